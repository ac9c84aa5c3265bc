/* The sparse dataset file that the sparse importers (import_libsvm.c, import_ctr.c)
 * write (docs/formats.md, "Sparse features (CSR)"): group /features holding indptr
 * int64 [N + 1], indices int64 [nnz], values float32 [nnz] (left out when every value
 * is 1) and fields int32 [nnz] (when the data has fields), with the group attributes
 * shape int64 [2] = (N, columns) and num_fields; /labels int32 [N] beside it. Rows
 * are added one at a time and written a block at a time into datasets that grow
 * (chunked, unlimited), so neither side ever holds the whole data. */
#ifndef PN_CSR_FILE_H
#define PN_CSR_FILE_H

#include <hdf5.h>
#include <stdbool.h>
#include <stdint.h>

/* The group the importers write and their models read ("dataset": "features"). */
#define PN_CSR_GROUP "features"

/* The default block: values per HDF5 chunk and per write (512 KiB of int64). */
enum { PN_CSR_CHUNK = 1 << 16 };

enum { PN_CSR_INDPTR, PN_CSR_INDICES, PN_CSR_VALUES, PN_CSR_FIELDS, PN_CSR_LABELS,
       PN_CSR_SETS };

typedef struct pn_csr_file {
    const char *path;          /* the caller's, for messages */
    hid_t file;
    hid_t sets[PN_CSR_SETS];   /* H5I_INVALID_HID for values, fields when left out */
    hsize_t written[PN_CSR_SETS];
    long chunk;
    long rows;                 /* rows added */
    int64_t nnz;               /* entries added */
    int64_t max_index;         /* the largest index added, -1 before any */
    int32_t max_field;         /* the largest field added, -1 before any */
    /* added and not yet written: rows' ends (indptr) and labels, their entries */
    int64_t *indptr, *indices;
    float *values;
    int32_t *fields, *labels;
    long buf_rows, buf_nnz, cap_nnz;
} pn_csr_file;

/* Creates path with the group and its empty datasets; chunk values (< 1: PN_CSR_CHUNK) per HDF5
 * chunk and per write (the tests make it small to cross many). */
int pn_csr_file_create(pn_csr_file *f, const char *path, bool with_values, bool with_fields,
                  long chunk);

/* Adds one row of n entries (n may be 0): indices[n] >= 0, values[n] (ignored when
 * the file has none), fields[n] >= 0 (ignored when the file has none). */
int pn_csr_file_add_row(pn_csr_file *f, int32_t label, long n, const int64_t *indices,
                   const float *values, const int32_t *fields);

/* When rc is 0: writes what is buffered, closes the datasets and writes the group's
 * attributes shape (rows, columns) and, with fields, num_fields; the file stays open
 * for root attributes (f->file). Returns the first error, rc included. */
int pn_csr_file_finish(pn_csr_file *f, int64_t columns, int32_t num_fields, int rc);

/* Closes everything still open and frees the buffers. */
int pn_csr_file_close(pn_csr_file *f, int rc);

#endif
