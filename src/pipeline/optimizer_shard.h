/* The optimizer's slots sharded over a stage's replicas (--shard-optimizer, ZeRO
 * stage 1): replica r of D keeps the slots of piece r of the dense gradient buffer
 * (pn_params_grad_piece floats, pn_params_set_grad_pieces) and of every row-sparse
 * parameter (those are updated row by row on every replica, as without sharding).
 * After its update each replica's piece of the values is gathered by all, through the
 * gradient buffer, which has room for every piece and is zero again afterwards. The
 * arena holds no slots meanwhile: _give puts whole slots back (before a snapshot is
 * written or read), _take cuts them to this replica's part and frees them. Private
 * to optimizer.c. */
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

/* The arena's whole slots (as added by pn_params_add_slot, handles 0 ..) into this
 * replica's part; the arena's slots are then dropped. */
int pn_opt_shard_take(pn_opt_shard *sh);

/* Adds the whole slots back to the arena, every replica's part gathered (collective
 * over the stage's replicas). */
int pn_opt_shard_give(pn_opt_shard *sh);

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
