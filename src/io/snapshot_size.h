/* The bytes a snapshot or model file (snapshot_file.h) will take, computed from what
 * it will hold before a byte is written: its parameters' names and shapes, the
 * optimizer slots and the config text. The writer reserves that much, so that a full
 * disk or a quota is found before anything is written, and a run checks at start
 * that its snapshot directory has room for one snapshot (train/checkpoint.h).
 * Also the one place that decides how a parameter's dataset is cut into chunks. */
#ifndef PN_SNAPSHOT_SIZE_H
#define PN_SNAPSHOT_SIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io/train_state.h"

/* One parameter of a file to be. A part of a snapshot whose optimizer is sharded
 * (docs/snapshots.md) may hold of it a run of each slot, or its slots only. */
typedef struct pn_snapshot_array {
    const char *name; /* "<layer>/<param>" */
    int rows, cols;
    long run;         /* its slots: 0 whole (rows x cols), > 0 a run of so many values
                       * (a dataset [run]), < 0 none */
    bool no_values;   /* its slots only */
} pn_snapshot_array;

/* What a file will hold. */
typedef struct pn_snapshot_contents {
    const pn_snapshot_array *params;
    int n_params;
    int n_slots;                    /* optimizer slots of a snapshot (0: none) */
    const char *const *slot_names;
    size_t config_bytes;            /* the config text's length */
    bool snapshot;                  /* a snapshot; else a model file: values only */
} pn_snapshot_contents;

/* The shape of a parameter's dataset ([cols] when rows is 1, else [rows, cols]) and
 * of its chunks: at most 1 MiB of float32 each, the dimensions cut evenly. */
void pn_snapshot_chunk_shape(int rows, int cols, int *rank, uint64_t dims[2],
                             uint64_t chunk[2]);

/* *bytes: at least what the file of c will take, and a little more (a few KiB: what
 * HDF5 may leave unused; the figures are in the .c). PN_ERR_NOMEM, else 0. */
int pn_snapshot_file_bytes(const pn_snapshot_contents *c, uint64_t *bytes);

/* The same for the file of st written as a snapshot, or as a model file. */
int pn_snapshot_state_bytes(const pn_train_state *st, bool snapshot, uint64_t *bytes);

#endif
