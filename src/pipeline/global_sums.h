/* Sums over the whole model's parameters that come out with the same bits on every
 * layout (DESIGN.md: layout invariance): the squared norm of all gradients (for
 * global-norm clipping) and a hash of all values (printed at the end of a run, so
 * two runs can be compared). Each stage computes the part of each parameter it
 * holds, the parts travel over the replica's pipe indexed by the parameter's place
 * in the graph, and every rank adds them in graph order. A tied table counts once
 * (pipeline/ties.h: its copies hold the same values and, after the step, the same
 * gradient). */
#ifndef PN_GLOBAL_SUMS_H
#define PN_GLOBAL_SUMS_H

#include "layers/params.h"
#include "mpi/comm.h"
#include "net/graph.h"

typedef struct pn_global_sums pn_global_sums;

/* Numbers g's parameters in graph order and finds the ones arena holds. */
int pn_global_sums_create(pn_global_sums **out, const pn_graph *g, const pn_params *arena,
                          pn_comm *comm);
void pn_global_sums_free(pn_global_sums *gs);

/* The stage's dense gradients are summed in this replica's piece only
 * (pn_stage_grads_in_pieces): the norm adds each replica's piece. */
void pn_global_sums_in_pieces(pn_global_sums *gs);

/* The sum of the squares of every gradient of the model. */
int pn_global_grad_norm2(pn_global_sums *gs, double *out);

/* After pn_global_grad_norm2: the first parameter in graph order whose gradient
 * holds a NaN or an infinity (its graph node and its place among the node's
 * parameters), or -1; the same answer on every rank. */
int pn_global_first_nonfinite(const pn_global_sums *gs, int *node, int *decl);

/* A hash of every parameter's name and value bits. */
int pn_global_param_hash(pn_global_sums *gs, unsigned long long *out);

#endif
