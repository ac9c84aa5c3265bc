/* The trainer's side of snapshots (io/snapshot_file.h, io/snapshot_dir.h), with the
 * arena as the unit of exchange. To save, every stage of the first replica packs
 * its arena's index (names, shapes, offsets) and copies its arena's buffers (the
 * values, then each optimizer slot) into one host image; rank 0 gathers indexes and
 * images through the communication seam, one transfer each per stage, takes the
 * images into a pn_train_state without copying and writes one file for the whole
 * model. To load, rank 0 reads the file once, cuts it into each stage's image by
 * that stage's index (whatever layout wrote the file), and scatters the images;
 * every rank writes its image into its arena through the matrix API. A table sharded
 * by rows travels apart, owner by owner (checkpoint_shards.h), and is whole in the
 * file: a snapshot does not depend on how its tables were sharded. */
#ifndef PN_CHECKPOINT_H
#define PN_CHECKPOINT_H

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
 * (pipeline/resume.h). */
typedef struct pn_run_settings {
    const char *config; /* the model's JSON text */
    uint64_t seed;
    long batch;         /* the global batch */
} pn_run_settings;

/* Collective: rank 0, the rank that writes snapshots, creates dir (and its
 * parents), checks that it can write there and takes dir's lock
 * (io/snapshot_lock.h) into *lock, for the run to hold until it ends (NULL on the
 * other ranks); every rank returns the same status, so a directory that another
 * run holds stops every rank. A run calls it before it trains. */
int pn_checkpoint_prepare(pn_comm *c, const char *dir, pn_snapshot_lock **lock);

/* Collective: rank 0 checks that dir's file system has room for one snapshot of
 * the model: the first replica's stages' parameters (their indexes gathered), the
 * optimizer slots slot_names[n_slots] and the config text. Every rank returns the
 * same status. A run calls it before it trains, once its stage is built. */
int pn_checkpoint_check_room(pn_comm *c, const pn_params *params, int n_slots,
                             const char *const *slot_names, const char *config,
                             const char *dir);

/* Collective: writes dir/snapshot-<step>.h5 from the first replica's stages (rank 0
 * writes), then keeps the newest `keep` snapshots. Every rank returns the same
 * status; *written_path (rank 0) names the file. */
int pn_checkpoint_save(pn_comm *c, const pn_params *params, pn_run_settings run,
                       pn_progress_mark mark, const char *dir, int keep, char *written_path,
                       size_t cap);

/* Collective: the snapshot to resume from into path (cap bytes), the same on every
 * rank (rank 0 looks): resume itself, the newest valid snapshot of resume when it
 * is a directory (io/snapshot_dir.h: pn_snapshot_resolve), or for "auto" the newest
 * valid snapshot of dir, "" when dir holds no snapshot yet (a run that starts
 * fresh). */
int pn_checkpoint_find(pn_comm *c, const char *resume, const char *dir, char *path,
                       size_t cap);

/* Collective: reads the snapshot at path on rank 0 and gives every rank the values
 * and optimizer slots of its stage's parameters (an error names a parameter or slot
 * the file lacks or shapes that differ). *mark receives the counters. */
int pn_checkpoint_load(pn_comm *c, pn_params *params, const char *path,
                       pn_progress_mark *mark);

#endif
