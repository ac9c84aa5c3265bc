/* The CSR group of a sparse field (reader_csr.h). */
#include "io/reader_csr.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/names.h"

enum { INDICES, VALUES, FIELDS };

/* Samples whose features lie at most CSR_GAP apart in the file are read with one
 * hyperslab per array, their gaps too, into span buffers of CSR_SPAN features: for
 * shuffled batches of short rows, few large reads beat one read per sample (each
 * H5Dread costs about 10 us). */
enum { CSR_GAP = 4096, CSR_SPAN = 1 << 16 };

/* "input 'x'" for messages. */
static const char *input_of(const pn_csr_source *s, char *buf, size_t cap)
{
    snprintf(buf, cap, "input '%s'", s->spec.input ? s->spec.input : "?");
    return buf;
}

/* Integer attribute attr of the group: absent (*present false, when optional), or
 * exactly n integers into out. */
static int read_attr(pn_csr_source *s, hid_t group, const char *attr, int n, bool optional,
                     int64_t *out, bool *present)
{
    const char *form = n == 2 ? "integer [2]: samples, columns, as AnnData writes it"
                              : "an integer: the number of fields";
    *present = false;
    pn_hdf5_lock();
    htri_t exists = H5Aexists(group, attr);
    int rc = 0;
    if (exists < 0) rc = pn_hdf5_fail("H5Aexists", "%s: group '/%s': cannot look up attribute "
                                      "'%s'", s->path, s->name, attr);
    hid_t a = H5I_INVALID_HID, t = H5I_INVALID_HID, space = H5I_INVALID_HID;
    hssize_t points = -1;
    const char *bad = "%s: group '/%s': cannot read attribute '%s'";
    if (rc == 0 && exists > 0) {
        PN_HDF5_CHECK(rc, a = H5Aopen(group, attr, H5P_DEFAULT), bad, s->path, s->name, attr);
        PN_HDF5_CHECK(rc, t = H5Aget_type(a), bad, s->path, s->name, attr);
        PN_HDF5_CHECK(rc, space = H5Aget_space(a), bad, s->path, s->name, attr);
        PN_HDF5_CHECK(rc, points = H5Sget_simple_extent_npoints(space), bad, s->path, s->name,
                      attr);
        if (rc == 0 && (H5Tget_class(t) != H5T_INTEGER || points != n))
            rc = pn_error_set(PN_ERR_INVALID, "%s: group '/%s': attribute '%s' is not %s",
                              s->path, s->name, attr, form);
        PN_HDF5_CHECK(rc, H5Aread(a, H5T_NATIVE_INT64, out), bad, s->path, s->name, attr);
    }
    if (space >= 0) H5Sclose(space);
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    pn_hdf5_unlock();
    if (rc == 0 && exists == 0 && !optional)
        rc = pn_error_set(PN_ERR_INVALID, "%s: group '/%s' has no attribute '%s' (%s)", s->path,
                          s->name, attr, form);
    *present = rc == 0 && exists > 0;
    return rc;
}

/* Opens array `leaf` of the group when it is there: one dimension of `len` values
 * of kind (integers, or floats for values). */
static int open_array(pn_csr_source *s, hid_t file, int k, const char *leaf, bool floats,
                      int64_t len)
{
    char full[2 * PN_NAME_MAX + 8], input[PN_NAME_MAX + 16];
    snprintf(full, sizeof full, "%s/%s", s->name, leaf);
    PN_TRY(pn_hdf5_open_dataset(file, s->path, full, NULL, &s->dset[k]));
    pn_hdf5_elem elem;
    PN_TRY(pn_hdf5_dataset_elem(s->dset[k], s->path, full, &elem));
    bool ok = floats ? elem.kind == PN_HDF5_KIND_FLOAT
                     : elem.kind == PN_HDF5_KIND_SIGNED || elem.kind == PN_HDF5_KIND_UNSIGNED;
    if (!ok)
        return pn_error_set(PN_ERR_INVALID, "%s: dataset '/%s' holds %s, but %s reads %s there",
                            s->path, full, elem.name, input_of(s, input, sizeof input),
                            floats ? "floats" : "integers");
    int rank;
    hsize_t dims[H5S_MAX_RANK];
    PN_TRY(pn_hdf5_dataset_extent(s->dset[k], s->path, full, &rank, dims));
    if (rank != 1)
        return pn_error_set(PN_ERR_INVALID, "%s: dataset '/%s' has %d dimensions: write one, "
                            "a value per feature", s->path, full, rank);
    if ((int64_t)dims[0] != len)
        return pn_error_set(PN_ERR_INVALID, "%s: dataset '/%s' holds %llu values, but indptr[N] "
                            "says %" PRId64 " features (indices, values and fields hold one a "
                            "feature)", s->path, full, (unsigned long long)dims[0], len);
    PN_TRY(pn_hdf5_check_storage(s->dset[k], s->path, full));
    int rc = 0;
    pn_hdf5_lock();
    PN_HDF5_CHECK(rc, s->fspace[k] = H5Dget_space(s->dset[k]), "%s: dataset '/%s': cannot make "
                  "its dataspace", s->path, full);
    pn_hdf5_unlock();
    return rc;
}

/* Reads indptr whole and checks it: n + 1 integers from 0, never decreasing. */
static int read_indptr(pn_csr_source *s, hid_t file)
{
    char full[PN_NAME_MAX + 16];
    snprintf(full, sizeof full, "%s/indptr", s->name);
    hid_t d;
    PN_TRY(pn_hdf5_open_dataset(file, s->path, full, NULL, &d));
    pn_hdf5_elem elem;
    int rank = 0, rc = pn_hdf5_dataset_elem(d, s->path, full, &elem);
    hsize_t dims[H5S_MAX_RANK];
    if (rc == 0) rc = pn_hdf5_dataset_extent(d, s->path, full, &rank, dims);
    if (rc == 0 && elem.kind != PN_HDF5_KIND_SIGNED && elem.kind != PN_HDF5_KIND_UNSIGNED)
        rc = pn_error_set(PN_ERR_INVALID, "%s: dataset '/%s' holds %s: write integers (int64)",
                          s->path, full, elem.name);
    if (rc == 0 && rank != 1)
        rc = pn_error_set(PN_ERR_INVALID, "%s: dataset '/%s' has %d dimensions: write one of "
                          "N + 1 offsets", s->path, full, rank);
    if (rc == 0 && (int64_t)dims[0] != (int64_t)s->n + 1)
        rc = pn_error_set(PN_ERR_INVALID, "%s: dataset '/%s' holds %llu values, but the group's "
                          "shape says %ld samples (write N + 1 offsets)", s->path, full,
                          (unsigned long long)dims[0], s->n);
    if (rc == 0) rc = pn_hdf5_check_storage(d, s->path, full);
    if (rc == 0 && !(s->indptr = malloc(((size_t)s->n + 1) * sizeof *s->indptr)))
        rc = pn_error_set(PN_ERR_NOMEM, "%s: out of memory for '/%s'", s->path, full);
    if (rc == 0) rc = pn_hdf5_read_all(d, s->path, full, PN_HDF5_INT64, s->indptr);
    pn_hdf5_close(d, s->path);
    if (rc == 0 && s->indptr[0] != 0)
        rc = pn_error_set(PN_ERR_INVALID, "%s: dataset '/%s': indptr[0] is %" PRId64 ", not 0",
                          s->path, full, s->indptr[0]);
    for (long r = 0; rc == 0 && r < s->n; r++)
        if (s->indptr[r + 1] < s->indptr[r])
            rc = pn_error_set(PN_ERR_INVALID, "%s: group '/%s', sample %ld: indptr[%ld] = %" PRId64
                              " is less than indptr[%ld] = %" PRId64 " (offsets never decrease)",
                              s->path, s->name, r, r + 1, s->indptr[r + 1], r, s->indptr[r]);
    if (rc == 0) s->nnz = s->indptr[s->n];
    return rc;
}

static int desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The sum of the count longest rows: no batch holds more features. */
static int compute_bound(pn_csr_source *s, long count)
{
    int64_t *len = malloc((size_t)s->n * sizeof *len + 1);
    if (!len) return pn_error_set(PN_ERR_NOMEM, "%s: out of memory", s->path);
    for (long r = 0; r < s->n; r++) len[r] = s->indptr[r + 1] - s->indptr[r];
    qsort(len, (size_t)s->n, sizeof *len, desc);
    s->bound = 0;
    for (long k = 0; k < count && k < s->n; k++) s->bound += len[k];
    free(len);
    if (s->bound <= INT_MAX) return PN_OK;
    return pn_error_set(PN_ERR_UNSUPPORTED, "%s: group '/%s': a batch of %ld samples may hold "
                        "%" PRId64 " features, more than %d: use a smaller batch", s->path,
                        s->name, count, s->bound, INT_MAX);
}

/* The group's attributes against the model's input: shape (N, columns) with columns
 * at most the input's; num_fields at most the input's fields. */
static int check_attrs(pn_csr_source *s, hid_t group, bool has_fields)
{
    int64_t shape[2] = {0, 0}, nf = 0;
    bool present;
    char input[PN_NAME_MAX + 16];
    input_of(s, input, sizeof input);
    PN_TRY(read_attr(s, group, "shape", 2, false, shape, &present));
    if (shape[0] < 0 || shape[0] > ((int64_t)1 << 40) || shape[1] < 1)
        return pn_error_set(PN_ERR_INVALID, "%s: group '/%s': attribute 'shape' is [%" PRId64
                            ", %" PRId64 "]: expected [samples, columns], columns >= 1",
                            s->path, s->name, shape[0], shape[1]);
    if (shape[1] > s->spec.shape.columns)
        return pn_error_set(PN_ERR_INVALID, "%s: group '/%s' has %" PRId64 " columns (attribute "
                            "'shape'), more than the \"columns\": %" PRId64 " of %s", s->path,
                            s->name, shape[1], s->spec.shape.columns, input);
    s->n = (long)shape[0];
    s->columns = shape[1];
    if (s->spec.shape.fields == 0) return PN_OK; /* the model reads no fields */
    if (!has_fields)
        return pn_error_set(PN_ERR_INVALID, "%s: group '/%s' has no dataset 'fields', but %s "
                            "reads %d fields", s->path, s->name, input, s->spec.shape.fields);
    PN_TRY(read_attr(s, group, "num_fields", 1, false, &nf, &present));
    if (nf < 1 || nf > s->spec.shape.fields)
        return pn_error_set(PN_ERR_INVALID, "%s: group '/%s': attribute 'num_fields' is %" PRId64
                            ", but %s reads 1 to %d fields", s->path, s->name, nf, input,
                            s->spec.shape.fields);
    s->num_fields = (int)nf;
    return PN_OK;
}

int pn_csr_open(pn_csr_source *s, hid_t file, const char *path, const pn_reader_field *spec,
                long count)
{
    *s = (pn_csr_source){.path = path, .spec = *spec};
    for (int k = 0; k < PN_CSR_ARRAYS; k++) s->dset[k] = s->fspace[k] = H5I_INVALID_HID;
    s->name = spec->dataset[0] == '/' ? spec->dataset + 1 : spec->dataset;
    char input[PN_NAME_MAX + 16], full[PN_NAME_MAX + 16];
    input_of(s, input, sizeof input);
    if (!pn_hdf5_link_exists(file, s->name))
        return pn_error_set(PN_ERR_INVALID, "%s: no group '/%s' (the model's %s reads it)", path,
                            s->name, input);
    pn_hdf5_lock();
    int rc = 0;
    hid_t group = H5I_INVALID_HID;
    PN_HDF5_CHECK(rc, group = H5Oopen(file, s->name, H5P_DEFAULT), "%s: cannot open '/%s'",
                  path, s->name);
    if (rc == 0 && H5Iget_type(group) != H5I_GROUP)
        rc = pn_error_set(PN_ERR_INVALID, "%s: '/%s' is a dataset, but %s is sparse: it reads a "
                          "CSR group (indptr, indices, values, shape; docs/formats.md)", path,
                          s->name, input);
    pn_hdf5_unlock();
    bool has[4] = {false, false, false, false};
    static const char *const leaves[] = {"indices", "values", "data", "fields"};
    for (int k = 0; rc == 0 && k < 4; k++) {
        snprintf(full, sizeof full, "%s/%s", s->name, leaves[k]);
        has[k] = pn_hdf5_link_exists(file, full);
    }
    if (rc == 0 && has[1] && has[2])
        rc = pn_error_set(PN_ERR_INVALID, "%s: group '/%s' holds both 'values' and 'data': keep "
                          "one (pipenet writes 'values', AnnData 'data')", path, s->name);
    if (rc == 0) rc = check_attrs(s, group, has[3]);
    if (group >= 0) pn_hdf5_close(group, path);
    if (rc == 0 && !has[0])
        rc = pn_error_set(PN_ERR_INVALID, "%s: group '/%s' has no dataset 'indices'", path,
                          s->name);
    if (rc == 0) rc = read_indptr(s, file);
    if (rc == 0) rc = open_array(s, file, INDICES, "indices", false, s->nnz);
    snprintf(s->value_name, sizeof s->value_name, "%s", has[2] ? "data" : "values");
    if (rc == 0 && (has[1] || has[2]))
        rc = open_array(s, file, VALUES, s->value_name, true, s->nnz);
    if (rc == 0 && s->num_fields > 0) rc = open_array(s, file, FIELDS, "fields", false, s->nnz);
    if (rc == 0) rc = compute_bound(s, count);
    if (rc == 0 && ((s->num_fields > 0 &&
                     !(s->stage = malloc((size_t)s->bound * sizeof *s->stage + 1))) ||
                    !(s->span_cols = malloc(CSR_SPAN * sizeof *s->span_cols)) ||
                    !(s->span_vals = malloc(CSR_SPAN * sizeof *s->span_vals)) ||
                    (s->num_fields > 0 &&
                     !(s->span_fields = malloc(CSR_SPAN * sizeof *s->span_fields)))))
        rc = pn_error_set(PN_ERR_NOMEM, "%s: out of memory for group '/%s'", path, s->name);
    return rc;
}

/* Checks features [from, from + n) of sample row (at cols, vals, fields; fields
 * wide when the values come from stage, then narrowed into fields). */
static int check_features(const pn_csr_source *s, long row, int64_t from, int64_t n,
                          const int64_t *cols, const float *vals, const int64_t *wide,
                          int *fields)
{
    for (int64_t k = 0; k < n; k++) {
        if (cols[k] < 0 || cols[k] >= s->columns)
            return pn_error_set(PN_ERR_INVALID, "%s: group '/%s', sample %ld: index %" PRId64
                                " (position %" PRId64 " of 'indices') is outside [0, %" PRId64
                                ") (the group's columns)", s->path, s->name, row, cols[k],
                                from + k, s->columns);
        if (s->dset[VALUES] >= 0 && !isfinite(vals[k])) {
            char msg[64];
            snprintf(msg, sizeof msg, "is %g (data must be finite)", vals[k]);
            return pn_error_set(PN_ERR_INVALID, "%s: group '/%s', sample %ld: value %" PRId64
                                " of '%s' %s", s->path, s->name, row, from + k, s->value_name,
                                msg);
        }
        if (s->num_fields == 0) continue;
        int64_t f = wide ? wide[k] : fields[k];
        if (f < 0 || f >= s->num_fields)
            return pn_error_set(PN_ERR_INVALID, "%s: group '/%s', sample %ld: field %" PRId64
                                " (position %" PRId64 " of 'fields') is outside [0, %d) "
                                "(attribute 'num_fields')", s->path, s->name, row, f, from + k,
                                s->num_fields);
        if (wide) fields[k] = (int)f;
    }
    return PN_OK;
}

bool pn_csr_cache_bytes(const pn_csr_source *s, size_t *bytes)
{
    size_t per = sizeof(int64_t) + sizeof(float) + (s->num_fields ? sizeof(int) : 0);
    return !__builtin_mul_overflow((size_t)s->nnz, per, bytes);
}

int pn_csr_cache(pn_csr_source *s)
{
    size_t n = (size_t)s->nnz + 1;
    s->cols = malloc(n * sizeof *s->cols);
    s->vals = malloc(n * sizeof *s->vals);
    s->fields = s->num_fields ? malloc(n * sizeof *s->fields) : NULL;
    int64_t *wide = s->num_fields ? malloc(n * sizeof *wide) : NULL;
    int rc = 0;
    if (!s->cols || !s->vals || (s->num_fields && (!s->fields || !wide)))
        rc = pn_error_set(PN_ERR_NOMEM, "%s: out of memory caching group '/%s'", s->path,
                          s->name);
    char full[PN_NAME_MAX + 16];
    snprintf(full, sizeof full, "%s/indices", s->name);
    if (rc == 0) rc = pn_hdf5_read_all(s->dset[INDICES], s->path, full, PN_HDF5_INT64, s->cols);
    snprintf(full, sizeof full, "%s/%s", s->name, s->value_name);
    if (rc == 0 && s->dset[VALUES] >= 0)
        rc = pn_hdf5_read_all(s->dset[VALUES], s->path, full, PN_HDF5_FLOAT32, s->vals);
    else if (rc == 0)
        for (size_t k = 0; k + 1 < n; k++) s->vals[k] = 1.0f;
    snprintf(full, sizeof full, "%s/fields", s->name);
    if (rc == 0 && wide) rc = pn_hdf5_read_all(s->dset[FIELDS], s->path, full, PN_HDF5_INT64, wide);
    for (long r = 0; rc == 0 && r < s->n; r++) {
        int64_t a = s->indptr[r], len = s->indptr[r + 1] - a;
        rc = check_features(s, r, a, len, s->cols + a, s->vals + a, wide ? wide + a : NULL,
                            s->fields ? s->fields + a : NULL);
    }
    free(wide);
    return rc;
}

int pn_csr_batch_alloc(const pn_csr_source *s, long count, pn_csr *out)
{
    size_t n = (size_t)s->bound + 1;
    *out = (pn_csr){0};
    out->offsets = calloc((size_t)count + 1, sizeof *out->offsets);
    out->cols = malloc(n * sizeof *out->cols);
    out->vals = malloc(n * sizeof *out->vals);
    out->fields = s->num_fields ? malloc(n * sizeof *out->fields) : NULL;
    if (out->offsets && out->cols && out->vals && (!s->num_fields || out->fields)) return PN_OK;
    pn_csr_batch_free(out);
    return pn_error_set(PN_ERR_NOMEM, "%s: out of memory for batches of group '/%s'", s->path,
                        s->name);
}

void pn_csr_batch_free(pn_csr *c)
{
    free(c->offsets);
    free(c->cols);
    free(c->vals);
    free(c->fields);
    *c = (pn_csr){0};
}

/* Reads features [from, from + n) of array k into out (HDF5 converting to mem). */
static int read_range(pn_csr_source *s, int k, int64_t from, int64_t n, pn_hdf5_type mem,
                      void *out)
{
    hsize_t start = (hsize_t)from, count = (hsize_t)n;
    hid_t mspace = H5I_INVALID_HID;
    int rc = 0;
    const char *what = "%s: group '/%s': cannot read its features %" PRId64 " to %" PRId64;
    PN_HDF5_CHECK(rc, mspace = H5Screate_simple(1, &count, NULL), what, s->path, s->name, from,
                  from + n);
    PN_HDF5_CHECK(rc, H5Sselect_hyperslab(s->fspace[k], H5S_SELECT_SET, &start, NULL, &count,
                                          NULL), what, s->path, s->name, from, from + n);
    PN_HDF5_CHECK(rc, H5Dread(s->dset[k], pn_hdf5_mem_type(mem), mspace, s->fspace[k],
                              H5P_DEFAULT, out), what, s->path, s->name, from, from + n);
    if (mspace >= 0) H5Sclose(mspace);
    return rc;
}

/* Reads features [from, from + n) of every array: ids into cols, values into vals
 * (ones without values), fields wide into wide (when read). */
static int read_span(pn_csr_source *s, int64_t from, int64_t n, int64_t *cols, float *vals,
                     int64_t *wide)
{
    pn_hdf5_lock();
    int rc = read_range(s, INDICES, from, n, PN_HDF5_INT64, cols);
    if (rc == 0 && s->dset[VALUES] >= 0) rc = read_range(s, VALUES, from, n, PN_HDF5_FLOAT32, vals);
    if (rc == 0 && s->num_fields) rc = read_range(s, FIELDS, from, n, PN_HDF5_INT64, wide);
    pn_hdf5_unlock();
    if (s->dset[VALUES] < 0)
        for (int64_t k = 0; k < n; k++) vals[k] = 1.0f;
    return rc;
}

/* The samples order[k .. end) of a group: their features lie in [from, to) of the
 * file, with gaps of at most GAP features between consecutive samples. */
static long group_end(const pn_csr_source *s, const pn_row_ref *order, long k, long rows,
                      int64_t *from, int64_t *to)
{
    *from = s->indptr[order[k].row];
    *to = s->indptr[order[k].row + 1];
    long end = k + 1;
    for (; end < rows; end++) {
        int64_t a = s->indptr[order[end].row], b = s->indptr[order[end].row + 1];
        if (a - *to > CSR_GAP || b - *from > CSR_SPAN) break;
        *to = b;
    }
    return end;
}

/* Reads samples order[k .. end) (a group, in file order) into out at their
 * offsets: from memory when cached, else one read of the group's span (gaps
 * included) into the span buffers, or straight into out for one sample longer
 * than them; then checks what the file held. */
static int read_group(pn_csr_source *s, const pn_row_ref *order, long k, long end, int64_t from,
                      int64_t to, pn_csr *out)
{
    const int64_t *cols = s->cols, *wide = NULL;
    const float *vals = s->vals;
    int64_t base = 0; /* the file position of cols[0] */
    int rc = 0;
    if (!s->cols && to - from > CSR_SPAN) { /* one long sample, read in place */
        int at = out->offsets[order[k].pos];
        rc = read_span(s, from, to - from, out->cols + at, out->vals + at, s->stage);
        cols = out->cols + at, vals = out->vals + at, wide = s->stage, base = from;
    } else if (!s->cols && to > from) {
        rc = read_span(s, from, to - from, s->span_cols, s->span_vals, s->span_fields);
        cols = s->span_cols, vals = s->span_vals, wide = s->span_fields, base = from;
    }
    for (long j = k; rc == 0 && j < end; j++) {
        int64_t a = s->indptr[order[j].row], len = s->indptr[order[j].row + 1] - a;
        int o = out->offsets[order[j].pos];
        if (len == 0) continue; /* nothing read for it: cols may be NULL (fuzz_csr) */
        if (out->cols + o != cols + (a - base)) { /* not read in place */
            memcpy(out->cols + o, cols + (a - base), (size_t)len * sizeof *out->cols);
            memcpy(out->vals + o, vals + (a - base), (size_t)len * sizeof *out->vals);
        }
        if (s->cols && s->fields) /* cached: checked at open */
            memcpy(out->fields + o, s->fields + a, (size_t)len * sizeof *out->fields);
        if (!s->cols) /* what the file held: check it */
            rc = check_features(s, order[j].row, a, len, out->cols + o, out->vals + o,
                                s->num_fields ? wide + (a - base) : NULL,
                                out->fields ? out->fields + o : NULL);
    }
    return rc;
}

int pn_csr_read(pn_csr_source *s, const pn_row_ref *order, long rows, pn_csr *out)
{
    out->rows = (int)rows; /* offsets by position first: rows come in file order */
    for (long k = 0; k < rows; k++)
        out->offsets[order[k].pos + 1] =
            (int)(s->indptr[order[k].row + 1] - s->indptr[order[k].row]);
    out->offsets[0] = 0;
    for (long p = 0; p < rows; p++) out->offsets[p + 1] += out->offsets[p];
    out->nnz = out->offsets[rows];
    int rc = 0;
    for (long k = 0; k < rows && rc == 0;) {
        int64_t from, to;
        long end = group_end(s, order, k, rows, &from, &to);
        rc = read_group(s, order, k, end, from, to, out);
        k = end;
    }
    return rc;
}

void pn_csr_close(pn_csr_source *s)
{
    for (int k = 0; k < PN_CSR_ARRAYS; k++) {
        pn_hdf5_close(s->fspace[k], s->path);
        pn_hdf5_close(s->dset[k], s->path);
    }
    free(s->indptr);
    free(s->stage);
    free(s->span_cols);
    free(s->span_vals);
    free(s->span_fields);
    free(s->cols);
    free(s->vals);
    free(s->fields);
    *s = (pn_csr_source){0};
    for (int k = 0; k < PN_CSR_ARRAYS; k++) s->dset[k] = s->fspace[k] = H5I_INVALID_HID;
}
