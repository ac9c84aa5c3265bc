/* The predictions file of `pipenet infer` (predictions.h), written under a temporary
 * name and put in place whole (base/out_file.h). */
#include "io/predictions.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "base/out_file.h"
#include "io/hdf5_util.h"

struct pn_predictions {
    char *path, *tmp;
    hid_t file, outputs, predictions, scores; /* the last two H5I_INVALID_HID: no classes */
};

/* Creates a dataset of spec's samples: [N, width] or [N, seq, width] floats (values),
 * or [N] or [N, seq] ints (one per row). */
static int create_dataset(pn_predictions *w, const pn_predictions_spec *spec, const char *name,
                          bool values, hid_t *out)
{
    hsize_t dims[3] = {(hsize_t)spec->n, (hsize_t)spec->seq, (hsize_t)spec->width};
    int rank = spec->seq > 1 ? 2 : 1;
    if (spec->seq == 1) dims[1] = (hsize_t)spec->width;
    return pn_hdf5_create_dataset(w->file, w->tmp, name,
                                  values ? PN_HDF5_FLOAT32 : PN_HDF5_INT32,
                                  values ? rank + 1 : rank, dims, (hsize_t)spec->chunk_rows, out);
}

int pn_predictions_create(pn_predictions **out, const char *path, const pn_predictions_spec *spec)
{
    *out = NULL;
    pn_predictions *w = calloc(1, sizeof *w);
    size_t len = strlen(path) + 32;
    if (!w || !(w->path = strdup(path)) || !(w->tmp = malloc(len))) {
        if (w) free(w->path);
        free(w);
        return pn_error_set(PN_ERR_NOMEM, "out of memory for '%s'", path);
    }
    pn_out_temp_name(path, w->tmp, len); /* fits: len has room for the suffix */
    w->file = w->outputs = w->predictions = w->scores = H5I_INVALID_HID;
    *out = w;
    PN_TRY(pn_hdf5_create_file(w->tmp, false, &w->file));
    PN_TRY(create_dataset(w, spec, "outputs", true, &w->outputs));
    if (spec->classes) {
        PN_TRY(create_dataset(w, spec, "predictions", false, &w->predictions));
        PN_TRY(create_dataset(w, spec, "scores", true, &w->scores));
    }
    PN_TRY(pn_hdf5_write_attr_string(w->file, w->tmp, "source", "pipenet infer", false));
    PN_TRY(pn_hdf5_write_attr_string(w->file, w->tmp, "model", spec->model, false));
    PN_TRY(pn_hdf5_write_attr_string(w->file, w->tmp, "data", spec->data, false));
    return pn_hdf5_write_attr_string(w->file, w->tmp, "output", spec->output, false);
}

int pn_predictions_write(pn_predictions *w, long row0, int rows, const float *outputs,
                         const int *predictions, const float *scores)
{
    PN_TRY(pn_hdf5_write_rows(w->outputs, w->tmp, "outputs", PN_HDF5_FLOAT32, (hsize_t)row0,
                              (hsize_t)rows, outputs));
    if (w->predictions == H5I_INVALID_HID) return PN_OK; /* not a classification */
    PN_TRY(pn_hdf5_write_rows(w->predictions, w->tmp, "predictions", PN_HDF5_INT32,
                              (hsize_t)row0, (hsize_t)rows, predictions));
    return pn_hdf5_write_rows(w->scores, w->tmp, "scores", PN_HDF5_FLOAT32, (hsize_t)row0,
                              (hsize_t)rows, scores);
}

int pn_predictions_close(pn_predictions *w, bool keep)
{
    if (!w) return PN_OK;
    int rc = pn_hdf5_close(w->outputs, w->tmp);
    int rc2 = pn_hdf5_close(w->scores, w->tmp);
    int rc3 = pn_hdf5_close(w->predictions, w->tmp);
    int rc4 = pn_hdf5_close(w->file, w->tmp);
    if (rc == PN_OK) rc = rc2;
    if (rc == PN_OK) rc = rc3;
    if (rc == PN_OK) rc = rc4;
    if (keep && rc == PN_OK) rc = pn_out_rename(w->tmp, w->path, "--out"); /* or removes it */
    else unlink(w->tmp);
    free(w->path);
    free(w->tmp);
    free(w);
    return rc;
}
