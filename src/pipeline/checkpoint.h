/* The trainer's side of snapshots (io/snapshot_file.h, io/snapshot_dir.h), with the
 * arena as the unit of exchange. To save, every stage of the first replica packs
 * its arena's index (names, shapes, offsets) and copies its arena's buffers (the
 * values, then each optimizer slot) into one host image; rank 0 gathers indexes and
 * images through the communication seam, one transfer each per stage, takes the
 * images into a pn_train_state without copying and writes one file for the whole
 * model. To load, rank 0 reads the file once, cuts it into each stage's image by
 * that stage's index (whatever layout wrote the file), and scatters the images;
 * every rank writes its image into its arena through the matrix API. */
#ifndef PN_CHECKPOINT_H
#define PN_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "layers/params.h"
#include "mpi/comm.h"

/* Where training stands: what a snapshot records besides the parameters. */
typedef struct pn_progress_mark {
    long step;        /* optimizer steps done */
    long epoch;       /* epoch of the next batch */
    long batch_index; /* next batch within that epoch */
} pn_progress_mark;

/* Collective: rank 0 creates dir (and its parents) and checks that it can write
 * there; every rank returns the same status. A run calls it before it trains. */
int pn_checkpoint_prepare(pn_comm *c, const char *dir);

/* Collective: writes dir/snapshot-<step>.h5 from the first replica's stages (rank 0
 * writes), then keeps the newest `keep` snapshots. Every rank returns the same
 * status; *written_path (rank 0) names the file. */
int pn_checkpoint_save(pn_comm *c, const pn_params *params, const char *config, uint64_t seed,
                       pn_progress_mark mark, const char *dir, int keep, char *written_path,
                       size_t cap);

/* Collective: resolves "auto" to the newest valid snapshot of dir (rank 0 looks),
 * reads it on rank 0 and gives every rank the values and optimizer slots of its
 * stage's parameters (an error names a parameter or slot the file lacks or shapes
 * that differ). *mark receives the counters; *path_out (cap bytes) the file used. */
int pn_checkpoint_load(pn_comm *c, pn_params *params, const char *resume, const char *dir,
                       pn_progress_mark *mark, char *path_out, size_t cap);

#endif
