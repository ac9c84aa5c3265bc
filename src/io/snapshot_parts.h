/* The files of a snapshot that several ranks write at once (docs/snapshots.md,
 * "Parallel snapshot writes"; the format: docs/formats.md, version 2): each writer
 * writes its part, snapshot-<step>.part-SSS-RRR.h5 (stage SSS, replica RRR), straight
 * from its arena, one array at a time, chunked with fletcher32 as a snapshot file
 * is; then one rank writes the index, snapshot-<step>.h5, whose datasets are virtual
 * over the parts, and which reads as the whole snapshot (io/snapshot_file.h). The
 * same writer makes a whole version 1 snapshot from one arena (a job of one writer),
 * again without a copy of the arena. Writing under a temporary name and committing
 * is io/snapshot_dir.h's. */
#ifndef PN_SNAPSHOT_PARTS_H
#define PN_SNAPSHOT_PARTS_H

#include <stdbool.h>
#include <stddef.h>

#include "io/snapshot_size.h"
#include "io/train_state.h"

/* A part's file name, bare (no directory): snapshot-<step 10 digits>.part-SSS-RRR.h5 */
void pn_snapshot_part_name(long step, int stage, int replica, char *out, size_t cap);

/* Gives the values (slot -1) or optimizer slot `slot` of array `array` of a part:
 * *data then points to its rows x cols floats (a slot's run: its run), dense, valid
 * until the next call;
 * staging (room for the largest array) is there for a fill that must copy (an arena
 * on a GPU). */
typedef int (*pn_part_fill_fn)(void *ctx, int array, int slot, float *staging,
                               const float **data);

typedef struct pn_snapshot_part {
    const pn_train_state *header; /* counters, seed, batch, config, slot names; no params */
    int stage, replica;           /* stage < 0: a whole snapshot (version 1), not a part */
    const pn_snapshot_array *arrays; /* the part's own shapes (a split table: its rows;
                                      * a sharded optimizer's run of the slots) */
    const bool *matrix;           /* [n_arrays]: written [rows, cols] even with one row */
    int n_arrays;
    size_t staging;               /* floats the fill may need in staging (0: none) */
    pn_part_fill_fn fill;
    void *ctx;
} pn_snapshot_part;

/* Writes part to path as it is named, its size reserved first. */
int pn_snapshot_part_file_write(const char *path, const pn_snapshot_part *part);

/* Checks a part file just written: its format, step, stage and replica. */
int pn_snapshot_part_check(const char *path, long step, int stage, int replica);

/* Where rows of a parameter of the index come from: the part of (stage, replica);
 * its dataset is rows first, first + step, ... (count of them) of the whole, or the
 * whole when step is 0. */
typedef struct pn_snapshot_source {
    int stage, replica;
    int first, step, count;
} pn_snapshot_source;

/* A run of a parameter's optimizer slots in the part of (stage, replica): values
 * at .. at + n - 1 of the whole in row-major order (a run may start and end mid-row),
 * each slot's dataset there [n]: a replica's part of a sharded optimizer's slots. */
typedef struct pn_snapshot_run {
    int stage, replica;
    size_t at, n;
} pn_snapshot_run;

typedef struct pn_snapshot_index_param {
    const char *name; /* "<layer>/<param>" */
    int rows, cols;   /* the whole */
    const pn_snapshot_source *sources;
    int n_sources;
    const pn_snapshot_run *runs; /* n_runs > 0: the slots come from these runs, which */
    int n_runs;                  /* cover the whole; else from sources, as the values */
} pn_snapshot_index_param;

/* Writes the index of header's step to path as it is named: header's attributes
 * (version 2, `parts`), and for each parameter its values and every slot of header
 * as virtual datasets over the parts, of the same shapes whatever the parts hold. */
int pn_snapshot_index_file_write(const char *path, const pn_train_state *header, int parts,
                                 const pn_snapshot_index_param *params, int n);

#endif
