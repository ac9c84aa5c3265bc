/* The optimizer's slots sharded over a stage's replicas (--shard-optimizer, ZeRO
 * stage 1): replica r of D keeps the slots of piece r of the dense gradient buffer
 * (pn_params_grad_piece floats, pn_params_set_grad_pieces) and of every row-sparse
 * parameter (those are updated row by row on every replica, as without sharding).
 * After its update each replica's piece of the values is gathered by all, through the
 * gradient buffer, which has room for every piece and is zero again afterwards. The
 * arena never holds slots: a snapshot writes and reads each replica's part where it
 * is (pn_opt_shard_slot). Private to optimizer.c. */
#ifndef PN_OPTIMIZER_SHARD_H
#define PN_OPTIMIZER_SHARD_H

#include <stdbool.h>

#include "layers/params.h"
#include "mpi/comm.h"

typedef struct pn_opt_shard pn_opt_shard;

/* This replica's part of n_slots slots (names) of params, zero; collective over
 * nothing. params must have been laid out in replicas pieces. */
int pn_opt_shard_create(pn_opt_shard **out, pn_params *params, pn_comm *comm, int n_slots,
                        const char *const *names);
void pn_opt_shard_free(pn_opt_shard *sh);

/* Slot k of parameter i as this replica keeps it: a dense parameter's run of *n
 * values from value *at of the parameter (row-major; it may start and end mid-row)
 * as a 1 x n view, a row-sparse one's whole (*at 0: its rows x cols); false when it
 * keeps none of it. */
bool pn_opt_shard_slot(const pn_opt_shard *sh, int i, int k, size_t *at, size_t *n,
                       pn_matrix *slot);

/* Parameter i's part this replica updates: values, gradient and slot views (1 x n of
 * its own run for a dense parameter, its rows x cols for a row-sparse one); false
 * when it has none. */
bool pn_opt_shard_part(const pn_opt_shard *sh, int i, pn_matrix *w, pn_matrix *g,
                       pn_matrix slots[2]);

/* After every part's update: each replica's values gathered into every replica's
 * arena, the gradients zero (collective over the stage's replicas). */
int pn_opt_shard_finish(pn_opt_shard *sh);

/* Floats of slot memory this replica holds per slot. */
size_t pn_opt_shard_floats(const pn_opt_shard *sh);

#endif
