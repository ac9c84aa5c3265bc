/* Text files to token-sequence dataset HDF5 (import_text.h). The files are read
 * whole into memory and concatenated; the train split is the text's first bytes, the
 * test split its tail. A split of m bytes holds (m - 1) / T samples: sample k has the
 * ids of bytes [kT, kT + T) and the targets of bytes [kT + 1, kT + T + 1), so every
 * target lies inside its split; the last (m - 1) % T bytes go unused. Rows are
 * written a block at a time from the bytes, so only the text itself stays in memory. */
#include "io/import_text.h"

#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "io/hdf5_util.h"
#include "io/text_source.h"

enum { CHUNK_BYTES = 1 << 20 }; /* at most this many bytes of ids per HDF5 chunk */

/* Samples in a split of m bytes with seq positions each. */
static long split_samples(size_t m, int seq)
{
    return m > (size_t)seq ? (long)((m - 1) / (size_t)seq) : 0;
}

/* Writes the samples of bytes[0, m) into the HDF5 file tmp (attributes from t). */
static int write_split(const char *tmp, const pn_text *t, const unsigned char *bytes, size_t m,
                       int seq, const char *split, size_t offset)
{
    long n = split_samples(m, seq);
    hsize_t dims[2] = {(hsize_t)n, (hsize_t)seq};
    long chunk_rows = CHUNK_BYTES / (4L * seq);
    if (chunk_rows < 1) chunk_rows = 1;
    if (chunk_rows > n) chunk_rows = n;
    hid_t file, ids = H5I_INVALID_HID, targets = H5I_INVALID_HID;
    PN_TRY(pn_hdf5_create_file(tmp, false, &file));
    int rc = pn_hdf5_create_dataset(file, tmp, "tokens", PN_HDF5_INT32, 2, dims,
                                    (hsize_t)chunk_rows, &ids);
    if (rc == 0)
        rc = pn_hdf5_create_dataset(file, tmp, "targets", PN_HDF5_INT32, 2, dims,
                                    (hsize_t)chunk_rows, &targets);
    int32_t *block = NULL;
    size_t block_len = (size_t)chunk_rows * (size_t)seq;
    if (rc == 0 && !(block = malloc(block_len * sizeof *block)))
        rc = pn_error_set(PN_ERR_NOMEM, "%s: out of memory for %zu ids", tmp, block_len);
    for (long row = 0; rc == 0 && row < n; row += chunk_rows) {
        long rows = n - row < chunk_rows ? n - row : chunk_rows;
        const unsigned char *src = bytes + (size_t)row * (size_t)seq;
        size_t count = (size_t)rows * (size_t)seq;
        for (int shift = 0; shift < 2 && rc == 0; shift++) {
            for (size_t k = 0; k < count; k++) block[k] = src[k + (size_t)shift];
            rc = pn_hdf5_write_rows(shift ? targets : ids, tmp, shift ? "targets" : "tokens",
                                    PN_HDF5_INT32, (hsize_t)row, (hsize_t)rows, block);
        }
    }
    free(block);
    rc = pn_hdf5_close_after(ids, tmp, rc);
    rc = pn_hdf5_close_after(targets, tmp, rc);
    char source[sizeof t->label + 128];
    snprintf(source, sizeof source, "text: %s, %s split: bytes %zu..%zu of %zu", t->label,
             split, offset, offset + m, t->len);
    if (rc == 0) rc = pn_hdf5_write_attr_string(file, tmp, "source", source, false);
    if (rc == 0) rc = pn_hdf5_write_attr_string(file, tmp, "tokenizer", "bytes", false);
    if (rc == 0) rc = pn_hdf5_write_attr_int(file, tmp, "vocab_size", PN_TEXT_VOCAB);
    if (rc == 0) rc = pn_hdf5_write_attr_int(file, tmp, "num_classes", PN_TEXT_VOCAB);
    if (rc == 0) rc = pn_hdf5_write_attr_int(file, tmp, "seq", seq);
    if (rc == 0) rc = pn_hdf5_write_attr_int(file, tmp, "stride", seq);
    return pn_hdf5_close_after(file, tmp, rc);
}

/* Refuses a split too short for one sample. */
static int check_split(const pn_text *t, const char *split, const char *part, size_t m, int seq)
{
    if (split_samples(m, seq) > 0) return 0;
    return pn_error_set(PN_ERR_INVALID,
                        "%s: the %s split (%s: %zu of the text's %zu bytes) holds no sample of "
                        "--seq %d, which needs %d bytes (%d ids and the target after them); "
                        "use a smaller --seq%s or more text",
                        t->label, split, part, m, t->len, seq, seq + 1, seq,
                        !strcmp(split, "train") ? "" : ", a larger --eval-fraction");
}

int pn_import_text(const char *const *files, int n_files, const char *out_dir, int seq,
                   double eval_fraction, pn_import_progress progress, void *ctx)
{
    if (seq < 1 || seq > PN_TEXT_MAX_SEQ)
        return pn_error_set(PN_ERR_INVALID, "--seq %d: expected 1..%d positions per sample",
                            seq, PN_TEXT_MAX_SEQ);
    if (!(eval_fraction > 0 && eval_fraction < 1))
        return pn_error_set(PN_ERR_INVALID, "--eval-fraction %g: expected a number in (0, 1)",
                            eval_fraction);
    pn_text t;
    PN_TRY(pn_text_read(&t, files, n_files));
    int rc = 0;
    size_t test_len = (size_t)llround(eval_fraction * (double)t.len);
    size_t train_len = t.len - test_len;
    char part[64];
    snprintf(part, sizeof part, "its first %g%%", 100 * (1 - eval_fraction));
    if (rc == 0) rc = check_split(&t, "train", part, train_len, seq);
    snprintf(part, sizeof part, "its last %g%%", 100 * eval_fraction);
    if (rc == 0) rc = check_split(&t, "test", part, test_len, seq);
    if (rc == 0) rc = pn_import_make_dirs(out_dir);
    static const char *const outputs[2] = {"train.h5", "test.h5"};
    for (int s = 0; s < 2 && rc == 0; s++) {
        char out[PATH_MAX], tmp[PATH_MAX + 32];
        if ((size_t)snprintf(out, sizeof out, "%s/%s", out_dir, outputs[s]) >= sizeof out) {
            rc = pn_error_set(PN_ERR_INVALID, "path too long: %s/%s", out_dir, outputs[s]);
            break;
        }
        size_t offset = s ? train_len : 0, m = s ? test_len : train_len;
        rc = pn_import_tmp_name(out, tmp, sizeof tmp);
        if (rc == 0)
            rc = pn_import_finish(tmp, out, write_split(tmp, &t, t.bytes + offset, m, seq,
                                                        s ? "test" : "train", offset));
        if (rc == 0 && progress) progress(out, split_samples(m, seq), ctx);
    }
    pn_text_free(&t);
    return rc;
}
