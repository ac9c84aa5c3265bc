/* Listings (hdf5_util.h): the names in a group, and every dataset of a file with
 * its type, shape, storage (chunks and checksum; a virtual dataset's sources, an
 * external one's files, and whether they are all there), as `pipenet inspect` shows
 * them; a dataset HDF5 cannot open is listed as unreadable rather than ending the
 * walk. */
#include "io/hdf5_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

typedef struct name_walk {
    pn_hdf5_name_fn fn;
    void *ctx;
    int rc;
} name_walk;

static herr_t on_link(hid_t group, const char *name, const H5L_info_t *info, void *data)
{
    name_walk *w = data;
    w->rc = w->fn(w->ctx, name);
    return w->rc != 0 ? 1 : 0;
}

int pn_hdf5_list_group(hid_t file, const char *fname, const char *path, pn_hdf5_name_fn fn,
                       void *ctx)
{
    name_walk w = {fn, ctx, 0};
    int rc = 0;
    pn_hdf5_lock();
    hid_t group = H5I_INVALID_HID;
    PN_HDF5_CHECK(rc, group = H5Gopen2(file, path, H5P_DEFAULT), "%s: '%s' is not a group",
                  fname, path);
    if (rc < 0) rc = PN_ERR_INVALID; /* the file's content, not I/O, is at fault */
    PN_HDF5_CHECK(rc, H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, NULL, on_link, &w),
                  "%s: group '%s': cannot list it", fname, path);
    if (w.rc != 0) rc = w.rc;
    if (group >= 0) H5Gclose(group);
    pn_hdf5_unlock();
    return rc;
}

typedef struct dataset_walk {
    pn_hdf5_dataset_fn fn;
    void *ctx;
    int rc;
    const char *fname;
} dataset_walk;

/* Fills info from the open dataset dset of the file at fname. */
static void describe_dataset(hid_t dset, const char *fname, pn_hdf5_dataset_info *info)
{
    hid_t t = H5Dget_type(dset), space = H5Dget_space(dset), dcpl = H5Dget_create_plist(dset);
    snprintf(info->type, sizeof info->type, "?");
    if (t >= 0) pn_hdf5_type_name(t, info->type, sizeof info->type);
    /* HDF5 allows 32 dimensions; dims holds fewer: a larger rank is shown unknown */
    int rank = space < 0 ? -1 : H5Sget_simple_extent_ndims(space);
    info->rank = rank < 0 || rank > (int)(sizeof info->dims / sizeof *info->dims)
                     ? -1
                     : H5Sget_simple_extent_dims(space, info->dims, NULL);
    if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED) {
        info->chunk_rank = H5Pget_chunk(dcpl, PN_HDF5_MAX_RANK + 4, info->chunk);
        unsigned flags;
        info->checksum = H5Pget_filter_by_id2(dcpl, H5Z_FILTER_FLETCHER32, &flags, NULL, NULL, 0,
                                              NULL, NULL) >= 0;
    }
    H5Eclear2(H5E_DEFAULT);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (space >= 0) H5Sclose(space);
    if (t >= 0) H5Tclose(t);
    info->storage = pn_hdf5_storage_kind(dset);
    if (info->storage != PN_HDF5_VIRTUAL && info->storage != PN_HDF5_EXTERNAL) return;
    pn_hdf5_storage_sources(dset, info->sources, sizeof info->sources);
    char *before = strdup(pn_error_message()); /* the listing is no failure of its own */
    if (pn_hdf5_check_storage(dset, fname, info->name) < 0)
        snprintf(info->missing, sizeof info->missing, "%s", pn_error_message());
    if (before) pn_error_set(PN_OK, "%s", before);
    free(before);
}

static herr_t on_object(hid_t root, const char *name, const H5L_info_t *info, void *data)
{
    dataset_walk *w = data;
    pn_hdf5_dataset_info d = {.name = name};
    hid_t obj = H5Oopen(root, name, H5P_DEFAULT);
    if (obj < 0) {
        H5Eclear2(H5E_DEFAULT);
        d.unreadable = true;
        d.rank = -1;
        w->rc = w->fn(w->ctx, &d);
        return w->rc != 0;
    }
    if (H5Iget_type(obj) == H5I_DATASET) {
        describe_dataset(obj, w->fname, &d);
        w->rc = w->fn(w->ctx, &d);
    }
    H5Oclose(obj);
    return w->rc != 0;
}

int pn_hdf5_list_datasets(hid_t file, const char *fname, pn_hdf5_dataset_fn fn, void *ctx)
{
    dataset_walk w = {fn, ctx, 0, fname};
    int rc = 0;
    pn_hdf5_lock();
    PN_HDF5_CHECK(rc, H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, on_object, &w),
                  "%s: cannot list its datasets", fname);
    if (w.rc != 0) rc = w.rc;
    pn_hdf5_unlock();
    return rc;
}
