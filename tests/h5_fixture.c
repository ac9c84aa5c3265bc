/* h5_fixture: writes the HDF5 files the shell tests need and pipenet never writes,
 * with the HDF5 API directly (as the fuzz targets do; tests/test_data_storage.sh,
 * tests/test_inspect_compare.sh):
 *
 *   h5_fixture dataset FILE ROWS
 *       a dataset file: /features float32 [ROWS, 4] and /labels int32 [ROWS] (ids
 *       in [0, 3)), contiguous, every value written
 *   h5_fixture floats FILE NAME VALUE...
 *       adds float32 dataset NAME [n] of the values ("nan", "inf" allowed) to FILE
 *       (created when missing); NAME may be of any length
 *   h5_fixture matrix FILE NAME COLS VALUE...
 *       adds float32 dataset NAME [n / COLS, COLS] of the values, row after row (a
 *       regression's features or targets; COLS 1 gives targets of shape [N, 1])
 *   h5_fixture print FILE NAME
 *       prints every value of dataset NAME (any number type, read as floats), one a
 *       line with 9 significant digits, in the file's order: what a test compares
 *       against, without h5dump or h5py
 *   h5_fixture attr FILE OBJECT NAME
 *       prints every value of attribute NAME of OBJECT (a group or dataset path, "/"
 *       the root; any number type, read as float64), one a line with 17 significant
 *       digits: the sparse group's shape, a file's planted AUC
 *   h5_fixture deep FILE NAME RANK
 *       adds float32 dataset NAME of RANK dimensions (HDF5 allows 32) of extent 1
 *   h5_fixture relocate FILE DATASET virtual|external TARGET...
 *       moves DATASET's values out of FILE: its rows split evenly over the TARGETs,
 *       each an HDF5 file holding them under the same dataset name (virtual: FILE's
 *       DATASET becomes a VDS over them) or a raw file of their bytes (external);
 *       TARGET names are recorded as given
 *   h5_fixture typed FILE NAME TYPE DIMS VALUE...
 *       adds dataset NAME of TYPE and extents DIMS ("40" or "40x4") to FILE (created
 *       when missing), contiguous, the VALUEs repeated to fill it; TYPE is one of
 *       float16 (h5py's numpy float16), float32, float64, int8, int16, int32, int64,
 *       uint8, uint16, uint32, uint64, string (16 bytes each), enum (h5py's numpy
 *       bool: int8 FALSE 0, TRUE 1) or compound (one int32 field "v")
 *   h5_fixture csr FILE GROUP ROWS COLUMNS FIELDS
 *       adds CSR group GROUP (docs/formats.md) of tests/csr_fixture.h's example
 *       (ROWS samples, COLUMNS columns, FIELDS fields, 0: none) and "labels" int32
 *       [ROWS] to FILE (created when missing)
 *   h5_fixture retype FILE NAME TYPE [DIMS]
 *       rewrites dataset NAME of FILE as TYPE (a number type of `typed`), with the
 *       same values (HDF5 converts them), in extents DIMS (as many values) if given
 *
 * Exits 0, or 1 with a message. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "csr_fixture.h"

static int die(const char *what, const char *detail)
{
    fprintf(stderr, "h5_fixture: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    return 1;
}

/* FILE opened for writing, created when missing. */
static hid_t open_rw(const char *path)
{
    if (access(path, F_OK) == 0) return H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    return H5Fcreate(path, H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT);
}

/* Writes dataset name of file type ftype, rank dims, from data of memory type mtype;
 * groups on the way are created. */
static int write_dataset(hid_t file, const char *name, hid_t ftype, hid_t mtype, int rank,
                         const hsize_t *dims, const void *data)
{
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t space = H5Screate_simple(rank, dims, NULL);
    hid_t d = H5Dcreate2(file, name, ftype, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = d < 0 ? -1 : H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
    if (d >= 0) H5Dclose(d);
    H5Sclose(space);
    H5Pclose(lcpl);
    return rc < 0 ? die("cannot write dataset", name) : 0;
}

static int dataset(const char *path, long rows)
{
    if (rows < 1) return die("ROWS must be positive", NULL);
    float *features = malloc((size_t)rows * 4 * sizeof *features);
    int *labels = malloc((size_t)rows * sizeof *labels);
    if (!features || !labels) return die("out of memory", NULL);
    for (long i = 0; i < rows; i++) {
        labels[i] = (int)(i % 3);
        for (int j = 0; j < 4; j++) features[i * 4 + j] = (float)(j == labels[i]) + 0.01f * j;
    }
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0) return die("cannot create", path);
    hsize_t dims[2] = {(hsize_t)rows, 4};
    int rc = write_dataset(file, "features", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, dims, features);
    if (rc == 0)
        rc = write_dataset(file, "labels", H5T_STD_I32LE, H5T_NATIVE_INT, 1, dims, labels);
    H5Fclose(file);
    free(features);
    free(labels);
    return rc;
}

static int floats(const char *path, const char *name, int n, char **values)
{
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) return die("out of memory", NULL);
    for (int i = 0; i < n; i++) v[i] = strtof(values[i], NULL);
    hid_t file = open_rw(path);
    if (file < 0) return die("cannot open", path);
    hsize_t dims[1] = {(hsize_t)n};
    int rc = write_dataset(file, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 1, dims, v);
    H5Fclose(file);
    free(v);
    return rc;
}

static int matrix(const char *path, const char *name, int cols, int n, char **values)
{
    if (cols < 1 || n < cols || n % cols) return die("expected rows of COLS values", name);
    float *v = malloc((size_t)n * sizeof *v);
    if (!v) return die("out of memory", NULL);
    for (int i = 0; i < n; i++) v[i] = strtof(values[i], NULL);
    hid_t file = open_rw(path);
    if (file < 0) return die("cannot open", path);
    hsize_t dims[2] = {(hsize_t)(n / cols), (hsize_t)cols};
    int rc = write_dataset(file, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, dims, v);
    H5Fclose(file);
    free(v);
    return rc;
}

static int print(const char *path, const char *name)
{
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = file < 0 ? -1 : H5Dopen2(file, name, H5P_DEFAULT);
    if (d < 0) {
        if (file >= 0) H5Fclose(file);
        return die("cannot open dataset", name);
    }
    hid_t space = H5Dget_space(d);
    hssize_t n = H5Sget_simple_extent_npoints(space);
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    int rc = v && n >= 0 && H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0
                 ? 0
                 : die("cannot read dataset", name);
    for (hssize_t i = 0; rc == 0 && i < n; i++) printf("%.9g\n", v[i]);
    free(v);
    H5Sclose(space);
    H5Dclose(d);
    H5Fclose(file);
    return rc;
}

static int deep(const char *path, const char *name, int rank)
{
    hsize_t dims[H5S_MAX_RANK];
    if (rank < 1 || rank > H5S_MAX_RANK) return die("RANK must be in 1..32", NULL);
    for (int k = 0; k < rank; k++) dims[k] = 1;
    float one = 1.0f;
    hid_t file = open_rw(path);
    if (file < 0) return die("cannot open", path);
    int rc = write_dataset(file, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, rank, dims, &one);
    H5Fclose(file);
    return rc;
}

/* The file type called name (see typed), or -1. */
static hid_t make_type(const char *name)
{
    static const char *const names[] = {"float32", "float64", "int8", "int16", "int32",
                                        "int64", "uint8", "uint16", "uint32", "uint64"};
    const hid_t types[] = {H5T_IEEE_F32LE, H5T_IEEE_F64LE, H5T_STD_I8LE, H5T_STD_I16LE,
                           H5T_STD_I32LE, H5T_STD_I64LE, H5T_STD_U8LE, H5T_STD_U16LE,
                           H5T_STD_U32LE, H5T_STD_U64LE};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++)
        if (!strcmp(name, names[k])) return H5Tcopy(types[k]);
    hid_t t = -1;
    signed char no = 0, yes = 1;
    if (!strcmp(name, "float16")) { /* as h5py makes it: HDF5 1.10 has no half type */
        t = H5Tcopy(H5T_IEEE_F32LE);
        H5Tset_fields(t, 15, 10, 5, 0, 10);
        H5Tset_size(t, 2);
        H5Tset_ebias(t, 15);
    } else if (!strcmp(name, "string")) {
        t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, 16);
    } else if (!strcmp(name, "enum")) {
        t = H5Tenum_create(H5T_NATIVE_SCHAR);
        H5Tenum_insert(t, "FALSE", &no);
        H5Tenum_insert(t, "TRUE", &yes);
    } else if (!strcmp(name, "compound")) {
        t = H5Tcreate(H5T_COMPOUND, 4);
        H5Tinsert(t, "v", 0, H5T_NATIVE_INT);
    }
    return t;
}

/* Extents "40" or "40x4" into dims; their rank, or -1. */
static int parse_dims(const char *text, hsize_t *dims, hsize_t *count)
{
    int rank = 0;
    *count = 1;
    for (const char *p = text; *p && rank < H5S_MAX_RANK; rank++) {
        char *end;
        dims[rank] = strtoull(p, &end, 10);
        if (end == p || (*end && *end != 'x')) return -1;
        *count *= dims[rank];
        p = *end ? end + 1 : end;
    }
    return rank;
}

/* The values of texts[k % n] for count elements of file type t, in the memory type
 * *mtype (malloc'd; strings, enums and compounds in t itself). */
static void *values_of(hid_t t, int n, char **texts, hsize_t count, hid_t *mtype)
{
    H5T_class_t cls = H5Tget_class(t);
    size_t size = cls == H5T_STRING ? 16 : cls == H5T_ENUM ? 1 : 8;
    char *v = calloc(count ? count : 1, size);
    *mtype = cls == H5T_FLOAT    ? H5T_NATIVE_DOUBLE
             : cls == H5T_STRING || cls == H5T_ENUM || cls == H5T_COMPOUND ? t
             : H5Tget_sign(t) == H5T_SGN_NONE ? H5T_NATIVE_ULLONG
                                               : H5T_NATIVE_LLONG;
    for (hsize_t i = 0; v && i < count; i++) {
        const char *text = texts[i % (hsize_t)n];
        if (cls == H5T_FLOAT) ((double *)v)[i] = strtod(text, NULL);
        else if (cls == H5T_STRING) strncpy(v + i * 16, text, 16);
        else if (cls == H5T_ENUM) v[i] = (char)atoi(text);
        else if (cls == H5T_COMPOUND) ((int *)v)[i] = atoi(text);
        else if (*mtype == H5T_NATIVE_ULLONG) ((unsigned long long *)v)[i] = strtoull(text, NULL, 10);
        else ((long long *)v)[i] = strtoll(text, NULL, 10);
    }
    return v;
}

static int typed(const char *path, const char *name, const char *type, const char *dims_text,
                 int n, char **texts)
{
    hsize_t dims[H5S_MAX_RANK], count;
    int rank = parse_dims(dims_text, dims, &count);
    hid_t t = make_type(type), mtype;
    if (rank < 1 || t < 0 || n < 1) return die("bad TYPE, DIMS or no VALUE", type);
    void *v = values_of(t, n, texts, count, &mtype);
    hid_t file = open_rw(path);
    if (!v || file < 0) return die("cannot open", path);
    int rc = write_dataset(file, name, t, mtype, rank, dims, v);
    H5Fclose(file);
    H5Tclose(t);
    free(v);
    return rc;
}

static int retype(const char *path, const char *name, const char *type, const char *dims_text)
{
    hsize_t dims[H5S_MAX_RANK], count, old_count = 1;
    hid_t t = make_type(type);
    hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t d = file < 0 ? -1 : H5Dopen2(file, name, H5P_DEFAULT);
    if (t < 0 || d < 0) return die("bad TYPE, or cannot open dataset", name);
    hid_t space = H5Dget_space(d);
    int rank = H5Sget_simple_extent_dims(space, dims, NULL);
    for (int k = 0; k < rank; k++) old_count *= dims[k];
    H5Sclose(space);
    count = old_count;
    if (dims_text) rank = parse_dims(dims_text, dims, &count);
    double *v = malloc((count ? count : 1) * sizeof *v);
    if (rank < 1 || count != old_count || !v ||
        H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0)
        return die("cannot read dataset, or DIMS hold another number of values", name);
    H5Dclose(d);
    int rc = H5Ldelete(file, name, H5P_DEFAULT) < 0 ? die("cannot delete", name) : 0;
    if (rc == 0) rc = write_dataset(file, name, t, H5T_NATIVE_DOUBLE, rank, dims, v);
    H5Tclose(t);
    free(v);
    return H5Fclose(file) < 0 ? die("cannot close", path) : rc;
}

/* The rows [from, from + count) of a dataset's values. */
typedef struct part {
    hsize_t from, count;
} part;

static part part_of(hsize_t rows, int k, int n)
{
    hsize_t each = rows / (hsize_t)n, from = each * (hsize_t)k;
    return (part){from, k == n - 1 ? rows - from : each};
}

/* Writes rows p of values (rank dims, file type ftype) as dataset name of a new HDF5
 * file target. */
static int write_part(const char *target, const char *name, hid_t ftype, int rank,
                      const hsize_t *dims, const char *bytes, size_t row_bytes, part p)
{
    hsize_t pdims[H5S_MAX_RANK];
    memcpy(pdims, dims, (size_t)rank * sizeof *pdims);
    pdims[0] = p.count;
    hid_t file = H5Fcreate(target, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0) return die("cannot create", target);
    int rc = write_dataset(file, name, ftype, ftype, rank, pdims, bytes + p.from * row_bytes);
    H5Fclose(file);
    return rc;
}

static int relocate(const char *path, const char *name, const char *how, int n, char **targets)
{
    int virtual = !strcmp(how, "virtual");
    if (!virtual && strcmp(how, "external")) return die("expected virtual or external", how);
    hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t d = file < 0 ? -1 : H5Dopen2(file, name, H5P_DEFAULT);
    if (d < 0) return die("cannot open dataset", name);
    hid_t ftype = H5Dget_type(d), space = H5Dget_space(d);
    hsize_t dims[H5S_MAX_RANK];
    int rank = H5Sget_simple_extent_dims(space, dims, NULL);
    size_t size = H5Tget_size(ftype), row_bytes = size;
    for (int k = 1; k < rank; k++) row_bytes *= dims[k];
    char *bytes = malloc(dims[0] * row_bytes + 1);
    if (rank < 1 || !bytes || H5Dread(d, ftype, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes) < 0)
        return die("cannot read dataset", name);
    H5Dclose(d);
    if (H5Ldelete(file, name, H5P_DEFAULT) < 0) return die("cannot delete", name);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    int rc = 0;
    for (int k = 0; rc == 0 && k < n; k++) {
        part p = part_of(dims[0], k, n);
        if (virtual) {
            rc = write_part(targets[k], name, ftype, rank, dims, bytes, row_bytes, p);
            hsize_t start[H5S_MAX_RANK] = {p.from}, count[H5S_MAX_RANK];
            memcpy(count, dims, (size_t)rank * sizeof *count);
            count[0] = p.count;
            hid_t vspace = H5Scopy(space), src = H5Screate_simple(rank, count, NULL);
            H5Sselect_hyperslab(vspace, H5S_SELECT_SET, start, NULL, count, NULL);
            if (rc == 0 && H5Pset_virtual(dcpl, vspace, targets[k], name, src) < 0)
                rc = die("cannot map", targets[k]);
            H5Sclose(src);
            H5Sclose(vspace);
        } else {
            FILE *raw = fopen(targets[k], "wb");
            if (!raw || fwrite(bytes + p.from * row_bytes, row_bytes, p.count, raw) != p.count)
                rc = die("cannot write", targets[k]);
            if (raw) fclose(raw);
            if (rc == 0 && H5Pset_external(dcpl, targets[k], 0, p.count * row_bytes) < 0)
                rc = die("cannot add external file", targets[k]);
        }
    }
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    d = rc != 0 ? -1 : H5Dcreate2(file, name, ftype, space, lcpl, dcpl, H5P_DEFAULT);
    if (rc == 0 && d < 0) rc = die("cannot create", name);
    if (d >= 0) H5Dclose(d);
    H5Pclose(lcpl);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Tclose(ftype);
    free(bytes);
    return H5Fclose(file) < 0 ? die("cannot close", path) : rc;
}

static int attr(const char *path, const char *object, const char *name)
{
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t a = file < 0 ? -1 : H5Aopen_by_name(file, object, name, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0) {
        if (file >= 0) H5Fclose(file);
        return die("cannot open attribute", name);
    }
    hid_t space = H5Aget_space(a);
    hssize_t n = H5Sget_simple_extent_npoints(space);
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    int rc = v && n >= 0 && H5Aread(a, H5T_NATIVE_DOUBLE, v) >= 0
                 ? 0
                 : die("cannot read attribute", name);
    for (hssize_t i = 0; rc == 0 && i < n; i++) printf("%.17g\n", v[i]);
    free(v);
    H5Sclose(space);
    H5Aclose(a);
    H5Fclose(file);
    return rc;
}

static int csr(const char *path, const char *group, long rows, long long columns, int fields)
{
    if (rows < 1 || columns < 2 || fields < 0) return die("bad ROWS, COLUMNS or FIELDS", NULL);
    hid_t file = open_rw(path);
    if (file < 0) return die("cannot open", path);
    int rc = csr_write_example(file, group, rows, columns, fields, true);
    return H5Fclose(file) < 0 || rc < 0 ? die("cannot write", path) : 0;
}

int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : "";
    if (!strcmp(cmd, "dataset") && argc == 4) return dataset(argv[2], atol(argv[3]));
    if (!strcmp(cmd, "floats") && argc >= 4) return floats(argv[2], argv[3], argc - 4, argv + 4);
    if (!strcmp(cmd, "matrix") && argc >= 6)
        return matrix(argv[2], argv[3], atoi(argv[4]), argc - 5, argv + 5);
    if (!strcmp(cmd, "print") && argc == 4) return print(argv[2], argv[3]);
    if (!strcmp(cmd, "attr") && argc == 5) return attr(argv[2], argv[3], argv[4]);
    if (!strcmp(cmd, "deep") && argc == 5) return deep(argv[2], argv[3], atoi(argv[4]));
    if (!strcmp(cmd, "relocate") && argc >= 6)
        return relocate(argv[2], argv[3], argv[4], argc - 5, argv + 5);
    if (!strcmp(cmd, "typed") && argc >= 7)
        return typed(argv[2], argv[3], argv[4], argv[5], argc - 6, argv + 6);
    if (!strcmp(cmd, "csr") && argc == 7)
        return csr(argv[2], argv[3], atol(argv[4]), atoll(argv[5]), atoi(argv[6]));
    if (!strcmp(cmd, "retype") && (argc == 5 || argc == 6))
        return retype(argv[2], argv[3], argv[4], argc == 6 ? argv[5] : NULL);
    return die("usage: h5_fixture dataset FILE ROWS | floats FILE NAME VALUE... | matrix FILE "
               "NAME COLS VALUE... | print FILE NAME | attr FILE OBJECT NAME | deep FILE NAME RANK | relocate FILE "
               "DATASET virtual|external TARGET... | typed FILE NAME TYPE DIMS VALUE... | "
               "csr FILE GROUP ROWS COLUMNS FIELDS | retype FILE NAME TYPE [DIMS]", NULL);
}
