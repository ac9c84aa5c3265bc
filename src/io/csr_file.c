/* Sparse (CSR) dataset files, written as they stream (csr_file.h). */
#include "io/csr_file.h"

#include <stdbool.h>
#include <stdlib.h>

#include "base/error.h"
#include "io/hdf5_util.h"

static const char *const set_names[PN_CSR_SETS] = {
    PN_CSR_GROUP "/indptr", PN_CSR_GROUP "/indices", PN_CSR_GROUP "/values",
    PN_CSR_GROUP "/fields", "labels"};
static const pn_hdf5_type set_types[PN_CSR_SETS] = {PN_HDF5_INT64, PN_HDF5_INT64,
                                                    PN_HDF5_FLOAT32, PN_HDF5_INT32,
                                                    PN_HDF5_INT32};

/* Grows buffer *p of cap values of size bytes to grown; false when out of memory. */
static bool grow(void **p, long grown, size_t size)
{
    if (!*p) return true; /* a dataset the file leaves out */
    void *more = realloc(*p, (size_t)grown * size);
    if (more) *p = more;
    return more != NULL;
}

/* Makes room for more entries in the buffer (rows' buffers are chunk long). */
static int reserve(pn_csr_file *f, long more)
{
    if (f->buf_nnz + more <= f->cap_nnz) return PN_OK;
    long cap = f->cap_nnz;
    while (cap < f->buf_nnz + more) cap *= 2;
    if (!grow((void **)&f->indices, cap, sizeof *f->indices) ||
        !grow((void **)&f->values, cap, sizeof *f->values) ||
        !grow((void **)&f->fields, cap, sizeof *f->fields))
        return pn_error_set(PN_ERR_NOMEM, "%s: out of memory for a row of %ld entries", f->path,
                            more);
    f->cap_nnz = cap;
    return PN_OK;
}

int pn_csr_file_create(pn_csr_file *f, const char *path, bool with_values, bool with_fields,
                  long chunk)
{
    if (chunk < 1) chunk = PN_CSR_CHUNK;
    *f = (pn_csr_file){.path = path, .file = H5I_INVALID_HID, .chunk = chunk, .max_index = -1,
                       .max_field = -1, .cap_nnz = chunk};
    for (int s = 0; s < PN_CSR_SETS; s++) f->sets[s] = H5I_INVALID_HID;
    size_t n = (size_t)f->chunk;
    f->indptr = malloc(n * sizeof *f->indptr);
    f->labels = malloc(n * sizeof *f->labels);
    f->indices = malloc(n * sizeof *f->indices);
    if (with_values) f->values = malloc(n * sizeof *f->values);
    if (with_fields) f->fields = malloc(n * sizeof *f->fields);
    if (!f->indptr || !f->labels || !f->indices || (with_values && !f->values) ||
        (with_fields && !f->fields))
        return pn_error_set(PN_ERR_NOMEM, "%s: out of memory for blocks of %ld entries", path,
                            f->chunk);
    PN_TRY(pn_hdf5_create_file(path, false, &f->file));
    for (int s = 0; s < PN_CSR_SETS; s++) {
        if ((s == PN_CSR_VALUES && !with_values) || (s == PN_CSR_FIELDS && !with_fields))
            continue;
        PN_TRY(pn_hdf5_create_growing(f->file, path, set_names[s], set_types[s],
                                      (hsize_t)f->chunk, &f->sets[s]));
    }
    const int64_t zero = 0; /* indptr[0] */
    return pn_hdf5_append(f->sets[PN_CSR_INDPTR], path, set_names[PN_CSR_INDPTR],
                          PN_HDF5_INT64, &f->written[PN_CSR_INDPTR], 1, &zero);
}

/* Writes the buffered rows and entries. */
static int flush(pn_csr_file *f)
{
    const void *data[PN_CSR_SETS] = {f->indptr, f->indices, f->values, f->fields, f->labels};
    const long counts[PN_CSR_SETS] = {f->buf_rows, f->buf_nnz, f->buf_nnz, f->buf_nnz,
                                      f->buf_rows};
    for (int s = 0; s < PN_CSR_SETS; s++)
        if (f->sets[s] != H5I_INVALID_HID)
            PN_TRY(pn_hdf5_append(f->sets[s], f->path, set_names[s], set_types[s],
                                  &f->written[s], (hsize_t)counts[s], data[s]));
    f->buf_rows = f->buf_nnz = 0;
    return PN_OK;
}

int pn_csr_file_add_row(pn_csr_file *f, int32_t label, long n, const int64_t *indices,
                   const float *values, const int32_t *fields)
{
    PN_TRY(reserve(f, n));
    for (long k = 0; k < n; k++) {
        f->indices[f->buf_nnz + k] = indices[k];
        if (indices[k] > f->max_index) f->max_index = indices[k];
        if (f->values) f->values[f->buf_nnz + k] = values[k];
        if (f->fields) {
            f->fields[f->buf_nnz + k] = fields[k];
            if (fields[k] > f->max_field) f->max_field = fields[k];
        }
    }
    f->buf_nnz += n;
    f->nnz += n;
    f->indptr[f->buf_rows] = f->nnz;
    f->labels[f->buf_rows++] = label;
    f->rows++;
    return f->buf_rows >= f->chunk || f->buf_nnz >= f->chunk ? flush(f) : PN_OK;
}

/* Closes the datasets still open; returns the first error, rc included. */
static int close_sets(pn_csr_file *f, int rc)
{
    for (int s = 0; s < PN_CSR_SETS; s++) {
        if (f->sets[s] != H5I_INVALID_HID) rc = pn_hdf5_close_after(f->sets[s], f->path, rc);
        f->sets[s] = H5I_INVALID_HID;
    }
    return rc;
}

int pn_csr_file_finish(pn_csr_file *f, int64_t columns, int32_t num_fields, int rc)
{
    if (rc == 0) rc = flush(f);
    rc = close_sets(f, rc);
    const int64_t shape[2] = {f->rows, columns}, fields = num_fields;
    if (rc == 0)
        rc = pn_hdf5_write_object_attr_int64(f->file, f->path, PN_CSR_GROUP, "shape", shape, 2);
    if (rc == 0 && f->fields)
        rc = pn_hdf5_write_object_attr_int64(f->file, f->path, PN_CSR_GROUP, "num_fields",
                                             &fields, 0);
    return rc;
}

int pn_csr_file_close(pn_csr_file *f, int rc)
{
    rc = close_sets(f, rc);
    if (f->file != H5I_INVALID_HID) rc = pn_hdf5_close_after(f->file, f->path, rc);
    f->file = H5I_INVALID_HID;
    free(f->indptr), free(f->indices), free(f->values), free(f->fields), free(f->labels);
    f->indptr = f->indices = NULL, f->values = NULL, f->fields = f->labels = NULL;
    return rc;
}
