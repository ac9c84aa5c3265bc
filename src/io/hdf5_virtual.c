/* Virtual datasets (VDS) over the part files of a snapshot (hdf5_util.h): writing
 * the index's mappings, the check that lets a reader trust one, and reading a run
 * of values (a sharded optimizer's part of a slot) out of one. A VDS reads
 * whatever files its mappings name, and a source HDF5 cannot find reads as the fill
 * value without an error; so an index is accepted only when every source is a part
 * of the same snapshot, beside it, holding its own checksummed values. */
#include "io/hdf5_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

static const char *slash(const char *name) { return name[0] == '/' ? "" : "/"; }

/* Values at .. at + n - 1 (row-major) of a dataset of cols columns as rectangles: the
 * rest of a first row cut mid-row, whole rows, the start of a last row; start and
 * count [rows, cols] of each. Returns how many (at most 3). */
static int run_rects(hsize_t cols, hsize_t at, hsize_t n, hsize_t start[3][2],
                     hsize_t count[3][2])
{
    int k = 0;
    hsize_t row = at / cols, col = at % cols;
    if (col > 0 && n > 0) { /* the first row's rest */
        hsize_t take = cols - col < n ? cols - col : n;
        start[k][0] = row, start[k][1] = col, count[k][0] = 1, count[k++][1] = take;
        n -= take;
        row++;
    }
    if (n >= cols) {
        start[k][0] = row, start[k][1] = 0, count[k][0] = n / cols, count[k++][1] = cols;
        row += n / cols;
        n %= cols;
    }
    if (n > 0) start[k][0] = row, start[k][1] = 0, count[k][0] = 1, count[k++][1] = n;
    return k;
}

/* The selection of values at .. at + n - 1 of space (rank 1 or 2) as its rectangles'
 * union; where a rectangle starts in the run too (off, when not NULL). */
static herr_t select_run(hid_t space, hsize_t at, hsize_t n, int *rects, hsize_t start[3][2],
                         hsize_t count[3][2], hsize_t off[3])
{
    hsize_t dims[2] = {1, 1};
    int rank = H5Sget_simple_extent_dims(space, dims, NULL);
    if (rank < 1 || rank > 2) return -1;
    *rects = rank == 1 ? 1 : run_rects(dims[1], at, n, start, count);
    if (rank == 1) start[0][0] = at, count[0][0] = n;
    hsize_t done = 0;
    herr_t rc = H5Sselect_none(space);
    for (int k = 0; rc >= 0 && k < *rects; k++) {
        if (off) off[k] = done;
        done += count[k][0] * (rank == 1 ? 1 : count[k][1]);
        rc = H5Sselect_hyperslab(space, H5S_SELECT_OR, start[k], NULL, count[k], NULL);
    }
    return rc;
}

int pn_hdf5_write_virtual(hid_t file, const char *fname, const char *name, int rank,
                          const hsize_t *dims, const pn_hdf5_source *sources, int n)
{
    if (rank < 1 || rank > 2)
        return pn_error_set(PN_ERR_INTERNAL, "%s: virtual dataset '%s%s' of rank %d", fname,
                            slash(name), name, rank);
    int rc = 0;
    const char *what = "%s: cannot create virtual dataset '%s%s'";
    pn_hdf5_lock();
    hid_t vspace = H5I_INVALID_HID, dcpl = H5I_INVALID_HID, lcpl = H5I_INVALID_HID;
    hid_t dset = H5I_INVALID_HID;
    float fill = NAN; /* a value mapped to nothing shows, rather than reading as 0 */
    PN_HDF5_CHECK(rc, vspace = H5Screate_simple(rank, dims, NULL), what, fname, slash(name),
                  name);
    PN_HDF5_CHECK(rc, dcpl = H5Pcreate(H5P_DATASET_CREATE), what, fname, slash(name), name);
    PN_HDF5_CHECK(rc, H5Pset_fill_value(dcpl, H5T_NATIVE_FLOAT, &fill), what, fname,
                  slash(name), name);
    PN_HDF5_CHECK(rc, lcpl = H5Pcreate(H5P_LINK_CREATE), what, fname, slash(name), name);
    PN_HDF5_CHECK(rc, H5Pset_create_intermediate_group(lcpl, 1), what, fname, slash(name), name);
    for (int i = 0; rc == 0 && i < n; i++) {
        const pn_hdf5_source *s = &sources[i];
        hid_t src = H5I_INVALID_HID;
        if (s->n > 0) { /* a run: each rectangle from its stretch of the 1-D source */
            hsize_t start[3][2], count[3][2], off[3], len[1] = {s->n};
            int rects = 0;
            PN_HDF5_CHECK(rc, select_run(vspace, s->at, s->n, &rects, start, count, off), what,
                          fname, slash(name), name);
            PN_HDF5_CHECK(rc, src = H5Screate_simple(1, len, NULL), what, fname, slash(name),
                          name);
            for (int k = 0; rc == 0 && k < rects; k++) {
                hsize_t one[1] = {count[k][0] * (rank == 1 ? 1 : count[k][1])};
                PN_HDF5_CHECK(rc, H5Sselect_hyperslab(vspace, H5S_SELECT_SET, start[k], NULL,
                                                      count[k], NULL), what, fname,
                              slash(name), name);
                PN_HDF5_CHECK(rc, H5Sselect_hyperslab(src, H5S_SELECT_SET, &off[k], NULL, one,
                                                      NULL), what, fname, slash(name), name);
                PN_HDF5_CHECK(rc, H5Pset_virtual(dcpl, vspace, s->file, s->dataset, src), what,
                              fname, slash(name), name);
            }
            if (src >= 0) H5Sclose(src);
            continue;
        }
        if (rank == 1) { /* whole onto whole */
            PN_HDF5_CHECK(rc, H5Sselect_all(vspace), what, fname, slash(name), name);
            PN_HDF5_CHECK(rc, src = H5Screate_simple(1, dims, NULL), what, fname, slash(name),
                          name);
        } else {
            hsize_t start[2] = {s->first, 0}, stride[2] = {s->step, 1}, count[2] = {s->count, 1},
                    block[2] = {1, dims[1]}, shape[2] = {s->count, dims[1]};
            PN_HDF5_CHECK(rc, H5Sselect_hyperslab(vspace, H5S_SELECT_SET, start, stride, count,
                                                  block), what, fname, slash(name), name);
            PN_HDF5_CHECK(rc, src = H5Screate_simple(2, shape, NULL), what, fname, slash(name),
                          name);
        }
        PN_HDF5_CHECK(rc, H5Pset_virtual(dcpl, vspace, s->file, s->dataset, src), what, fname,
                      slash(name), name);
        if (src >= 0) H5Sclose(src);
    }
    if (rc == 0) H5Sselect_all(vspace);
    PN_HDF5_CHECK(rc, dset = H5Dcreate2(file, name, H5T_IEEE_F32LE, vspace, lcpl, dcpl,
                                        H5P_DEFAULT), what, fname, slash(name), name);
    if (dset >= 0 && H5Dclose(dset) < 0 && rc == 0)
        rc = pn_hdf5_fail("H5Dclose", what, fname, slash(name), name);
    if (lcpl >= 0) H5Pclose(lcpl);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (vspace >= 0) H5Sclose(vspace);
    pn_hdf5_unlock();
    return rc;
}

int pn_hdf5_read_run(hid_t file, const char *fname, const char *name, hsize_t at, hsize_t n,
                     float *out)
{
    if (n == 0) return 0;
    int rc = 0, rects = 0;
    pn_hdf5_lock();
    hid_t dset = H5I_INVALID_HID, fspace = H5I_INVALID_HID, mspace = H5I_INVALID_HID;
    hsize_t start[3][2], count[3][2], len[1] = {n};
    const char *what = "%s: cannot read values of dataset '%s%s'";
    PN_HDF5_CHECK(rc, dset = H5Dopen2(file, name, H5P_DEFAULT), what, fname, slash(name), name);
    PN_HDF5_CHECK(rc, fspace = H5Dget_space(dset), what, fname, slash(name), name);
    if (rc == 0 && (at + n < at || at + n > (hsize_t)H5Sget_simple_extent_npoints(fspace)))
        rc = pn_error_set(PN_ERR_INTERNAL, "%s: dataset '%s%s': values %llu to %llu do not "
                          "fit its shape", fname, slash(name), name, (unsigned long long)at,
                          (unsigned long long)(at + n - 1));
    /* the union's values come in row-major order: the run's */
    PN_HDF5_CHECK(rc, select_run(fspace, at, n, &rects, start, count, NULL), what, fname,
                  slash(name), name);
    PN_HDF5_CHECK(rc, mspace = H5Screate_simple(1, len, NULL), what, fname, slash(name), name);
    PN_HDF5_CHECK(rc, H5Dread(dset, H5T_NATIVE_FLOAT, mspace, fspace, H5P_DEFAULT, out), what,
                  fname, slash(name), name);
    if (mspace >= 0) H5Sclose(mspace);
    if (fspace >= 0) H5Sclose(fspace);
    if (dset >= 0 && H5Dclose(dset) < 0 && rc == 0)
        rc = pn_hdf5_fail("H5Dclose", what, fname, slash(name), name);
    pn_hdf5_unlock();
    return rc;
}

/* Whether a part's file name is one of this snapshot's: prefix...h5, no directory. */
static bool part_name(const char *file, const char *prefix)
{
    size_t n = strlen(file), k = strlen(prefix);
    return !strchr(file, '/') && !strchr(file, '%') && n > k + 3 && !strncmp(file, prefix, k) &&
           !strcmp(file + n - 3, ".h5");
}

/* The source dataset of one mapping, in the file beside fname: it must be there and
 * chunked (its own values, under its checksums). */
static int check_source(const char *fname, const char *name, const char *file,
                        const char *dataset)
{
    const char *cut = strrchr(fname, '/');
    size_t dir = cut ? (size_t)(cut - fname) + 1 : 0;
    char *path = malloc(dir + strlen(file) + 1);
    if (!path) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    sprintf(path, "%.*s%s", (int)dir, fname, file);
    int rc = 0;
    hid_t f = H5Fis_hdf5(path) > 0 ? H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
    hid_t d = f >= 0 && H5Lexists(f, dataset, H5P_DEFAULT) > 0
                  ? H5Dopen2(f, dataset, H5P_DEFAULT) : -1;
    hid_t dcpl = d >= 0 ? H5Dget_create_plist(d) : -1;
    H5Eclear2(H5E_DEFAULT);
    if (f < 0)
        rc = pn_error_set(PN_ERR_INVALID, "%s: dataset '%s%s': its part '%s' is missing or "
                          "not a whole HDF5 file", fname, slash(name), name, file);
    else if (d < 0)
        rc = pn_error_set(PN_ERR_INVALID, "%s: dataset '%s%s': its part '%s' holds no dataset "
                          "'%s'", fname, slash(name), name, file, dataset);
    else if (dcpl < 0 || H5Pget_layout(dcpl) != H5D_CHUNKED)
        rc = pn_error_set(PN_ERR_INVALID, "%s: dataset '%s%s': its part '%s' does not hold its "
                          "values itself (dataset '%s' is not chunked)", fname, slash(name),
                          name, file, dataset);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (d >= 0) H5Dclose(d);
    if (f >= 0) H5Fclose(f);
    H5Eclear2(H5E_DEFAULT);
    free(path);
    return rc;
}

int pn_hdf5_check_parts(hid_t dset, const char *fname, const char *name, const char *prefix)
{
    int rc = 0;
    size_t count = 0;
    pn_hdf5_lock();
    hid_t dcpl = H5Dget_create_plist(dset);
    if (dcpl < 0 || H5Pget_layout(dcpl) != H5D_VIRTUAL || H5Pget_virtual_count(dcpl, &count) < 0)
        rc = pn_hdf5_fail("H5Pget_virtual_count", "%s: dataset '%s%s': cannot read its "
                          "virtual mappings", fname, slash(name), name);
    for (size_t i = 0; rc == 0 && i < count; i++) {
        char *file = pn_hdf5_virtual_name(dcpl, i, true), *src = pn_hdf5_virtual_name(dcpl, i, false);
        if (!file || !src)
            rc = pn_hdf5_fail("H5Pget_virtual_filename", "%s: dataset '%s%s': cannot read its "
                              "virtual mappings", fname, slash(name), name);
        else if (!part_name(file, prefix) || strcmp(src + (src[0] == '/'), name + (name[0] == '/')))
            rc = pn_error_set(PN_ERR_INVALID, "%s: dataset '%s%s' is virtual with values in "
                              "'%s' dataset '%s', which is not this snapshot's part "
                              "('%s*.h5' beside it, the same dataset): refused", fname,
                              slash(name), name, file, src, prefix);
        else
            rc = check_source(fname, name, file, src);
        free(file);
        free(src);
    }
    if (dcpl >= 0) H5Pclose(dcpl);
    H5Eclear2(H5E_DEFAULT);
    pn_hdf5_unlock();
    return rc == 0 ? pn_hdf5_check_storage(dset, fname, name) : rc;
}
