/* reader_csr: a sparse field of the dataset reader (reader.h): a CSR group
 * (docs/formats.md, "Sparse features (CSR)") of indptr [N+1], indices [nnz],
 * values or data [nnz] (optional: all 1) and fields [nnz] (optional), with group
 * attributes shape = (N, columns) and, with fields, num_fields.
 * At open: the layout is checked (indptr[0] == 0, non-decreasing, indptr[N] ==
 * nnz == every array's length, the attributes, columns and num_fields within the
 * model's input's), indptr is read whole (8 bytes a sample) and the most features
 * a batch of `count` samples can hold is computed from it (the sum of the count
 * longest rows): the reader's buffers are allocated for that bound once, so a
 * batch never allocates. A batch's rows, in file order, are read in groups of
 * samples that lie close in the file: one hyperslab per array over the group's
 * span (gaps included) into a span buffer, then copied into place; or copied from
 * memory when the group is cached. Every feature is checked as it is
 * read (index in [0, columns), value finite, field in [0, num_fields)); an error
 * names the file, the group, and the sample (its row in the file). */
#ifndef PN_READER_CSR_H
#define PN_READER_CSR_H

#include <stdbool.h>
#include <stdint.h>

#include "io/hdf5_util.h"
#include "io/reader.h"
#include "io/sample_order.h"

enum { PN_CSR_ARRAYS = 3 }; /* indices, values, fields */

typedef struct pn_csr_source {
    const char *path, *name;    /* file and group, for messages (borrowed) */
    pn_reader_field spec;
    hid_t dset[PN_CSR_ARRAYS];  /* H5I_INVALID_HID when absent (values, fields) */
    hid_t fspace[PN_CSR_ARRAYS];
    char value_name[8];         /* "values" or "data" */
    long n;                     /* samples */
    int64_t nnz, columns;       /* the file's */
    int num_fields;             /* the file's; 0 when the model reads no fields */
    int64_t *indptr;            /* [n + 1] */
    int64_t bound;              /* most features in a batch of count samples */
    int64_t *stage;             /* [bound] fields read wide, then narrowed */
    int64_t *span_cols;         /* a group of samples' features read at once (reader_csr.c) */
    float *span_vals;
    int64_t *span_fields;
    int64_t *cols;              /* cached whole ([nnz]), or NULL */
    float *vals;
    int *fields;
} pn_csr_source;

/* Opens and checks group spec->dataset of file for batches of count samples. */
int pn_csr_open(pn_csr_source *s, hid_t file, const char *path, const pn_reader_field *spec,
                long count);

/* Bytes the group takes cached in memory (false: more than a size_t). */
bool pn_csr_cache_bytes(const pn_csr_source *s, size_t *bytes);

/* Reads the group whole into memory and checks every feature once. */
int pn_csr_cache(pn_csr_source *s);

/* Gives out room for a batch of count samples (the bound), or frees it (count 0). */
int pn_csr_batch_alloc(const pn_csr_source *s, long count, pn_csr *out);
void pn_csr_batch_free(pn_csr *c);

/* Reads samples order[0..rows) (sorted by file row) into out at their positions. */
int pn_csr_read(pn_csr_source *s, const pn_row_ref *order, long rows, pn_csr *out);

void pn_csr_close(pn_csr_source *s);

#endif
