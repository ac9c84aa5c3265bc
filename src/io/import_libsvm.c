/* libsvm and libffm text files to sparse dataset HDF5 (import_sparse.h). Each file is
 * read a line at a time (getline) and each sample goes straight into the CSR writer
 * (csr_file.h), which writes a block at a time: memory holds one line and one block,
 * whatever the files' size. --test-fraction counts the samples in a first pass, so
 * that test.h5 takes the last ones (CTR logs are in time order: the test split is the
 * future, not a random share). */
#include "io/import_sparse.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "io/csr_file.h"
#include "io/hdf5_util.h"

static const pn_choice form_items[] = {
    {"auto", "the first feature decides (libsvm or libffm)"},
    {"libsvm", "label idx:val ..."},
    {"libffm", "label field:idx:val ..."}};
const pn_choices pn_svm_forms = {"a text form", 3, form_items};

static const char *form_name(pn_svm_form f) { return pn_choice_name(&pn_svm_forms, (int)f); }

/* The largest index and field the files may name: indices stay far from int64's end
 * (columns = index + 1), fields fit int32. */
#define MAX_INDEX ((int64_t)1 << 62)
#define MAX_FIELD (INT32_MAX - 1)

/* One line being parsed, and the entries of its sample. */
typedef struct parser {
    const pn_libsvm_options *o;
    pn_svm_form form;        /* AUTO until the first feature */
    const char *form_where;  /* "a.svm line 3": where the form was decided */
    char form_at[PATH_MAX + 32];
    int base;                /* the index base once the form is known */
    const char *file;
    long line;
    const char *text;        /* the line, for columns */
    int64_t *indices;
    float *values;
    int32_t *fields;
    long n, cap;
} parser;

/* "file: line L, column C: expected <what>, found '<token>'", the token cut to 40
 * bytes and its unprintable bytes (a NUL, a control byte) shown as \xNN. */
static int refuse(const parser *p, const char *at, size_t len, const char *what)
{
    char shown[4 * 40 + 4];
    size_t n = 0;
    for (size_t i = 0; i < len && i < 40; i++) {
        unsigned char c = (unsigned char)at[i];
        if (c >= 0x20 && c != 0x7f) shown[n++] = (char)c;
        else n += (size_t)snprintf(shown + n, sizeof shown - n, "\\x%02x", c);
    }
    snprintf(shown + n, sizeof shown - n, "%s", len > 40 ? "..." : "");
    return pn_error_set(PN_ERR_INVALID, "%s: line %ld, column %ld: expected %s, found '%s'",
                        p->file, p->line, (long)(at - p->text) + 1, what, shown);
}

/* A non-negative decimal integer of len bytes at s, at most max; -1 when not. */
static int64_t parse_uint(const char *s, size_t len, int64_t max)
{
    if (len == 0) return -1;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        int d = s[i] - '0';
        if (d > max || v > (max - d) / 10) return -1;
        v = v * 10 + d;
    }
    return v;
}

/* A number of exactly len bytes at s (strtod's syntax); false when not one. */
static bool parse_double(const char *s, size_t len, double *out)
{
    char buf[64];
    /* strtod would skip leading blanks such as '\v' and '\r' */
    if (len == 0 || len >= sizeof buf || isspace((unsigned char)s[0])) return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end;
    *out = strtod(buf, &end);
    return end == buf + len;
}

static int parse_label(const parser *p, const char *s, size_t len, int32_t *label)
{
    double v;
    if (!parse_double(s, len, &v) || (v != 0 && v != 1 && v != -1))
        return refuse(p, s, len, "a label 0 or 1 (or -1 for 0, +1 for 1)");
    *label = v == 1;
    return PN_OK;
}

/* Decides the form from the first feature (colons: 1 libsvm, 2 libffm), or checks
 * that this feature has the form decided. */
static int check_form(parser *p, const char *tok, size_t len, int colons)
{
    pn_svm_form form = colons == 2 ? PN_SVM_LIBFFM : PN_SVM_LIBSVM;
    if (p->form == PN_SVM_AUTO) {
        p->form = form;
        p->base = p->o->index_base >= 0 ? p->o->index_base : form == PN_SVM_LIBSVM ? 1 : 0;
        snprintf(p->form_at, sizeof p->form_at, "%s line %ld", p->file, p->line);
        return PN_OK;
    }
    if (form == p->form) return PN_OK;
    char what[PATH_MAX + 128];
    snprintf(what, sizeof what, "%s (the %s form, as %s)",
             p->form == PN_SVM_LIBSVM ? "index:value" : "field:index:value",
             form_name(p->form), p->o->form != PN_SVM_AUTO ? "--format says" : p->form_at);
    return refuse(p, tok, len, what);
}

static int add_entry(parser *p, int64_t index, float value, int32_t field)
{
    if (p->n == p->cap) {
        long cap = p->cap ? 2 * p->cap : 256;
        int64_t *i = realloc(p->indices, (size_t)cap * sizeof *i);
        if (i) p->indices = i;
        float *v = i ? realloc(p->values, (size_t)cap * sizeof *v) : NULL;
        if (v) p->values = v;
        int32_t *f = v ? realloc(p->fields, (size_t)cap * sizeof *f) : NULL;
        if (!f)
            return pn_error_set(PN_ERR_NOMEM, "%s: line %ld: out of memory for %ld features",
                                p->file, p->line, cap);
        p->fields = f, p->cap = cap;
    }
    p->indices[p->n] = index, p->values[p->n] = value, p->fields[p->n++] = field;
    return PN_OK;
}

/* One feature token tok[len]: [field:]index:value. */
static int parse_feature(parser *p, const char *tok, size_t len)
{
    const char *c1 = memchr(tok, ':', len);
    if (!c1) return refuse(p, tok, len, "index:value or field:index:value (no ':')");
    const char *c2 = memchr(c1 + 1, ':', (size_t)(tok + len - c1 - 1));
    if (c2 && memchr(c2 + 1, ':', (size_t)(tok + len - c2 - 1)))
        return refuse(p, tok, len, "index:value or field:index:value (three ':' or more)");
    PN_TRY(check_form(p, tok, len, c2 ? 2 : 1));
    int32_t field = 0;
    const char *idx = tok, *val = c1 + 1;
    if (c2) {
        int32_t limit = p->o->num_fields > 0 ? p->o->num_fields - 1 : MAX_FIELD;
        int64_t f = parse_uint(tok, (size_t)(c1 - tok), limit);
        if (f < 0) {
            char what[96];
            snprintf(what, sizeof what, "a field: an integer in [0, %ld]%s", (long)limit,
                     p->o->num_fields > 0 ? " (--fields)" : "");
            return refuse(p, tok, (size_t)(c1 - tok), what);
        }
        field = (int32_t)f, idx = c1 + 1, val = c2 + 1;
    }
    size_t idx_len = (size_t)(val - 1 - idx);
    int64_t limit = p->o->columns > 0 ? p->o->columns - 1 + p->base : MAX_INDEX;
    int64_t index = parse_uint(idx, idx_len, limit);
    if (index < 0 || index < p->base) {
        char what[128];
        snprintf(what, sizeof what, "an index: an integer in [%d, %lld]%s", p->base,
                 (long long)limit,
                 p->base && parse_uint(idx, idx_len, limit) == 0
                     ? " (indices count from 1; --index-base 0 reads 0 as the first)"
                 : p->o->columns > 0 ? " (--columns)" : "");
        return refuse(p, idx, idx_len, what);
    }
    size_t val_len = (size_t)(tok + len - val);
    double v;
    if (!parse_double(val, val_len, &v) || !isfinite(v) || fabs(v) > FLT_MAX)
        return refuse(p, val, val_len, "a finite value (a float32)");
    return add_entry(p, index - p->base, (float)v, field);
}

/* Parses line text[len] (no newline): 1 and the sample's label and entries in p, 0
 * for a line that holds no sample, or an error. */
static int parse_line(parser *p, const char *text, size_t len, int32_t *label)
{
    p->text = text, p->n = 0;
    const char *end = text + len, *s = text;
    bool have_label = false;
    for (;;) {
        while (s < end && (*s == ' ' || *s == '\t')) s++;
        if (s == end || *s == '#') return have_label; /* the rest is a comment */
        const char *tok = s;
        while (s < end && *s != ' ' && *s != '\t') s++;
        if (have_label) {
            PN_TRY(parse_feature(p, tok, (size_t)(s - tok)));
        } else {
            PN_TRY(parse_label(p, tok, (size_t)(s - tok), label));
            have_label = true;
        }
    }
}

/* Calls sample(ctx) for every sample line of path, its label and entries in p. */
typedef int (*sample_fn)(parser *p, int32_t label, void *ctx);
static int read_lines(parser *p, const char *path, sample_fn sample, void *ctx)
{
    errno = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return pn_error_set(PN_ERR_IO, "cannot open '%s': %s", path,
                            errno ? strerror(errno) : "out of memory");
    p->file = path, p->line = 0;
    char *buf = NULL;
    size_t cap = 0;
    ssize_t got;
    int rc = PN_OK;
    errno = 0;
    while (rc == PN_OK && (got = getline(&buf, &cap, f)) >= 0) {
        size_t len = (size_t)got;
        p->line++;
        if (len && buf[len - 1] == '\n') len--;
        if (len && buf[len - 1] == '\r') len--;
        int32_t label = 0;
        rc = parse_line(p, buf, len, &label);
        if (rc == 1) rc = sample(p, label, ctx);
    }
    if (rc == PN_OK && ferror(f))
        rc = pn_error_set(PN_ERR_IO, "%s: line %ld: read failed: %s", path, p->line + 1,
                          strerror(errno));
    free(buf);
    fclose(f);
    return rc;
}

/* The two outputs and where samples go. */
typedef struct split {
    pn_csr_file out[2];
    int n_out;       /* 1: train.h5 alone; 2: and test.h5 */
    long test_from;  /* with --test-fraction: samples from this one on go to test */
    long seen;
    int to;          /* the split of the file being read (--test FILE) */
} split;

enum { STOP = 2 }; /* a sample callback's "enough" */

static int count_sample(parser *p, int32_t label, void *ctx)
{
    (*(long *)ctx)++;
    return PN_OK;
}

static int stop_at_form(parser *p, int32_t label, void *ctx)
{
    return p->form != PN_SVM_AUTO ? STOP : PN_OK;
}

static int write_sample(parser *p, int32_t label, void *ctx)
{
    split *s = ctx;
    int to = s->test_from >= 0 ? s->seen >= s->test_from : s->to;
    s->seen++;
    return pn_csr_file_add_row(&s->out[to], label, p->n, p->indices, p->values, p->fields);
}

/* Reads every input (train files, then the test file) with fn; stops at STOP. */
static int read_all(parser *p, const char *const *files, int n_files, sample_fn fn, void *ctx,
                    split *s)
{
    int rc = PN_OK;
    for (int i = 0; i < n_files && rc == PN_OK; i++) rc = read_lines(p, files[i], fn, ctx);
    if (rc == PN_OK && p->o->test_file) {
        if (s) s->to = 1;
        rc = read_lines(p, p->o->test_file, fn, ctx);
    }
    return rc == STOP ? PN_OK : rc;
}

/* A first pass before anything is written: the form (whether files get fields) from
 * the first feature, and with --test-fraction the number of samples, refusing a
 * split left empty. */
static int first_pass(parser *p, const char *const *files, int n_files, long *test_from)
{
    if (p->o->test_fraction <= 0) {
        if (p->form != PN_SVM_AUTO) return PN_OK;
        return read_all(p, files, n_files, stop_at_form, NULL, NULL);
    }
    long n = 0;
    PN_TRY(read_all(p, files, n_files, count_sample, &n, NULL));
    if (n < 2)
        return pn_error_set(PN_ERR_INVALID, "%s%s: %ld sample%s: --test-fraction needs 2 or "
                            "more (one for train.h5, one for test.h5)", files[0],
                            n_files > 1 ? " and the files after it" : "", n,
                            n == 1 ? "" : "s");
    long n_test = llround(p->o->test_fraction * (double)n);
    if (n_test < 1) n_test = 1;
    if (n_test > n - 1) n_test = n - 1;
    *test_from = n - n_test;
    return PN_OK;
}

/* Writes both files (under their temporary names) from every input. */
static int write_files(parser *p, split *s, const char *const *files, int n_files,
                       char tmp[2][PATH_MAX + 32], pn_libsvm_result *res)
{
    bool fields = p->form == PN_SVM_LIBFFM;
    char source[2][PATH_MAX + 128];
    snprintf(source[0], sizeof source[0], "%s: %s%s", form_name(p->form), files[0],
             n_files > 1 ? " and the files after it" : "");
    if (p->o->test_fraction > 0)
        snprintf(source[1], sizeof source[1], "%s: %s%s (the last %g of the samples)",
                 form_name(p->form), files[0],
                 n_files > 1 ? " and the files after it" : "", p->o->test_fraction);
    else
        snprintf(source[1], sizeof source[1], "%s: %s", form_name(p->form),
                 p->o->test_file ? p->o->test_file : "");
    int rc = PN_OK;
    for (int k = 0; k < s->n_out; k++) {
        int r = pn_csr_file_create(&s->out[k], tmp[k], true, fields, p->o->chunk);
        if (r < 0 && rc == PN_OK) rc = r;
    }
    if (rc == PN_OK) rc = read_all(p, files, n_files, write_sample, s, s);
    int64_t max_index = -1;
    int32_t max_field = -1;
    for (int k = 0; k < s->n_out; k++) {
        if (s->out[k].max_index > max_index) max_index = s->out[k].max_index;
        if (s->out[k].max_field > max_field) max_field = s->out[k].max_field;
    }
    res->columns = p->o->columns > 0 ? p->o->columns : max_index + 1;
    res->num_fields = !fields ? 0 : p->o->num_fields > 0 ? p->o->num_fields : max_field + 1;
    for (int k = 0; k < s->n_out; k++) {
        res->rows[k] = s->out[k].rows, res->nnz[k] = s->out[k].nnz;
        rc = pn_csr_file_finish(&s->out[k], res->columns, res->num_fields, rc);
        if (rc == PN_OK) rc = pn_hdf5_write_attr_string(s->out[k].file, tmp[k], "source",
                                                        source[k], false);
        if (rc == PN_OK) rc = pn_hdf5_write_attr_int(s->out[k].file, tmp[k], "index_base",
                                                     p->base);
        if (rc == PN_OK) rc = pn_hdf5_write_attr_int(s->out[k].file, tmp[k], "num_classes", 2);
        rc = pn_csr_file_close(&s->out[k], rc);
    }
    return rc;
}

int pn_import_libsvm(const char *const *files, int n_files, const char *out_dir,
                     const pn_libsvm_options *o, pn_libsvm_result *res,
                     pn_import_progress progress, void *ctx)
{
    *res = (pn_libsvm_result){0};
    if (n_files < 1) return pn_error_set(PN_ERR_INVALID, "no libsvm file to import");
    parser p = {.o = o, .form = o->form, .base = o->index_base};
    if (o->form != PN_SVM_AUTO && p.base < 0) p.base = o->form == PN_SVM_LIBSVM ? 1 : 0;
    split s = {.n_out = o->test_file || o->test_fraction > 0 ? 2 : 1, .test_from = -1};
    int rc = first_pass(&p, files, n_files, &s.test_from);
    if (p.form == PN_SVM_AUTO) p.base = o->index_base > 0 ? o->index_base : 0;
    if (rc == PN_OK) rc = pn_import_make_dirs(out_dir);
    char out[2][PATH_MAX], tmp[2][PATH_MAX + 32] = {"", ""};
    for (int k = 0; k < s.n_out && rc == PN_OK; k++) {
        rc = pn_import_output(out_dir, k, out[k], sizeof out[k]);
        if (rc == PN_OK) rc = pn_import_tmp_name(out[k], tmp[k], sizeof tmp[k]);
    }
    if (rc == PN_OK) rc = write_files(&p, &s, files, n_files, tmp, res);
    /* both files are put in place, or neither */
    for (int k = 0; k < s.n_out && rc < 0 && tmp[k][0]; k++) unlink(tmp[k]);
    for (int k = 0; k < s.n_out && rc == PN_OK; k++) {
        rc = pn_import_finish(tmp[k], out[k], rc);
        if (rc == PN_OK && progress) progress(out[k], res->rows[k], ctx);
    }
    res->form = p.form, res->index_base = p.base;
    free(p.indices), free(p.values), free(p.fields);
    return rc;
}
