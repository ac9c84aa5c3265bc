/* HDF5 helpers of src/io: the process-wide lock, quiet error stacks, root
 * attributes, chunked dataset writes and checked dataset opens. Each helper holds
 * the lock for its own HDF5 calls; failures carry HDF5's innermost reason. */
#include "io/hdf5_util.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "base/log.h"

static pthread_mutex_t hdf5_mutex;
static pthread_once_t hdf5_once = PTHREAD_ONCE_INIT;
static _Thread_local bool hdf5_quiet; /* error stacks are per thread in thread-safe builds */

static void hdf5_init(void)
{
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&hdf5_mutex, &attr);
    pthread_mutexattr_destroy(&attr);
}

void pn_hdf5_lock(void)
{
    pthread_once(&hdf5_once, hdf5_init);
    pthread_mutex_lock(&hdf5_mutex);
    if (!hdf5_quiet) {
        hdf5_quiet = true;
        if (H5Eset_auto2(H5E_DEFAULT, NULL, NULL) < 0)
            pn_log_warn("could not silence HDF5's error printing");
    }
}

void pn_hdf5_unlock(void) { pthread_mutex_unlock(&hdf5_mutex); }

/* "/" when name lacks its leading slash, so messages always show '/name'. */
static const char *slash(const char *name) { return name[0] == '/' ? "" : "/"; }

static herr_t innermost_cb(unsigned n, const H5E_error2_t *err, void *data)
{
    if (n == 0 && err->desc) snprintf(data, 256, "%s", err->desc);
    return 0;
}

const char *pn_hdf5_reason(char buf[256])
{
    char desc[256] = "";
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost_cb, desc);
    H5Eclear2(H5E_DEFAULT);
    snprintf(buf, 256, "%s%s", desc[0] ? ": " : "", desc);
    return buf;
}

static hid_t file_type(pn_hdf5_type type)
{
    return type == PN_HDF5_FLOAT32 ? H5T_IEEE_F32LE : H5T_STD_I32LE;
}

static hid_t mem_type(pn_hdf5_type type)
{
    return type == PN_HDF5_FLOAT32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_INT;
}

static const char *type_name(pn_hdf5_type type)
{
    return type == PN_HDF5_FLOAT32 ? "float32" : "int32";
}

int pn_hdf5_open_file(const char *path, hid_t fapl, hid_t *out)
{
    *out = H5I_INVALID_HID;
    struct stat st;
    if (stat(path, &st) != 0 || access(path, R_OK) != 0)
        return pn_error_set(PN_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return pn_error_set(PN_ERR_IO, "cannot open '%s': is a directory", path);
    pn_hdf5_lock();
#if H5_VERSION_GE(1, 12, 0)
    htri_t is_hdf5 = H5Fis_accessible(path, fapl);
#else
    htri_t is_hdf5 = H5Fis_hdf5(path);
#endif
    char why[256];
    int rc = 0;
    if (is_hdf5 <= 0) {
        H5Eclear2(H5E_DEFAULT);
        rc = pn_error_set(PN_ERR_IO, "cannot open '%s': not an HDF5 file", path);
    } else if ((*out = H5Fopen(path, H5F_ACC_RDONLY, fapl)) < 0) {
        rc = pn_error_set(PN_ERR_IO, "cannot open '%s'%s", path, pn_hdf5_reason(why));
    }
    pn_hdf5_unlock();
    return rc;
}

int pn_hdf5_create_file(const char *path, hid_t *out)
{
    char why[256];
    int rc = 0;
    pn_hdf5_lock();
    if ((*out = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)) < 0)
        rc = pn_error_set(PN_ERR_IO, "cannot create '%s'%s", path, pn_hdf5_reason(why));
    pn_hdf5_unlock();
    return rc;
}

int pn_hdf5_close(hid_t id, const char *fname)
{
    if (id < 0) return 0;
    pn_hdf5_lock();
    herr_t st;
    switch (H5Iget_type(id)) {
    case H5I_FILE: st = H5Fclose(id); break;
    case H5I_DATASET: st = H5Dclose(id); break;
    case H5I_DATASPACE: st = H5Sclose(id); break;
    case H5I_DATATYPE: st = H5Tclose(id); break;
    case H5I_ATTR: st = H5Aclose(id); break;
    case H5I_GROUP: st = H5Gclose(id); break;
    case H5I_GENPROP_LST: st = H5Pclose(id); break;
    default: st = H5Idec_ref(id) < 0 ? -1 : 0; break;
    }
    char why[256];
    int rc =
        st < 0 ? pn_error_set(PN_ERR_IO, "%s: closing failed%s", fname, pn_hdf5_reason(why)) : 0;
    pn_hdf5_unlock();
    return rc;
}

/* Removes attribute name from the root group if it exists (attributes are rewritten). */
static int drop_attr(hid_t file, const char *fname, const char *name)
{
    char why[256];
    htri_t exists = H5Aexists(file, name);
    if (exists < 0)
        return pn_error_set(PN_ERR_IO, "%s: cannot look up attribute '%s'%s", fname, name,
                            pn_hdf5_reason(why));
    if (exists && H5Adelete(file, name) < 0)
        return pn_error_set(PN_ERR_IO, "%s: cannot replace attribute '%s'%s", fname, name,
                            pn_hdf5_reason(why));
    return 0;
}

/* Creates attribute name of type t (scalar) on the root group and writes value. */
static int write_attr(hid_t file, const char *fname, const char *name, hid_t t, hid_t mem_t,
                      const void *value)
{
    char why[256];
    int rc = drop_attr(file, fname, name);
    if (rc < 0) return rc;
    hid_t space = H5Screate(H5S_SCALAR), attr = H5I_INVALID_HID;
    if (space < 0 || (attr = H5Acreate2(file, name, t, space, H5P_DEFAULT, H5P_DEFAULT)) < 0 ||
        H5Awrite(attr, mem_t, value) < 0)
        rc = pn_error_set(PN_ERR_IO, "%s: cannot write attribute '%s'%s", fname, name,
                          pn_hdf5_reason(why));
    if (attr >= 0 && H5Aclose(attr) < 0 && rc == 0)
        rc = pn_error_set(PN_ERR_IO, "%s: cannot write attribute '%s'%s", fname, name,
                          pn_hdf5_reason(why));
    if (space >= 0) H5Sclose(space);
    return rc;
}

int pn_hdf5_write_attr_string(hid_t file, const char *fname, const char *name, const char *value)
{
    char why[256];
    int rc;
    pn_hdf5_lock();
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0 || H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0)
        rc = pn_error_set(PN_ERR_IO, "%s: cannot make a string type for attribute '%s'%s",
                          fname, name, pn_hdf5_reason(why));
    else
        rc = write_attr(file, fname, name, t, t, &value);
    if (t >= 0) H5Tclose(t);
    pn_hdf5_unlock();
    return rc;
}

int pn_hdf5_write_attr_int(hid_t file, const char *fname, const char *name, long value)
{
    pn_hdf5_lock();
    int rc = write_attr(file, fname, name, H5T_STD_I64LE, H5T_NATIVE_LONG, &value);
    pn_hdf5_unlock();
    return rc;
}

/* Opens root attribute name holding one value of class want; *type is its type. */
static int open_attr(hid_t file, const char *fname, const char *name, H5T_class_t want,
                     const char *what, hid_t *attr, hid_t *type)
{
    char why[256];
    *attr = *type = H5I_INVALID_HID;
    htri_t exists = H5Aexists(file, name);
    if (exists < 0)
        return pn_error_set(PN_ERR_IO, "%s: cannot look up attribute '%s'%s", fname, name,
                            pn_hdf5_reason(why));
    if (!exists) return pn_error_set(PN_ERR_INVALID, "%s: no attribute '%s'", fname, name);
    hid_t space = H5I_INVALID_HID;
    hssize_t n = -1;
    if ((*attr = H5Aopen(file, name, H5P_DEFAULT)) < 0 || (*type = H5Aget_type(*attr)) < 0 ||
        (space = H5Aget_space(*attr)) < 0 || (n = H5Sget_simple_extent_npoints(space)) < 0) {
        if (space >= 0) H5Sclose(space);
        return pn_error_set(PN_ERR_IO, "%s: cannot read attribute '%s'%s", fname, name,
                            pn_hdf5_reason(why));
    }
    H5Sclose(space);
    if (H5Tget_class(*type) != want)
        return pn_error_set(PN_ERR_INVALID, "%s: attribute '%s' is not %s", fname, name, what);
    if (n != 1)
        return pn_error_set(PN_ERR_INVALID, "%s: attribute '%s' holds %lld values, expected one",
                            fname, name, (long long)n);
    return 0;
}

/* Reads string attribute a of file type t into buf. */
static int read_string(hid_t a, hid_t t, const char *fname, const char *name, char *buf,
                       size_t cap)
{
    char why[256];
    htri_t vlen = H5Tis_variable_str(t);
    size_t size = H5Tget_size(t);
    hid_t mem = H5Tcopy(t);
    int rc = 0;
    if (vlen < 0 || size == 0 || mem < 0) {
        rc = -1;
    } else if (vlen) {
        char *text = NULL;
        if (H5Aread(a, mem, &text) < 0) {
            rc = -1;
        } else {
            snprintf(buf, cap, "%s", text ? text : "");
            H5free_memory(text);
        }
    } else {
        char *text = malloc(size + 1);
        if (!text) {
            rc = pn_error_set(PN_ERR_NOMEM, "%s: attribute '%s': out of memory", fname, name);
        } else if (H5Aread(a, mem, text) < 0) {
            rc = -1;
        } else {
            text[size] = '\0';
            snprintf(buf, cap, "%s", text);
        }
        free(text);
    }
    if (mem >= 0) H5Tclose(mem);
    if (rc == -1)
        rc = pn_error_set(PN_ERR_IO, "%s: cannot read attribute '%s'%s", fname, name,
                          pn_hdf5_reason(why));
    return rc;
}

int pn_hdf5_read_attr_string(hid_t file, const char *fname, const char *name, char *buf,
                             size_t cap)
{
    hid_t a, t;
    if (cap) buf[0] = '\0';
    pn_hdf5_lock();
    int rc = open_attr(file, fname, name, H5T_STRING, "a string", &a, &t);
    if (rc == 0) rc = read_string(a, t, fname, name, buf, cap);
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    pn_hdf5_unlock();
    return rc;
}

int pn_hdf5_read_attr_int(hid_t file, const char *fname, const char *name, long *value)
{
    char why[256];
    hid_t a, t;
    pn_hdf5_lock();
    int rc = open_attr(file, fname, name, H5T_INTEGER, "an integer", &a, &t);
    if (rc == 0 && H5Aread(a, H5T_NATIVE_LONG, value) < 0)
        rc = pn_error_set(PN_ERR_IO, "%s: cannot read attribute '%s'%s", fname, name,
                          pn_hdf5_reason(why));
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    pn_hdf5_unlock();
    return rc;
}

/* Chunk extents: chunk_rows samples (at least 1, at most all), whole samples, and
 * under HDF5's 4 GiB chunk limit. */
static void chunk_dims(int rank, const hsize_t *dims, hsize_t chunk_rows, hsize_t *chunk)
{
    hsize_t sample_bytes = 4;
    for (int k = 1; k < rank; k++) sample_bytes *= chunk[k] = dims[k];
    chunk[0] = chunk_rows < 1 ? 1 : chunk_rows > dims[0] ? dims[0] : chunk_rows;
    while (chunk[0] > 1 && chunk[0] * sample_bytes > ((hsize_t)1 << 31)) chunk[0] /= 2;
}

int pn_hdf5_create_dataset(hid_t file, const char *fname, const char *name, pn_hdf5_type type,
                           int rank, const hsize_t *dims, hsize_t chunk_rows, hid_t *out)
{
    *out = H5I_INVALID_HID;
    if (rank < 1 || rank > PN_HDF5_MAX_RANK)
        return pn_error_set(PN_ERR_INTERNAL, "%s: dataset '%s%s': rank %d not in 1..%d", fname,
                            slash(name), name, rank, PN_HDF5_MAX_RANK);
    bool empty = false;
    for (int k = 0; k < rank; k++) empty = empty || dims[k] == 0;
    char why[256];
    int rc = 0;
    pn_hdf5_lock();
    hid_t space = H5Screate_simple(rank, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE), lcpl = H5Pcreate(H5P_LINK_CREATE);
    hsize_t chunk[PN_HDF5_MAX_RANK];
    if (!empty) chunk_dims(rank, dims, chunk_rows, chunk);
    if (space < 0 || dcpl < 0 || lcpl < 0 || H5Pset_create_intermediate_group(lcpl, 1) < 0 ||
        (!empty && H5Pset_chunk(dcpl, rank, chunk) < 0) ||
        H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) < 0 ||
        (*out = H5Dcreate2(file, name, file_type(type), space, lcpl, dcpl, H5P_DEFAULT)) < 0)
        rc = pn_error_set(PN_ERR_IO, "%s: cannot create dataset '%s%s'%s", fname, slash(name),
                          name, pn_hdf5_reason(why));
    if (lcpl >= 0) H5Pclose(lcpl);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (space >= 0) H5Sclose(space);
    pn_hdf5_unlock();
    return rc;
}

int pn_hdf5_write_rows(hid_t dset, const char *fname, const char *name, pn_hdf5_type type,
                       hsize_t row0, hsize_t rows, const void *data)
{
    if (rows == 0) return 0;
    char why[256];
    int rc = 0;
    pn_hdf5_lock();
    hsize_t dims[H5S_MAX_RANK], start[H5S_MAX_RANK] = {row0};
    hid_t fspace = H5Dget_space(dset), mspace = H5I_INVALID_HID;
    int rank = fspace < 0 ? -1 : H5Sget_simple_extent_dims(fspace, dims, NULL);
    if (rank < 1) {
        rc = pn_error_set(PN_ERR_IO, "%s: dataset '%s%s': cannot read its shape%s", fname,
                          slash(name), name, pn_hdf5_reason(why));
    } else if (row0 + rows > dims[0]) {
        rc = pn_error_set(PN_ERR_INTERNAL, "%s: dataset '%s%s': rows %llu..%llu past its %llu",
                          fname, slash(name), name, (unsigned long long)row0,
                          (unsigned long long)(row0 + rows), (unsigned long long)dims[0]);
    } else {
        dims[0] = rows;
        if (H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, dims, NULL) < 0 ||
            (mspace = H5Screate_simple(rank, dims, NULL)) < 0 ||
            H5Dwrite(dset, mem_type(type), mspace, fspace, H5P_DEFAULT, data) < 0)
            rc = pn_error_set(PN_ERR_IO, "%s: cannot write dataset '%s%s'%s", fname, slash(name),
                              name, pn_hdf5_reason(why));
    }
    if (mspace >= 0) H5Sclose(mspace);
    if (fspace >= 0) H5Sclose(fspace);
    pn_hdf5_unlock();
    return rc;
}

int pn_hdf5_write_dataset(hid_t file, const char *fname, const char *name, pn_hdf5_type type,
                          int rank, const hsize_t *dims, hsize_t chunk_rows, const void *data)
{
    hid_t dset;
    PN_TRY(pn_hdf5_create_dataset(file, fname, name, type, rank, dims, chunk_rows, &dset));
    int rc = pn_hdf5_write_rows(dset, fname, name, type, 0, dims[0], data);
    int rc_close = pn_hdf5_close(dset, fname);
    return rc < 0 ? rc : rc_close;
}

int pn_hdf5_open_dataset(hid_t file, const char *fname, const char *name, const char *purpose,
                         hid_t *out)
{
    char why[256];
    int rc = 0;
    pn_hdf5_lock();
    htri_t exists = H5Lexists(file, name, H5P_DEFAULT);
    H5Eclear2(H5E_DEFAULT);
    if (exists <= 0) {
        rc = pn_error_set(PN_ERR_INVALID, "%s: no dataset '%s%s'%s%s%s", fname, slash(name), name,
                          purpose ? " (" : "", purpose ? purpose : "", purpose ? ")" : "");
    } else if ((*out = H5Dopen2(file, name, H5P_DEFAULT)) < 0) {
        rc = pn_error_set(PN_ERR_INVALID, "%s: '%s%s' is not a dataset%s", fname, slash(name),
                          name, pn_hdf5_reason(why));
    }
    pn_hdf5_unlock();
    return rc;
}

void pn_hdf5_type_name(hid_t t, char *buf, size_t cap)
{
    size_t bits = H5Tget_size(t) * 8;
    switch (H5Tget_class(t)) {
    case H5T_INTEGER:
        snprintf(buf, cap, "%sint%zu", H5Tget_sign(t) == H5T_SGN_NONE ? "u" : "", bits);
        break;
    case H5T_FLOAT: snprintf(buf, cap, "float%zu", bits); break;
    case H5T_STRING: snprintf(buf, cap, "string"); break;
    case H5T_COMPOUND: snprintf(buf, cap, "a compound type"); break;
    case H5T_ENUM: snprintf(buf, cap, "an enum"); break;
    case H5T_ARRAY: snprintf(buf, cap, "an array type"); break;
    case H5T_VLEN: snprintf(buf, cap, "a variable-length type"); break;
    case H5T_OPAQUE: snprintf(buf, cap, "an opaque type"); break;
    case H5T_BITFIELD: snprintf(buf, cap, "a bitfield"); break;
    case H5T_REFERENCE: snprintf(buf, cap, "references"); break;
    default: snprintf(buf, cap, "an unknown type"); break;
    }
}

static bool type_matches(hid_t t, pn_hdf5_type want)
{
    if (H5Tget_size(t) != 4) return false;
    if (want == PN_HDF5_FLOAT32) return H5Tget_class(t) == H5T_FLOAT;
    return H5Tget_class(t) == H5T_INTEGER && H5Tget_sign(t) == H5T_SGN_2;
}

/* Appends "[N, 784]" (-1 shows as N) to buf at *len. */
static void append_shape(char *buf, size_t cap, size_t *len, int rank, const long *dims)
{
    for (int k = 0; k <= rank && *len < cap; k++) {
        const char *sep = k == 0 ? "[" : ", ";
        int n = k == rank ? snprintf(buf + *len, cap - *len, "%s]", rank ? "" : "[")
                : dims[k] < 0 ? snprintf(buf + *len, cap - *len, "%sN", sep)
                              : snprintf(buf + *len, cap - *len, "%s%ld", sep, dims[k]);
        *len += n > 0 ? (size_t)n : 0;
    }
    if (*len >= cap) *len = cap - 1;
}

static int check_shape(hid_t dset, const char *fname, const char *name,
                       const pn_hdf5_shape *shapes, int n_shapes, int *which, hsize_t *dims)
{
    char why[256];
    hsize_t found[H5S_MAX_RANK];
    hid_t space = H5Dget_space(dset);
    int rank = space < 0 ? -1 : H5Sget_simple_extent_dims(space, found, NULL);
    if (space >= 0) H5Sclose(space);
    if (rank < 0)
        return pn_error_set(PN_ERR_IO, "%s: dataset '%s%s': cannot read its shape%s", fname,
                            slash(name), name, pn_hdf5_reason(why));
    for (int s = 0; s < n_shapes; s++) {
        bool ok = shapes[s].rank == rank;
        for (int k = 0; ok && k < rank; k++)
            ok = shapes[s].dims[k] < 0 || (hsize_t)shapes[s].dims[k] == found[k];
        if (ok) {
            *which = s;
            for (int k = 0; k < PN_HDF5_MAX_RANK; k++) dims[k] = k < rank ? found[k] : 1;
            return 0;
        }
    }
    char want[256], got[256];
    size_t wl = 0, gl = 0;
    for (int s = 0; s < n_shapes; s++) {
        if (s) wl += (size_t)snprintf(want + wl, sizeof want - wl, " or ");
        append_shape(want, sizeof want, &wl, shapes[s].rank, shapes[s].dims);
    }
    long as_long[H5S_MAX_RANK];
    for (int k = 0; k < rank; k++) as_long[k] = (long)found[k];
    append_shape(got, sizeof got, &gl, rank, as_long);
    return pn_error_set(PN_ERR_INVALID, "%s: dataset '%s%s': expected shape %s, found %s", fname,
                        slash(name), name, want, got);
}

int pn_hdf5_check_dataset(hid_t dset, const char *fname, const char *name, pn_hdf5_type type,
                          const pn_hdf5_shape *shapes, int n_shapes, int *which, hsize_t *dims)
{
    char why[256], found[64];
    int rc;
    pn_hdf5_lock();
    hid_t t = H5Dget_type(dset);
    if (t < 0) {
        rc = pn_error_set(PN_ERR_IO, "%s: dataset '%s%s': cannot read its type%s", fname,
                          slash(name), name, pn_hdf5_reason(why));
    } else if (!type_matches(t, type)) {
        pn_hdf5_type_name(t, found, sizeof found);
        rc = pn_error_set(PN_ERR_INVALID, "%s: dataset '%s%s': expected %s, found %s", fname,
                          slash(name), name, type_name(type), found);
    } else {
        rc = check_shape(dset, fname, name, shapes, n_shapes, which, dims);
    }
    if (t >= 0) H5Tclose(t);
    pn_hdf5_unlock();
    return rc;
}
