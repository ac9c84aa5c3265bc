/* Text generation across pipeline stages (`mpirun -np P pipenet generate`): each rank
 * holds its stage's part of the model's step network (model/generate.c), and one
 * position of every sequence travels through the stages per step: a link per value
 * that crosses from one stage to another (mpi/comm.h), one message of n rows each.
 * The stage that computes the output then gives every rank the logits, so that every
 * rank chooses the same tokens (the choice is deterministic: the seed and a counter)
 * and keeps the same windows, beams and key/value caches of its own layers; the first
 * stage so has the token it feeds next. */
#ifndef PN_GEN_STAGES_H
#define PN_GEN_STAGES_H

#include <stdbool.h>

#include "mpi/comm.h"
#include "net/network.h"
#include "plan/plan.h"

typedef struct pn_gen_stages pn_gen_stages;

/* The links of this rank (stage plan->stage_of's) for a step network that computes
 * the ancestors of out_node, n_max sequences at a time. Collective (the transport
 * connects the links). */
int pn_gen_stages_create(pn_gen_stages **out, pn_comm *comm, const pn_graph *g,
                         const pn_plan *plan, int out_node, int n_max);
void pn_gen_stages_free(pn_gen_stages *s);

/* One position pos of n sequences through this rank's part, net (its step network):
 * receive the values it consumes, step, send what later stages consume; with logits
 * (n x the output's width), also the output's values on every rank. ctx: the
 * pn_gen_stages. */
int pn_gen_stages_step(void *ctx, pn_network *net, int pos, int n, float *logits);

/* After a generation failed with rc on this rank: where it failed before the first
 * step (options, setup: often on every rank alike), every rank agrees on it, so that
 * the lowest failing rank alone reports it and the others wait on no link; returns
 * the agreed status (PN_ERR_PEER where another rank reports). *together: whether the
 * failure is known to every rank (else peers may wait on this one: the job ends). */
int pn_gen_stages_failed(pn_gen_stages *s, int rc, bool *together);

#endif
