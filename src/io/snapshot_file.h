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
 * /optimizer/<layer>/<param>/<slot> the same shape (snapshots only). */
#ifndef PN_SNAPSHOT_FILE_H
#define PN_SNAPSHOT_FILE_H

#include "io/train_state.h"

/* Writes st to path as it is named (no temporary name), as format (NULL: st's own;
 * PN_FORMAT_MODEL writes a snapshot state's values without its slots). */
int pn_snapshot_file_write(const char *path, const pn_train_state *st, const char *format);

/* A state's deferred parameters (pn_train_state_defer) arrive in parts while the file
 * is open: their datasets are created empty, then fill(ctx, sink) writes their rows
 * through pn_snapshot_fill_rows. Each array of each deferred parameter must get
 * exactly its rows' count of rows, or the file is not written. */
typedef struct pn_snapshot_sink pn_snapshot_sink;
typedef int (*pn_snapshot_fill_fn)(void *ctx, pn_snapshot_sink *sink);

/* Writes rows first, first + step, ... (count rows, cols wide) of deferred parameter
 * name's values (slot -1) or of its optimizer slot `slot` (ignored in a model file). */
int pn_snapshot_fill_rows(pn_snapshot_sink *sink, const char *name, int slot, int first,
                          int step, int count, const float *rows);

/* pn_snapshot_file_write for a state with deferred parameters (fill NULL: none). */
int pn_snapshot_file_write_filled(const char *path, const pn_train_state *st,
                                  const char *format, pn_snapshot_fill_fn fill, void *ctx);

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

#endif
