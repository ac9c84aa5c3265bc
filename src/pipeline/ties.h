/* pn_ties: the gradients of tied parameters (layers/layer.h: an fc's "tie" to an
 * embedding's table). Every use of a tied table is a parameter of its own in the
 * arena of the stage that runs its layer: the table ("embed/table") and each copy
 * ("logits/w"). So each use's gradient is summed over micro-batches and replicas
 * like any parameter's, by the same ops whatever the layout, and
 * pn_ties_sum_grads then makes every use's gradient the sum of all uses'
 * gradients, added in graph order (use 0 + use 1 + ...), the uses that other
 * stages hold received over the pipe: the same float additions on every stage and
 * in every layout. The copies start equal (initialized from the table's name), get
 * equal gradients and equal updates, and stay equal. */
#ifndef PN_TIES_H
#define PN_TIES_H

#include "layers/params.h"
#include "mpi/comm.h"
#include "net/graph.h"

typedef struct pn_ties pn_ties;

/* The tied tables of g with a use on stage `stage`, whose parameters are in arena;
 * stage_of[node] is each node's stage (NULL: every node on this one). comm carries
 * the uses that other stages hold (NULL: there are none). *out is NULL when no use
 * of a tied table is on this stage. */
int pn_ties_create(pn_ties **out, const pn_graph *g, const int *stage_of, int stage,
                   pn_params *arena, pn_comm *comm);
void pn_ties_free(pn_ties *t);

/* Every use's gradient = the sum of all uses' gradients, in graph order. Every
 * stage that holds a use calls it after the step's gradients are summed over
 * micro-batches and replicas (NULL t: nothing to do). */
int pn_ties_sum_grads(pn_ties *t);

#endif
