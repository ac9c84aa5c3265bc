/* Internal to src/io's snapshot files (snapshot_file.c, snapshot_parts.c,
 * snapshot_reader.c): the pieces of the format the writers and readers share. */
#ifndef PN_SNAPSHOT_FORMAT_H
#define PN_SNAPSHOT_FORMAT_H

#include <hdf5.h>
#include <stdbool.h>
#include <stddef.h>

#include "io/train_state.h"

enum {
    PN_SNAPSHOT_VERSION = 1,      /* a file that holds its values: snapshots and models */
    PN_SNAPSHOT_INDEX_VERSION = 2 /* a snapshot's index over its parts */
};

/* The format attribute of a snapshot's part file. */
#define PN_FORMAT_PART "pipenet-snapshot-part"

/* The root attributes of st (format, version, counters, seed, batch, config and its
 * CRC-32, and for a snapshot the slots), with `parts` when parts > 0. */
int pn_snapshot_write_header(hid_t file, const char *fname, const pn_train_state *st,
                             bool snapshot, int version, int parts);

/* What st must hold before a byte of it is written (names, counters, slot names). */
int pn_snapshot_check_state(const char *path, const pn_train_state *st, bool snapshot);

/* Writes float32 dataset name, rows x cols ([cols] when rows is 1, unless matrix), in
 * chunks of at most 1 MiB, each with a fletcher32 checksum (data NULL: left empty). */
int pn_snapshot_write_floats(hid_t file, const char *fname, const char *name, int rows,
                             int cols, bool matrix, const float *data);

/* Reads the root attributes of the open file into a new *out, checking the format
 * (against expect when not NULL), the version and the config's CRC-32, and with
 * slots a snapshot's slot names. parts (cap bytes) receives, for an index, what its
 * parts' names start with, else "". */
int pn_snapshot_read_header_open(hid_t file, const char *fname, const char *expect,
                                 bool slots, pn_train_state **out, char *parts, size_t cap);

/* Opens float32 dataset name and checks it: its storage (parts not NULL: an index,
 * whose virtual datasets must lie over those parts; else in the file itself), its
 * type and, with *rows set (> 0), its shape ([*cols] when *rows is 1, else [*rows,
 * *cols]); otherwise the shape is returned there. With out, reads it all. */
int pn_snapshot_read_floats(hid_t file, const char *fname, const char *name,
                            const char *purpose, const char *parts, int *rows, int *cols,
                            float *out);

/* After a failure (rc) on dataset dset of an index: the message names the parts the
 * values come from (a damaged part is the one to look at). Returns rc. */
int pn_snapshot_name_parts(hid_t dset, int rc);

#endif
