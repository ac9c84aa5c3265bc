/* Writes CSR groups for the tests (csr_fixture.h). */
#include "csr_fixture.h"

#include <stdio.h>
#include <stdlib.h>

static int fail(const char *what, const char *name)
{
    fprintf(stderr, "csr_fixture: %s '%s'\n", what, name);
    return -1;
}

static int put(hid_t group, const char *name, hid_t ftype, hid_t mtype, hsize_t n,
               const void *data)
{
    hid_t space = H5Screate_simple(1, &n, NULL);
    hid_t d = H5Dcreate2(group, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = d < 0 ? -1 : H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
    if (d >= 0) H5Dclose(d);
    H5Sclose(space);
    return rc < 0 ? fail("cannot write dataset", name) : 0;
}

static int put_attr(hid_t group, const char *name, hid_t ftype, hid_t mtype, hsize_t n,
                    const void *data)
{
    hid_t space = H5Screate_simple(1, &n, NULL);
    hid_t a = H5Acreate2(group, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Awrite(a, mtype, data);
    if (a >= 0) H5Aclose(a);
    H5Sclose(space);
    return rc < 0 ? fail("cannot write attribute", name) : 0;
}

int csr_write(hid_t file, const char *group, const csr_spec *s)
{
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t g = H5Gcreate2(file, group, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    H5Pclose(lcpl);
    if (g < 0) return fail("cannot create group", group);
    hsize_t nnz = (hsize_t)s->indptr[s->n], len = s->indptr_len ? (hsize_t)s->indptr_len
                                                                : (hsize_t)s->n + 1;
    int64_t shape[2] = {s->n, s->columns};
    int rc = put(g, "indptr", H5T_STD_I64LE, H5T_NATIVE_INT64, len, s->indptr);
    hsize_t ids = s->indices_len ? (hsize_t)s->indices_len : nnz;
    if (rc == 0) rc = put(g, "indices", H5T_STD_I64LE, H5T_NATIVE_INT64, ids, s->indices);
    if (rc == 0 && s->values)
        rc = put(g, s->values_name ? s->values_name : "values", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT,
                 nnz, s->values);
    if (rc == 0 && s->fields)
        rc = put(g, "fields", H5T_STD_I32LE, H5T_NATIVE_INT32, nnz, s->fields);
    if (rc == 0 && !s->no_shape)
        rc = put_attr(g, "shape", H5T_STD_I64LE, H5T_NATIVE_INT64, 2, shape);
    if (rc == 0 && s->fields)
        rc = put_attr(g, "num_fields", H5T_STD_I32LE, H5T_NATIVE_INT, 1, &s->num_fields);
    H5Gclose(g);
    return rc;
}

int csr_example_len(long r) { return (int)(r % 5); }

int csr_example_label(long r) { return (int)(r % 2); }

int64_t csr_example_id(long r, int k, int64_t columns)
{
    int64_t half = columns / 2, spread = (r * 7 + k * 13) % (columns - half);
    return csr_example_label(r) ? half + spread : spread % (half ? half : 1);
}

float csr_example_value(long r, int k) { return 0.5f + 0.25f * (float)((r + k) % 4); }

int csr_example_field(long r, int k, int num_fields) { return (int)((r + k) % num_fields); }

int csr_write_example(hid_t file, const char *group, long n, int64_t columns, int num_fields,
                      bool labels)
{
    int64_t *indptr = malloc(((size_t)n + 1) * sizeof *indptr);
    int32_t *label = malloc(((size_t)n + 1) * sizeof *label);
    if (!indptr || !label) return fail("out of memory for", group);
    indptr[0] = 0;
    for (long r = 0; r < n; r++) indptr[r + 1] = indptr[r] + csr_example_len(r);
    size_t nnz = (size_t)indptr[n] + 1;
    int64_t *ids = malloc(nnz * sizeof *ids);
    float *vals = malloc(nnz * sizeof *vals);
    int32_t *fields = malloc(nnz * sizeof *fields);
    if (!ids || !vals || !fields) return fail("out of memory for", group);
    for (long r = 0; r < n; r++) {
        label[r] = csr_example_label(r);
        for (int k = 0; k < csr_example_len(r); k++) {
            int64_t j = indptr[r] + k;
            ids[j] = csr_example_id(r, k, columns);
            vals[j] = csr_example_value(r, k);
            fields[j] = num_fields ? csr_example_field(r, k, num_fields) : 0;
        }
    }
    csr_spec s = {.n = n, .columns = columns, .indptr = indptr, .indices = ids, .values = vals,
                  .fields = num_fields ? fields : NULL, .num_fields = num_fields};
    int rc = csr_write(file, group, &s);
    hsize_t dims = (hsize_t)n;
    if (rc == 0 && labels) rc = put(file, "labels", H5T_STD_I32LE, H5T_NATIVE_INT32, dims, label);
    free(indptr), free(label), free(ids), free(vals), free(fields);
    return rc;
}
