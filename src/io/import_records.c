/* Text files to padded token-sequence dataset HDF5, one record at a time
 * (import_text.h, pn_import_text_records): the records are found first (every file
 * line by line, a line equal to the separator ending one), checked, and split
 * between train and test by count; then each split's samples are written a block of
 * rows at a time, tokens, targets and lengths side by side. */
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
#include "io/token_file.h"

/* One record: bytes [start, start + len) of the text. */
typedef struct record {
    size_t start, len;
} record;

typedef struct record_list {
    record *at;
    long n, cap, empty;
} record_list;

/* Samples a record of len bytes gives at seq positions each. */
static long record_samples(size_t len, int seq) { return (long)((len - 2) / (size_t)seq) + 1; }

/* Adds bytes [start, end) of file f as a record that ends at line (its separator's,
 * or the file's last); an empty one (separators in a row, or one at the start of a
 * file) is only counted. */
static int add_record(record_list *l, const pn_text *t, int f, size_t start, size_t end,
                      long line)
{
    if (end == start) {
        l->empty++;
        return PN_OK;
    }
    if (end - start < 2)
        return pn_error_set(PN_ERR_INVALID,
                            "%s: line %ld: the record that ends here holds 1 byte, which gives "
                            "no target to predict (a record needs a token and the one after it)",
                            t->files[f], line);
    if (l->n == l->cap) {
        long cap = l->cap ? 2 * l->cap : 1024;
        record *more = realloc(l->at, (size_t)cap * sizeof *more);
        if (!more) return pn_error_set(PN_ERR_NOMEM, "out of memory for %ld records", cap);
        l->at = more, l->cap = cap;
    }
    l->at[l->n++] = (record){start, end - start};
    return PN_OK;
}

/* Cuts every file of t into records at the lines equal to sep. */
static int find_records(const pn_text *t, const char *sep, record_list *l)
{
    size_t sep_len = strlen(sep);
    size_t begin = 0;
    for (int f = 0; f < t->n_files; f++) {
        size_t end = t->ends[f], pos = begin, rec = begin;
        long line = 0;
        while (pos < end) {
            const unsigned char *nl = memchr(t->bytes + pos, '\n', end - pos);
            size_t line_end = nl ? (size_t)(nl - t->bytes) : end;
            size_t next = nl ? line_end + 1 : end;
            line++;
            if (line_end - pos == sep_len && !memcmp(t->bytes + pos, sep, sep_len)) {
                PN_TRY(add_record(l, t, f, rec, pos, line));
                rec = next;
            }
            pos = next;
        }
        if (rec < end) PN_TRY(add_record(l, t, f, rec, end, line)); /* else sep ended it */
        begin = end;
    }
    return PN_OK;
}

/* Writes records [0, n) as samples into the HDF5 file tmp. */
static int write_split(const char *tmp, const pn_text *t, const record *recs, long n, int seq,
                       const char *sep, const char *source)
{
    long samples = 0;
    for (long r = 0; r < n; r++) samples += record_samples(recs[r].len, seq);
    pn_token_file f;
    int rc = pn_token_file_create(&f, tmp, samples, seq, true);
    size_t block_len = (size_t)f.chunk_rows * (size_t)seq;
    int32_t *tok = malloc(block_len * sizeof *tok), *tgt = malloc(block_len * sizeof *tgt);
    int32_t *len = malloc((size_t)f.chunk_rows * sizeof *len);
    if (rc == 0 && (!tok || !tgt || !len))
        rc = pn_error_set(PN_ERR_NOMEM, "%s: out of memory for %zu ids", tmp, block_len);
    long row = 0, filled = 0; /* rows written, rows in the block */
    for (long r = 0; rc == 0 && r < n; r++) {
        const unsigned char *b = t->bytes + recs[r].start;
        size_t pairs = recs[r].len - 1;
        for (size_t first = 0; rc == 0 && first < pairs; first += (size_t)seq) {
            size_t k = pairs - first < (size_t)seq ? pairs - first : (size_t)seq;
            int32_t *tk = tok + (size_t)filled * (size_t)seq, *tg = tgt + (size_t)filled * seq;
            for (size_t p = 0; p < (size_t)seq; p++) {
                tk[p] = p < k ? b[first + p] : 0;
                tg[p] = p < k ? b[first + p + 1] : 0;
            }
            len[filled++] = (int32_t)k;
            bool last = r == n - 1 && first + (size_t)seq >= pairs;
            if (filled < f.chunk_rows && !last) continue;
            rc = pn_token_file_write(&f, row, filled, tok, tgt, len);
            row += filled, filled = 0;
        }
    }
    free(tok), free(tgt), free(len);
    rc = pn_token_file_finish(&f, source, rc);
    if (rc == 0) rc = pn_hdf5_write_attr_string(f.file, tmp, "record_separator", sep, false);
    if (rc == 0) rc = pn_hdf5_write_attr_int(f.file, tmp, "records", n);
    return pn_token_file_close(&f, rc);
}

static int check_args(int seq, double eval_fraction, const char *sep)
{
    PN_TRY(pn_text_check_split(seq, eval_fraction));
    if (!sep || !sep[0])
        return pn_error_set(PN_ERR_INVALID, "--records: expected the text of the line that "
                                            "separates records (such as %%), found ''");
    if (strchr(sep, '\n'))
        return pn_error_set(PN_ERR_INVALID, "--records: the separator is one line; it cannot "
                                            "hold a newline");
    return PN_OK;
}

int pn_import_text_records(const char *const *files, int n_files, const char *out_dir, int seq,
                           double eval_fraction, pn_text_records *records,
                           pn_import_progress progress, void *ctx)
{
    records->records[0] = records->records[1] = records->empty = 0;
    PN_TRY(check_args(seq, eval_fraction, records->separator));
    pn_text t;
    PN_TRY(pn_text_read(&t, files, n_files));
    record_list l = {0};
    int rc = find_records(&t, records->separator, &l);
    if (rc == 0 && l.n < 2)
        rc = pn_error_set(PN_ERR_INVALID,
                          "%s: %ld record%s between lines '%s' (and %ld empty): train.h5 and "
                          "test.h5 need one each (is the separator right?)",
                          t.label, l.n, l.n == 1 ? "" : "s", records->separator, l.empty);
    long n_test = llround(eval_fraction * (double)l.n);
    if (n_test < 1) n_test = 1;
    if (n_test > l.n - 1) n_test = l.n - 1;
    long n_train = l.n - n_test;
    if (rc == 0) rc = pn_import_make_dirs(out_dir);
    for (int s = 0; s < 2 && rc == 0; s++) {
        char out[PATH_MAX], tmp[PATH_MAX + 32], source[sizeof t.label + 160];
        if ((rc = pn_import_output(out_dir, s, out, sizeof out)) < 0) break;
        long first = s ? n_train : 0, n = s ? n_test : n_train, samples = 0;
        for (long r = first; r < first + n; r++) samples += record_samples(l.at[r].len, seq);
        snprintf(source, sizeof source, "text: %s, %s split: records %ld..%ld of %ld "
                 "(separated by lines '%.20s')", t.label, pn_import_splits[s], first,
                 first + n, l.n, records->separator);
        rc = pn_import_tmp_name(out, tmp, sizeof tmp);
        if (rc == 0)
            rc = pn_import_finish(tmp, out, write_split(tmp, &t, l.at + first, n, seq,
                                                        records->separator, source));
        if (rc == 0 && progress) progress(out, samples, ctx);
    }
    if (rc == 0) records->records[0] = n_train, records->records[1] = n_test;
    records->empty = l.empty;
    free(l.at);
    pn_text_free(&t);
    return rc;
}
