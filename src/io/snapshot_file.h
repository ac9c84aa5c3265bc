/* Snapshot and model files (DESIGN.md section 3, docs/formats.md): the HDF5 format
 * of a pn_train_state. Snapshots (format "pipenet-snapshot") hold all of it; model
 * exports ("pipenet-model") hold the config and the values only. Datasets are
 * chunked with HDF5's fletcher32 checksum, strings are fixed-length (so the root
 * group's checksummed header holds them) and the config text carries a CRC-32:
 * reading verifies all of it, and a truncated or corrupted file is refused, naming
 * it. Writing to a final name safely is io/snapshot_dir.h's job.
 *
 * Layout: root attributes format, version, step, epoch, batch_index, seed (uint64),
 * batch, config, config_crc32, slots (snapshots: the slot names joined by commas);
 * /params/<layer>/<param> float32 [rows, cols] ([cols] when rows is 1);
 * /optimizer/<layer>/<param>/<slot> the same shape (snapshots only).
 *
 * A snapshot written by several ranks (version 2, docs/snapshots.md) is an index,
 * DIR/snapshot-<step>.h5, with the same attributes (version 2, and `parts`) and the
 * same datasets, each virtual over the part files snapshot-<step>.part-SSS-RRR.h5
 * beside it (io/snapshot_parts.h); it reads as one file, here and in h5py. A
 * virtual dataset is accepted only in an index, and only over its own parts. */
#ifndef PN_SNAPSHOT_FILE_H
#define PN_SNAPSHOT_FILE_H

#include "io/train_state.h"

/* The name every snapshot file of a directory starts with (snapshot-<step>.h5). */
#define PN_SNAPSHOT_PREFIX "snapshot-"

/* Writes st to path as it is named (no temporary name), as format (NULL: st's own;
 * PN_FORMAT_MODEL writes a snapshot state's values without its slots). */
int pn_snapshot_file_write(const char *path, const pn_train_state *st, const char *format);

/* Reads and verifies a snapshot or model file. expect_format may be NULL (either). */
int pn_snapshot_read(const char *path, const char *expect_format, pn_train_state **out);

/* The names of some parameters ("<layer>/<param>"). */
typedef struct pn_name_list {
    const char *const *names;
    int n;
} pn_name_list;

/* The same, but only the values of the parameters want names (no optimizer slots):
 * what one pipeline stage loads (`pipenet infer` across ranks), so that no rank
 * reads or holds the whole model. A name the file lacks is simply absent from
 * *out (the caller names what is missing). */
int pn_snapshot_read_values(const char *path, const char *expect_format,
                            const pn_name_list *want, pn_train_state **out);

/* The same without the parameters: the root attributes and the config only (what a
 * resume checks before it builds anything). */
int pn_snapshot_read_header(const char *path, const char *expect_format, pn_train_state **out);

/* Per-rank reads of a snapshot (version 1, or an index over its parts): each rank
 * opens the file read-only and reads only its own parameters, its rows of a split
 * table or its run of a sharded optimizer's slots, without any rank reading the
 * whole (train/checkpoint.c). */
typedef struct pn_snapshot_reader pn_snapshot_reader;

/* Opens the snapshot at path and reads its header (format, version, counters,
 * config and its CRC-32, slot names). */
int pn_snapshot_reader_open(const char *path, pn_snapshot_reader **out);
void pn_snapshot_reader_close(pn_snapshot_reader *r);

/* The header: its counters, seed, batch, config and slot names; no parameters. */
const pn_train_state *pn_snapshot_reader_header(const pn_snapshot_reader *r);

/* Reads rows first, first + step, ... (count of them) of parameter name's values
 * (slot -1) or of the header's slot `slot` into out (count x cols, dense), after
 * checking that the file holds the parameter as rows x cols (else an error naming
 * the file and the parameter), stored as its format allows. */
int pn_snapshot_reader_rows(pn_snapshot_reader *r, const char *name, int slot, int rows,
                            int cols, int first, int step, int count, float *out);

/* The same for values at .. at + n - 1 in row-major order (a run that may start and
 * end mid-row: a sharded optimizer's part of a slot) into out (n floats). */
int pn_snapshot_reader_run(pn_snapshot_reader *r, const char *name, int slot, int rows,
                           int cols, size_t at, size_t n, float *out);

/* Reads every value of the snapshot at path and verifies it (checksums, shapes,
 * parts), one dataset at a time: what a reader checks, without holding the model. */
int pn_snapshot_verify(const char *path);

/* The same without reading the values: the header, and every dataset's type, shape
 * and storage (all there; an index's parts all found and whole). */
int pn_snapshot_check(const char *path);

#endif
