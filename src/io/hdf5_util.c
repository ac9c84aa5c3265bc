/* HDF5 helpers of src/io (hdf5_util.h): the process-wide lock, quiet error stacks
 * and the checking macro's messages, files, and datasets: chunked writes, checked
 * opens and reads (listings are in hdf5_list.c). Each helper holds the lock for its own HDF5 calls;
 * failures carry the HDF5 function and HDF5's innermost reason. */
#include "io/hdf5_util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
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

/* Copies text into buf (cap bytes) as one line: every run of spaces, newlines and
 * other control characters becomes one space, none at either end. */
static void one_line(char *buf, size_t cap, const char *text)
{
    size_t n = 0;
    bool gap = false;
    for (const unsigned char *c = (const unsigned char *)text; *c && n + 1 < cap; c++) {
        if (isspace(*c) || iscntrl(*c)) {
            gap = n > 0;
            continue;
        }
        if (gap && n + 2 < cap) buf[n++] = ' ';
        gap = false;
        buf[n++] = (char)*c;
    }
    buf[n] = '\0';
}

static herr_t innermost_cb(unsigned n, const H5E_error2_t *err, void *data)
{
    if (n == 0 && err->desc) one_line(data, 256, err->desc);
    return 0;
}

const char *pn_hdf5_reason(char buf[256])
{
    buf[0] = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost_cb, buf);
    H5Eclear2(H5E_DEFAULT);
    return buf;
}

int pn_hdf5_fail(const char *call_text, const char *fmt, ...)
{
    char what[768], why[256], fn[64] = "HDF5";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const char *h5 = strstr(call_text, "H5");
    if (h5) {
        size_t n = 0;
        while (n + 1 < sizeof fn && (isalnum((unsigned char)h5[n]) || h5[n] == '_')) n++;
        snprintf(fn, sizeof fn, "%.*s", (int)n, h5);
    }
    pn_hdf5_reason(why);
    return pn_error_set(PN_ERR_IO, "%s (%s: %s)", what, fn, why[0] ? why : "failed");
}

/* --- files ----------------------------------------------------------------------------- */

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
    int rc = 0;
    if (is_hdf5 <= 0) {
        H5Eclear2(H5E_DEFAULT);
        rc = pn_error_set(PN_ERR_IO, "cannot open '%s': not an HDF5 file", path);
    }
    PN_HDF5_CHECK(rc, *out = H5Fopen(path, H5F_ACC_RDONLY, fapl), "cannot open '%s'", path);
    pn_hdf5_unlock();
    return rc;
}

/* Root attributes stay in the root group's (checksummed) object header up to this
 * many, rather than moving to dense storage past HDF5's default of 8. */
enum { MAX_COMPACT_ATTRS = 16 };

int pn_hdf5_create_file(const char *path, bool durable, hid_t *out)
{
    *out = H5I_INVALID_HID;
    int rc = 0;
    pn_hdf5_lock();
    hid_t fapl = H5P_DEFAULT, fcpl = H5P_DEFAULT;
    if (durable) {
        PN_HDF5_CHECK(rc, fapl = H5Pcreate(H5P_FILE_ACCESS), "cannot create '%s'", path);
        PN_HDF5_CHECK(rc, fcpl = H5Pcreate(H5P_FILE_CREATE), "cannot create '%s'", path);
        PN_HDF5_CHECK(rc, H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110),
                      "cannot create '%s'", path);
        PN_HDF5_CHECK(rc, H5Pset_fclose_degree(fapl, H5F_CLOSE_SEMI), "cannot create '%s'", path);
        PN_HDF5_CHECK(rc, H5Pset_attr_phase_change(fcpl, MAX_COMPACT_ATTRS, MAX_COMPACT_ATTRS - 2),
                      "cannot create '%s'", path);
    }
    PN_HDF5_CHECK(rc, *out = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, fapl), "cannot create '%s'",
                  path);
    if (fcpl > 0 && fcpl != H5P_DEFAULT) H5Pclose(fcpl);
    if (fapl > 0 && fapl != H5P_DEFAULT) H5Pclose(fapl);
    pn_hdf5_unlock();
    return rc;
}

int pn_hdf5_close(hid_t id, const char *fname)
{
    if (id < 0) return 0;
    pn_hdf5_lock();
    int rc = 0;
    switch (H5Iget_type(id)) {
    case H5I_FILE: PN_HDF5_CHECK(rc, H5Fclose(id), "%s: closing failed", fname); break;
    case H5I_DATASET: PN_HDF5_CHECK(rc, H5Dclose(id), "%s: closing failed", fname); break;
    case H5I_DATASPACE: PN_HDF5_CHECK(rc, H5Sclose(id), "%s: closing failed", fname); break;
    case H5I_DATATYPE: PN_HDF5_CHECK(rc, H5Tclose(id), "%s: closing failed", fname); break;
    case H5I_ATTR: PN_HDF5_CHECK(rc, H5Aclose(id), "%s: closing failed", fname); break;
    case H5I_GROUP: PN_HDF5_CHECK(rc, H5Gclose(id), "%s: closing failed", fname); break;
    case H5I_GENPROP_LST: PN_HDF5_CHECK(rc, H5Pclose(id), "%s: closing failed", fname); break;
    default: PN_HDF5_CHECK(rc, H5Idec_ref(id), "%s: closing failed", fname); break;
    }
    pn_hdf5_unlock();
    return rc;
}

/* --- datasets -------------------------------------------------------------------------- */

static hid_t file_type(pn_hdf5_type type)
{
    switch (type) {
    case PN_HDF5_FLOAT32: return H5T_IEEE_F32LE;
    case PN_HDF5_INT32: return H5T_STD_I32LE;
    case PN_HDF5_FLOAT64: return H5T_IEEE_F64LE;
    case PN_HDF5_INT64: return H5T_STD_I64LE;
    default: return H5T_STD_U64LE;
    }
}

hid_t pn_hdf5_mem_type(pn_hdf5_type type)
{
    switch (type) {
    case PN_HDF5_FLOAT32: return H5T_NATIVE_FLOAT;
    case PN_HDF5_INT32: return H5T_NATIVE_INT;
    case PN_HDF5_FLOAT64: return H5T_NATIVE_DOUBLE;
    case PN_HDF5_INT64: return H5T_NATIVE_INT64;
    default: return H5T_NATIVE_UINT64;
    }
}

static const char *type_label(pn_hdf5_type type)
{
    static const char *const labels[] = {"float32", "int32", "float64", "int64", "uint64"};
    return labels[type];
}

/* Bytes of one value of type, in memory and in the file. */
static hsize_t type_bytes(pn_hdf5_type type)
{
    return type == PN_HDF5_FLOAT32 || type == PN_HDF5_INT32 ? 4 : 8;
}

/* Chunk extents: chunk_rows samples (at least 1, at most all), whole samples, and
 * under HDF5's 4 GiB chunk limit. */
static void chunk_dims(pn_hdf5_type type, int rank, const hsize_t *dims, hsize_t chunk_rows,
                       hsize_t *chunk)
{
    hsize_t sample_bytes = type_bytes(type);
    for (int k = 1; k < rank; k++) sample_bytes *= chunk[k] = dims[k];
    chunk[0] = chunk_rows < 1 ? 1 : chunk_rows > dims[0] ? dims[0] : chunk_rows;
    while (chunk[0] > 1 && chunk[0] * sample_bytes > ((hsize_t)1 << 31)) chunk[0] /= 2;
}

/* Creates dataset name: chunked by chunk (NULL: contiguous), with fletcher32 when
 * checksum, its first extent unlimited when growing; intermediate groups are
 * created. */
static int create(hid_t file, const char *fname, const char *name, pn_hdf5_type type, int rank,
                  const hsize_t *dims, const hsize_t *chunk, bool checksum, bool growing,
                  hid_t *out)
{
    *out = H5I_INVALID_HID;
    if (rank < 1 || rank > PN_HDF5_MAX_RANK)
        return pn_error_set(PN_ERR_INTERNAL, "%s: dataset '%s%s': rank %d not in 1..%d", fname,
                            slash(name), name, rank, PN_HDF5_MAX_RANK);
    int rc = 0;
    pn_hdf5_lock();
    hid_t space = H5I_INVALID_HID, dcpl = H5I_INVALID_HID, lcpl = H5I_INVALID_HID;
    const char *what = "%s: cannot create dataset '%s%s'";
    hsize_t maxdims[PN_HDF5_MAX_RANK];
    for (int k = 0; k < rank; k++) maxdims[k] = k == 0 && growing ? H5S_UNLIMITED : dims[k];
    PN_HDF5_CHECK(rc, space = H5Screate_simple(rank, dims, maxdims), what, fname, slash(name),
                  name);
    PN_HDF5_CHECK(rc, dcpl = H5Pcreate(H5P_DATASET_CREATE), what, fname, slash(name), name);
    PN_HDF5_CHECK(rc, lcpl = H5Pcreate(H5P_LINK_CREATE), what, fname, slash(name), name);
    PN_HDF5_CHECK(rc, H5Pset_create_intermediate_group(lcpl, 1), what, fname, slash(name), name);
    if (chunk) PN_HDF5_CHECK(rc, H5Pset_chunk(dcpl, rank, chunk), what, fname, slash(name), name);
    if (checksum) PN_HDF5_CHECK(rc, H5Pset_fletcher32(dcpl), what, fname, slash(name), name);
    PN_HDF5_CHECK(rc, H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), what, fname, slash(name),
                  name);
    PN_HDF5_CHECK(rc, *out = H5Dcreate2(file, name, file_type(type), space, lcpl, dcpl,
                                        H5P_DEFAULT),
                  what, fname, slash(name), name);
    if (lcpl >= 0) H5Pclose(lcpl);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (space >= 0) H5Sclose(space);
    pn_hdf5_unlock();
    return rc;
}

int pn_hdf5_create_group(hid_t file, const char *fname, const char *path)
{
    int rc = 0;
    pn_hdf5_lock();
    hid_t lcpl = H5I_INVALID_HID, group = H5I_INVALID_HID;
    const char *what = "%s: cannot create group '%s'";
    PN_HDF5_CHECK(rc, lcpl = H5Pcreate(H5P_LINK_CREATE), what, fname, path);
    PN_HDF5_CHECK(rc, H5Pset_create_intermediate_group(lcpl, 1), what, fname, path);
    PN_HDF5_CHECK(rc, group = H5Gcreate2(file, path, lcpl, H5P_DEFAULT, H5P_DEFAULT), what, fname,
                  path);
    PN_HDF5_CHECK(rc, H5Gclose(group), what, fname, path);
    if (lcpl >= 0) H5Pclose(lcpl);
    pn_hdf5_unlock();
    return rc;
}

int pn_hdf5_create_dataset(hid_t file, const char *fname, const char *name, pn_hdf5_type type,
                           int rank, const hsize_t *dims, hsize_t chunk_rows, hid_t *out)
{
    bool empty = false;
    for (int k = 0; k < rank && k < PN_HDF5_MAX_RANK; k++) empty = empty || dims[k] == 0;
    hsize_t chunk[PN_HDF5_MAX_RANK];
    if (!empty && rank >= 1 && rank <= PN_HDF5_MAX_RANK) chunk_dims(type, rank, dims, chunk_rows, chunk);
    return create(file, fname, name, type, rank, dims, empty ? NULL : chunk, false, false, out);
}

int pn_hdf5_write_rows(hid_t dset, const char *fname, const char *name, pn_hdf5_type type,
                       hsize_t row0, hsize_t rows, const void *data)
{
    if (rows == 0) return 0;
    int rc = 0, rank = -1;
    pn_hdf5_lock();
    hsize_t dims[H5S_MAX_RANK], start[H5S_MAX_RANK] = {row0};
    hid_t fspace = H5I_INVALID_HID, mspace = H5I_INVALID_HID;
    PN_HDF5_CHECK(rc, fspace = H5Dget_space(dset), "%s: dataset '%s%s': cannot read its shape",
                  fname, slash(name), name);
    PN_HDF5_CHECK(rc, rank = H5Sget_simple_extent_dims(fspace, dims, NULL),
                  "%s: dataset '%s%s': cannot read its shape", fname, slash(name), name);
    if (rc == 0 && (rank < 1 || row0 + rows > dims[0]))
        rc = pn_error_set(PN_ERR_INTERNAL, "%s: dataset '%s%s': rows %llu..%llu past its %llu",
                          fname, slash(name), name, (unsigned long long)row0,
                          (unsigned long long)(row0 + rows),
                          (unsigned long long)(rank < 1 ? 0 : dims[0]));
    dims[0] = rows;
    const char *what = "%s: cannot write dataset '%s%s'";
    PN_HDF5_CHECK(rc, H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, dims, NULL), what,
                  fname, slash(name), name);
    PN_HDF5_CHECK(rc, mspace = H5Screate_simple(rank, dims, NULL), what, fname, slash(name), name);
    PN_HDF5_CHECK(rc, H5Dwrite(dset, pn_hdf5_mem_type(type), mspace, fspace, H5P_DEFAULT, data), what,
                  fname, slash(name), name);
    if (mspace >= 0) H5Sclose(mspace);
    if (fspace >= 0) H5Sclose(fspace);
    pn_hdf5_unlock();
    return rc;
}

int pn_hdf5_create_growing(hid_t file, const char *fname, const char *name, pn_hdf5_type type,
                           hsize_t chunk, hid_t *out)
{
    hsize_t dims[1] = {0}, chunks[1] = {chunk < 1 ? 1 : chunk};
    return create(file, fname, name, type, 1, dims, chunks, false, true, out);
}

int pn_hdf5_append(hid_t dset, const char *fname, const char *name, pn_hdf5_type type,
                   hsize_t *length, hsize_t n, const void *data)
{
    if (n == 0) return 0;
    int rc = 0;
    hsize_t grown[1] = {*length + n};
    pn_hdf5_lock();
    PN_HDF5_CHECK(rc, H5Dset_extent(dset, grown), "%s: cannot extend dataset '%s%s' to %llu",
                  fname, slash(name), name, (unsigned long long)grown[0]);
    pn_hdf5_unlock();
    if (rc == 0) rc = pn_hdf5_write_rows(dset, fname, name, type, *length, n, data);
    if (rc == 0) *length = grown[0];
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

int pn_hdf5_write_checksummed(hid_t file, const char *fname, const char *name, int rank,
                              const hsize_t *dims, const hsize_t *chunk, const float *data)
{
    hid_t dset;
    PN_TRY(create(file, fname, name, PN_HDF5_FLOAT32, rank, dims, chunk, true, false, &dset));
    int rc = 0;
    pn_hdf5_lock();
    if (data)
        PN_HDF5_CHECK(rc, H5Dwrite(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data),
                      "%s: cannot write dataset '%s'", fname, name);
    PN_HDF5_CHECK(rc, H5Dclose(dset), "%s: cannot write dataset '%s'", fname, name);
    pn_hdf5_unlock();
    return rc < 0 ? pn_hdf5_close_after(dset, fname, rc) : rc; /* after a failed write */
}

int pn_hdf5_read_strided(hid_t file, const char *fname, const char *name, hsize_t first,
                         hsize_t step, hsize_t count, float *out)
{
    if (count == 0) return 0;
    int rc = 0;
    pn_hdf5_lock();
    hid_t dset = H5I_INVALID_HID, fspace = H5I_INVALID_HID, mspace = H5I_INVALID_HID;
    hsize_t dims[H5S_MAX_RANK];
    const char *what = "%s: cannot read rows of dataset '%s'";
    PN_HDF5_CHECK(rc, dset = H5Dopen2(file, name, H5P_DEFAULT), what, fname, name);
    PN_HDF5_CHECK(rc, fspace = H5Dget_space(dset), what, fname, name);
    int rank = rc == 0 ? H5Sget_simple_extent_dims(fspace, dims, NULL) : -1;
    if (rc == 0 && (rank != 2 || step < 1 || first + (count - 1) * step >= dims[0]))
        rc = pn_error_set(PN_ERR_INTERNAL, "%s: dataset '%s': %llu rows from %llu every %llu do "
                          "not fit its shape", fname, name, (unsigned long long)count,
                          (unsigned long long)first, (unsigned long long)step);
    if (rc == 0) {
        hsize_t start[2] = {first, 0}, stride[2] = {step, 1}, blocks[2] = {count, 1},
                block[2] = {1, dims[1]}, shape[2] = {count, dims[1]};
        PN_HDF5_CHECK(rc, H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, stride, blocks,
                                              block), what, fname, name);
        PN_HDF5_CHECK(rc, mspace = H5Screate_simple(2, shape, NULL), what, fname, name);
        PN_HDF5_CHECK(rc, H5Dread(dset, H5T_NATIVE_FLOAT, mspace, fspace, H5P_DEFAULT, out),
                      what, fname, name);
    }
    if (mspace >= 0) H5Sclose(mspace);
    if (fspace >= 0) H5Sclose(fspace);
    if (dset >= 0 && H5Dclose(dset) < 0 && rc == 0)
        rc = pn_hdf5_fail("H5Dclose", what, fname, name);
    pn_hdf5_unlock();
    return rc;
}

int pn_hdf5_close_after(hid_t id, const char *fname, int rc)
{
    if (rc == 0) return pn_hdf5_close(id, fname);
    char reason[1024];
    snprintf(reason, sizeof reason, "%s", pn_error_message());
    pn_hdf5_close(id, fname);
    return pn_error_set(rc, "%s", reason);
}

int pn_hdf5_reserve(hid_t file, const char *fname, uint64_t bytes)
{
    int *fd = NULL, rc = 0;
    pn_hdf5_lock();
    PN_HDF5_CHECK(rc, H5Fget_vfd_handle(file, H5P_DEFAULT, (void **)&fd),
                  "%s: cannot reserve space", fname);
    pn_hdf5_unlock();
    if (rc < 0 || !fd) return rc;
    if (fallocate(*fd, 0, 0, (off_t)bytes) != 0 && errno != EOPNOTSUPP && errno != ENOSYS)
        return pn_error_set(PN_ERR_IO, "%s: no room for %.1f MB: %s", fname, (double)bytes / 1e6,
                            strerror(errno));
    return 0;
}

int pn_hdf5_close_reserved(hid_t file, const char *fname, int rc)
{
    rc = pn_hdf5_close_after(file, fname, rc);
    if (rc != 0) return rc;
    /* HDF5 may still allocate while it closes the file (a snapshot of ~40 parameters
     * grew by 12 bytes, and trimming to the end seen before the close cut them off):
     * the end the closed file records in its superblock is the one to keep. */
    hid_t closed;
    haddr_t used = HADDR_UNDEF;
    PN_TRY(pn_hdf5_open_file(fname, H5P_DEFAULT, &closed));
    pn_hdf5_lock();
    PN_HDF5_CHECK(rc, H5Fget_eoa(closed, &used), "%s: cannot read the end of the file", fname);
    pn_hdf5_unlock();
    rc = pn_hdf5_close_after(closed, fname, rc);
    if (rc == 0 && truncate(fname, (off_t)used) != 0)
        rc = pn_error_set(PN_ERR_IO, "%s: cannot trim the file: %s", fname, strerror(errno));
    return rc;
}

bool pn_hdf5_link_exists(hid_t file, const char *name)
{
    pn_hdf5_lock();
    htri_t exists = H5Lexists(file, name, H5P_DEFAULT);
    H5Eclear2(H5E_DEFAULT); /* a missing group on the way fails: that is a "no" too */
    pn_hdf5_unlock();
    return exists > 0;
}

int pn_hdf5_open_dataset(hid_t file, const char *fname, const char *name, const char *purpose,
                         hid_t *out)
{
    *out = H5I_INVALID_HID;
    if (!pn_hdf5_link_exists(file, name))
        return pn_error_set(PN_ERR_INVALID, "%s: no dataset '%s%s'%s%s%s", fname, slash(name),
                            name, purpose ? " (" : "", purpose ? purpose : "", purpose ? ")" : "");
    int rc = 0;
    pn_hdf5_lock();
    PN_HDF5_CHECK(rc, *out = H5Dopen2(file, name, H5P_DEFAULT), "%s: '%s%s' is not a dataset",
                  fname, slash(name), name);
    pn_hdf5_unlock();
    return rc < 0 ? PN_ERR_INVALID : 0; /* the file's content, not I/O, is at fault */
}

static bool type_matches(hid_t t, pn_hdf5_type want)
{
    if (H5Tget_size(t) != type_bytes(want)) return false;
    if (want == PN_HDF5_FLOAT32 || want == PN_HDF5_FLOAT64) return H5Tget_class(t) == H5T_FLOAT;
    H5T_sign_t sign = want == PN_HDF5_UINT64 ? H5T_SGN_NONE : H5T_SGN_2;
    return H5Tget_class(t) == H5T_INTEGER && H5Tget_sign(t) == sign;
}

int pn_hdf5_dataset_elem(hid_t dset, const char *fname, const char *name, pn_hdf5_elem *out)
{
    int rc = 0;
    pn_hdf5_lock();
    hid_t t = H5I_INVALID_HID;
    PN_HDF5_CHECK(rc, t = H5Dget_type(dset), "%s: dataset '%s%s': cannot read its type", fname,
                  slash(name), name);
    if (rc == 0) {
        H5T_class_t cls = H5Tget_class(t);
        bool is_signed = H5Tget_sign(t) == H5T_SGN_2;
        out->kind = cls == H5T_FLOAT     ? PN_HDF5_KIND_FLOAT
                    : cls != H5T_INTEGER ? PN_HDF5_KIND_OTHER
                    : is_signed          ? PN_HDF5_KIND_SIGNED
                                         : PN_HDF5_KIND_UNSIGNED;
        out->bytes = H5Tget_size(t);
        pn_hdf5_type_name(t, out->name, sizeof out->name);
        H5Tclose(t);
    }
    pn_hdf5_unlock();
    return rc;
}

int pn_hdf5_dataset_extent(hid_t dset, const char *fname, const char *name, int *rank,
                           hsize_t *dims)
{
    hid_t space = H5I_INVALID_HID;
    int rc = 0;
    pn_hdf5_lock();
    const char *what = "%s: dataset '%s%s': cannot read its shape";
    PN_HDF5_CHECK(rc, space = H5Dget_space(dset), what, fname, slash(name), name);
    PN_HDF5_CHECK(rc, *rank = H5Sget_simple_extent_dims(space, dims, NULL), what, fname,
                  slash(name), name);
    if (space >= 0) H5Sclose(space);
    pn_hdf5_unlock();
    return rc;
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

int pn_hdf5_match_shape(const pn_hdf5_shape *shapes, int n_shapes, int rank,
                        const hsize_t *dims)
{
    for (int s = 0; s < n_shapes; s++) {
        bool ok = shapes[s].rank == rank;
        for (int k = 0; ok && k < rank; k++)
            ok = shapes[s].dims[k] < 0 || (hsize_t)shapes[s].dims[k] == dims[k];
        if (ok) return s;
    }
    return -1;
}

static int check_shape(hid_t dset, const char *fname, const char *name,
                       const pn_hdf5_shape *shapes, int n_shapes, int *which, hsize_t *dims)
{
    hsize_t found[H5S_MAX_RANK];
    int rank = -1;
    PN_TRY(pn_hdf5_dataset_extent(dset, fname, name, &rank, found));
    *which = pn_hdf5_match_shape(shapes, n_shapes, rank, found);
    if (*which >= 0) {
        for (int k = 0; k < PN_HDF5_MAX_RANK; k++) dims[k] = k < rank ? found[k] : 1;
        return 0;
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
    char found[64];
    int rc = 0;
    pn_hdf5_lock();
    hid_t t = H5I_INVALID_HID;
    PN_HDF5_CHECK(rc, t = H5Dget_type(dset), "%s: dataset '%s%s': cannot read its type", fname,
                  slash(name), name);
    if (rc == 0 && !type_matches(t, type)) {
        pn_hdf5_type_name(t, found, sizeof found);
        rc = pn_error_set(PN_ERR_INVALID, "%s: dataset '%s%s': expected %s, found %s", fname,
                          slash(name), name, type_label(type), found);
    }
    if (rc == 0) rc = check_shape(dset, fname, name, shapes, n_shapes, which, dims);
    if (rc == 0) rc = pn_hdf5_check_storage(dset, fname, name);
    if (t >= 0) H5Tclose(t);
    pn_hdf5_unlock();
    return rc;
}

int pn_hdf5_read_all(hid_t dset, const char *fname, const char *name, pn_hdf5_type type,
                     void *out)
{
    int rc = 0;
    pn_hdf5_lock();
    PN_HDF5_CHECK(rc, H5Dread(dset, pn_hdf5_mem_type(type), H5S_ALL, H5S_ALL, H5P_DEFAULT, out),
                  "%s: dataset '%s%s': checksum mismatch or unreadable data", fname, slash(name),
                  name);
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
