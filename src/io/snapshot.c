/* Snapshot and model files (snapshot.h, docs/formats.md): a pn_train_state written
 * as HDF5 under "<path>.tmp-<pid>", fsynced and renamed over path; read back with
 * every dataset's fletcher32 checksum and the config's CRC-32 verified; the newest
 * good snapshot of a directory found by step; old snapshots and dead writers'
 * temporaries pruned. */
#include "io/snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>
#include <zlib.h>

#include "base/error.h"
#include "io/hdf5_util.h"

enum {
    FORMAT_VERSION = 1,
    CHUNK_FLOATS = 1 << 18, /* at most 1 MiB of float32 per chunk */
    NAME_CAP = 512,         /* "/optimizer/<layer>/<param>/<slot>" */
    /* Root attributes stay in the root group's (checksummed) object header up to
     * this many, rather than moving to dense storage past HDF5's default of 8. */
    MAX_COMPACT_ATTRS = 16
};

static const char SNAPSHOT_PREFIX[] = "snapshot-";

/* --- the in-memory state ----------------------------------------------------------- */

static bool known_format(const char *format)
{
    return !strcmp(format, PN_FORMAT_SNAPSHOT) || !strcmp(format, PN_FORMAT_MODEL);
}

static bool is_snapshot(const pn_train_state *st)
{
    return !strcmp(st->format, PN_FORMAT_SNAPSHOT);
}

int pn_train_state_create(pn_train_state **out, const char *format)
{
    *out = NULL;
    if (!format || !known_format(format))
        return pn_error_set(PN_ERR_INVALID, "unknown state format '%s' (expected %s or %s)",
                            format ? format : "(null)", PN_FORMAT_SNAPSHOT, PN_FORMAT_MODEL);
    pn_train_state *st = calloc(1, sizeof *st);
    if (!st) return pn_error_set(PN_ERR_NOMEM, "out of memory for a training state");
    snprintf(st->format, sizeof st->format, "%s", format);
    *out = st;
    return 0;
}

static void free_param(pn_state_param *p, int n_slots)
{
    free(p->name);
    free(p->value);
    if (p->slots)
        for (int s = 0; s < n_slots; s++) free(p->slots[s]);
    free(p->slots);
}

void pn_train_state_free(pn_train_state *st)
{
    if (!st) return;
    for (int i = 0; i < st->n_params; i++) free_param(&st->params[i], st->n_slot_names);
    free(st->params);
    for (int s = 0; s < st->n_slot_names; s++) free(st->slot_names[s]);
    free(st->slot_names);
    free(st->config);
    free(st);
}

/* A slot name is one HDF5 link name and one item of the comma-joined `slots`. */
static bool valid_slot_name(const char *name)
{
    return name[0] && !strpbrk(name, ",/") && strcmp(name, ".") && strcmp(name, "..");
}

int pn_train_state_set_slots(pn_train_state *st, int n, const char *const *names)
{
    if (!is_snapshot(st) && n > 0)
        return pn_error_set(PN_ERR_INVALID, "a %s holds no optimizer slots", st->format);
    if (st->n_params > 0)
        return pn_error_set(PN_ERR_INTERNAL, "slot names set after %d parameters were added",
                            st->n_params);
    if (n < 0) return pn_error_set(PN_ERR_INTERNAL, "%d slot names", n);
    for (int s = 0; s < n; s++) {
        if (!valid_slot_name(names[s]))
            return pn_error_set(PN_ERR_INVALID, "bad optimizer slot name '%s' (empty, '.', "
                                "'..' or holding ',' or '/')", names[s]);
        for (int t = 0; t < s; t++)
            if (!strcmp(names[s], names[t]))
                return pn_error_set(PN_ERR_INVALID, "optimizer slot '%s' named twice", names[s]);
    }
    char **copy = n ? calloc((size_t)n, sizeof *copy) : NULL;
    if (n && !copy) return pn_error_set(PN_ERR_NOMEM, "out of memory for slot names");
    for (int s = 0; s < n; s++)
        if (!(copy[s] = strdup(names[s]))) {
            for (int t = 0; t < s; t++) free(copy[t]);
            free(copy);
            return pn_error_set(PN_ERR_NOMEM, "out of memory for slot names");
        }
    for (int s = 0; s < st->n_slot_names; s++) free(st->slot_names[s]);
    free(st->slot_names);
    st->slot_names = copy;
    st->n_slot_names = n;
    return 0;
}

int pn_train_state_set_config(pn_train_state *st, const char *config)
{
    char *copy = strdup(config ? config : "");
    if (!copy) return pn_error_set(PN_ERR_NOMEM, "out of memory for the config text");
    free(st->config);
    st->config = copy;
    return 0;
}

/* "<layer>/<param>": two non-empty link names, neither "." nor "..". */
static bool valid_param_name(const char *name)
{
    const char *slash = strchr(name, '/');
    if (!slash || slash == name || !slash[1] || strchr(slash + 1, '/')) return false;
    size_t layer = (size_t)(slash - name);
    bool dots = (layer == 1 && name[0] == '.') || (layer == 2 && !strncmp(name, "..", 2));
    return !dots && strcmp(slash + 1, ".") && strcmp(slash + 1, "..");
}

static float *copy_floats(const float *src, size_t n)
{
    float *dst = malloc(n * sizeof *dst);
    if (dst) memcpy(dst, src, n * sizeof *dst);
    return dst;
}

int pn_train_state_add(pn_train_state *st, const char *name, int rows, int cols,
                       const float *value, const float *const *slots)
{
    if (!valid_param_name(name))
        return pn_error_set(PN_ERR_INVALID, "bad parameter name '%s' (expected <layer>/<param>)",
                            name);
    if (rows < 1 || cols < 1)
        return pn_error_set(PN_ERR_INVALID, "parameter '%s': empty shape %d x %d", name, rows,
                            cols);
    if (pn_train_state_find(st, name))
        return pn_error_set(PN_ERR_INVALID, "parameter '%s' added twice", name);
    if (st->n_slot_names > 0 && !slots)
        return pn_error_set(PN_ERR_INVALID, "parameter '%s': no values for its %d optimizer slots",
                            name, st->n_slot_names);
    int n = st->n_params;
    if ((n & (n - 1)) == 0) {
        pn_state_param *grown = realloc(st->params, (size_t)(n ? 2 * n : 1) * sizeof *grown);
        if (!grown) return pn_error_set(PN_ERR_NOMEM, "out of memory for parameter '%s'", name);
        st->params = grown;
    }
    size_t count = (size_t)rows * (size_t)cols;
    pn_state_param p = {.name = strdup(name), .rows = rows, .cols = cols};
    bool ok = p.name && (p.value = copy_floats(value, count));
    if (ok && st->n_slot_names > 0) {
        ok = (p.slots = calloc((size_t)st->n_slot_names, sizeof *p.slots)) != NULL;
        for (int s = 0; ok && s < st->n_slot_names; s++)
            ok = (p.slots[s] = copy_floats(slots[s], count)) != NULL;
    }
    if (!ok) {
        free_param(&p, st->n_slot_names);
        return pn_error_set(PN_ERR_NOMEM, "out of memory for parameter '%s' (%d x %d)", name,
                            rows, cols);
    }
    st->params[st->n_params++] = p;
    return 0;
}

const pn_state_param *pn_train_state_find(const pn_train_state *st, const char *name)
{
    for (int i = 0; i < st->n_params; i++)
        if (!strcmp(st->params[i].name, name)) return &st->params[i];
    return NULL;
}

/* --- writing ------------------------------------------------------------------------- */

/* " (HDF5: <why>)" from HDF5's error stack, or ""; call under the lock. */
static const char *hdf5_why(char buf[300])
{
    char reason[256];
    pn_hdf5_reason(reason);
    if (reason[0])
        snprintf(buf, 300, " (HDF5: %s)", reason + 2);
    else
        buf[0] = '\0';
    return buf;
}

/* Splits n into equal pieces of at most cap (edge chunks are stored whole). */
static hsize_t even_piece(hsize_t n, hsize_t cap)
{
    hsize_t pieces = (n + cap - 1) / cap;
    return (n + pieces - 1) / pieces;
}

/* Creates float32 dataset name ([cols] when rows is 1, else [rows, cols]) in chunks
 * of at most 1 MiB with a fletcher32 checksum each, and writes data. */
static int write_floats(hid_t file, const char *fname, const char *name, int rows, int cols,
                        const float *data)
{
    int rank = rows == 1 ? 1 : 2;
    hsize_t dims[2], chunk[2];
    if (rank == 1) {
        dims[0] = (hsize_t)cols;
        chunk[0] = even_piece(dims[0], CHUNK_FLOATS);
    } else {
        dims[0] = (hsize_t)rows;
        dims[1] = (hsize_t)cols;
        chunk[1] = even_piece(dims[1], CHUNK_FLOATS);
        chunk[0] = even_piece(dims[0], CHUNK_FLOATS / chunk[1] ? CHUNK_FLOATS / chunk[1] : 1);
    }
    char why[300];
    int rc = 0;
    pn_hdf5_lock();
    hid_t space = H5Screate_simple(rank, dims, NULL), dset = H5I_INVALID_HID;
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE), lcpl = H5Pcreate(H5P_LINK_CREATE);
    if (space < 0 || dcpl < 0 || lcpl < 0 || H5Pset_create_intermediate_group(lcpl, 1) < 0 ||
        H5Pset_chunk(dcpl, rank, chunk) < 0 || H5Pset_fletcher32(dcpl) < 0 ||
        H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) < 0 ||
        (dset = H5Dcreate2(file, name, H5T_IEEE_F32LE, space, lcpl, dcpl, H5P_DEFAULT)) < 0)
        rc = pn_error_set(PN_ERR_IO, "%s: cannot create dataset '%s'%s", fname, name,
                          hdf5_why(why));
    else if (H5Dwrite(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
        rc = pn_error_set(PN_ERR_IO, "%s: cannot write dataset '%s'%s", fname, name,
                          hdf5_why(why));
    if (dset >= 0 && H5Dclose(dset) < 0 && rc == 0)
        rc = pn_error_set(PN_ERR_IO, "%s: cannot write dataset '%s'%s", fname, name,
                          hdf5_why(why));
    if (lcpl >= 0) H5Pclose(lcpl);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (space >= 0) H5Sclose(space);
    pn_hdf5_unlock();
    return rc;
}

/* Writes root attribute name as a fixed-length UTF-8 string: it lives in the root
 * group's object header (or its dense attribute storage), which HDF5 checksums,
 * where a variable-length string would sit in the unchecksummed global heap. */
static int write_text(hid_t file, const char *fname, const char *name, const char *value)
{
    char why[300];
    int rc = 0;
    pn_hdf5_lock();
    hid_t type = H5Tcopy(H5T_C_S1), space = H5Screate(H5S_SCALAR), attr = H5I_INVALID_HID;
    if (type < 0 || space < 0 || H5Tset_size(type, strlen(value) + 1) < 0 ||
        H5Tset_strpad(type, H5T_STR_NULLTERM) < 0 || H5Tset_cset(type, H5T_CSET_UTF8) < 0 ||
        (attr = H5Acreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT)) < 0 ||
        H5Awrite(attr, type, value) < 0)
        rc = pn_error_set(PN_ERR_IO, "%s: cannot write attribute '%s'%s", fname, name,
                          hdf5_why(why));
    if (attr >= 0 && H5Aclose(attr) < 0 && rc == 0)
        rc = pn_error_set(PN_ERR_IO, "%s: cannot write attribute '%s'%s", fname, name,
                          hdf5_why(why));
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    pn_hdf5_unlock();
    return rc;
}

/* Writes root attribute name as an unsigned integer of file type type (U64 or U32). */
static int write_unsigned(hid_t file, const char *fname, const char *name, hid_t type,
                          uint64_t value)
{
    char why[300];
    int rc = 0;
    pn_hdf5_lock();
    hid_t space = H5Screate(H5S_SCALAR), attr = H5I_INVALID_HID;
    if (space < 0 ||
        (attr = H5Acreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT)) < 0 ||
        H5Awrite(attr, H5T_NATIVE_UINT64, &value) < 0)
        rc = pn_error_set(PN_ERR_IO, "%s: cannot write attribute '%s'%s", fname, name,
                          hdf5_why(why));
    if (attr >= 0 && H5Aclose(attr) < 0 && rc == 0)
        rc = pn_error_set(PN_ERR_IO, "%s: cannot write attribute '%s'%s", fname, name,
                          hdf5_why(why));
    if (space >= 0) H5Sclose(space);
    pn_hdf5_unlock();
    return rc;
}

/* zlib's CRC-32 of text (what Python's zlib.crc32 gives for its bytes). */
static uint64_t text_crc32(const char *text)
{
    return crc32_z(crc32_z(0, Z_NULL, 0), (const Bytef *)text, strlen(text));
}

/* The slot names joined by commas (malloc'd). */
static char *join_slots(const pn_train_state *st)
{
    size_t len = 1;
    for (int s = 0; s < st->n_slot_names; s++) len += strlen(st->slot_names[s]) + 1;
    char *text = malloc(len);
    if (!text) return NULL;
    text[0] = '\0';
    for (int s = 0; s < st->n_slot_names; s++) {
        if (s) strcat(text, ",");
        strcat(text, st->slot_names[s]);
    }
    return text;
}

static int write_attributes(hid_t file, const char *fname, const pn_train_state *st)
{
    PN_TRY(write_text(file, fname, "format", st->format));
    PN_TRY(pn_hdf5_write_attr_int(file, fname, "version", FORMAT_VERSION));
    PN_TRY(pn_hdf5_write_attr_int(file, fname, "step", st->step));
    PN_TRY(pn_hdf5_write_attr_int(file, fname, "epoch", st->epoch));
    PN_TRY(pn_hdf5_write_attr_int(file, fname, "batch_index", st->batch_index));
    PN_TRY(write_unsigned(file, fname, "seed", H5T_STD_U64LE, st->seed));
    const char *config = st->config ? st->config : "";
    PN_TRY(write_text(file, fname, "config", config));
    PN_TRY(write_unsigned(file, fname, "config_crc32", H5T_STD_U32LE, text_crc32(config)));
    if (!is_snapshot(st)) return 0;
    char *slots = join_slots(st);
    if (!slots) return pn_error_set(PN_ERR_NOMEM, "%s: out of memory for the slot names", fname);
    int rc = write_text(file, fname, "slots", slots);
    free(slots);
    return rc;
}

/* Writes every attribute and dataset of st into the new file tmp. */
static int write_file(const char *tmp, const pn_train_state *st)
{
    char why[300];
    int rc = 0;
    pn_hdf5_lock();
    hid_t file = H5I_INVALID_HID, fapl = H5Pcreate(H5P_FILE_ACCESS);
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    if (fapl < 0 || fcpl < 0 ||
        H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110) < 0 ||
        H5Pset_fclose_degree(fapl, H5F_CLOSE_SEMI) < 0 ||
        H5Pset_attr_phase_change(fcpl, MAX_COMPACT_ATTRS, MAX_COMPACT_ATTRS - 2) < 0 ||
        (file = H5Fcreate(tmp, H5F_ACC_TRUNC, fcpl, fapl)) < 0)
        rc = pn_error_set(PN_ERR_IO, "cannot create '%s'%s", tmp, hdf5_why(why));
    if (fcpl >= 0) H5Pclose(fcpl);
    if (fapl >= 0) H5Pclose(fapl);
    pn_hdf5_unlock();
    if (rc == 0) rc = write_attributes(file, tmp, st);
    char name[NAME_CAP];
    for (int i = 0; rc == 0 && i < st->n_params; i++) {
        const pn_state_param *p = &st->params[i];
        snprintf(name, sizeof name, "/params/%s", p->name);
        rc = write_floats(file, tmp, name, p->rows, p->cols, p->value);
        for (int s = 0; rc == 0 && s < st->n_slot_names; s++) {
            snprintf(name, sizeof name, "/optimizer/%s/%s", p->name, st->slot_names[s]);
            rc = write_floats(file, tmp, name, p->rows, p->cols, p->slots[s]);
        }
    }
    int rc_close = pn_hdf5_close(file, tmp);
    return rc < 0 ? rc : rc_close;
}

/* fsyncs path (a file or, with O_DIRECTORY, a directory). */
static int sync_path(const char *path, int flags, const char *what)
{
    int fd = open(path, O_RDONLY | flags);
    if (fd < 0)
        return pn_error_set(PN_ERR_IO, "cannot open %s '%s' to sync it: %s", what, path,
                            strerror(errno));
    int rc = 0;
    if (fsync(fd) != 0)
        rc = pn_error_set(PN_ERR_IO, "cannot sync %s '%s': %s", what, path, strerror(errno));
    close(fd);
    return rc;
}

/* The directory holding path ("." when path has no '/'). */
static void parent_dir(const char *path, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(out, cap, ".");
    else if (slash == path)
        snprintf(out, cap, "/");
    else
        snprintf(out, cap, "%.*s", (int)(slash - path), path);
}

/* Checks what st must hold before a byte is written. */
static int check_state(const char *path, const pn_train_state *st)
{
    if (!known_format(st->format))
        return pn_error_set(PN_ERR_INVALID, "%s: unknown state format '%s'", path, st->format);
    if (!is_snapshot(st) && st->n_slot_names > 0)
        return pn_error_set(PN_ERR_INVALID, "%s: a %s holds no optimizer slots", path,
                            st->format);
    for (int s = 0; s < st->n_slot_names; s++)
        if (!valid_slot_name(st->slot_names[s]))
            return pn_error_set(PN_ERR_INVALID, "%s: bad optimizer slot name '%s'", path,
                                st->slot_names[s]);
    if (st->step < 0 || st->epoch < 0 || st->batch_index < 0)
        return pn_error_set(PN_ERR_INVALID, "%s: negative counter (step %ld, epoch %ld, "
                            "batch_index %ld)", path, st->step, st->epoch, st->batch_index);
    for (int i = 0; i < st->n_params; i++) {
        const pn_state_param *p = &st->params[i];
        size_t need = strlen("/optimizer/") + strlen(p->name) + 1;
        for (int s = 0; s < st->n_slot_names; s++)
            if (strlen(st->slot_names[s]) + need >= NAME_CAP)
                return pn_error_set(PN_ERR_INVALID, "%s: parameter '%s': name too long", path,
                                    p->name);
        if (need >= NAME_CAP)
            return pn_error_set(PN_ERR_INVALID, "%s: parameter '%s': name too long", path,
                                p->name);
    }
    return 0;
}

int pn_snapshot_write(const char *path, const pn_train_state *st)
{
    PN_TRY(check_state(path, st));
    char tmp[PATH_MAX + 32], dir[PATH_MAX];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)getpid()) >= sizeof tmp)
        return pn_error_set(PN_ERR_INVALID, "path too long: %s", path);
    int rc = write_file(tmp, st);
    if (rc == 0) rc = sync_path(tmp, 0, "file");
    if (rc == 0 && rename(tmp, path) != 0)
        rc = pn_error_set(PN_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, path,
                          strerror(errno));
    if (rc < 0) {
        unlink(tmp);
        return rc;
    }
    parent_dir(path, dir, sizeof dir);
    return sync_path(dir, O_DIRECTORY, "directory");
}

/* --- reading ------------------------------------------------------------------------- */

/* Opens root attribute name (which must exist) as one value; *type is its file type. */
static int open_attr(hid_t file, const char *fname, const char *name, hid_t *attr, hid_t *type)
{
    char why[300];
    hid_t space = H5I_INVALID_HID;
    hssize_t n = -1;
    *type = H5I_INVALID_HID;
    if ((*attr = H5Aopen(file, name, H5P_DEFAULT)) < 0 || (*type = H5Aget_type(*attr)) < 0 ||
        (space = H5Aget_space(*attr)) < 0 || (n = H5Sget_simple_extent_npoints(space)) < 0) {
        if (space >= 0) H5Sclose(space);
        return pn_error_set(PN_ERR_IO, "%s: attribute '%s': unreadable%s", fname, name,
                            hdf5_why(why));
    }
    H5Sclose(space);
    if (n != 1)
        return pn_error_set(PN_ERR_INVALID, "%s: attribute '%s' holds %lld values, expected one",
                            fname, name, (long long)n);
    return 0;
}

/* 1 when root attribute name exists, 0 when not, or an error. */
static int attr_exists(hid_t file, const char *fname, const char *name)
{
    char why[300];
    pn_hdf5_lock();
    htri_t exists = H5Aexists(file, name);
    int rc = exists < 0 ? pn_error_set(PN_ERR_IO, "%s: cannot look up attribute '%s'%s", fname,
                                       name, hdf5_why(why))
                        : exists > 0;
    pn_hdf5_unlock();
    return rc;
}

/* Reads string attribute name of any length into *out (malloc'd). */
static int read_text(hid_t file, const char *fname, const char *name, char **out)
{
    char why[300];
    *out = NULL;
    int rc = attr_exists(file, fname, name);
    if (rc == 0) return pn_error_set(PN_ERR_INVALID, "%s: no attribute '%s'", fname, name);
    if (rc < 0) return rc;
    hid_t attr, type, mem = H5I_INVALID_HID;
    pn_hdf5_lock();
    rc = open_attr(file, fname, name, &attr, &type);
    if (rc == 0 && H5Tget_class(type) != H5T_STRING)
        rc = pn_error_set(PN_ERR_INVALID, "%s: attribute '%s' is not a string", fname, name);
    htri_t vlen = rc == 0 ? H5Tis_variable_str(type) : 0;
    size_t size = rc == 0 ? H5Tget_size(type) : 0;
    if (rc == 0 && (vlen < 0 || size == 0 || (mem = H5Tcopy(type)) < 0))
        rc = pn_error_set(PN_ERR_IO, "%s: attribute '%s': unreadable string type%s", fname, name,
                          hdf5_why(why));
    if (rc == 0 && vlen) {
        char *text = NULL;
        if (H5Aread(attr, mem, &text) < 0)
            rc = pn_error_set(PN_ERR_IO, "%s: attribute '%s': unreadable%s", fname, name,
                              hdf5_why(why));
        else if (!(*out = strdup(text ? text : "")))
            rc = pn_error_set(PN_ERR_NOMEM, "%s: attribute '%s': out of memory", fname, name);
        if (text) H5free_memory(text);
    } else if (rc == 0) {
        if (!(*out = calloc(size + 1, 1)))
            rc = pn_error_set(PN_ERR_NOMEM, "%s: attribute '%s': out of memory", fname, name);
        else if (H5Aread(attr, mem, *out) < 0)
            rc = pn_error_set(PN_ERR_IO, "%s: attribute '%s': unreadable%s", fname, name,
                              hdf5_why(why));
    }
    if (mem >= 0) H5Tclose(mem);
    if (type >= 0) H5Tclose(type);
    if (attr >= 0) H5Aclose(attr);
    pn_hdf5_unlock();
    if (rc < 0) {
        free(*out);
        *out = NULL;
    }
    return rc;
}

/* Reads integer attribute name (signed and not negative, or unsigned) as uint64. */
static int read_u64(hid_t file, const char *fname, const char *name, uint64_t *value)
{
    char why[300];
    hid_t attr, type;
    pn_hdf5_lock();
    int rc = open_attr(file, fname, name, &attr, &type);
    bool is_signed = rc == 0 && H5Tget_sign(type) == H5T_SGN_2;
    int64_t as_signed = 0;
    if (rc == 0 && H5Tget_class(type) != H5T_INTEGER)
        rc = pn_error_set(PN_ERR_INVALID, "%s: attribute '%s' is not an integer", fname, name);
    else if (rc == 0 && (is_signed ? H5Aread(attr, H5T_NATIVE_INT64, &as_signed)
                                   : H5Aread(attr, H5T_NATIVE_UINT64, value)) < 0)
        rc = pn_error_set(PN_ERR_IO, "%s: attribute '%s': unreadable%s", fname, name,
                          hdf5_why(why));
    else if (rc == 0 && is_signed && as_signed < 0)
        rc = pn_error_set(PN_ERR_INVALID, "%s: attribute '%s' is negative (%lld)", fname, name,
                          (long long)as_signed);
    else if (rc == 0 && is_signed)
        *value = (uint64_t)as_signed;
    if (type >= 0) H5Tclose(type);
    if (attr >= 0) H5Aclose(attr);
    pn_hdf5_unlock();
    return rc;
}

/* Reads unsigned attribute name into *value (0 and *found false when it is missing
 * and optional). */
static int read_unsigned(hid_t file, const char *fname, const char *name, bool optional,
                         uint64_t *value, bool *found)
{
    *value = 0;
    int rc = attr_exists(file, fname, name);
    *found = rc > 0;
    if (rc < 0) return rc;
    if (rc == 0)
        return optional ? 0 : pn_error_set(PN_ERR_INVALID, "%s: no attribute '%s'", fname, name);
    return read_u64(file, fname, name, value);
}

/* Reads counter attribute name (>= 0); a missing one is 0 when optional. */
static int read_counter(hid_t file, const char *fname, const char *name, bool optional,
                        long *value)
{
    *value = 0;
    int rc = attr_exists(file, fname, name);
    if (rc < 0) return rc;
    if (rc == 0)
        return optional ? 0 : pn_error_set(PN_ERR_INVALID, "%s: no attribute '%s'", fname, name);
    PN_TRY(pn_hdf5_read_attr_int(file, fname, name, value));
    if (*value < 0)
        return pn_error_set(PN_ERR_INVALID, "%s: attribute '%s' is negative (%ld)", fname, name,
                            *value);
    return 0;
}

/* Checks format (against expect when not NULL) and version; fills st->format. */
static int read_format(hid_t file, const char *fname, const char *expect, char *format,
                       size_t cap)
{
    int rc = attr_exists(file, fname, "format");
    if (rc == 0)
        return pn_error_set(PN_ERR_INVALID, "%s: not a pipenet file (no 'format' attribute)",
                            fname);
    if (rc < 0) return rc;
    PN_TRY(pn_hdf5_read_attr_string(file, fname, "format", format, cap));
    if (!known_format(format))
        return pn_error_set(PN_ERR_INVALID, "%s: not a pipenet file (format '%s')", fname,
                            format);
    if (expect && strcmp(format, expect))
        return pn_error_set(PN_ERR_INVALID, "%s: is a %s, expected a %s", fname, format, expect);
    long version;
    PN_TRY(read_counter(file, fname, "version", false, &version));
    if (version != FORMAT_VERSION)
        return pn_error_set(PN_ERR_INVALID, "%s: %s version %ld, this pipenet reads version %d",
                            fname, format, version, FORMAT_VERSION);
    return 0;
}

/* Splits the comma-joined slot names text into st's slot names. */
static int parse_slots(const char *fname, char *text, pn_train_state *st)
{
    const char *names[64];
    int n = 0;
    for (char *p = text; text[0];) {
        char *end = strchr(p, ',');
        if (end) *end = '\0';
        if (n == (int)(sizeof names / sizeof *names))
            return pn_error_set(PN_ERR_INVALID, "%s: attribute 'slots' names more than %d slots",
                                fname, n);
        names[n++] = p;
        if (!end) break;
        p = end + 1;
    }
    int rc = pn_train_state_set_slots(st, n, names);
    return rc < 0 ? pn_error_wrap(rc, "%s: attribute 'slots'", fname) : 0;
}

/* The names under /params, collected by walking the groups. */
typedef struct name_list {
    char **names;
    int n, cap;
    int rc;
    const char *fname;
} name_list;

static int list_push(name_list *list, const char *a, const char *b)
{
    if (list->n == list->cap) {
        int cap = list->cap ? 2 * list->cap : 16;
        char **grown = realloc(list->names, (size_t)cap * sizeof *grown);
        if (!grown) return pn_error_set(PN_ERR_NOMEM, "%s: out of memory for names", list->fname);
        list->names = grown;
        list->cap = cap;
    }
    size_t len = strlen(a) + (b ? strlen(b) + 1 : 0) + 1;
    char *name = malloc(len);
    if (!name) return pn_error_set(PN_ERR_NOMEM, "%s: out of memory for names", list->fname);
    snprintf(name, len, b ? "%s/%s" : "%s", a, b ? b : "");
    list->names[list->n++] = name;
    return 0;
}

static void list_free(name_list *list)
{
    for (int i = 0; i < list->n; i++) free(list->names[i]);
    free(list->names);
}

static herr_t collect_link(hid_t group, const char *name, const H5L_info_t *info, void *data)
{
    name_list *list = data;
    list->rc = list_push(list, name, NULL);
    return list->rc < 0 ? -1 : 0;
}

/* The link names of group path into list (in HDF5's name order). */
static int list_links(hid_t file, const char *fname, const char *path, name_list *list)
{
    char why[300];
    int rc = 0;
    list->rc = 0;
    pn_hdf5_lock();
    hid_t group = H5Gopen2(file, path, H5P_DEFAULT);
    if (group < 0)
        rc = pn_error_set(PN_ERR_INVALID, "%s: '%s' is not a group%s", fname, path,
                          hdf5_why(why));
    else if (H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, NULL, collect_link, list) < 0)
        rc = list->rc < 0 ? list->rc
                          : pn_error_set(PN_ERR_IO, "%s: group '%s': cannot list it%s", fname,
                                         path, hdf5_why(why));
    if (group >= 0 && H5Gclose(group) < 0 && rc == 0)
        rc = pn_error_set(PN_ERR_IO, "%s: group '%s': cannot close it%s", fname, path,
                          hdf5_why(why));
    pn_hdf5_unlock();
    return rc;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every "<layer>/<param>" under /params, sorted by name. */
static int list_params(hid_t file, const char *fname, name_list *params)
{
    pn_hdf5_lock();
    htri_t exists = H5Lexists(file, "/params", H5P_DEFAULT);
    if (exists < 0) H5Eclear2(H5E_DEFAULT);
    pn_hdf5_unlock();
    if (exists <= 0) return pn_error_set(PN_ERR_INVALID, "%s: no group '/params'", fname);
    name_list layers = {.fname = fname};
    int rc = list_links(file, fname, "/params", &layers);
    for (int i = 0; rc == 0 && i < layers.n; i++) {
        char path[NAME_CAP];
        name_list inner = {.fname = fname};
        if ((size_t)snprintf(path, sizeof path, "/params/%s", layers.names[i]) >= sizeof path)
            rc = pn_error_set(PN_ERR_INVALID, "%s: group '/params/%s': name too long", fname,
                              layers.names[i]);
        if (rc == 0) rc = list_links(file, fname, path, &inner);
        for (int k = 0; rc == 0 && k < inner.n; k++)
            rc = list_push(params, layers.names[i], inner.names[k]);
        list_free(&inner);
    }
    list_free(&layers);
    if (rc == 0 && params->n > 1)
        qsort(params->names, (size_t)params->n, sizeof *params->names, compare_names);
    return rc;
}

/* Reads float32 dataset name whole into *data (malloc'd). With fixed_shape its shape
 * must be [*cols] (when *rows is 1) or [*rows, *cols]; otherwise it may be [n] or
 * [rows, cols] and is returned in *rows, *cols. A failed read is a checksum
 * mismatch (fletcher32) or damaged data; purpose says why the dataset is wanted. */
static int read_floats(hid_t file, const char *fname, const char *name, const char *purpose,
                       bool fixed_shape, int *rows, int *cols, float **data)
{
    static const pn_hdf5_shape any_shape[2] = {{1, {-1}}, {2, {-1, -1}}};
    pn_hdf5_shape exact = {*rows == 1 ? 1 : 2, {*rows == 1 ? *cols : *rows, *cols}};
    *data = NULL;
    hid_t dset;
    PN_TRY(pn_hdf5_open_dataset(file, fname, name, purpose, &dset));
    int which;
    hsize_t dims[PN_HDF5_MAX_RANK];
    int rc = fixed_shape
                 ? pn_hdf5_check_dataset(dset, fname, name, PN_HDF5_FLOAT32, &exact, 1, &which,
                                         dims)
                 : pn_hdf5_check_dataset(dset, fname, name, PN_HDF5_FLOAT32, any_shape, 2,
                                         &which, dims);
    if (rc == 0 && !fixed_shape) {
        hsize_t r = which == 0 ? 1 : dims[0], c = which == 0 ? dims[0] : dims[1];
        if (r == 0 || c == 0 || r > INT_MAX || c > INT_MAX)
            rc = pn_error_set(PN_ERR_INVALID, "%s: dataset '%s': shape %llu x %llu not usable",
                              fname, name, (unsigned long long)r, (unsigned long long)c);
        *rows = (int)r;
        *cols = (int)c;
    }
    size_t count = (size_t)*rows * (size_t)*cols;
    if (rc == 0 && !(*data = malloc(count * sizeof **data)))
        rc = pn_error_set(PN_ERR_NOMEM, "%s: dataset '%s': out of memory for %zu floats", fname,
                          name, count);
    char why[300];
    pn_hdf5_lock();
    if (rc == 0 && H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, *data) < 0)
        rc = pn_error_set(PN_ERR_IO, "%s: dataset '%s': checksum mismatch or unreadable data%s",
                          fname, name, hdf5_why(why));
    pn_hdf5_unlock();
    int rc_close = pn_hdf5_close(dset, fname);
    if (rc == 0) rc = rc_close;
    if (rc < 0) {
        free(*data);
        *data = NULL;
    }
    return rc;
}

/* Reads parameter name (its value and, in a snapshot, every slot) into st. */
static int read_param(hid_t file, const char *fname, const char *name, pn_train_state *st)
{
    char path[NAME_CAP], purpose[NAME_CAP + 64];
    int rows = 0, cols = 0, rc;
    float *value;
    snprintf(path, sizeof path, "/params/%s", name);
    PN_TRY(read_floats(file, fname, path, NULL, false, &rows, &cols, &value));
    int n_slots = st->n_slot_names;
    float **slots = n_slots ? calloc((size_t)n_slots, sizeof *slots) : NULL;
    rc = n_slots && !slots ? pn_error_set(PN_ERR_NOMEM, "%s: out of memory", fname) : 0;
    for (int s = 0; rc == 0 && s < n_slots; s++) {
        if ((size_t)snprintf(path, sizeof path, "/optimizer/%s/%s", name,
                             st->slot_names[s]) >= sizeof path)
            rc = pn_error_set(PN_ERR_INVALID, "%s: parameter '%s': name too long", fname, name);
        snprintf(purpose, sizeof purpose, "slot '%s' of parameter '%s'", st->slot_names[s], name);
        if (rc == 0) rc = read_floats(file, fname, path, purpose, true, &rows, &cols, &slots[s]);
    }
    if (rc == 0) rc = pn_train_state_add(st, name, rows, cols, value, (const float *const *)slots);
    for (int s = 0; s < n_slots && slots; s++) free(slots[s]);
    free(slots);
    free(value);
    return rc;
}

/* Reads everything of the open file into a new state *out. */
static int read_file(hid_t file, const char *fname, const char *expect, pn_train_state **out)
{
    char format[32];
    PN_TRY(read_format(file, fname, expect, format, sizeof format));
    PN_TRY(pn_train_state_create(out, format));
    pn_train_state *st = *out;
    bool optional = !is_snapshot(st);
    PN_TRY(read_counter(file, fname, "step", optional, &st->step));
    PN_TRY(read_counter(file, fname, "epoch", optional, &st->epoch));
    PN_TRY(read_counter(file, fname, "batch_index", optional, &st->batch_index));
    bool found;
    PN_TRY(read_unsigned(file, fname, "seed", optional, &st->seed, &found));
    PN_TRY(read_text(file, fname, "config", &st->config));
    uint64_t crc;
    PN_TRY(read_unsigned(file, fname, "config_crc32", optional, &crc, &found));
    if (found && crc != text_crc32(st->config))
        return pn_error_set(PN_ERR_IO, "%s: attribute 'config': checksum mismatch (its CRC-32 is "
                            "0x%08llx, attribute 'config_crc32' says 0x%08llx)", fname,
                            (unsigned long long)text_crc32(st->config), (unsigned long long)crc);
    int rc;
    if (!optional) {
        char *slots;
        PN_TRY(read_text(file, fname, "slots", &slots));
        rc = parse_slots(fname, slots, st);
        free(slots);
        PN_TRY(rc);
    }
    name_list params = {.fname = fname};
    rc = list_params(file, fname, &params);
    for (int i = 0; rc == 0 && i < params.n; i++)
        rc = read_param(file, fname, params.names[i], st);
    list_free(&params);
    return rc;
}

int pn_snapshot_read(const char *path, const char *expect_format, pn_train_state **out)
{
    *out = NULL;
    hid_t file;
    PN_TRY(pn_hdf5_open_file(path, H5P_DEFAULT, &file));
    pn_train_state *st = NULL;
    int rc = read_file(file, path, expect_format, &st);
    int rc_close = pn_hdf5_close(file, path);
    if (rc == 0) rc = rc_close;
    if (rc < 0) {
        pn_train_state_free(st);
        return rc;
    }
    *out = st;
    return 0;
}

/* --- directories of snapshots --------------------------------------------------------- */

void pn_snapshot_path(const char *dir, long step, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s%010ld.h5", dir, SNAPSHOT_PREFIX, step);
}

/* One snapshot-<step>.h5 of a directory. */
typedef struct snap_file {
    long step;
    char name[NAME_MAX + 1];
} snap_file;

/* The step of file name when it is exactly what pn_snapshot_path makes, else -1. */
static long snapshot_step(const char *name)
{
    size_t prefix = sizeof SNAPSHOT_PREFIX - 1;
    if (strncmp(name, SNAPSHOT_PREFIX, prefix) || name[prefix] < '0' || name[prefix] > '9')
        return -1;
    char *end, canonical[NAME_MAX + 1];
    errno = 0;
    long step = strtol(name + prefix, &end, 10);
    if (errno || strcmp(end, ".h5")) return -1;
    snprintf(canonical, sizeof canonical, "%s%010ld.h5", SNAPSHOT_PREFIX, step);
    return strcmp(canonical, name) ? -1 : step;
}

/* The pid of a temporary file snapshot-*.tmp-<pid>, else -1. */
static long temporary_pid(const char *name)
{
    const char *tag = strstr(name, ".tmp-");
    if (strncmp(name, SNAPSHOT_PREFIX, sizeof SNAPSHOT_PREFIX - 1) || !tag) return -1;
    while (strstr(tag + 1, ".tmp-")) tag = strstr(tag + 1, ".tmp-");
    char *end;
    errno = 0;
    long pid = strtol(tag + 5, &end, 10);
    return errno || end == tag + 5 || *end || pid <= 0 ? -1 : pid;
}

static int newest_first(const void *a, const void *b)
{
    long x = ((const snap_file *)a)->step, y = ((const snap_file *)b)->step;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The snapshots of dir, newest first (*files malloc'd), and optionally the dead
 * writers' temporary files deleted on the way. */
static int list_snapshots(const char *dir, snap_file **files, int *n, bool drop_temporaries)
{
    *files = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return pn_error_set(PN_ERR_IO, "cannot open directory '%s': %s", dir, strerror(errno));
    int cap = 0, rc = 0;
    for (struct dirent *e; rc == 0 && (errno = 0, e = readdir(d));) {
        long pid = drop_temporaries ? temporary_pid(e->d_name) : -1;
        if (pid > 0 && pid != (long)getpid() && kill((pid_t)pid, 0) != 0 && errno == ESRCH) {
            char path[PATH_MAX + NAME_MAX + 2];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            if (unlink(path) != 0 && errno != ENOENT)
                rc = pn_error_set(PN_ERR_IO, "cannot delete '%s': %s", path, strerror(errno));
            continue;
        }
        long step = snapshot_step(e->d_name);
        if (step < 0) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            snap_file *grown = realloc(*files, (size_t)cap * sizeof *grown);
            if (!grown) {
                rc = pn_error_set(PN_ERR_NOMEM, "out of memory listing '%s'", dir);
                break;
            }
            *files = grown;
        }
        (*files)[*n].step = step;
        snprintf((*files)[*n].name, sizeof (*files)[*n].name, "%s", e->d_name);
        (*n)++;
    }
    if (rc == 0 && errno)
        rc = pn_error_set(PN_ERR_IO, "cannot list directory '%s': %s", dir, strerror(errno));
    closedir(d);
    if (rc == 0 && *n > 1) qsort(*files, (size_t)*n, sizeof **files, newest_first);
    if (rc < 0) {
        free(*files);
        *files = NULL;
        *n = 0;
    }
    return rc;
}

int pn_snapshot_latest(const char *dir, char *out, size_t cap)
{
    snap_file *files;
    int n;
    if (cap) out[0] = '\0';
    PN_TRY(list_snapshots(dir, &files, &n, false));
    if (n == 0) {
        free(files);
        return pn_error_set(PN_ERR_IO, "no snapshots in %s", dir);
    }
    char refused[1024] = "";
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        char path[PATH_MAX + NAME_MAX + 2];
        snprintf(path, sizeof path, "%s/%s", dir, files[i].name);
        pn_train_state *st;
        if (pn_snapshot_read(path, PN_FORMAT_SNAPSHOT, &st) == 0) {
            pn_train_state_free(st);
            free(files);
            if ((size_t)snprintf(out, cap, "%s", path) >= cap)
                return pn_error_set(PN_ERR_INVALID, "path too long: %s", path);
            pn_error_clear();
            return 0;
        }
        if (used < sizeof refused) {
            int k = snprintf(refused + used, sizeof refused - used, "%s%s", used ? "; " : "",
                             pn_error_message());
            used += k > 0 ? (size_t)k : 0;
        }
    }
    free(files);
    return pn_error_set(PN_ERR_IO, "no usable snapshot in %s (%d refused): %s", dir, n, refused);
}

int pn_snapshot_prune(const char *dir, int keep)
{
    if (keep < 0) return pn_error_set(PN_ERR_INVALID, "cannot keep %d snapshots", keep);
    snap_file *files;
    int n, rc = 0;
    PN_TRY(list_snapshots(dir, &files, &n, true));
    for (int i = keep; rc == 0 && i < n; i++) {
        char path[PATH_MAX + NAME_MAX + 2];
        snprintf(path, sizeof path, "%s/%s", dir, files[i].name);
        if (unlink(path) != 0 && errno != ENOENT)
            rc = pn_error_set(PN_ERR_IO, "cannot delete '%s': %s", path, strerror(errno));
    }
    free(files);
    return rc;
}
