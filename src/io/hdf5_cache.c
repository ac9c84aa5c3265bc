/* Chunk caches (hdf5_util.h): the slots of a cache, and a compressed dataset reopened
 * with a cache that holds its chunks (they are decompressed whole), after checking
 * that this HDF5 has every filter it was written with. */
#include "io/hdf5_util.h"

#include "base/error.h"

static bool is_prime(size_t n)
{
    for (size_t d = 2; d * d <= n; d++)
        if (n % d == 0) return false;
    return n >= 2;
}

size_t pn_hdf5_chunk_cache_slots(size_t cache_bytes, size_t chunk_bytes)
{
    /* Past ~2^20 slots a bigger table only costs memory: 100 per chunk asked HDF5 for
     * 800 MB of table for 4 MB of one-float chunks (found by fuzz/fuzz_dataset). */
    size_t chunks = cache_bytes / (chunk_bytes ? chunk_bytes : 1) + 1;
    size_t slots = chunks < ((size_t)1 << 20) / 100 ? 100 * chunks + 1 : ((size_t)1 << 20) + 1;
    while (!is_prime(slots)) slots += 2;
    return slots;
}

int pn_hdf5_cache_filtered(hid_t file, const char *fname, const char *name, int rank,
                           const hsize_t *dims, size_t elem_bytes, size_t cache_max,
                           hid_t *dset)
{
    char filter_name[64] = "";
    int rc = 0, nfilters = 0;
    hid_t dcpl = H5I_INVALID_HID, dapl = H5I_INVALID_HID;
    H5D_layout_t layout = H5D_LAYOUT_ERROR;
    hsize_t chunk[PN_HDF5_MAX_RANK];
    const char *what = "%s: dataset '/%s': cannot read its layout";
    PN_HDF5_CHECK(rc, dcpl = H5Dget_create_plist(*dset), what, fname, name);
    PN_HDF5_CHECK(rc, layout = H5Pget_layout(dcpl), what, fname, name);
    if (layout == H5D_CHUNKED) PN_HDF5_CHECK(rc, nfilters = H5Pget_nfilters(dcpl), what, fname,
                                             name);
    if (nfilters > 0) PN_HDF5_CHECK(rc, H5Pget_chunk(dcpl, rank, chunk), what, fname, name);
    for (int i = 0; rc == 0 && i < nfilters; i++) {
        unsigned flags, config;
        size_t n_values = 0;
        H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags, &n_values, NULL,
                                         sizeof filter_name, filter_name, &config);
        if (id < 0 || H5Zfilter_avail(id) <= 0)
            rc = pn_error_set(PN_ERR_UNSUPPORTED,
                              "%s: dataset '/%s' is compressed with filter %d (%s), which "
                              "this HDF5 build lacks: write it uncompressed or with gzip "
                              "(h5py: compression=\"gzip\")",
                              fname, name, (int)id, filter_name);
    }
    if (rc == 0 && nfilters > 0) {
        size_t chunk_bytes = elem_bytes, total = elem_bytes; /* as the file holds them */
        for (int k = 0; k < rank; k++) chunk_bytes *= chunk[k], total *= dims[k];
        size_t bytes = total < cache_max ? total : cache_max;
        size_t slots = pn_hdf5_chunk_cache_slots(bytes, chunk_bytes);
        what = "%s: dataset '/%s': cannot set its chunk cache";
        PN_HDF5_CHECK(rc, dapl = H5Pcreate(H5P_DATASET_ACCESS), what, fname, name);
        PN_HDF5_CHECK(rc, H5Pset_chunk_cache(dapl, slots, bytes, 0.75), what, fname, name);
        PN_HDF5_CHECK(rc, H5Dclose(*dset), what, fname, name);
        PN_HDF5_CHECK(rc, *dset = H5Dopen2(file, name, dapl), what, fname, name);
    }
    if (dapl >= 0) H5Pclose(dapl);
    if (dcpl >= 0) H5Pclose(dcpl);
    return rc;
}
