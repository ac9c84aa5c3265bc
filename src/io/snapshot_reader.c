/* Per-rank reads of one snapshot (snapshot_file.h: pn_snapshot_reader): a
 * parameter's datasets checked (storage, type, shape) and read whole, or one
 * owner's rows of a split table by a strided selection, from a version 1 file or
 * through an index's virtual datasets, whatever layout wrote it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/names.h"
#include "io/hdf5_util.h"
#include "io/snapshot_file.h"
#include "io/snapshot_format.h"

enum { NAME_CAP = sizeof "/optimizer/" + PN_PARAM_NAME_MAX + 1 + PN_SUFFIX_MAX };

struct pn_snapshot_reader {
    hid_t file;
    char *path;
    char parts[64]; /* an index: what its parts' names start with; else "" */
    pn_train_state *header;
};

int pn_snapshot_reader_open(const char *path, pn_snapshot_reader **out)
{
    pn_snapshot_reader *r = calloc(1, sizeof *r);
    *out = NULL;
    if (!r || !(r->path = strdup(path))) {
        free(r);
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    }
    int rc = pn_hdf5_open_file(path, H5P_DEFAULT, &r->file);
    if (rc < 0) r->file = H5I_INVALID_HID;
    if (rc == 0)
        rc = pn_snapshot_read_header_open(r->file, path, PN_FORMAT_SNAPSHOT, true, &r->header,
                                          r->parts, sizeof r->parts);
    if (rc < 0) {
        pn_snapshot_reader_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

void pn_snapshot_reader_close(pn_snapshot_reader *r)
{
    if (!r) return;
    if (r->file >= 0) pn_hdf5_close(r->file, r->path);
    pn_train_state_free(r->header);
    free(r->path);
    free(r);
}

const pn_train_state *pn_snapshot_reader_header(const pn_snapshot_reader *r)
{
    return r->header;
}

/* Checks array `slot` (-1: the values) of parameter name against the model's rows x
 * cols (the file's storage, type and shape) into dset, and reads it whole into out
 * unless out is NULL. */
static int check_array(pn_snapshot_reader *r, const char *name, int slot, int rows, int cols,
                       char *dset, float *out)
{
    const pn_train_state *h = r->header;
    char purpose[NAME_CAP + 64];
    if (strlen(name) > PN_PARAM_NAME_MAX || slot < -1 || slot >= h->n_slot_names)
        return pn_error_set(PN_ERR_INTERNAL, "%s: no array %d of parameter '%s'", r->path, slot,
                            name);
    snprintf(dset, NAME_CAP, "/params/%s", name);
    if (!pn_hdf5_link_exists(r->file, dset))
        return pn_error_set(PN_ERR_INVALID, "%s: has no parameter '%s'", r->path, name);
    int file_rows = 0, file_cols = 0;
    const char *parts = r->parts[0] ? r->parts : NULL;
    PN_TRY(pn_snapshot_read_floats(r->file, r->path, dset, NULL, parts, &file_rows, &file_cols,
                                   NULL));
    if (file_rows != rows || file_cols != cols)
        return pn_error_set(PN_ERR_INVALID, "%s: parameter '%s' is %d x %d, the model's is %d x "
                            "%d", r->path, name, file_rows, file_cols, rows, cols);
    if (slot >= 0) {
        snprintf(dset, NAME_CAP, "/optimizer/%s/%s", name, h->slot_names[slot]);
        snprintf(purpose, sizeof purpose, "slot '%s' of parameter '%s'", h->slot_names[slot],
                 name);
    }
    /* checked (storage, type, shape) before any value is read, then read */
    return pn_snapshot_read_floats(r->file, r->path, dset, slot >= 0 ? purpose : NULL, parts,
                                   &rows, &cols, out);
}

/* A failed read of part of dset, its parts named when it is virtual. */
static int name_parts(pn_snapshot_reader *r, const char *dset, int rc)
{
    hid_t d;
    if (rc < 0 && r->parts[0] && pn_hdf5_open_dataset(r->file, r->path, dset, NULL, &d) == 0) {
        rc = pn_snapshot_name_parts(d, rc);
        pn_hdf5_close(d, r->path);
    }
    return rc;
}

int pn_snapshot_reader_rows(pn_snapshot_reader *r, const char *name, int slot, int rows,
                            int cols, int first, int step, int count, float *out)
{
    char dset[NAME_CAP];
    bool whole = first == 0 && (step == 1 || count <= 1) && count == rows;
    PN_TRY(check_array(r, name, slot, rows, cols, dset, whole ? out : NULL));
    if (whole) return 0;
    return name_parts(r, dset, pn_hdf5_read_strided(r->file, r->path, dset, (hsize_t)first,
                                                    (hsize_t)step, (hsize_t)count, out));
}

int pn_snapshot_reader_run(pn_snapshot_reader *r, const char *name, int slot, int rows,
                           int cols, size_t at, size_t n, float *out)
{
    char dset[NAME_CAP];
    bool whole = at == 0 && n == (size_t)rows * (size_t)cols;
    PN_TRY(check_array(r, name, slot, rows, cols, dset, whole ? out : NULL));
    if (whole) return 0;
    return name_parts(r, dset, pn_hdf5_read_run(r->file, r->path, dset, (hsize_t)at,
                                                (hsize_t)n, out));
}
