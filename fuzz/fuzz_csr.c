/* Fuzz target: CSR groups as the reader takes them for a sparse input
 * (io/reader_csr.h). The input chooses the model's columns and fields and what the
 * file holds: the group or a dataset in its place, each array's presence, element
 * type, length and values (offsets that start off zero or decrease, ids out of
 * range, NaN and infinite values, fields out of range), 'values', 'data' or both,
 * the shape and num_fields attributes (missing, of a wrong type or count, or values
 * that disagree), chunked and compressed storage; then the reader's batch, replica
 * slice, order and cache. Every batch read is checked: offsets from 0, never
 * decreasing, to nnz, and every feature within the model's bounds. */
#include <hdf5.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "fuzz_util.h"
#include "io/reader.h"

enum { MAX_ROWS = 40, MAX_NNZ = MAX_ROWS * 8 };

/* A 1-D dataset of n values given as doubles, in a type the input chooses (the
 * first, want, is what pipenet writes), chunked and compressed or not. */
static void put(fz_in *in, hid_t g, const char *name, hid_t want, const double *v, hsize_t n)
{
    unsigned k = fz_below(in, 9);
    hid_t types[] = {want, H5T_STD_I64LE, H5T_STD_I32BE, H5T_STD_U64LE, H5T_IEEE_F64LE,
                     H5T_IEEE_F32LE, H5T_STD_U8LE};
    hid_t t = k <= 6 ? H5Tcopy(types[k]) : H5Tcopy(H5T_C_S1);
    if (k > 6) H5Tset_size(t, 4);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (fz_below(in, 3) == 2 && n > 0) {
        hsize_t chunk = 1 + fz_below(in, 8);
        H5Pset_chunk(dcpl, 1, &chunk);
        if (fz_below(in, 2)) H5Pset_deflate(dcpl, 1);
    }
    hsize_t dims[2] = {n, 2};
    int rank = fz_below(in, 8) == 7 ? 2 : 1; /* a matrix where a vector belongs */
    hid_t space = H5Screate_simple(rank, dims, NULL);
    hid_t d = H5Dcreate2(g, name, t, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (d >= 0 && rank == 1 && k <= 6) H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL,
                                                 H5P_DEFAULT, v);
    if (d >= 0) H5Dclose(d);
    H5Sclose(space);
    H5Pclose(dcpl);
    H5Tclose(t);
}

/* An integer attribute of n values (the input may change its type, count or leave
 * it out). */
static void put_attr(fz_in *in, hid_t g, const char *name, const int64_t *v, hsize_t n)
{
    unsigned k = fz_below(in, 6);
    if (k == 5) return;
    hsize_t count = k == 3 ? n + 1 : k == 4 && n > 1 ? n - 1 : n;
    int64_t vals[4] = {0};
    memcpy(vals, v, (size_t)n * sizeof *v);
    hid_t space = H5Screate_simple(1, &count, NULL);
    hid_t type = k == 1 ? H5T_NATIVE_DOUBLE : k == 2 ? H5T_NATIVE_INT8 : H5T_NATIVE_INT64;
    hid_t a = H5Acreate2(g, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0) {
        double dv[4] = {(double)vals[0], (double)vals[1], (double)vals[2], 0};
        int8_t bv[4] = {(int8_t)vals[0], (int8_t)vals[1], (int8_t)vals[2], 0};
        H5Awrite(a, type, k == 1 ? (void *)dv : k == 2 ? (void *)bv : (void *)vals);
        H5Aclose(a);
    }
    H5Sclose(space);
}

/* Aborts unless batch b's CSR field is well formed within the spec's bounds. */
static void check_batch(const pn_csr *c, int rows, const pn_reader_field *spec)
{
    bool ok = c->rows == rows && c->offsets[0] == 0 && c->offsets[rows] == c->nnz;
    for (int k = 0; ok && k < rows; k++) ok = c->offsets[k] <= c->offsets[k + 1];
    for (int j = 0; ok && j < c->nnz; j++)
        ok = c->cols[j] >= 0 && c->cols[j] < spec->shape.columns && isfinite(c->vals[j]) &&
             (!spec->shape.fields || (c->fields[j] >= 0 && c->fields[j] < spec->shape.fields));
    if (ok) return;
    fprintf(stderr, "fuzz: a batch of %d rows read with a feature out of bounds or offsets out "
            "of order\n", rows);
    abort();
}

static void write_file(fz_in *in, const char *path, const pn_reader_field *spec)
{
    static const long columns_in_file[] = {50, 10, 1, 51, 0, -3, 1L << 40};
    static const long fields_in_file[] = {3, 1, 2, 0, -1, 4, 100};
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0) return;
    unsigned form = fz_below(in, 8);
    if (form == 7) { /* a dataset where the group belongs */
        hsize_t n = 4;
        hid_t s = H5Screate_simple(1, &n, NULL);
        hid_t d = H5Dcreate2(file, "g", H5T_NATIVE_INT, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (d >= 0) H5Dclose(d);
        H5Sclose(s);
        H5Fclose(file);
        return;
    }
    hid_t g = form == 6 ? H5Gcreate2(file, "other", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)
                        : H5Gcreate2(file, "g", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    long rows = 4 + (long)fz_below(in, MAX_ROWS - 4);
    int64_t columns = FZ_PICK(in, columns_in_file), num_fields = FZ_PICK(in, fields_in_file);
    double indptr[MAX_ROWS + 2], ids[MAX_NNZ], vals[MAX_NNZ], fields[MAX_NNZ];
    indptr[0] = fz_below(in, 8) == 7 ? 1 : 0;
    for (long r = 0; r < rows; r++) {
        unsigned len = fz_below(in, 6);
        indptr[r + 1] = indptr[r] + (fz_below(in, 16) == 15 ? -1.0 : (double)len);
    }
    long nnz = (long)indptr[rows] < 0 ? 0 : (long)indptr[rows];
    if (nnz > MAX_NNZ) nnz = MAX_NNZ;
    int64_t bound = columns > 0 ? columns : 1;
    for (long j = 0; j < nnz; j++) {
        static const double odd_ids[] = {-1, 50, 1e12, 2.5};
        static const double odd_vals[] = {NAN, INFINITY, -INFINITY, 1e39};
        unsigned k = fz_below(in, 24);
        ids[j] = k >= 20 ? odd_ids[k - 20] : (double)((j * 7 + k) % bound);
        k = fz_below(in, 24);
        vals[j] = k >= 20 ? odd_vals[k - 20] : 0.25 * (double)(k + 1);
        k = fz_below(in, 24);
        int64_t nf = num_fields > 0 ? num_fields : 1;
        fields[j] = k == 1 ? -1 : k == 2 ? (double)num_fields : (double)(j % nf);
    }
    hsize_t len = (hsize_t)(nnz + (fz_below(in, 16) == 15 ? 1 : 0));
    if (len > MAX_NNZ) len = MAX_NNZ;
    hsize_t ptr_len = (hsize_t)rows + 1 - (fz_below(in, 16) == 15 ? 1 : 0);
    if (fz_below(in, 16) != 15) put(in, g, "indptr", H5T_STD_I64LE, indptr, ptr_len);
    if (fz_below(in, 16) != 15) put(in, g, "indices", H5T_STD_I64LE, ids, len);
    unsigned values = fz_below(in, 5); /* values, data, none, both, values too short */
    if (values == 0 || values == 3) put(in, g, "values", H5T_IEEE_F32LE, vals, len);
    if (values == 1 || values == 3) put(in, g, "data", H5T_IEEE_F32LE, vals, len);
    if (values == 4) put(in, g, "values", H5T_IEEE_F32LE, vals, len ? len - 1 : 0);
    if ((spec->shape.fields > 0) != (fz_below(in, 8) == 7))
        put(in, g, "fields", H5T_STD_I32LE, fields, len);
    int64_t shape[2] = {fz_below(in, 8) == 7 ? rows + 1 : rows, columns};
    put_attr(in, g, "shape", shape, 2);
    if (spec->shape.fields > 0 || fz_below(in, 2)) put_attr(in, g, "num_fields", &num_fields, 1);
    if (g >= 0) H5Gclose(g);
    H5Fclose(file);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const long columns[] = {50, 100, 1, 1L << 40, 49};
    static const long fields[] = {3, 0, 1, 7};
    static const long batches[] = {4, 1, 3, 7, 64, 0};
    fz_in in = {data, size};
    fz_hdf5_quiet();
    char path[256];
    fz_scratch("csr.h5", path, sizeof path);
    pn_reader_field spec = {.dataset = "g", .input = "x"};
    spec.shape = (pn_shape){.seq = 1, .sparse = true, .fields = (int)FZ_PICK(&in, fields),
                            .columns = FZ_PICK(&in, columns)};
    write_file(&in, path, &spec);
    pn_reader_options o = {.global_batch = (int)FZ_PICK(&in, batches), .seed = fz_uint(&in, 2)};
    o.count = o.global_batch;
    if (fz_below(&in, 2) && o.global_batch > 1) {
        o.first = (int)fz_below(&in, (unsigned)o.global_batch);
        o.count = 1 + (int)fz_below(&in, (unsigned)(o.global_batch - o.first));
    }
    o.shuffle = fz_below(&in, 2) == 0;
    o.drop_last = fz_below(&in, 2) == 0;
    static const long caches[] = {0, 1 << 20, 16};
    o.cache_bytes = (size_t)FZ_PICK(&in, caches);
    pn_reader *r = NULL;
    pn_error_clear();
    int rc = pn_reader_open(&r, path, &spec, 1, &o);
    fz_check_status(rc, "pn_reader_open");
    for (int k = 0; rc == 0 && k < 3; k++) {
        const pn_batch *b;
        pn_error_clear();
        int brc = pn_reader_next(r, &b);
        fz_check_status(brc, "pn_reader_next");
        if (brc == 0) check_batch(&b->csr[0], b->rows, &spec);
    }
    pn_reader_close(r);
    fz_check_hdf5_closed("the reader");
    unlink(path);
    return 0;
}
