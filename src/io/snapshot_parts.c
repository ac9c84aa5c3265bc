/* Part files and the index of a snapshot written by several ranks (snapshot_parts.h). */
#include "io/snapshot_parts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/error.h"
#include "base/names.h"
#include "io/hdf5_util.h"
#include "io/snapshot_file.h"
#include "io/snapshot_format.h"

/* "/optimizer/<layer>/<param>/<slot>" */
enum { NAME_CAP = sizeof "/optimizer/" + PN_PARAM_NAME_MAX + 1 + PN_SUFFIX_MAX };

void pn_snapshot_part_name(long step, int stage, int replica, char *out, size_t cap)
{
    snprintf(out, cap, "%s%010ld.part-%03d-%03d.h5", PN_SNAPSHOT_PREFIX, step, stage, replica);
}

/* The dataset of array name's values (slot < 0) or of its slot. */
static void dataset_name(const pn_train_state *h, const char *name, int slot, char *out,
                         size_t cap)
{
    if (slot < 0)
        snprintf(out, cap, "/params/%s", name);
    else
        snprintf(out, cap, "/optimizer/%s/%s", name, h->slot_names[slot]);
}

/* A part's own attributes: what it is, of which snapshot, and the config's CRC-32
 * (the index holds the config). */
static int write_part_header(hid_t file, const char *fname, const pn_snapshot_part *part)
{
    const pn_train_state *h = part->header;
    const char *config = h->config ? h->config : "";
    uint64_t crc = crc32_z(crc32_z(0, Z_NULL, 0), (const Bytef *)config, strlen(config));
    PN_TRY(pn_hdf5_write_attr_string(file, fname, "format", PN_FORMAT_PART, true));
    PN_TRY(pn_hdf5_write_attr_int(file, fname, "version", PN_SNAPSHOT_INDEX_VERSION));
    PN_TRY(pn_hdf5_write_attr_int(file, fname, "step", h->step));
    PN_TRY(pn_hdf5_write_attr_int(file, fname, "stage", part->stage));
    PN_TRY(pn_hdf5_write_attr_int(file, fname, "replica", part->replica));
    return pn_hdf5_write_attr_uint(file, fname, "config_crc32", crc, 32);
}

static int write_arrays(hid_t file, const char *fname, const pn_snapshot_part *part,
                        float *staging)
{
    const pn_train_state *h = part->header;
    char name[NAME_CAP];
    for (int i = 0; i < part->n_arrays; i++) {
        const pn_snapshot_array *a = &part->arrays[i];
        if (strlen(a->name) > PN_PARAM_NAME_MAX)
            return pn_error_set(PN_ERR_INVALID, "%s: parameter '%.40s...': name too long",
                                fname, a->name);
        for (int s = a->no_values ? 0 : -1; s < (a->run < 0 ? 0 : h->n_slot_names); s++) {
            const float *data = NULL;
            bool run = s >= 0 && a->run > 0; /* a sharded optimizer's run: [run] */
            PN_TRY(part->fill(part->ctx, i, s, staging, &data));
            dataset_name(h, a->name, s, name, sizeof name);
            PN_TRY(pn_snapshot_write_floats(file, fname, name, run ? 1 : a->rows,
                                            run ? (int)a->run : a->cols,
                                            !run && part->matrix && part->matrix[i], data));
        }
    }
    return 0;
}

int pn_snapshot_part_file_write(const char *path, const pn_snapshot_part *part)
{
    const pn_train_state *h = part->header;
    bool whole = part->stage < 0;
    PN_TRY(pn_snapshot_check_state(path, h, true));
    pn_snapshot_contents contents = {part->arrays, part->n_arrays, h->n_slot_names,
                                     (const char *const *)h->slot_names,
                                     whole && h->config ? strlen(h->config) : 0, true};
    uint64_t bytes;
    PN_TRY(pn_snapshot_file_bytes(&contents, &bytes)); /* a part's header is smaller */
    float *staging = NULL;
    if (part->staging && !(staging = malloc(part->staging * sizeof *staging)))
        return pn_error_set(PN_ERR_NOMEM, "%s: out of memory for %zu floats", path,
                            part->staging);
    hid_t file;
    int rc = pn_hdf5_create_file(path, true, &file);
    if (rc < 0) {
        free(staging);
        return rc;
    }
    rc = pn_hdf5_reserve(file, path, bytes);
    if (rc == 0)
        rc = whole ? pn_snapshot_write_header(file, path, h, true, PN_SNAPSHOT_VERSION, 0)
                   : write_part_header(file, path, part);
    if (rc == 0) rc = pn_hdf5_create_group(file, path, "/params");
    if (rc == 0) rc = write_arrays(file, path, part, staging);
    free(staging);
    return pn_hdf5_close_reserved(file, path, rc);
}

int pn_snapshot_part_check(const char *path, long step, int stage, int replica)
{
    hid_t file;
    PN_TRY(pn_hdf5_open_file(path, H5P_DEFAULT, &file));
    char format[32] = "";
    long got[3] = {-1, -1, -1};
    int rc = pn_hdf5_read_attr_string(file, path, "format", format, sizeof format);
    if (rc == 0) rc = pn_hdf5_read_attr_int(file, path, "step", &got[0]);
    if (rc == 0) rc = pn_hdf5_read_attr_int(file, path, "stage", &got[1]);
    if (rc == 0) rc = pn_hdf5_read_attr_int(file, path, "replica", &got[2]);
    if (rc == 0 && (strcmp(format, PN_FORMAT_PART) || got[0] != step || got[1] != stage ||
                    got[2] != replica))
        rc = pn_error_set(PN_ERR_IO, "%s: reads back as '%s' step %ld stage %ld replica %ld, "
                          "not the part of step %ld stage %d replica %d", path, format, got[0],
                          got[1], got[2], step, stage, replica);
    return pn_hdf5_close_after(file, path, rc);
}

/* One virtual dataset of the index: array p's values (slot < 0) or slot, from its
 * sources, or for a slot from its runs when it has any. */
static int write_mapped(hid_t file, const char *fname, const pn_train_state *h,
                        const pn_snapshot_index_param *p, int slot)
{
    char name[NAME_CAP];
    dataset_name(h, p->name, slot, name, sizeof name);
    bool runs = slot >= 0 && p->n_runs > 0;
    int n = runs ? p->n_runs : p->n_sources;
    pn_hdf5_source *src = malloc((size_t)(n ? n : 1) * sizeof *src);
    char (*parts)[64] = malloc((size_t)(n ? n : 1) * sizeof *parts);
    if (!src || !parts) {
        free(src);
        free(parts);
        return pn_error_set(PN_ERR_NOMEM, "%s: out of memory", fname);
    }
    for (int k = 0; k < n; k++) {
        if (runs) {
            const pn_snapshot_run *u = &p->runs[k];
            pn_snapshot_part_name(h->step, u->stage, u->replica, parts[k], sizeof parts[k]);
            src[k] = (pn_hdf5_source){parts[k], name, 0, 1, 0, (hsize_t)u->at, (hsize_t)u->n};
            continue;
        }
        const pn_snapshot_source *s = &p->sources[k];
        pn_snapshot_part_name(h->step, s->stage, s->replica, parts[k], sizeof parts[k]);
        src[k] = s->step ? (pn_hdf5_source){parts[k], name, (hsize_t)s->first, (hsize_t)s->step,
                                            (hsize_t)s->count, 0, 0}
                         : (pn_hdf5_source){parts[k], name, 0, 1, (hsize_t)p->rows, 0, 0};
    }
    int rank = p->rows == 1 ? 1 : 2;
    hsize_t dims[2] = {p->rows == 1 ? (hsize_t)p->cols : (hsize_t)p->rows, (hsize_t)p->cols};
    int rc = pn_hdf5_write_virtual(file, fname, name, rank, dims, src, n);
    free(parts);
    free(src);
    return rc;
}

static int write_index(hid_t file, const char *fname, const pn_train_state *h,
                       const pn_snapshot_index_param *params, int n)
{
    PN_TRY(pn_hdf5_create_group(file, fname, "/params"));
    for (int i = 0; i < n; i++) {
        const pn_snapshot_index_param *p = &params[i];
        if (strlen(p->name) > PN_PARAM_NAME_MAX)
            return pn_error_set(PN_ERR_INVALID, "%s: parameter '%.40s...': name too long",
                                fname, p->name);
        for (int s = -1; s < h->n_slot_names; s++) PN_TRY(write_mapped(file, fname, h, p, s));
    }
    return 0;
}

int pn_snapshot_index_file_write(const char *path, const pn_train_state *header, int parts,
                                 const pn_snapshot_index_param *params, int n)
{
    PN_TRY(pn_snapshot_check_state(path, header, true));
    hid_t file;
    PN_TRY(pn_hdf5_create_file(path, true, &file));
    int rc = pn_snapshot_write_header(file, path, header, true, PN_SNAPSHOT_INDEX_VERSION, parts);
    if (rc == 0) rc = write_index(file, path, header, params, n);
    return pn_hdf5_close_after(file, path, rc);
}
