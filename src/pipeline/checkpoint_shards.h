/* Snapshots of tables sharded by rows across a stage's replicas (checkpoint.c's
 * helper): a table the file holds whole, as an unsharded run writes it, while no
 * rank holds it whole on the way. Each rank's "part" is its rows of every split
 * table of its arena (split: sharded with more than one shard), in arena order,
 * each table's values then each optimizer slot. To save, rank 0 receives the parts
 * one rank at a time while the file is open and writes each owner's rows at their
 * global places (owner r of D: rows r, r + D, ...). To load, rank 0 (which reads
 * the file whole, as for every snapshot) cuts each rank's part and sends it to that
 * rank alone. */
#ifndef PN_CHECKPOINT_SHARDS_H
#define PN_CHECKPOINT_SHARDS_H

#include <stdbool.h>
#include <stddef.h>

#include "io/snapshot_file.h"
#include "io/train_state.h"
#include "layers/params.h"
#include "mpi/comm.h"

/* Whether any stage of the job has a split table (collective: one answer for all). */
int pn_shards_any(pn_comm *c, const pn_params *p, bool *any);

/* Rank 0's view of the stages' indexes, to place any rank's part. */
typedef struct pn_shard_layout {
    int stages, replicas, n_slots;
    pn_param **items; /* [stages] unpacked indexes */
    int *counts;
} pn_shard_layout;

/* From stage 0's packed index (own) and stages 1 .. P-1's back to back (indexes). */
int pn_shard_layout_make(pn_shard_layout *l, const pn_grid *g, int n_slots, const char *own,
                         const char *indexes, const size_t *index_bytes);
void pn_shard_layout_free(pn_shard_layout *l);

/* Save. Rank 0 calls pn_shards_write as the fill of its snapshot file
 * (pn_snapshot_write_filled) with a pn_shard_writer; every other rank calls
 * pn_shards_send. Rank 0 calls pn_shards_drain after the file is done, which
 * receives the parts (and drops them) when the fill never ran, so that no sender
 * waits for ever. */
typedef struct pn_shard_writer {
    pn_comm *c;
    const pn_shard_layout *layout;
    const pn_params *params;
    bool gathered;
    pn_snapshot_sink *sink; /* while writing */
} pn_shard_writer;

int pn_shards_write(void *writer, pn_snapshot_sink *sink);
int pn_shards_send(pn_comm *c, const pn_params *p);
int pn_shards_drain(pn_shard_writer *w);

/* Load, after every rank has written the rest of its arena: rank 0 passes the file's
 * state (st, its slot slot_of[s] holding the arena's slot s) and layout, the others
 * NULLs; each rank writes its part into its arena. */
int pn_shards_load(pn_comm *c, pn_params *p, const pn_train_state *st, const int *slot_of,
                   const pn_shard_layout *layout, const char *path);

#endif
