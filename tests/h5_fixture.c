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
 *   h5_fixture deep FILE NAME RANK
 *       adds float32 dataset NAME of RANK dimensions (HDF5 allows 32) of extent 1
 *   h5_fixture relocate FILE DATASET virtual|external TARGET...
 *       moves DATASET's values out of FILE: its rows split evenly over the TARGETs,
 *       each an HDF5 file holding them under the same dataset name (virtual: FILE's
 *       DATASET becomes a VDS over them) or a raw file of their bytes (external);
 *       TARGET names are recorded as given
 *
 * Exits 0, or 1 with a message. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : "";
    if (!strcmp(cmd, "dataset") && argc == 4) return dataset(argv[2], atol(argv[3]));
    if (!strcmp(cmd, "floats") && argc >= 4) return floats(argv[2], argv[3], argc - 4, argv + 4);
    if (!strcmp(cmd, "matrix") && argc >= 6)
        return matrix(argv[2], argv[3], atoi(argv[4]), argc - 5, argv + 5);
    if (!strcmp(cmd, "print") && argc == 4) return print(argv[2], argv[3]);
    if (!strcmp(cmd, "deep") && argc == 5) return deep(argv[2], argv[3], atoi(argv[4]));
    if (!strcmp(cmd, "relocate") && argc >= 6)
        return relocate(argv[2], argv[3], argv[4], argc - 5, argv + 5);
    return die("usage: h5_fixture dataset FILE ROWS | floats FILE NAME VALUE... | matrix FILE "
               "NAME COLS VALUE... | print FILE NAME | deep FILE NAME RANK | relocate FILE "
               "DATASET virtual|external TARGET...", NULL);
}
