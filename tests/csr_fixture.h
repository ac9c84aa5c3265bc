/* csr_fixture: writes a CSR group (docs/formats.md, "Sparse features (CSR)") with
 * the HDF5 API alone, for h5_fixture's `csr` command and tests/test_reader_csr.c,
 * and the example content both use: sample r holds r % 5 features (every fifth is
 * empty), its label is r % 2, and its ids lie in the lower half of the columns for
 * label 0 and in the upper half for label 1 (so a bag of embeddings learns it). */
#ifndef PN_CSR_FIXTURE_H
#define PN_CSR_FIXTURE_H

#include <hdf5.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct csr_spec {
    long n;
    int64_t columns;
    const int64_t *indptr;   /* [n + 1] */
    const int64_t *indices;  /* [indptr[n]] */
    const float *values;     /* NULL: no values */
    const char *values_name; /* NULL: "values" (AnnData writes "data") */
    const int32_t *fields;   /* NULL: no fields */
    int num_fields;
    int64_t indptr_len;      /* 0: n + 1 (a wrong length for the error tests) */
    int64_t indices_len;     /* 0: indptr[n] (likewise) */
    bool no_shape;           /* leave attribute shape out */
} csr_spec;

/* Writes group (created with its parents) of file; 0, or -1 with a message. */
int csr_write(hid_t file, const char *group, const csr_spec *s);

/* The example's sample r: its feature count, label, and feature k's id, value and
 * field. */
int csr_example_len(long r);
int csr_example_label(long r);
int64_t csr_example_id(long r, int k, int64_t columns);
float csr_example_value(long r, int k);
int csr_example_field(long r, int k, int num_fields);

/* Writes the example's n samples as group of file, and "labels" int32 [n] when
 * labels is set (num_fields 0: no fields). */
int csr_write_example(hid_t file, const char *group, long n, int64_t columns, int num_fields,
                      bool labels);

#endif
