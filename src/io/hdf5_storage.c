/* Where a dataset's values are, and whether they are all there (hdf5_util.h): rows
 * a writer declared and never wrote, a virtual dataset's sources, an external
 * dataset's raw files. HDF5 reads each of these gaps as the fill value without an
 * error (a VDS source it cannot find, the part of a raw file past its end), so
 * pipenet checks before it reads: data that is not there is not zeros.
 * A virtual source is looked for where HDF5 looks (H5Pset_virtual: an absolute
 * name, else stripped to its last component; the dataset's VDS prefix; the VDS
 * file's directory; the current directory: the first that opens), an external file
 * at the dataset's external-file prefix joined with its name. Where HDF5 might look
 * further, the check is the stricter one: it refuses rather than trusts. */
#include "io/hdf5_util.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"

/* Virtual datasets whose sources are virtual in turn are followed this many levels
 * deep (the first included), no deeper. */
enum { MAX_DEPTH = 4 };

/* "/" when name lacks its leading slash, so messages always show '/name'. */
static const char *slash(const char *name) { return name[0] == '/' ? "" : "/"; }

static int check_at(hid_t dset, const char *fname, const char *name, int depth);

/* --- how a dataset is stored --------------------------------------------------------- */

static pn_hdf5_storage storage_of(hid_t dcpl)
{
    switch (H5Pget_layout(dcpl)) {
    case H5D_COMPACT: return PN_HDF5_COMPACT;
    case H5D_CHUNKED: return PN_HDF5_CHUNKED;
    case H5D_VIRTUAL: return PN_HDF5_VIRTUAL;
    case H5D_CONTIGUOUS:
        return H5Pget_external_count(dcpl) > 0 ? PN_HDF5_EXTERNAL : PN_HDF5_CONTIGUOUS;
    default: return PN_HDF5_STORAGE_UNKNOWN;
    }
}

pn_hdf5_storage pn_hdf5_storage_kind(hid_t dset)
{
    pn_hdf5_lock();
    hid_t dcpl = H5Dget_create_plist(dset);
    pn_hdf5_storage kind = dcpl < 0 ? PN_HDF5_STORAGE_UNKNOWN : storage_of(dcpl);
    if (dcpl >= 0) H5Pclose(dcpl);
    H5Eclear2(H5E_DEFAULT);
    pn_hdf5_unlock();
    return kind;
}

const char *pn_hdf5_storage_name(pn_hdf5_storage kind)
{
    static const char *const names[] = {"contiguous", "chunked", "compact", "virtual",
                                        "external", "unknown storage"};
    return names[kind <= PN_HDF5_STORAGE_UNKNOWN ? kind : PN_HDF5_STORAGE_UNKNOWN];
}

char *pn_hdf5_virtual_name(hid_t dcpl, size_t i, bool file)
{
    ssize_t len = file ? H5Pget_virtual_filename(dcpl, i, NULL, 0)
                       : H5Pget_virtual_dsetname(dcpl, i, NULL, 0);
    char *text = len < 0 ? NULL : malloc((size_t)len + 1);
    if (text && (file ? H5Pget_virtual_filename(dcpl, i, text, (size_t)len + 1)
                      : H5Pget_virtual_dsetname(dcpl, i, text, (size_t)len + 1)) < 0) {
        free(text);
        text = NULL;
    }
    return text;
}

/* Appends text to buf (cap bytes) at *len, ending in "..." when it does not fit. */
static void append(char *buf, size_t cap, size_t *len, const char *text)
{
    if (*len + 1 >= cap) return;
    int n = snprintf(buf + *len, cap - *len, "%s", text);
    if (n >= 0 && (size_t)n < cap - *len) {
        *len += (size_t)n;
    } else {
        *len = cap - 1;
        if (cap > 4) memcpy(buf + cap - 4, "...", 4);
    }
}

void pn_hdf5_storage_sources(hid_t dset, char *buf, size_t cap)
{
    size_t len = 0, count = 0;
    buf[0] = '\0';
    pn_hdf5_lock();
    hid_t dcpl = H5Dget_create_plist(dset);
    pn_hdf5_storage kind = dcpl < 0 ? PN_HDF5_STORAGE_UNKNOWN : storage_of(dcpl);
    if (kind == PN_HDF5_VIRTUAL && H5Pget_virtual_count(dcpl, &count) >= 0)
        for (size_t i = 0; i < count && len + 1 < cap; i++) {
            char *file = pn_hdf5_virtual_name(dcpl, i, true), *name = pn_hdf5_virtual_name(dcpl, i, false);
            append(buf, cap, &len, i ? ", " : "");
            append(buf, cap, &len, file ? file : "?");
            append(buf, cap, &len, ":");
            append(buf, cap, &len, name ? name : "?");
            free(file);
            free(name);
        }
    int files = kind == PN_HDF5_EXTERNAL ? H5Pget_external_count(dcpl) : 0;
    for (int i = 0; i < files && len + 1 < cap; i++) {
        char name[PATH_MAX] = "?";
        off_t offset = 0;
        hsize_t size = 0;
        H5Pget_external(dcpl, (unsigned)i, sizeof name, name, &offset, &size);
        name[sizeof name - 1] = '\0';
        append(buf, cap, &len, i ? ", " : "");
        append(buf, cap, &len, name);
    }
    if (dcpl >= 0) H5Pclose(dcpl);
    H5Eclear2(H5E_DEFAULT);
    pn_hdf5_unlock();
}

/* --- rows never written -------------------------------------------------------------- */

/* The first row of dset ([dims], chunked by chunk) in a chunk that was never
 * allocated, or dims[0]. HDF5 1.10 reports a complete dataset as partly allocated
 * when its chunks hold fewer bytes than its extent (compressed, or a last chunk that
 * sticks out), so the chunks are counted first; only a dataset short of chunks is
 * walked, by place, row block by row block: one lookup per chunk before the gap. A
 * lookup HDF5 cannot answer is taken as allocated, never as a reason to refuse. */
static hsize_t first_unallocated_row(hid_t dset, int rank, const hsize_t *dims,
                                     const hsize_t *chunk)
{
    hsize_t across = 1, offset[H5S_MAX_RANK] = {0}; /* chunks per row block */
    for (int k = 1; k < rank; k++) across *= (dims[k] + chunk[k] - 1) / chunk[k];
    hsize_t expected = across * ((dims[0] + chunk[0] - 1) / chunk[0]), allocated = 0;
    hid_t space = H5Dget_space(dset);
    herr_t counted = space < 0 ? -1 : H5Dget_num_chunks(dset, space, &allocated);
    if (space >= 0) H5Sclose(space);
    if (counted >= 0 && allocated >= expected) return dims[0];
    for (offset[0] = 0; offset[0] < dims[0]; offset[0] += chunk[0])
        for (hsize_t c = 0; c < across; c++) {
            hsize_t i = c; /* the chunk's place across the other dimensions */
            for (int k = rank - 1; k >= 1; k--) {
                hsize_t n = (dims[k] + chunk[k] - 1) / chunk[k];
                offset[k] = i % n * chunk[k];
                i /= n;
            }
            unsigned mask;
            haddr_t addr = HADDR_UNDEF;
            hsize_t size = 0;
            if (H5Dget_chunk_info_by_coord(dset, offset, &mask, &addr, &size) < 0) continue;
            if (addr == HADDR_UNDEF) return offset[0];
        }
    return dims[0];
}

/* Refuses rows whose storage HDF5 never allocated (a writer that declared the extent
 * and stopped early): they would read as the fill value. A contiguous dataset is
 * allocated whole or not at all; a chunked one chunk by chunk. A chunk written in
 * part, or storage allocated early and never written, cannot be told apart. */
static int check_written(hid_t dset, hid_t dcpl, const char *fname, const char *name, int rank,
                         const hsize_t *dims)
{
    int rc = 0;
    H5D_space_status_t status = H5D_SPACE_STATUS_ERROR;
    hsize_t chunk[H5S_MAX_RANK], first = rank < 1 ? 0 : dims[0];
    bool empty = rank < 1;
    for (int k = 0; k < rank; k++) empty = empty || dims[k] == 0;
    if (empty) return 0;
    if (H5Dget_space_status(dset, &status) < 0) H5Eclear2(H5E_DEFAULT); /* taken as written */
    if (status == H5D_SPACE_STATUS_NOT_ALLOCATED) first = 0;
    if (status == H5D_SPACE_STATUS_PART_ALLOCATED) {
        PN_HDF5_CHECK(rc, H5Pget_chunk(dcpl, rank, chunk),
                      "%s: dataset '%s%s': cannot read how its storage is allocated", fname,
                      slash(name), name);
        if (rc == 0) first = first_unallocated_row(dset, rank, dims, chunk);
        H5Eclear2(H5E_DEFAULT);
    }
    if (rc == 0 && first < dims[0])
        rc = pn_error_set(PN_ERR_INVALID, "%s: dataset '%s%s': rows from %llu on (of %llu) were "
                          "never written (HDF5 holds no storage for them, so they would read as "
                          "its fill value): was the file written to the end?", fname, slash(name),
                          name, (unsigned long long)first, (unsigned long long)dims[0]);
    return rc;
}

/* --- external raw files -------------------------------------------------------------- */

/* prefix joined with name as HDF5 joins them (H5_combine_path): name alone when the
 * prefix is empty or name is absolute. malloc'd, or NULL. */
static char *joined(const char *prefix, const char *name)
{
    size_t lp = prefix ? strlen(prefix) : 0, ln = strlen(name);
    bool alone = lp == 0 || name[0] == '/', sep = !alone && prefix[lp - 1] != '/';
    char *path = malloc((alone ? 0 : lp) + sep + ln + 1);
    if (path) sprintf(path, "%s%s%s", alone ? "" : prefix, sep ? "/" : "", name);
    return path;
}

/* A dataset access property (HDF5's effective one: its environment variable
 * applied, ${ORIGIN} expanded) as a malloc'd string, "" when unset; NULL when it
 * cannot be read. */
static char *access_prefix(hid_t dset, bool virtual)
{
    hid_t dapl = H5Dget_access_plist(dset);
    ssize_t len = dapl < 0 ? -1
                  : virtual ? H5Pget_virtual_prefix(dapl, NULL, 0)
                            : H5Pget_efile_prefix(dapl, NULL, 0);
    char *prefix = len < 0 ? NULL : calloc((size_t)len + 1, 1);
    if (prefix && len > 0 &&
        (virtual ? H5Pget_virtual_prefix(dapl, prefix, (size_t)len + 1)
                 : H5Pget_efile_prefix(dapl, prefix, (size_t)len + 1)) < 0)
        prefix[0] = '\0';
    if (dapl >= 0) H5Pclose(dapl);
    H5Eclear2(H5E_DEFAULT);
    return prefix;
}

/* The bytes of the dataset's values, as stored (its file type), in *bytes. */
static int stored_bytes(hid_t dset, const char *fname, const char *name, hsize_t *bytes)
{
    int rc = 0;
    hid_t type = H5I_INVALID_HID, space = H5I_INVALID_HID;
    hssize_t n = -1;
    size_t size = 0;
    const char *what = "%s: dataset '%s%s': cannot read its size";
    PN_HDF5_CHECK(rc, type = H5Dget_type(dset), what, fname, slash(name), name);
    PN_HDF5_CHECK(rc, space = H5Dget_space(dset), what, fname, slash(name), name);
    PN_HDF5_CHECK(rc, n = H5Sget_simple_extent_npoints(space), what, fname, slash(name), name);
    if (rc == 0 && !(size = H5Tget_size(type))) rc = pn_hdf5_fail("H5Tget_size", what, fname,
                                                                   slash(name), name);
    if (rc == 0 && __builtin_mul_overflow((hsize_t)n, (hsize_t)size, bytes))
        rc = pn_error_set(PN_ERR_INVALID, "%s: dataset '%s%s': declares more bytes than any "
                          "file holds", fname, slash(name), name);
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    return rc;
}

/* Every raw file of an external dataset holds its share of the values: it exists,
 * is a regular file (a pipe or a device would block or never end) and reaches past
 * the last byte the dataset takes from it. HDF5 fails on a missing file, but reads
 * the part of a file past its end as zeros. */
static int check_external(hid_t dset, hid_t dcpl, const char *fname, const char *name)
{
    hsize_t left = 0;
    PN_TRY(stored_bytes(dset, fname, name, &left));
    int files = H5Pget_external_count(dcpl), rc = 0;
    char *prefix = access_prefix(dset, false);
    if (!prefix) return pn_hdf5_fail("H5Pget_efile_prefix", "%s: dataset '%s%s': cannot read "
                                     "its external files", fname, slash(name), name);
    for (int i = 0; rc == 0 && i < files && left > 0; i++) {
        char file[PATH_MAX] = "";
        off_t offset = 0;
        hsize_t size = 0;
        PN_HDF5_CHECK(rc, H5Pget_external(dcpl, (unsigned)i, sizeof file, file, &offset, &size),
                      "%s: dataset '%s%s': cannot read its external files", fname, slash(name),
                      name);
        file[sizeof file - 1] = '\0';
        hsize_t take = size == H5F_UNLIMITED || size > left ? left : size;
        char *path = rc == 0 ? joined(prefix, file) : NULL;
        struct stat st;
        if (rc == 0 && !path) rc = pn_error_set(PN_ERR_NOMEM, "out of memory");
        else if (rc == 0 && stat(path, &st) != 0)
            rc = pn_error_set(PN_ERR_INVALID, "%s: dataset '%s%s' is stored in external file "
                              "'%s', which cannot be opened (%s): its bytes %lld to %lld are "
                              "missing", fname, slash(name), name, path, strerror(errno),
                              (long long)offset, (long long)(offset + (off_t)take));
        else if (rc == 0 && !S_ISREG(st.st_mode))
            rc = pn_error_set(PN_ERR_INVALID, "%s: dataset '%s%s' is stored in external file "
                              "'%s', which is not a regular file", fname, slash(name), name,
                              path);
        else if (rc == 0 && (uint64_t)st.st_size < (uint64_t)offset + take)
            rc = pn_error_set(PN_ERR_INVALID, "%s: dataset '%s%s' is stored in external file "
                              "'%s', which is cut short: it holds %lld bytes, the dataset takes "
                              "bytes %lld to %lld of it (HDF5 would read the missing ones as "
                              "zeros)", fname, slash(name), name, path, (long long)st.st_size,
                              (long long)offset, (long long)(offset + (off_t)take));
        free(path);
        left -= take;
    }
    if (rc == 0 && left > 0)
        rc = pn_error_set(PN_ERR_INVALID, "%s: dataset '%s%s': its external files hold room for "
                          "fewer bytes than its values take (%llu short)", fname, slash(name),
                          name, (unsigned long long)left);
    free(prefix);
    return rc;
}

/* --- virtual datasets ---------------------------------------------------------------- */

/* Opens path read-only when it is an HDF5 file; H5I_INVALID_HID otherwise. */
static hid_t try_open(const char *path)
{
    struct stat st;
    hid_t file = H5I_INVALID_HID;
    if (path && stat(path, &st) == 0 && S_ISREG(st.st_mode) && H5Fis_hdf5(path) > 0)
        file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    H5Eclear2(H5E_DEFAULT);
    return file;
}

/* Opens the file HDF5 takes for source file name of the VDS in vds_path (its VDS
 * prefix prefix, possibly several joined by ':'), in HDF5's order; *found is the
 * path opened (malloc'd). H5I_INVALID_HID when none opens. */
static hid_t open_source_file(const char *vds_path, const char *prefix, const char *name,
                              char **found)
{
    const char *base = name;
    hid_t file = H5I_INVALID_HID;
    *found = NULL;
    if (name[0] == '/') { /* absolute: as it is, then its last component */
        if ((file = try_open(name)) >= 0) return *found = strdup(name), file;
        base = strrchr(name, '/') + 1;
    }
    char *list = strdup(prefix), *save = NULL;
    for (char *p = list ? strtok_r(list, ":", &save) : NULL; p && file < 0;
         p = strtok_r(NULL, ":", &save))
        if ((file = try_open(*found = joined(p, base))) < 0) free(*found), *found = NULL;
    free(list);
    /* the directory of the VDS file, as HDF5 recorded it at open (the cwd joined) */
    const char *cut = strrchr(vds_path, '/');
    char *cwd = vds_path[0] == '/' ? strdup("") : getcwd(NULL, 0);
    size_t n = cut ? (size_t)(cut - vds_path) : 0, lc = cwd ? strlen(cwd) : 0;
    char *dir = cwd ? malloc(lc + n + 3) : NULL;
    if (dir) sprintf(dir, "%s%s%.*s%s", cwd, lc ? "/" : "", (int)n, vds_path, n || !lc ? "/" : "");
    if (file < 0 && dir && (file = try_open(*found = joined(dir, base))) < 0)
        free(*found), *found = NULL;
    free(dir);
    free(cwd);
    if (file < 0 && (file = try_open(base)) >= 0) *found = strdup(base);
    return file;
}

/* Whether a mapping's selection has no end (an unlimited VDS): its regions are not
 * fixed, so they cannot be checked. */
static bool unlimited(hid_t space)
{
    hsize_t start[H5S_MAX_RANK], stride[H5S_MAX_RANK], count[H5S_MAX_RANK], block[H5S_MAX_RANK];
    int rank = H5Sget_simple_extent_ndims(space);
    bool open = H5Sget_select_type(space) == H5S_SEL_HYPERSLABS &&
                H5Sis_regular_hyperslab(space) > 0 &&
                H5Sget_regular_hyperslab(space, start, stride, count, block) >= 0;
    for (int k = 0; open && k < rank; k++)
        if (count[k] == H5S_UNLIMITED || block[k] == H5S_UNLIMITED) return true;
    H5Eclear2(H5E_DEFAULT);
    return false;
}

/* Adds the selection of vspace to covered (the same extent): block by block (a
 * hyperslab's), point by point, or all of it (*all). */
static int cover(hid_t covered, hid_t vspace, bool *all)
{
    int rank = H5Sget_simple_extent_ndims(vspace), rc = 0;
    hsize_t ones[H5S_MAX_RANK], block[H5S_MAX_RANK];
    for (int k = 0; k < H5S_MAX_RANK; k++) ones[k] = 1;
    H5S_sel_type type = H5Sget_select_type(vspace);
    if (type == H5S_SEL_ALL) *all = true;
    if (type != H5S_SEL_HYPERSLABS && type != H5S_SEL_POINTS) return rc;
    bool blocks = type == H5S_SEL_HYPERSLABS;
    hssize_t n = blocks ? H5Sget_select_hyper_nblocks(vspace) : H5Sget_select_elem_npoints(vspace);
    size_t per = (size_t)rank * (blocks ? 2 : 1);
    hsize_t *list = n < 0 || rank < 1 ? NULL : malloc(((size_t)n * per + 1) * sizeof *list);
    if (!list) return n < 0 || rank < 1 ? -1 : pn_error_set(PN_ERR_NOMEM, "out of memory");
    herr_t got = blocks ? H5Sget_select_hyper_blocklist(vspace, 0, (hsize_t)n, list)
                        : H5Sget_select_elem_pointlist(vspace, 0, (hsize_t)n, list);
    for (hssize_t b = 0; got >= 0 && rc == 0 && b < n; b++) {
        const hsize_t *start = list + (size_t)b * per;
        for (int k = 0; k < rank; k++) block[k] = blocks ? start[rank + k] - start[k] + 1 : 1;
        if (H5Sselect_hyperslab(covered, H5S_SELECT_OR, start, NULL, ones, block) < 0) rc = -1;
    }
    free(list);
    return got < 0 ? -1 : rc;
}

/* "rows 4 to 7" of a mapping's virtual selection. */
static void rows_of(hid_t vspace, char *buf, size_t cap)
{
    hsize_t start[H5S_MAX_RANK], end[H5S_MAX_RANK];
    if (H5Sget_select_bounds(vspace, start, end) < 0)
        snprintf(buf, cap, "some rows");
    else if (start[0] == end[0])
        snprintf(buf, cap, "row %llu", (unsigned long long)start[0]);
    else
        snprintf(buf, cap, "rows %llu to %llu", (unsigned long long)start[0],
                 (unsigned long long)end[0]);
    H5Eclear2(H5E_DEFAULT);
}

/* One mapping of a VDS: its source file found, its dataset there, large enough for
 * the region the mapping reads, and itself whole (checked as any dataset). */
static int check_source(hid_t dset, const char *fname, const char *name, const char *prefix,
                        const char *src_file, const char *src_name, hid_t vspace,
                        hid_t srcspace, const char *rows, int depth)
{
    if (strchr(src_file, '%') || strchr(src_name, '%'))
        return pn_error_set(PN_ERR_UNSUPPORTED, "%s: dataset '%s%s': %s come from '%s' dataset "
                            "'%s', a name pattern (printf-style), which pipenet cannot check",
                            fname, slash(name), name, rows, src_file, src_name);
    bool same = !strcmp(src_file, ".");
    char *found = NULL;
    hid_t file = same ? H5Iget_file_id(dset) : open_source_file(fname, prefix, src_file, &found);
    H5Eclear2(H5E_DEFAULT);
    const char *path = same ? fname : found;
    if (file < 0) {
        free(found);
        return pn_error_set(PN_ERR_INVALID, "%s: dataset '%s%s' is virtual: its %s come from "
                            "file '%s' (dataset '%s'), which cannot be found or opened (HDF5 "
                            "would read them as the fill value)",
                            fname, slash(name), name, rows, src_file, src_name);
    }
    int rc = 0;
    hid_t src = H5I_INVALID_HID, space = H5I_INVALID_HID;
    hsize_t dims[H5S_MAX_RANK];
    if (H5Lexists(file, src_name, H5P_DEFAULT) <= 0 ||
        (src = H5Dopen2(file, src_name, H5P_DEFAULT)) < 0)
        rc = pn_error_set(PN_ERR_INVALID, "%s: dataset '%s%s' is virtual: its %s come from "
                          "'%s', which holds no dataset '%s' (HDF5 would read them as the fill "
                          "value)", fname, slash(name), name, rows, path, src_name);
    H5Eclear2(H5E_DEFAULT);
    int rank = -1;
    if (rc == 0 && ((space = H5Dget_space(src)) < 0 ||
                    (rank = H5Sget_simple_extent_dims(space, dims, NULL)) < 0))
        rc = pn_hdf5_fail("H5Sget_simple_extent_dims", "%s: dataset '%s%s': cannot read the "
                          "shape of its source '%s' in '%s'", fname, slash(name), name, src_name,
                          path);
    hssize_t held = rc == 0 ? H5Sget_simple_extent_npoints(space) : 0;
    if (rc == 0 && H5Sget_select_type(srcspace) == H5S_SEL_ALL) {
        /* all of the source, whatever its extent is when it is read */
        hssize_t taken = H5Sget_select_npoints(vspace);
        if (held != taken)
            rc = pn_error_set(PN_ERR_INVALID, "%s: dataset '%s%s' is virtual: its %s come from "
                              "dataset '%s' of '%s', which holds %llu rows (%lld values) where "
                              "the mapping takes %lld values", fname, slash(name), name, rows,
                              src_name, path, (unsigned long long)(rank > 0 ? dims[0] : 1),
                              (long long)held, (long long)taken);
    } else if (rc == 0) {
        hsize_t start[H5S_MAX_RANK], end[H5S_MAX_RANK];
        bool fits = H5Sget_simple_extent_ndims(srcspace) == rank &&
                    H5Sget_select_bounds(srcspace, start, end) >= 0;
        for (int k = 0; fits && k < rank; k++) fits = end[k] < dims[k];
        if (!fits)
            rc = pn_error_set(PN_ERR_INVALID, "%s: dataset '%s%s' is virtual: its %s come from "
                              "dataset '%s' of '%s', which is short: it holds %llu rows, the "
                              "mapping reads a region past them (HDF5 would read it as the "
                              "fill value)", fname, slash(name), name, rows, src_name, path,
                              (unsigned long long)(rank > 0 ? dims[0] : 1));
    }
    H5Eclear2(H5E_DEFAULT);
    if (rc == 0 && (rc = check_at(src, path, src_name, depth + 1)) < 0)
        pn_error_wrap(rc, "%s: dataset '%s%s' is virtual: its %s come from '%s'", fname,
                      slash(name), name, rows, path);
    if (space >= 0) H5Sclose(space);
    if (src >= 0) H5Dclose(src);
    H5Fclose(file);
    H5Eclear2(H5E_DEFAULT);
    free(found);
    return rc;
}

/* Every value of a VDS comes from a source that is there: each mapping's source
 * checked, and the mappings together cover the whole extent (a value mapped to no
 * source reads as the fill value too). Unlimited mappings and name patterns are
 * refused: their regions depend on the sources found at each read. */
static int check_virtual(hid_t dset, hid_t dcpl, const char *fname, const char *name,
                         int depth)
{
    if (depth >= MAX_DEPTH) /* a VDS over a VDS over ..., or over itself */
        return pn_error_set(PN_ERR_UNSUPPORTED, "%s: dataset '%s%s' is virtual, with sources "
                            "virtual in turn more than %d deep", fname, slash(name), name,
                            MAX_DEPTH);
    size_t count = 0;
    int rc = 0;
    hid_t space = H5I_INVALID_HID, covered = H5I_INVALID_HID;
    const char *what = "%s: dataset '%s%s': cannot read its virtual mappings";
    PN_HDF5_CHECK(rc, H5Pget_virtual_count(dcpl, &count), what, fname, slash(name), name);
    PN_HDF5_CHECK(rc, space = H5Dget_space(dset), what, fname, slash(name), name);
    PN_HDF5_CHECK(rc, covered = H5Scopy(space), what, fname, slash(name), name);
    PN_HDF5_CHECK(rc, H5Sselect_none(covered), what, fname, slash(name), name);
    char *prefix = rc == 0 ? access_prefix(dset, true) : NULL;
    if (rc == 0 && !prefix) rc = pn_hdf5_fail("H5Pget_virtual_prefix", what, fname, slash(name),
                                              name);
    bool all = false;
    for (size_t i = 0; rc == 0 && i < count; i++) {
        hid_t vspace = H5Pget_virtual_vspace(dcpl, i), srcspace = H5Pget_virtual_srcspace(dcpl, i);
        char *file = pn_hdf5_virtual_name(dcpl, i, true), *src = pn_hdf5_virtual_name(dcpl, i, false), rows[64];
        if (vspace < 0 || srcspace < 0 || !file || !src)
            rc = pn_hdf5_fail("H5Pget_virtual_vspace", what, fname, slash(name), name);
        else if (unlimited(vspace) || unlimited(srcspace))
            rc = pn_error_set(PN_ERR_UNSUPPORTED, "%s: dataset '%s%s' is virtual with an "
                              "unlimited mapping (from '%s' dataset '%s'), which pipenet cannot "
                              "check", fname, slash(name), name, file, src);
        else if (cover(covered, vspace, &all) < 0)
            rc = pn_hdf5_fail("H5Sselect_hyperslab", what, fname, slash(name), name);
        if (rc == 0) rows_of(vspace, rows, sizeof rows);
        if (rc == 0)
            rc = check_source(dset, fname, name, prefix, file, src, vspace, srcspace, rows,
                              depth);
        free(file);
        free(src);
        if (srcspace >= 0) H5Sclose(srcspace);
        if (vspace >= 0) H5Sclose(vspace);
    }
    hssize_t total = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
    hssize_t mapped = all ? total : covered < 0 ? -1 : H5Sget_select_npoints(covered);
    if (rc == 0 && mapped < total)
        rc = pn_error_set(PN_ERR_INVALID, "%s: dataset '%s%s' is virtual, and %lld of its %lld "
                          "values are mapped to no source (HDF5 would read them as the fill "
                          "value)", fname, slash(name), name, (long long)(total - mapped),
                          (long long)total);
    free(prefix);
    if (covered >= 0) H5Sclose(covered);
    if (space >= 0) H5Sclose(space);
    H5Eclear2(H5E_DEFAULT);
    return rc;
}

/* --- the check ----------------------------------------------------------------------- */

static int check_at(hid_t dset, const char *fname, const char *name, int depth)
{
    int rc = 0, rank = -1;
    hid_t dcpl = H5I_INVALID_HID, space = H5I_INVALID_HID;
    hsize_t dims[H5S_MAX_RANK];
    const char *what = "%s: dataset '%s%s': cannot read how it is stored";
    PN_HDF5_CHECK(rc, dcpl = H5Dget_create_plist(dset), what, fname, slash(name), name);
    PN_HDF5_CHECK(rc, space = H5Dget_space(dset), what, fname, slash(name), name);
    PN_HDF5_CHECK(rc, rank = H5Sget_simple_extent_dims(space, dims, NULL), what, fname,
                  slash(name), name);
    pn_hdf5_storage kind = rc == 0 ? storage_of(dcpl) : PN_HDF5_STORAGE_UNKNOWN;
    if (rc == 0 && kind == PN_HDF5_VIRTUAL) rc = check_virtual(dset, dcpl, fname, name, depth);
    else if (rc == 0 && kind == PN_HDF5_EXTERNAL) rc = check_external(dset, dcpl, fname, name);
    else if (rc == 0) rc = check_written(dset, dcpl, fname, name, rank, dims);
    if (space >= 0) H5Sclose(space);
    if (dcpl >= 0) H5Pclose(dcpl);
    return rc;
}

int pn_hdf5_check_storage(hid_t dset, const char *fname, const char *name)
{
    pn_hdf5_lock();
    int rc = check_at(dset, fname, name, 0);
    pn_hdf5_unlock();
    return rc;
}

int pn_hdf5_check_self_contained(hid_t dset, const char *fname, const char *name)
{
    pn_hdf5_storage kind = pn_hdf5_storage_kind(dset);
    if (kind != PN_HDF5_VIRTUAL && kind != PN_HDF5_EXTERNAL) return 0;
    char sources[256];
    pn_hdf5_storage_sources(dset, sources, sizeof sources);
    return pn_error_set(PN_ERR_INVALID, "%s: dataset '%s%s' is %s (its values are in %s), but "
                        "this file must hold its own values: pipenet never writes such a "
                        "dataset, and no checksum covers what is outside the file",
                        fname, slash(name), name, pn_hdf5_storage_name(kind), sources);
}
