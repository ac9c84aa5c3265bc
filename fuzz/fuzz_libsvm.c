/* Fuzz target: text files as `pipenet import libsvm` reads them. The input chooses
 * --format, --index-base, --columns, --fields, --chunk and a split (none,
 * --test-fraction, --test FILE), then the bytes of one or two files (a prefix of
 * good and bad lines, then raw bytes), written to /dev/shm. A refusal must say why
 * and name the file and line; what the importer writes must be the CSR layout of
 * docs/formats.md: indptr from 0, non-decreasing, ending at nnz; every index below
 * the shape's columns; finite values; labels 0 or 1; fields below num_fields; the
 * shape's rows the labels' count and the samples reported. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "fuzz_util.h"
#include "io/import_sparse.h"

static void fail(const char *path, const char *what, long at)
{
    fprintf(stderr, "fuzz: the importer wrote %s, whose %s is wrong (at %ld)\n", path, what, at);
    abort();
}

/* A one-dimensional dataset read whole as type (NULL and *n = 0 when missing). */
static void *read_set(hid_t file, const char *name, hid_t type, size_t size, long *n)
{
    *n = 0;
    if (H5Lexists(file, "features", H5P_DEFAULT) <= 0 || H5Lexists(file, name, H5P_DEFAULT) <= 0)
        return NULL;
    hid_t d = H5Dopen2(file, name, H5P_DEFAULT), s = H5Dget_space(d);
    *n = (long)H5Sget_simple_extent_npoints(s);
    void *v = malloc((size_t)(*n ? *n : 1) * size);
    if (!v || H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0) abort();
    H5Sclose(s);
    H5Dclose(d);
    return v;
}

/* Checks the CSR layout of path, which the importer says holds rows samples. */
static void check_file(const char *path, long rows, bool fields)
{
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) fail(path, "file", 0);
    long n_ptr, n_idx, n_val, n_fld, n_lab;
    int64_t *ptr = read_set(file, "features/indptr", H5T_NATIVE_INT64, 8, &n_ptr);
    int64_t *idx = read_set(file, "features/indices", H5T_NATIVE_INT64, 8, &n_idx);
    float *val = read_set(file, "features/values", H5T_NATIVE_FLOAT, 4, &n_val);
    int32_t *fld = read_set(file, "features/fields", H5T_NATIVE_INT32, 4, &n_fld);
    int32_t *lab = read_set(file, "labels", H5T_NATIVE_INT32, 4, &n_lab);
    int64_t shape[2] = {-1, -1}, num_fields = -1;
    hid_t a = H5Aopen_by_name(file, "features", "shape", H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0 || H5Aread(a, H5T_NATIVE_INT64, shape) < 0) fail(path, "shape attribute", 0);
    H5Aclose(a);
    if (fields) {
        a = H5Aopen_by_name(file, "features", "num_fields", H5P_DEFAULT, H5P_DEFAULT);
        if (a < 0 || H5Aread(a, H5T_NATIVE_INT64, &num_fields) < 0) fail(path, "num_fields", 0);
        H5Aclose(a);
    }
    H5Fclose(file);
    if (!ptr || n_ptr != rows + 1 || n_lab != rows || shape[0] != rows) fail(path, "rows", rows);
    if (ptr[0] != 0 || ptr[rows] != n_idx || n_val != n_idx) fail(path, "indptr's ends", rows);
    if (fields != (fld != NULL) || (fld && n_fld != n_idx)) fail(path, "fields dataset", 0);
    for (long r = 0; r < rows; r++) {
        if (ptr[r + 1] < ptr[r]) fail(path, "indptr order", r);
        if (lab[r] != 0 && lab[r] != 1) fail(path, "label", r);
    }
    for (long k = 0; k < n_idx; k++) {
        if (idx[k] < 0 || idx[k] >= shape[1]) fail(path, "index", k);
        if (!isfinite(val[k])) fail(path, "value", k);
        if (fld && (fld[k] < 0 || fld[k] >= num_fields)) fail(path, "field", k);
    }
    free(ptr), free(idx), free(val), free(fld), free(lab);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const long bases[] = {-1, 0, 1};
    static const long columns[] = {0, 10, 1, 1000000};
    static const long fields[] = {0, 3, 1};
    /* table[0] is small, not the default (0: 65536 values): chunks of 512 KiB would
     * make every execution write megabytes and the fuzzer a tenth as fast */
    static const long chunks[] = {64, 1, 3, 0};
    static const long percents[] = {0, 50, 10, 90};
    static const char *const prefixes[] = {
        "1 1:0.5 3:2\n-1\n\n# c\n+1 2:1\t10:-3.5e2\r\n0 1:1 # t\n", "", "1 0:3:1 2:7:0.25\n0\n",
        "1 1:1\n0 0:2:1\n", "2 1:1\n", "1 1:nan\n", "1 0:1\n", "1 5\n", "0 1:1:1:1\n"};
    fz_in in = {data, size};
    fz_hdf5_quiet();
    pn_libsvm_options o = {.form = (pn_svm_form)fz_below(&in, 3)};
    o.index_base = (int)FZ_PICK(&in, bases);
    o.columns = FZ_PICK(&in, columns);
    o.num_fields = (int32_t)FZ_PICK(&in, fields);
    o.chunk = FZ_PICK(&in, chunks);
    unsigned split = fz_below(&in, 3);
    if (split == 1) o.test_fraction = (double)FZ_PICK(&in, percents) / 100.0;
    if (o.test_fraction <= 0 && split == 1) o.test_fraction = 0.5;

    char names[2][256], out[256];
    int n_files = split == 2 ? 2 : 1;
    for (int i = 0; i < n_files; i++) {
        char tag[32];
        snprintf(tag, sizeof tag, "libsvm%d.txt", i);
        fz_scratch(tag, names[i], sizeof names[i]);
        FILE *f = fopen(names[i], "wb");
        if (!f) return 0;
        fputs(prefixes[fz_below(&in, sizeof prefixes / sizeof *prefixes)], f);
        for (unsigned n = i == n_files - 1 ? (unsigned)in.n : fz_byte(&in); n > 0; n--)
            fputc((int)fz_byte(&in), f);
        fclose(f);
    }
    if (split == 2) o.test_file = names[1];
    fz_scratch("libsvm.out", out, sizeof out);
    const char *files[1] = {names[0]};

    pn_libsvm_result res;
    pn_error_clear();
    int rc = pn_import_libsvm(files, 1, out, &o, &res, NULL, NULL);
    fz_check_status(rc, "import libsvm");
    fz_check_hdf5_closed("import libsvm");
    if (rc < 0 && rc == PN_ERR_INVALID && !strstr(pn_error_message(), "libsvm")) {
        fprintf(stderr, "fuzz: a refusal names no file: %s\n", pn_error_message());
        abort();
    }
    static const char *const outputs[2] = {"train.h5", "test.h5"};
    for (int k = 0; k < 2; k++) {
        char path[320];
        snprintf(path, sizeof path, "%s/%s", out, outputs[k]);
        if (rc == 0 && (k == 0 || split)) check_file(path, res.rows[k], res.form == PN_SVM_LIBFFM);
        if (rc < 0 && access(path, F_OK) == 0) {
            fprintf(stderr, "fuzz: a refused import left %s\n", path);
            abort();
        }
        remove(path);
    }
    if (rmdir(out) != 0 && errno == ENOTEMPTY) { /* a temporary file left behind */
        fprintf(stderr, "fuzz: import libsvm left files in %s\n", out);
        abort();
    }
    for (int i = 0; i < n_files; i++) remove(names[i]);
    return 0;
}
