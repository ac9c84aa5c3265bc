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
#include "io/text_source.h"
#include "io/token_file.h"

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
    pn_token_file f;
    int rc = pn_token_file_create(&f, tmp, n, seq, false);
    size_t block_len = (size_t)f.chunk_rows * (size_t)seq;
    int32_t *tok = NULL, *tgt = NULL;
    if (rc == 0 && (!(tok = malloc(block_len * sizeof *tok)) ||
                    !(tgt = malloc(block_len * sizeof *tgt))))
        rc = pn_error_set(PN_ERR_NOMEM, "%s: out of memory for %zu ids", tmp, block_len);
    for (long row = 0; rc == 0 && row < n; row += f.chunk_rows) {
        long rows = n - row < f.chunk_rows ? n - row : f.chunk_rows;
        const unsigned char *src = bytes + (size_t)row * (size_t)seq;
        size_t count = (size_t)rows * (size_t)seq;
        for (size_t k = 0; k < count; k++) tok[k] = src[k], tgt[k] = src[k + 1];
        rc = pn_token_file_write(&f, row, rows, tok, tgt, NULL);
    }
    free(tok);
    free(tgt);
    char source[sizeof t->label + 128];
    snprintf(source, sizeof source, "text: %s, %s split: bytes %zu..%zu of %zu", t->label,
             split, offset, offset + m, t->len);
    return pn_token_file_close(&f, pn_token_file_finish(&f, source, rc));
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
    PN_TRY(pn_text_check_split(seq, eval_fraction));
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
    for (int s = 0; s < 2 && rc == 0; s++) {
        char out[PATH_MAX], tmp[PATH_MAX + 32];
        if ((rc = pn_import_output(out_dir, s, out, sizeof out)) < 0) break;
        size_t offset = s ? train_len : 0, m = s ? test_len : train_len;
        rc = pn_import_tmp_name(out, tmp, sizeof tmp);
        if (rc == 0)
            rc = pn_import_finish(tmp, out, write_split(tmp, &t, t.bytes + offset, m, seq,
                                                        pn_import_splits[s], offset));
        if (rc == 0 && progress) progress(out, split_samples(m, seq), ctx);
    }
    pn_text_free(&t);
    return rc;
}
