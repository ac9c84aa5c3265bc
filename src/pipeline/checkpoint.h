/* The trainer's side of snapshots (io/snapshot.h): gathering every stage's
 * parameters and optimizer slots, by name, to rank 0, which writes one file for the
 * whole model; and, on resume, giving each rank the values of the parameters its
 * stage holds, whatever layout wrote the file. */
#ifndef PN_CHECKPOINT_H
#define PN_CHECKPOINT_H

#include "layers/params.h"
#include "mpi/grid.h"

/* Where training stands: what a snapshot records besides the parameters. */
typedef struct pn_progress_mark {
    long step;        /* optimizer steps done */
    long epoch;       /* epoch of the next batch */
    long batch_index; /* next batch within that epoch */
} pn_progress_mark;

/* Collective over the grid: writes dir/snapshot-<step>.h5 from replica 0's stages
 * (rank 0 writes), then keeps the newest `keep` snapshots. Every rank returns the
 * same status; *written_path (rank 0) names the file. */
int pn_checkpoint_save(const pn_grid *g, const pn_params *params, const char *config,
                       uint64_t seed, pn_progress_mark mark, const char *dir, int keep,
                       char *written_path, size_t cap);

/* Collective: resolves "auto" to the newest valid snapshot of dir (rank 0 looks),
 * reads it on every rank, and loads the values and optimizer slots of this rank's
 * parameters (an error names a parameter or slot the file lacks or shapes that
 * differ). *mark receives the counters; *path_out (cap bytes) the file used. */
int pn_checkpoint_load(const pn_grid *g, pn_params *params, const char *resume,
                       const char *dir, pn_progress_mark *mark, char *path_out, size_t cap);

#endif
