/* The fuzz targets' shared pieces (fuzz_util.h). The HDF5 calls here write the
 * files the targets hand to pipenet; they live outside src/io on purpose, since
 * they must be able to write what pipenet's helpers never would. */
#include "fuzz_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"

unsigned fz_byte(fz_in *in)
{
    if (!in->n) return 0;
    in->n--;
    return *in->p++;
}

unsigned fz_below(fz_in *in, unsigned n) { return n ? fz_byte(in) % n : 0; }

uint64_t fz_uint(fz_in *in, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)fz_byte(in) << (8 * i);
    return v;
}

long fz_pick(fz_in *in, const long *table, int n) { return table[fz_below(in, (unsigned)n)]; }

size_t fz_text(fz_in *in, char *buf, size_t cap)
{
    size_t len = fz_byte(in);
    if (len > cap - 1) len = cap - 1;
    for (size_t i = 0; i < len; i++) {
        if (!in->n) {
            len = i;
            break;
        }
        buf[i] = (char)fz_byte(in);
        if (!buf[i]) buf[i] = 'x';
    }
    buf[len] = '\0';
    return len;
}

const char *fz_scratch(const char *tag, char *buf, size_t cap)
{
    struct stat st;
    const char *dir = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : NULL;
    if (!dir) dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(buf, cap, "%s/pipenet-fuzz-%ld-%s", dir, (long)getpid(), tag);
    return buf;
}

void fz_hdf5_quiet(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

/* --- root attributes --------------------------------------------------------------- */

static void attr_name(fz_in *in, char *name, size_t cap)
{
    static const char *const pool[] = {"classes", "format", "version", "step", "seed",
                                       "config", "slots", "source", "epoch", "batch_index",
                                       "config_crc32", "a b", "\xc3\xa9t\xc3\xa9", ""};
    unsigned k = fz_below(in, sizeof pool / sizeof *pool + 1);
    if (k < sizeof pool / sizeof *pool)
        snprintf(name, cap, "%s", pool[k]);
    else
        fz_text(in, name, cap);
}

/* A string type: fixed (size bytes, NUL-terminated or padded) or variable. */
static hid_t string_type(bool variable, size_t size, H5T_str_t pad, H5T_cset_t cset)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, variable ? H5T_VARIABLE : size ? size : 1);
    H5Tset_strpad(t, pad);
    H5Tset_cset(t, cset);
    return t;
}

void fz_write_root_attr(fz_in *in, hid_t file)
{
    char name[64], text[300];
    attr_name(in, name, sizeof name);
    unsigned kind = fz_below(in, 20);
    hsize_t dims[2] = {1 + fz_below(in, 3), 2};
    hid_t space = H5Screate(H5S_SCALAR), type = H5I_INVALID_HID, mem = H5I_INVALID_HID;
    uint8_t value[64] = {0};
    for (size_t i = 0; i < sizeof value; i++) value[i] = (uint8_t)fz_byte(in);
    const void *data = value;
    const char *strings[3];
    switch (kind) {
    case 0: type = H5Tcopy(H5T_STD_I64LE), mem = H5Tcopy(H5T_NATIVE_INT64); break;
    case 1: type = H5Tcopy(H5T_STD_U64BE), mem = H5Tcopy(H5T_NATIVE_UINT64); break;
    case 2: type = H5Tcopy(H5T_STD_U32LE), mem = H5Tcopy(H5T_NATIVE_UINT32); break;
    case 3: type = H5Tcopy(H5T_STD_I8LE), mem = H5Tcopy(H5T_NATIVE_INT8); break;
    case 4: type = H5Tcopy(H5T_IEEE_F64LE), mem = H5Tcopy(H5T_NATIVE_DOUBLE); break;
    case 5: type = H5Tcopy(H5T_IEEE_F32BE), mem = H5Tcopy(H5T_NATIVE_FLOAT); break;
    case 6: case 7: case 8: { /* fixed strings: terminated, padded, one byte */
        size_t len = fz_text(in, text, sizeof text);
        H5T_str_t pad = kind == 6 ? H5T_STR_NULLTERM : kind == 7 ? H5T_STR_NULLPAD
                                                                 : H5T_STR_SPACEPAD;
        type = string_type(false, kind == 8 ? 1 : len + (kind == 6), pad, H5T_CSET_UTF8);
        mem = H5Tcopy(type);
        data = text;
        break;
    }
    case 9: case 10: /* variable strings, one or an array of them */
        fz_text(in, text, sizeof text);
        strings[0] = strings[1] = strings[2] = text;
        type = string_type(true, 0, H5T_STR_NULLTERM, kind == 9 ? H5T_CSET_UTF8 : H5T_CSET_ASCII);
        mem = H5Tcopy(type);
        data = strings;
        if (kind == 10) {
            H5Sclose(space);
            space = H5Screate_simple(1, dims, NULL);
        }
        break;
    case 11: /* integers in a [n] or [n, 2] dataspace */
        H5Sclose(space);
        space = H5Screate_simple(1 + fz_below(in, 2), dims, NULL);
        type = H5Tcopy(H5T_STD_I32LE), mem = H5Tcopy(H5T_NATIVE_INT32);
        break;
    case 12: { /* a compound of an int and a double */
        type = H5Tcreate(H5T_COMPOUND, 16);
        H5Tinsert(type, "a", 0, H5T_NATIVE_INT32);
        H5Tinsert(type, "b", 8, H5T_NATIVE_DOUBLE);
        mem = H5Tcopy(type);
        break;
    }
    case 13: { /* an enum */
        type = H5Tenum_create(H5T_NATIVE_INT);
        int a = 0, b = 1;
        H5Tenum_insert(type, "zero", &a);
        H5Tenum_insert(type, "one", &b);
        mem = H5Tcopy(type);
        memset(value, 0, sizeof(int));
        break;
    }
    case 14: type = H5Tcreate(H5T_OPAQUE, 4), mem = H5Tcopy(type); break;
    case 15: type = H5Tcopy(H5T_STD_B32LE), mem = H5Tcopy(H5T_NATIVE_B32); break;
    case 16: /* a null dataspace: no value at all */
        H5Sclose(space);
        space = H5Screate(H5S_NULL);
        type = H5Tcopy(H5T_STD_I64LE), mem = H5Tcopy(H5T_NATIVE_INT64);
        break;
    case 17: { /* an array type of two ints */
        hsize_t two = 2;
        type = H5Tarray_create2(H5T_STD_I32LE, 1, &two);
        mem = H5Tarray_create2(H5T_NATIVE_INT32, 1, &two);
        break;
    }
    case 18: /* an empty extent [0] */
        H5Sclose(space);
        dims[0] = 0;
        space = H5Screate_simple(1, dims, NULL);
        type = H5Tcopy(H5T_STD_I64LE), mem = H5Tcopy(H5T_NATIVE_INT64);
        break;
    default: /* an integer of odd precision */
        type = H5Tcopy(H5T_STD_I32LE);
        H5Tset_precision(type, 1 + fz_below(in, 32));
        mem = H5Tcopy(H5T_NATIVE_INT32);
        break;
    }
    if (H5Aexists(file, name) > 0) H5Adelete(file, name);
    hid_t attr = H5Acreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    if (attr >= 0 && kind != 16) H5Awrite(attr, mem, data);
    if (attr >= 0) H5Aclose(attr);
    if (mem >= 0) H5Tclose(mem);
    if (type >= 0) H5Tclose(type);
    H5Sclose(space);
    H5Eclear2(H5E_DEFAULT);
}

void fz_note_values(hid_t dset, fz_region *regions, int *n)
{
    if (*n >= FZ_MAX_REGIONS) return;
    haddr_t addr = H5Dget_offset(dset); /* contiguous */
    hsize_t size = H5Dget_storage_size(dset), chunks = 0;
    if (addr == HADDR_UNDEF && H5Dget_num_chunks(dset, H5S_ALL, &chunks) >= 0 && chunks > 0) {
        hsize_t coords[32];
        unsigned mask;
        if (H5Dget_chunk_info(dset, H5S_ALL, 0, coords, &mask, &addr, &size) < 0)
            addr = HADDR_UNDEF;
    }
    H5Eclear2(H5E_DEFAULT);
    if (addr != HADDR_UNDEF && size > 0) regions[(*n)++] = (fz_region){addr, size};
}

void fz_damage(fz_in *in, const char *path, const fz_region *regions, int n)
{
    unsigned kind = fz_below(in, 8); /* mostly left whole */
    struct stat st;
    if (kind < 6 || stat(path, &st) != 0 || st.st_size == 0) return;
    if (kind == 6) {
        if (truncate(path, (off_t)(fz_uint(in, 4) % (uint64_t)st.st_size)) != 0) return;
        return;
    }
    if (n == 0) return;
    const fz_region *r = &regions[fz_below(in, (unsigned)n)];
    uint64_t at = r->offset + fz_uint(in, 4) % r->size;
    FILE *f = fopen(path, "r+b");
    if (!f) return;
    unsigned char c = 0;
    if (fseek(f, (long)at, SEEK_SET) == 0 && fread(&c, 1, 1, f) == 1) {
        c ^= (unsigned char)(1 + fz_below(in, 255));
        if (fseek(f, (long)at, SEEK_SET) == 0) fwrite(&c, 1, 1, f);
    }
    fclose(f);
}

void fz_check_status(int rc, const char *what)
{
    static int verbose = -1; /* PN_FUZZ_VERBOSE=1 prints every refusal */
    if (verbose < 0) verbose = getenv("PN_FUZZ_VERBOSE") != NULL;
    if (verbose) fprintf(stderr, "%s: %s\n", what, rc ? pn_error_message() : "ok");
    if (rc == 0) return;
    if (rc > 0 || rc < PN_ERR_PEER) {
        fprintf(stderr, "fuzz: %s returned %d, not a pn_status\n", what, rc);
        abort();
    }
    if (!pn_error_message()[0]) {
        fprintf(stderr, "fuzz: %s failed (%s) without a message\n", what, pn_status_name(rc));
        abort();
    }
}

void fz_check_hdf5_closed(const char *what)
{
    ssize_t open = H5Fget_obj_count((hid_t)H5F_OBJ_ALL, H5F_OBJ_ALL);
    if (open > 0) {
        fprintf(stderr, "fuzz: %s left %zd HDF5 objects open\n", what, open);
        hid_t ids[16];
        ssize_t n = H5Fget_obj_ids((hid_t)H5F_OBJ_ALL, H5F_OBJ_ALL, 16, ids);
        for (ssize_t i = 0; i < n; i++) {
            char name[256] = "";
            H5Iget_name(ids[i], name, sizeof name);
            fprintf(stderr, "  type %d: %s\n", (int)H5Iget_type(ids[i]), name);
        }
        abort();
    }
}
