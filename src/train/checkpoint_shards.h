/* Snapshots of tables sharded by rows across a stage's replicas (checkpoint.c's
 * helper). A split table (sharded with more than one shard) is written by its owners,
 * each its rows into its own part file, and the snapshot's index maps owner r of D
 * onto rows r, r + D, ... of the whole, so the snapshot holds every table whole as an
 * unsharded run writes it and no rank holds a split table whole; a load reads each
 * owner's rows alone (io/snapshot_file.h: pn_snapshot_reader_rows). This file keeps
 * rank 0's view of the stages, from which the index is made. */
#ifndef PN_CHECKPOINT_SHARDS_H
#define PN_CHECKPOINT_SHARDS_H

#include <stdbool.h>
#include <stddef.h>

#include "layers/params.h"
#include "mpi/comm.h"

/* Whether any stage of the job has a split table (collective: one answer for all). */
int pn_shards_any(pn_comm *c, const pn_params *p, bool *any);

/* Rank 0's view of the stages' indexes: which parameters, which split, and how a
 * sharded optimizer's replicas cut the dense ones. */
typedef struct pn_shard_layout {
    int stages, replicas, n_slots;
    pn_param **items; /* [stages] unpacked indexes */
    int *counts;
    size_t *pieces;   /* [stages] their gradient pieces (pn_params_grad_piece) */
} pn_shard_layout;

/* From stage 0's packed index (own) and stages 1 .. P-1's back to back (indexes). */
int pn_shard_layout_make(pn_shard_layout *l, const pn_grid *g, int n_slots, const char *own,
                         const char *indexes, const size_t *index_bytes);
void pn_shard_layout_free(pn_shard_layout *l);

#endif
