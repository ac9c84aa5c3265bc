/* The trainer's side of snapshots (io/snapshot_file.h, io/snapshot_parts.h,
 * io/snapshot_dir.h), written and read in parallel (docs/snapshots.md): to save, each
 * writer (the first replica of every stage, and every owner of rows of a table
 * sharded by rows) writes its own part file straight from its arena, and rank 0, once
 * all are in place, writes and commits the index over them (the stages' indexes,
 * small, gathered to it); a job of one writer writes one version 1 file the same way.
 * With a sharded optimizer every replica writes its own run of the slots. No rank
 * holds another's state. To load, every rank opens the snapshot read-only
 * and reads its own stage's parameters through the matrix API (a split table's owner
 * only its rows), whatever layout wrote the file: a snapshot does not depend on how
 * its job was laid out. */
#ifndef PN_CHECKPOINT_H
#define PN_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io/snapshot_lock.h"
#include "layers/params.h"
#include "mpi/comm.h"

/* Where training stands: what a snapshot records besides the parameters. */
typedef struct pn_progress_mark {
    long step;        /* optimizer steps done */
    long epoch;       /* epoch of the next batch */
    long batch_index; /* next batch within that epoch */
} pn_progress_mark;

/* What a snapshot records about its run besides the state: what a resume checks
 * (train/resume.h). */
typedef struct pn_run_settings {
    const char *config; /* the model's JSON text */
    uint64_t seed;
    long batch;         /* the global batch */
} pn_run_settings;

/* The slots of a sharded optimizer (--shard-optimizer), which the arena does not
 * hold: each replica keeps a run of every dense parameter's slots and the row-sparse
 * ones whole. A snapshot writes each replica's own into its own part and reads back
 * only it (docs/snapshots.md); NULL where the slots are the arena's. */
typedef struct pn_slot_parts {
    int n_slots;
    const char *names[2];
    /* Slot k of parameter i as this rank keeps it: a dense parameter's run of *n
     * values from value *at (row-major) as a 1 x n view, a row-sparse one's whole
     * rows x cols (*at 0); false when it keeps none of it (optim/optimizer.h:
     * pn_optimizer_slot_part). */
    bool (*part)(void *ctx, int i, int k, size_t *at, size_t *n, pn_matrix *slot);
    void *ctx;
} pn_slot_parts;

/* Collective: rank 0, the rank that commits snapshots, creates dir (and its
 * parents), checks that it can write there and takes dir's lock
 * (io/snapshot_lock.h) into *lock, for the run to hold until it ends (NULL on the
 * other ranks); every rank returns the same status, so a directory that another
 * run holds stops every rank. A run calls it before it trains. */
int pn_checkpoint_prepare(pn_comm *c, const char *dir, pn_snapshot_lock **lock);

/* Collective: rank 0 checks that dir's file system has room for one snapshot of
 * the model: the first replica's stages' parameters (their indexes gathered), the
 * optimizer slots slot_names[n_slots] and the config text; then every rank that will
 * write a part of it (every rank when sharded_slots: the slots of a sharded
 * optimizer) checks that it sees the directory rank 0 does (a marker file of rank
 * 0's: not a node-local path). Every rank returns the same status, and learns the
 * snapshot's bytes (*snap_bytes: the bound of a snapshot's waits follows them). A
 * run calls it before it trains, once its stage is built. */
int pn_checkpoint_check_room(pn_comm *c, const pn_params *params, int n_slots,
                             const char *const *slot_names, bool sharded_slots,
                             const char *config, const char *dir, double *snap_bytes);

/* Collective: writes dir/snapshot-<step>.h5 (with its parts) from the first
 * replica's stages, the split tables' owners and, with slots (a sharded optimizer's,
 * else NULL: the arena's), every replica, each writing its own, then keeps the newest
 * `keep` snapshots (rank 0). Every rank returns the same status; a failure leaves the
 * snapshots already there as they were, and no part behind; *written_path (rank 0)
 * names the snapshot. */
int pn_checkpoint_save(pn_comm *c, const pn_params *params, const pn_slot_parts *slots,
                       pn_run_settings run, pn_progress_mark mark, const char *dir, int keep,
                       char *written_path, size_t cap);

/* Collective: the snapshot to resume from into path (cap bytes), the same on every
 * rank (rank 0 looks): resume itself, the newest valid snapshot of resume when it
 * is a directory (io/snapshot_dir.h: pn_snapshot_resolve), or for "auto" the newest
 * valid snapshot of dir, "" when dir holds no snapshot yet (a run that starts
 * fresh). */
int pn_checkpoint_find(pn_comm *c, const char *resume, const char *dir, char *path,
                       size_t cap);

/* Collective: every rank reads the values and optimizer slots of its own stage's
 * parameters from the snapshot at path (an error names a parameter or slot the file
 * lacks or shapes that differ); with slots (a sharded optimizer's, else NULL) only
 * its own part of them, whatever layout wrote the file. *mark receives the
 * counters. */
int pn_checkpoint_load(pn_comm *c, pn_params *params, const pn_slot_parts *slots,
                       const char *path, pn_progress_mark *mark);

#endif
