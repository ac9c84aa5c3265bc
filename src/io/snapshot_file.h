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

/* Reads and verifies a snapshot or model file. expect_format may be NULL (either). */
int pn_snapshot_read(const char *path, const char *expect_format, pn_train_state **out);

/* The same without the parameters: the root attributes and the config only (what a
 * resume checks before it builds anything). */
int pn_snapshot_read_header(const char *path, const char *expect_format, pn_train_state **out);

#endif
