/* The snapshot and model file format (snapshot_file.h): a pn_train_state written as
 * root attributes and one checksummed dataset per parameter and slot; read back by
 * listing /params, reading every dataset into one block per array (values, each
 * slot) and verifying each checksum and the config's CRC-32. */
#include "io/snapshot_file.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/error.h"
#include "base/names.h"
#include "io/hdf5_util.h"
#include "io/snapshot_format.h"
#include "io/snapshot_size.h"

enum {
    /* "/optimizer/<layer>/<param>/<slot>": what any name a state accepts needs */
    NAME_CAP = sizeof "/optimizer/" + PN_PARAM_NAME_MAX + 1 + PN_SUFFIX_MAX
};

static bool known_format(const char *format)
{
    return !strcmp(format, PN_FORMAT_SNAPSHOT) || !strcmp(format, PN_FORMAT_MODEL);
}

/* zlib's CRC-32 of text (what Python's zlib.crc32 gives for its bytes). */
static uint64_t text_crc32(const char *text)
{
    return crc32_z(crc32_z(0, Z_NULL, 0), (const Bytef *)text, strlen(text));
}

/* --- writing ------------------------------------------------------------------------- */

int pn_snapshot_write_floats(hid_t file, const char *fname, const char *name, int rows,
                             int cols, bool matrix, const float *data)
{
    int rank;
    uint64_t dims64[2], chunk64[2];
    pn_snapshot_chunk_shape(rows, cols, &rank, dims64, chunk64);
    hsize_t dims[2] = {dims64[0], dims64[1]}, chunk[2] = {chunk64[0], chunk64[1]};
    if (matrix && rank == 1) { /* one row of a split table: still [1, cols] */
        rank = 2;
        dims[0] = chunk[0] = 1;
        dims[1] = dims64[0];
        chunk[1] = chunk64[0];
    }
    return pn_hdf5_write_checksummed(file, fname, name, rank, dims, chunk, data);
}

static int write_floats(hid_t file, const char *fname, const char *name, int rows, int cols,
                        const float *data)
{
    return pn_snapshot_write_floats(file, fname, name, rows, cols, false, data);
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

int pn_snapshot_write_header(hid_t file, const char *fname, const pn_train_state *st,
                             bool snapshot, int version, int parts)
{
    PN_TRY(pn_hdf5_write_attr_string(file, fname, "format",
                                     snapshot ? PN_FORMAT_SNAPSHOT : PN_FORMAT_MODEL, true));
    PN_TRY(pn_hdf5_write_attr_int(file, fname, "version", version));
    if (parts > 0) PN_TRY(pn_hdf5_write_attr_int(file, fname, "parts", parts));
    PN_TRY(pn_hdf5_write_attr_int(file, fname, "step", st->step));
    PN_TRY(pn_hdf5_write_attr_int(file, fname, "epoch", st->epoch));
    PN_TRY(pn_hdf5_write_attr_int(file, fname, "batch_index", st->batch_index));
    PN_TRY(pn_hdf5_write_attr_uint(file, fname, "seed", st->seed, 64));
    PN_TRY(pn_hdf5_write_attr_int(file, fname, "batch", st->batch));
    const char *config = st->config ? st->config : "";
    PN_TRY(pn_hdf5_write_attr_string(file, fname, "config", config, true));
    PN_TRY(pn_hdf5_write_attr_uint(file, fname, "config_crc32", text_crc32(config), 32));
    if (!snapshot) return 0;
    char *slots = join_slots(st);
    if (!slots) return pn_error_set(PN_ERR_NOMEM, "%s: out of memory for the slot names", fname);
    int rc = pn_hdf5_write_attr_string(file, fname, "slots", slots, true);
    free(slots);
    return rc;
}

/* Checks what st must hold before a byte is written. */
int pn_snapshot_check_state(const char *path, const pn_train_state *st, bool snapshot)
{
    if (!known_format(st->format))
        return pn_error_set(PN_ERR_INVALID, "%s: unknown state format '%s'", path, st->format);
    if (snapshot && strcmp(st->format, PN_FORMAT_SNAPSHOT))
        return pn_error_set(PN_ERR_INVALID, "%s: a %s cannot be written as a snapshot", path,
                            st->format);
    for (int s = 0; s < st->n_slot_names; s++)
        if (!pn_train_state_valid_slot_name(st->slot_names[s]))
            return pn_error_set(PN_ERR_INVALID, "%s: bad optimizer slot name '%s'", path,
                                st->slot_names[s]);
    if (st->step < 0 || st->epoch < 0 || st->batch_index < 0 || st->batch < 0)
        return pn_error_set(PN_ERR_INVALID, "%s: negative counter (step %ld, epoch %ld, "
                            "batch_index %ld, batch %ld)", path, st->step, st->epoch,
                            st->batch_index, st->batch);
    for (int i = 0; i < st->n_params; i++) /* so that every dataset name fits NAME_CAP */
        if (strlen(st->params[i].name) > PN_PARAM_NAME_MAX)
            return pn_error_set(PN_ERR_INVALID, "%s: parameter '%.40s...': a name of %zu bytes "
                                "(at most %d)", path, st->params[i].name,
                                strlen(st->params[i].name), PN_PARAM_NAME_MAX);
    return 0;
}

/* Writes every parameter's datasets: its values, then (a snapshot) each slot. */
static int write_params(hid_t file, const char *fname, const pn_train_state *st, bool snapshot)
{
    char name[NAME_CAP];
    for (int i = 0; i < st->n_params; i++) {
        const pn_state_param *p = &st->params[i];
        snprintf(name, sizeof name, "/params/%s", p->name);
        PN_TRY(write_floats(file, fname, name, p->rows, p->cols, p->value));
        for (int s = 0; snapshot && s < st->n_slot_names; s++) {
            snprintf(name, sizeof name, "/optimizer/%s/%s", p->name, st->slot_names[s]);
            PN_TRY(write_floats(file, fname, name, p->rows, p->cols, p->slots[s]));
        }
    }
    return 0;
}

int pn_snapshot_file_write(const char *path, const pn_train_state *st, const char *format)
{
    bool snapshot = !strcmp(format ? format : st->format, PN_FORMAT_SNAPSHOT);
    if (format && !known_format(format))
        return pn_error_set(PN_ERR_INVALID, "%s: unknown format '%s'", path, format);
    PN_TRY(pn_snapshot_check_state(path, st, snapshot));
    uint64_t bytes;
    PN_TRY(pn_snapshot_state_bytes(st, snapshot, &bytes)); /* what the file will take */
    hid_t file;
    PN_TRY(pn_hdf5_create_file(path, true, &file));
    int rc = pn_hdf5_reserve(file, path, bytes);
    if (rc == 0) rc = pn_snapshot_write_header(file, path, st, snapshot, PN_SNAPSHOT_VERSION, 0);
    /* the reader wants the group even when no parameter is in it */
    if (rc == 0) rc = pn_hdf5_create_group(file, path, "/params");
    if (rc == 0) rc = write_params(file, path, st, snapshot);
    return pn_hdf5_close_reserved(file, path, rc);
}

/* --- reading ------------------------------------------------------------------------- */

/* Reads counter attribute name (>= 0); a missing one is 0 when optional. */
static int read_counter(hid_t file, const char *fname, const char *name, bool optional,
                        long *value)
{
    *value = 0;
    int rc = pn_hdf5_attr_exists(file, fname, name);
    if (rc < 0) return rc;
    if (rc == 0)
        return optional ? 0 : pn_error_set(PN_ERR_INVALID, "%s: no attribute '%s'", fname, name);
    PN_TRY(pn_hdf5_read_attr_int(file, fname, name, value));
    if (*value < 0)
        return pn_error_set(PN_ERR_INVALID, "%s: attribute '%s' is negative (%ld)", fname, name,
                            *value);
    return 0;
}

/* Reads unsigned attribute name into *value (0 and *found false when it is missing
 * and optional). */
static int read_unsigned(hid_t file, const char *fname, const char *name, bool optional,
                         uint64_t *value, bool *found)
{
    *value = 0;
    int rc = pn_hdf5_attr_exists(file, fname, name);
    *found = rc > 0;
    if (rc < 0) return rc;
    if (rc == 0)
        return optional ? 0 : pn_error_set(PN_ERR_INVALID, "%s: no attribute '%s'", fname, name);
    return pn_hdf5_read_attr_uint(file, fname, name, value);
}

/* Checks format (against expect when not NULL) and version; fills format and
 * *version (a snapshot's index is version 2, every other file version 1). */
static int read_format(hid_t file, const char *fname, const char *expect, char *format,
                       size_t cap, long *version)
{
    int rc = pn_hdf5_attr_exists(file, fname, "format");
    if (rc == 0)
        return pn_error_set(PN_ERR_INVALID, "%s: not a pipenet file (no 'format' attribute)",
                            fname);
    if (rc < 0) return rc;
    PN_TRY(pn_hdf5_read_attr_string(file, fname, "format", format, cap));
    if (!strcmp(format, PN_FORMAT_PART))
        return pn_error_set(PN_ERR_INVALID, "%s: is one part of a snapshot: open the snapshot "
                            "itself (snapshot-<step>.h5 beside it)", fname);
    if (!known_format(format))
        return pn_error_set(PN_ERR_INVALID, "%s: not a pipenet file (format '%s')", fname,
                            format);
    if (expect && strcmp(format, expect))
        return pn_error_set(PN_ERR_INVALID, "%s: is a %s, expected a %s", fname, format, expect);
    PN_TRY(read_counter(file, fname, "version", false, version));
    bool snapshot = !strcmp(format, PN_FORMAT_SNAPSHOT);
    if (*version != PN_SNAPSHOT_VERSION && !(snapshot && *version == PN_SNAPSHOT_INDEX_VERSION))
        return pn_error_set(PN_ERR_INVALID, "%s: %s version %ld, this pipenet reads version%s",
                            fname, format, *version, snapshot ? "s 1 and 2" : " 1");
    return 0;
}

/* Splits the comma-joined slot names text into st's slot names. */
static int parse_slots(const char *fname, char *text, pn_train_state *st)
{
    const char *names[PN_STATE_MAX_SLOTS];
    int n = 0;
    for (char *p = text; text[0];) {
        char *end = strchr(p, ',');
        if (end) *end = '\0';
        if (n == PN_STATE_MAX_SLOTS)
            return pn_error_set(PN_ERR_INVALID, "%s: attribute 'slots' names more than %d slots",
                                fname, n);
        names[n++] = p;
        if (!end) break;
        p = end + 1;
    }
    int rc = pn_train_state_set_slots(st, n, names);
    return rc < 0 ? pn_error_wrap(rc, "%s: attribute 'slots'", fname) : 0;
}

/* The parameters of a file as they are found: names, shapes and offsets in the
 * blocks the data is read into. */
typedef struct param_list {
    pn_param *items;
    int n, cap;
    size_t floats;     /* the blocks' length */
    const char *fname;
    const char *layer; /* while listing one layer's group */
} param_list;

static int push_name(void *ctx, const char *name)
{
    param_list *list = ctx;
    if (list->n == list->cap) {
        int cap = list->cap ? 2 * list->cap : 16;
        pn_param *grown = realloc(list->items, (size_t)cap * sizeof *grown);
        if (!grown) return pn_error_set(PN_ERR_NOMEM, "%s: out of memory for names", list->fname);
        list->items = grown;
        list->cap = cap;
    }
    size_t len = strlen(list->layer ? list->layer : "") + strlen(name) + 2;
    char *full = malloc(len);
    if (!full) return pn_error_set(PN_ERR_NOMEM, "%s: out of memory for names", list->fname);
    snprintf(full, len, list->layer ? "%s/%s" : "%s%s", list->layer ? list->layer : "", name);
    list->items[list->n++] = (pn_param){.name = full};
    return 0;
}

static void free_list(param_list *list)
{
    for (int i = 0; i < list->n; i++) free(list->items[i].name);
    free(list->items);
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(((const pn_param *)a)->name, ((const pn_param *)b)->name);
}

/* Every "<layer>/<param>" under /params, sorted by name. */
static int list_params(hid_t file, const char *fname, param_list *params)
{
    if (!pn_hdf5_link_exists(file, "/params"))
        return pn_error_set(PN_ERR_INVALID, "%s: no group '/params'", fname);
    param_list layers = {.fname = fname};
    int rc = pn_hdf5_list_group(file, fname, "/params", push_name, &layers);
    for (int i = 0; rc == 0 && i < layers.n; i++) {
        char path[NAME_CAP];
        if ((size_t)snprintf(path, sizeof path, "/params/%s", layers.items[i].name) >= sizeof path)
            rc = pn_error_set(PN_ERR_INVALID, "%s: group '/params/%s': name too long", fname,
                              layers.items[i].name);
        params->layer = layers.items[i].name;
        if (rc == 0) rc = pn_hdf5_list_group(file, fname, path, push_name, params);
    }
    params->layer = NULL;
    free_list(&layers);
    if (rc == 0 && params->n > 1)
        qsort(params->items, (size_t)params->n, sizeof *params->items, compare_names);
    return rc;
}

int pn_snapshot_read_floats(hid_t file, const char *fname, const char *name,
                            const char *purpose, const char *parts, int *rows, int *cols,
                            float *out)
{
    static const pn_hdf5_shape any_shape[2] = {{1, {-1}}, {2, {-1, -1}}};
    bool fixed = *rows > 0;
    pn_hdf5_shape exact = {*rows == 1 ? 1 : 2, {*rows == 1 ? *cols : *rows, *cols}};
    hid_t dset;
    PN_TRY(pn_hdf5_open_dataset(file, fname, name, purpose, &dset));
    int which;
    hsize_t dims[PN_HDF5_MAX_RANK];
    /* values in other files (a hostile VDS or external dataset) are never read: HDF5
     * would read a missing one as zeros, or any local file as floats; an index reads
     * its own snapshot's parts only */
    int rc = parts && pn_hdf5_storage_kind(dset) == PN_HDF5_VIRTUAL
                 ? pn_hdf5_check_parts(dset, fname, name, parts)
                 : pn_hdf5_check_self_contained(dset, fname, name);
    if (rc == 0)
        rc = pn_hdf5_check_dataset(dset, fname, name, PN_HDF5_FLOAT32,
                                   fixed ? &exact : any_shape, fixed ? 1 : 2, &which, dims);
    if (rc == 0 && !fixed) {
        hsize_t r = which == 0 ? 1 : dims[0], c = which == 0 ? dims[0] : dims[1];
        if (r == 0 || c == 0 || r > INT_MAX || c > INT_MAX)
            rc = pn_error_set(PN_ERR_INVALID, "%s: dataset '%s': shape %llu x %llu not usable",
                              fname, name, (unsigned long long)r, (unsigned long long)c);
        *rows = (int)r;
        *cols = (int)c;
    }
    if (rc == 0 && out) {
        rc = pn_hdf5_read_all(dset, fname, name, PN_HDF5_FLOAT32, out);
        if (rc < 0 && parts) rc = pn_snapshot_name_parts(dset, rc); /* a damaged part */
    }
    int rc_close = pn_hdf5_close(dset, fname);
    return rc < 0 ? rc : rc_close;
}

int pn_snapshot_name_parts(hid_t dset, int rc)
{
    char sources[256], message[1024];
    pn_hdf5_storage_sources(dset, sources, sizeof sources);
    if (!sources[0]) return rc;
    snprintf(message, sizeof message, "%s", pn_error_message());
    return pn_error_set(rc, "%s (its values are in part %s)", message, sources);
}

static int read_floats(hid_t file, const char *fname, const char *name, const char *purpose,
                       const char *parts, int *rows, int *cols, float *out)
{
    return pn_snapshot_read_floats(file, fname, name, purpose, parts, rows, cols, out);
}

/* Keeps the listed parameters that want names (all when want is NULL). */
static void keep_wanted(param_list *list, const pn_name_list *want)
{
    if (!want) return;
    int kept = 0;
    for (int i = 0; i < list->n; i++) {
        bool wanted = false;
        for (int k = 0; k < want->n && !wanted; k++)
            wanted = !strcmp(want->names[k], list->items[i].name);
        if (wanted)
            list->items[kept++] = list->items[i];
        else
            free(list->items[i].name);
    }
    list->n = kept;
}

/* How much of a file a read takes in. */
typedef enum read_mode {
    READ_HEADER, /* the root attributes */
    READ_CHECK,  /* and every dataset's type, shape and storage, no values */
    READ_VERIFY, /* and every value read (checksums), one dataset at a time, none kept */
    READ_ALL     /* and every value kept in the state */
} read_mode;

/* Reads the datasets of parameter p (values, then each slot) into data[1 + slots]
 * (NULL entries: checked, not read). */
static int read_param(hid_t file, const char *fname, const char *parts,
                      const pn_train_state *st, pn_param *p, float *const *data)
{
    char path[NAME_CAP], purpose[NAME_CAP + 64];
    snprintf(path, sizeof path, "/params/%s", p->name);
    int rc = read_floats(file, fname, path, NULL, parts, &p->rows, &p->cols, data[0]);
    for (int s = 0; rc == 0 && s < st->n_slot_names; s++) {
        if ((size_t)snprintf(path, sizeof path, "/optimizer/%s/%s", p->name,
                             st->slot_names[s]) >= sizeof path)
            return pn_error_set(PN_ERR_INVALID, "%s: parameter '%s': name too long", fname,
                                p->name);
        snprintf(purpose, sizeof purpose, "slot '%s' of parameter '%s'", st->slot_names[s],
                 p->name);
        rc = read_floats(file, fname, path, purpose, parts, &p->rows, &p->cols, data[1 + s]);
    }
    return rc;
}

/* Reads every parameter (and slot) of the file, or those want names (not NULL), as
 * mode says: shapes first, then (all) the data into one block per array of st, or
 * (verify) each dataset in turn into one buffer of the largest. */
static int read_params(hid_t file, const char *fname, const char *parts, read_mode mode,
                       const pn_name_list *want, pn_train_state *st)
{
    param_list list = {.fname = fname};
    int rc = list_params(file, fname, &list), n_arrays = 1 + st->n_slot_names;
    keep_wanted(&list, want);
    char path[NAME_CAP];
    size_t largest = 1;
    for (int i = 0; rc == 0 && i < list.n; i++) {
        pn_param *p = &list.items[i];
        snprintf(path, sizeof path, "/params/%s", p->name);
        rc = read_floats(file, fname, path, NULL, parts, &p->rows, &p->cols, NULL);
        p->offset = list.floats;
        list.floats += (size_t)p->rows * (size_t)p->cols;
        if ((size_t)p->rows * (size_t)p->cols > largest)
            largest = (size_t)p->rows * (size_t)p->cols;
    }
    size_t stride = list.floats, floats = mode == READ_ALL ? (size_t)n_arrays * (stride ? stride : 1)
                                                           : mode == READ_VERIFY ? largest : 0;
    float *image = NULL, *data[1 + PN_STATE_MAX_SLOTS] = {NULL};
    if (rc == 0 && floats && !(image = malloc((floats ? floats : 1) * sizeof(float))))
        rc = pn_error_set(PN_ERR_NOMEM, "%s: out of memory for %zu floats", fname, floats);
    if (rc == 0 && mode == READ_ALL) rc = pn_train_state_keep(st, image);
    for (int i = 0; rc == 0 && i < list.n; i++) {
        pn_param *p = &list.items[i];
        for (int a = 0; image && a < n_arrays; a++)
            data[a] = mode == READ_ALL ? image + (size_t)a * stride + p->offset : image;
        /* READ_VERIFY: every dataset in turn into the same buffer; READ_CHECK: none */
        rc = read_param(file, fname, parts, st, p, data);
    }
    if (rc == 0 && mode == READ_ALL) rc = pn_train_state_adopt(st, list.items, list.n, image, stride);
    if (mode == READ_VERIFY) free(image);
    free_list(&list);
    return rc;
}

int pn_snapshot_read_header_open(hid_t file, const char *fname, const char *expect,
                                 bool slots, pn_train_state **out, char *parts, size_t cap)
{
    char format[32];
    long version;
    *out = NULL;
    PN_TRY(read_format(file, fname, expect, format, sizeof format, &version));
    PN_TRY(pn_train_state_create(out, format));
    pn_train_state *st = *out;
    bool optional = strcmp(format, PN_FORMAT_SNAPSHOT) != 0;
    PN_TRY(read_counter(file, fname, "step", optional, &st->step));
    PN_TRY(read_counter(file, fname, "epoch", optional, &st->epoch));
    PN_TRY(read_counter(file, fname, "batch_index", optional, &st->batch_index));
    bool found;
    PN_TRY(read_unsigned(file, fname, "seed", optional, &st->seed, &found));
    PN_TRY(read_counter(file, fname, "batch", true, &st->batch)); /* older files lack it */
    PN_TRY(pn_hdf5_read_attr_text(file, fname, "config", &st->config));
    uint64_t crc;
    PN_TRY(read_unsigned(file, fname, "config_crc32", optional, &crc, &found));
    if (found && crc != text_crc32(st->config))
        return pn_error_set(PN_ERR_IO, "%s: attribute 'config': checksum mismatch (its CRC-32 is "
                            "0x%08llx, attribute 'config_crc32' says 0x%08llx)", fname,
                            (unsigned long long)text_crc32(st->config), (unsigned long long)crc);
    if (!optional && slots) {
        char *names;
        PN_TRY(pn_hdf5_read_attr_text(file, fname, "slots", &names));
        int rc = parse_slots(fname, names, st);
        free(names);
        PN_TRY(rc);
    }
    /* an index (version 2) reads from its snapshot's parts, named by its step */
    if (cap) parts[0] = '\0';
    if (version == PN_SNAPSHOT_INDEX_VERSION)
        snprintf(parts, cap, "%s%010ld.part-", PN_SNAPSHOT_PREFIX, st->step);
    return 0;
}

static int read_path(const char *path, const char *expect_format, read_mode mode,
                     const pn_name_list *want, pn_train_state **out)
{
    *out = NULL;
    hid_t file;
    PN_TRY(pn_hdf5_open_file(path, H5P_DEFAULT, &file));
    pn_train_state *st = NULL;
    char parts[64];
    /* values only (want): no slot names, so no slots read */
    int rc = pn_snapshot_read_header_open(file, path, expect_format, !want, &st, parts,
                                          sizeof parts);
    if (rc == 0 && mode != READ_HEADER)
        rc = read_params(file, path, parts[0] ? parts : NULL, mode, want, st);
    int rc_close = pn_hdf5_close(file, path);
    if (rc == 0) rc = rc_close;
    if (rc < 0) {
        pn_train_state_free(st);
        return rc;
    }
    *out = st;
    return 0;
}

int pn_snapshot_read(const char *path, const char *expect_format, pn_train_state **out)
{
    return read_path(path, expect_format, READ_ALL, NULL, out);
}

int pn_snapshot_read_values(const char *path, const char *expect_format,
                            const pn_name_list *want, pn_train_state **out)
{
    return read_path(path, expect_format, READ_ALL, want, out);
}

int pn_snapshot_read_header(const char *path, const char *expect_format, pn_train_state **out)
{
    return read_path(path, expect_format, READ_HEADER, NULL, out);
}

/* mode READ_CHECK or READ_VERIFY: the header into a state that is dropped */
static int check_path(const char *path, read_mode mode)
{
    pn_train_state *st;
    PN_TRY(read_path(path, PN_FORMAT_SNAPSHOT, mode, NULL, &st));
    pn_train_state_free(st);
    return 0;
}

int pn_snapshot_verify(const char *path) { return check_path(path, READ_VERIFY); }

int pn_snapshot_check(const char *path) { return check_path(path, READ_CHECK); }
