/* Root attributes (hdf5_util.h): strings (fixed- or variable-length), signed and
 * unsigned integers, written replacing any attribute of the same name and read with
 * checks of class and count, and a listing that shows each value in one line. */
#include "io/hdf5_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

int pn_hdf5_attr_exists(hid_t file, const char *fname, const char *name)
{
    int rc = 0;
    htri_t exists = 0;
    pn_hdf5_lock();
    PN_HDF5_CHECK(rc, exists = H5Aexists(file, name), "%s: cannot look up attribute '%s'", fname,
                  name);
    pn_hdf5_unlock();
    return rc < 0 ? rc : exists > 0;
}

/* Creates attribute name of file type t on object (a path from the root; "." is the
 * root group), scalar when n is 0, else of n values; replaces one of that name;
 * writes value (in memory type mem_t). */
static int write_attr_at(hid_t file, const char *fname, const char *object, const char *name,
                         hid_t t, hid_t mem_t, hsize_t n, const void *value)
{
    int rc = 0;
    htri_t exists = 0;
    const char *what = "%s: cannot write attribute '%s' of '%s'";
    pn_hdf5_lock();
    hid_t space = H5I_INVALID_HID, attr = H5I_INVALID_HID;
    PN_HDF5_CHECK(rc, exists = H5Aexists_by_name(file, object, name, H5P_DEFAULT), what, fname,
                  name, object);
    if (exists > 0)
        PN_HDF5_CHECK(rc, H5Adelete_by_name(file, object, name, H5P_DEFAULT), what, fname, name,
                      object);
    PN_HDF5_CHECK(rc, space = n ? H5Screate_simple(1, &n, NULL) : H5Screate(H5S_SCALAR), what,
                  fname, name, object);
    PN_HDF5_CHECK(rc, attr = H5Acreate_by_name(file, object, name, t, space, H5P_DEFAULT,
                                               H5P_DEFAULT, H5P_DEFAULT),
                  what, fname, name, object);
    PN_HDF5_CHECK(rc, H5Awrite(attr, mem_t, value), what, fname, name, object);
    if (attr >= 0 && H5Aclose(attr) < 0 && rc == 0) /* closed even after a failed write */
        rc = pn_hdf5_fail("H5Aclose(attr)", what, fname, name, object);
    if (space >= 0) H5Sclose(space);
    pn_hdf5_unlock();
    return rc;
}

/* The same, scalar, on the root group. */
static int write_attr(hid_t file, const char *fname, const char *name, hid_t t, hid_t mem_t,
                      const void *value)
{
    return write_attr_at(file, fname, ".", name, t, mem_t, 0, value);
}

int pn_hdf5_write_attr_string(hid_t file, const char *fname, const char *name,
                              const char *value, bool fixed_length)
{
    int rc = 0;
    pn_hdf5_lock();
    hid_t t = H5I_INVALID_HID;
    const char *what = "%s: cannot make a string type for attribute '%s'";
    PN_HDF5_CHECK(rc, t = H5Tcopy(H5T_C_S1), what, fname, name);
    PN_HDF5_CHECK(rc, H5Tset_size(t, fixed_length ? strlen(value) + 1 : H5T_VARIABLE), what,
                  fname, name);
    if (fixed_length) PN_HDF5_CHECK(rc, H5Tset_strpad(t, H5T_STR_NULLTERM), what, fname, name);
    PN_HDF5_CHECK(rc, H5Tset_cset(t, H5T_CSET_UTF8), what, fname, name);
    if (rc == 0) rc = write_attr(file, fname, name, t, t, fixed_length ? (const void *)value
                                                                       : (const void *)&value);
    if (t >= 0) H5Tclose(t);
    pn_hdf5_unlock();
    return rc;
}

int pn_hdf5_write_attr_int(hid_t file, const char *fname, const char *name, long value)
{
    return write_attr(file, fname, name, H5T_STD_I64LE, H5T_NATIVE_LONG, &value);
}

int pn_hdf5_write_attr_uint(hid_t file, const char *fname, const char *name, uint64_t value,
                            int bits)
{
    return write_attr(file, fname, name, bits == 32 ? H5T_STD_U32LE : H5T_STD_U64LE,
                      H5T_NATIVE_UINT64, &value);
}

int pn_hdf5_write_attr_double(hid_t file, const char *fname, const char *name, double value)
{
    return write_attr(file, fname, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
}

int pn_hdf5_write_object_attr_int64(hid_t file, const char *fname, const char *object,
                                    const char *name, const int64_t *values, int n)
{
    return write_attr_at(file, fname, object, name, H5T_STD_I64LE, H5T_NATIVE_INT64,
                         (hsize_t)(n < 0 ? 0 : n), values);
}

/* Opens root attribute name, which must exist and hold one value of class want
 * (what describes it in messages); *type is its file type. Call under the lock. */
static int open_attr(hid_t file, const char *fname, const char *name, H5T_class_t want,
                     const char *what, hid_t *attr, hid_t *type)
{
    *attr = *type = H5I_INVALID_HID;
    int rc = pn_hdf5_attr_exists(file, fname, name);
    if (rc == 0) return pn_error_set(PN_ERR_INVALID, "%s: no attribute '%s'", fname, name);
    if (rc < 0) return rc;
    rc = 0;
    hid_t space = H5I_INVALID_HID;
    hssize_t n = -1;
    const char *unreadable = "%s: cannot read attribute '%s'";
    PN_HDF5_CHECK(rc, *attr = H5Aopen(file, name, H5P_DEFAULT), unreadable, fname, name);
    PN_HDF5_CHECK(rc, *type = H5Aget_type(*attr), unreadable, fname, name);
    PN_HDF5_CHECK(rc, space = H5Aget_space(*attr), unreadable, fname, name);
    PN_HDF5_CHECK(rc, n = H5Sget_simple_extent_npoints(space), unreadable, fname, name);
    if (space >= 0) H5Sclose(space);
    if (rc < 0) return rc;
    if (H5Tget_class(*type) != want)
        return pn_error_set(PN_ERR_INVALID, "%s: attribute '%s' is not %s", fname, name, what);
    if (n != 1)
        return pn_error_set(PN_ERR_INVALID, "%s: attribute '%s' holds %lld values, expected one",
                            fname, name, (long long)n);
    return 0;
}

static void close_attr(hid_t attr, hid_t type)
{
    if (type >= 0) H5Tclose(type);
    if (attr >= 0) H5Aclose(attr);
}

/* Reads string attribute a of file type t, fixed- or variable-length, into *out
 * (malloc'd). Call under the lock. */
static int read_string(hid_t a, hid_t t, const char *fname, const char *name, char **out)
{
    *out = NULL;
    int rc = 0;
    htri_t vlen = -1;
    size_t size = 0;
    hid_t mem = H5I_INVALID_HID;
    const char *unreadable = "%s: cannot read attribute '%s'";
    PN_HDF5_CHECK(rc, vlen = H5Tis_variable_str(t), unreadable, fname, name);
    PN_HDF5_CHECK(rc, mem = H5Tcopy(t), unreadable, fname, name);
    if (rc == 0 && !vlen && (size = H5Tget_size(t)) == 0)
        rc = pn_error_set(PN_ERR_INVALID, "%s: attribute '%s': a string of no size", fname, name);
    if (rc == 0 && vlen) {
        char *text = NULL;
        PN_HDF5_CHECK(rc, H5Aread(a, mem, &text), unreadable, fname, name);
        if (rc == 0 && !(*out = strdup(text ? text : "")))
            rc = pn_error_set(PN_ERR_NOMEM, "%s: attribute '%s': out of memory", fname, name);
        if (text) H5free_memory(text);
    } else if (rc == 0) {
        if (!(*out = calloc(size + 1, 1)))
            rc = pn_error_set(PN_ERR_NOMEM, "%s: attribute '%s': out of memory", fname, name);
        PN_HDF5_CHECK(rc, H5Aread(a, mem, *out), unreadable, fname, name);
    }
    if (mem >= 0) H5Tclose(mem);
    if (rc < 0) {
        free(*out);
        *out = NULL;
    }
    return rc;
}

int pn_hdf5_read_attr_text(hid_t file, const char *fname, const char *name, char **out)
{
    hid_t a, t;
    pn_hdf5_lock();
    int rc = open_attr(file, fname, name, H5T_STRING, "a string", &a, &t);
    if (rc == 0) rc = read_string(a, t, fname, name, out);
    close_attr(a, t);
    pn_hdf5_unlock();
    return rc;
}

int pn_hdf5_read_attr_string(hid_t file, const char *fname, const char *name, char *buf,
                             size_t cap)
{
    char *text;
    if (cap) buf[0] = '\0';
    PN_TRY(pn_hdf5_read_attr_text(file, fname, name, &text));
    snprintf(buf, cap, "%s", text);
    free(text);
    return 0;
}

int pn_hdf5_read_attr_int(hid_t file, const char *fname, const char *name, long *value)
{
    hid_t a, t;
    pn_hdf5_lock();
    int rc = open_attr(file, fname, name, H5T_INTEGER, "an integer", &a, &t);
    PN_HDF5_CHECK(rc, H5Aread(a, H5T_NATIVE_LONG, value), "%s: cannot read attribute '%s'",
                  fname, name);
    close_attr(a, t);
    pn_hdf5_unlock();
    return rc;
}

int pn_hdf5_read_attr_uint(hid_t file, const char *fname, const char *name, uint64_t *value)
{
    hid_t a, t;
    int64_t as_signed = 0;
    pn_hdf5_lock();
    int rc = open_attr(file, fname, name, H5T_INTEGER, "an integer", &a, &t);
    bool is_signed = rc == 0 && H5Tget_sign(t) == H5T_SGN_2;
    const char *unreadable = "%s: cannot read attribute '%s'";
    if (is_signed)
        PN_HDF5_CHECK(rc, H5Aread(a, H5T_NATIVE_INT64, &as_signed), unreadable, fname, name);
    else
        PN_HDF5_CHECK(rc, H5Aread(a, H5T_NATIVE_UINT64, value), unreadable, fname, name);
    if (rc == 0 && is_signed && as_signed < 0)
        rc = pn_error_set(PN_ERR_INVALID, "%s: attribute '%s' is negative (%lld)", fname, name,
                          (long long)as_signed);
    else if (rc == 0 && is_signed)
        *value = (uint64_t)as_signed;
    close_attr(a, t);
    pn_hdf5_unlock();
    return rc;
}

/* --- the listing ----------------------------------------------------------------------- */

/* "[60000, 784]" from a dataspace. */
static void describe_space(hid_t space, char *buf, size_t cap)
{
    hsize_t dims[H5S_MAX_RANK];
    int rank = H5Sget_simple_extent_dims(space, dims, NULL);
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int k = 0; k < rank && len < cap; k++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%llu", k ? ", " : "",
                                (unsigned long long)dims[k]);
    if (len < cap) snprintf(buf + len, cap - len, "]");
}

/* The value of attribute attr of type t in one line: a number, up to 8 integers
 * "(a, b)", a string's first line (quoted, cut at 100 characters), or the shape of
 * another array. */
static void describe_value(hid_t attr, hid_t t, char *buf, size_t cap)
{
    hid_t space = H5Aget_space(attr);
    hssize_t n = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
    H5T_class_t cls = H5Tget_class(t);
    snprintf(buf, cap, "(unreadable)");
    if (n > 1 && n <= 8 && cls == H5T_INTEGER) { /* a short list, as a CSR group's shape */
        long long v[8];
        if (H5Aread(attr, H5T_NATIVE_LLONG, v) >= 0) {
            size_t len = (size_t)snprintf(buf, cap, "(");
            for (hssize_t k = 0; k < n && len < cap; k++)
                len += (size_t)snprintf(buf + len, cap - len, "%s%lld", k ? ", " : "", v[k]);
            if (len < cap) snprintf(buf + len, cap - len, ")");
        }
    } else if (n != 1) {
        char shape[64] = "?";
        if (space >= 0) describe_space(space, shape, sizeof shape);
        snprintf(buf, cap, "%s values", shape);
    } else if (cls == H5T_INTEGER && H5Tget_sign(t) == H5T_SGN_NONE) {
        unsigned long long v;
        if (H5Aread(attr, H5T_NATIVE_ULLONG, &v) >= 0) snprintf(buf, cap, "%llu", v);
    } else if (cls == H5T_INTEGER) {
        long long v;
        if (H5Aread(attr, H5T_NATIVE_LLONG, &v) >= 0) snprintf(buf, cap, "%lld", v);
    } else if (cls == H5T_FLOAT) {
        double v;
        if (H5Aread(attr, H5T_NATIVE_DOUBLE, &v) >= 0) snprintf(buf, cap, "%.9g", v);
    } else if (cls == H5T_STRING) {
        char *s;
        if (read_string(attr, t, "", "", &s) == 0) {
            int line = (int)strcspn(s, "\n");
            snprintf(buf, cap, "\"%.*s\"%s", line > 100 ? 100 : line, s,
                     line > 100 || s[line] ? " ..." : "");
            free(s);
        }
    } else {
        snprintf(buf, cap, "(not shown)");
    }
    H5Eclear2(H5E_DEFAULT);
    if (space >= 0) H5Sclose(space);
}

typedef struct attr_walk {
    pn_hdf5_attr_fn fn;
    void *ctx;
    int rc;
} attr_walk;

static herr_t on_attr(hid_t loc, const char *name, const H5A_info_t *info, void *data)
{
    attr_walk *w = data;
    char type[32] = "?", value[160] = "(unreadable)";
    hid_t attr = H5Aopen(loc, name, H5P_DEFAULT);
    hid_t t = attr < 0 ? H5I_INVALID_HID : H5Aget_type(attr);
    if (t >= 0) {
        pn_hdf5_type_name(t, type, sizeof type);
        describe_value(attr, t, value, sizeof value);
    }
    close_attr(attr, t);
    H5Eclear2(H5E_DEFAULT);
    w->rc = w->fn(w->ctx, name, type, value);
    return w->rc != 0;
}

int pn_hdf5_list_attrs(hid_t file, const char *fname, pn_hdf5_attr_fn fn, void *ctx)
{
    return pn_hdf5_list_object_attrs(file, fname, "/", fn, ctx);
}

int pn_hdf5_list_object_attrs(hid_t file, const char *fname, const char *object,
                              pn_hdf5_attr_fn fn, void *ctx)
{
    attr_walk w = {fn, ctx, 0};
    hsize_t idx = 0;
    int rc = 0;
    pn_hdf5_lock();
    hid_t obj = H5Oopen(file, object, H5P_DEFAULT);
    if (obj < 0) {
        H5Eclear2(H5E_DEFAULT);
        rc = pn_error_set(PN_ERR_IO, "%s: cannot open '%s'", fname, object);
    } else {
        PN_HDF5_CHECK(rc, H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &idx, on_attr, &w),
                      "%s: cannot list the attributes of '%s'", fname, object);
        H5Oclose(obj);
    }
    if (rc == 0 && w.rc != 0) rc = w.rc;
    pn_hdf5_unlock();
    return rc;
}
