/* Token-sequence dataset files (token_file.h). */
#include "io/token_file.h"

#include "base/error.h"
#include "io/hdf5_util.h"
#include "io/text_vocab.h"

enum { CHUNK_BYTES = 1 << 20 }; /* at most this many bytes of ids per HDF5 chunk */

int pn_token_file_create(pn_token_file *f, const char *path, long samples, int seq,
                         bool with_lengths)
{
    *f = (pn_token_file){.path = path, .file = H5I_INVALID_HID, .tokens = H5I_INVALID_HID,
                         .targets = H5I_INVALID_HID, .lengths = H5I_INVALID_HID, .seq = seq};
    f->chunk_rows = CHUNK_BYTES / (4L * seq);
    if (f->chunk_rows < 1) f->chunk_rows = 1;
    if (f->chunk_rows > samples) f->chunk_rows = samples;
    hsize_t dims[2] = {(hsize_t)samples, (hsize_t)seq}, chunk = (hsize_t)f->chunk_rows;
    PN_TRY(pn_hdf5_create_file(path, false, &f->file));
    int rc = pn_hdf5_create_dataset(f->file, path, "tokens", PN_HDF5_INT32, 2, dims, chunk,
                                    &f->tokens);
    if (rc == 0)
        rc = pn_hdf5_create_dataset(f->file, path, "targets", PN_HDF5_INT32, 2, dims, chunk,
                                    &f->targets);
    if (rc == 0 && with_lengths)
        rc = pn_hdf5_create_dataset(f->file, path, "lengths", PN_HDF5_INT32, 1, dims, chunk,
                                    &f->lengths);
    return rc;
}

int pn_token_file_write(pn_token_file *f, long row, long n, const int32_t *tokens,
                        const int32_t *targets, const int32_t *lengths)
{
    hsize_t at = (hsize_t)row, rows = (hsize_t)n;
    PN_TRY(pn_hdf5_write_rows(f->tokens, f->path, "tokens", PN_HDF5_INT32, at, rows, tokens));
    PN_TRY(pn_hdf5_write_rows(f->targets, f->path, "targets", PN_HDF5_INT32, at, rows,
                              targets));
    if (f->lengths != H5I_INVALID_HID)
        PN_TRY(pn_hdf5_write_rows(f->lengths, f->path, "lengths", PN_HDF5_INT32, at, rows,
                                  lengths));
    return 0;
}

/* Closes the datasets still open; returns the first error, rc included. */
static int close_datasets(pn_token_file *f, int rc)
{
    hid_t *sets[] = {&f->tokens, &f->targets, &f->lengths};
    for (int i = 0; i < 3; i++) {
        if (*sets[i] != H5I_INVALID_HID) rc = pn_hdf5_close_after(*sets[i], f->path, rc);
        *sets[i] = H5I_INVALID_HID;
    }
    return rc;
}

int pn_token_file_finish(pn_token_file *f, const char *source, int rc)
{
    rc = close_datasets(f, rc);
    if (rc == 0) rc = pn_hdf5_write_attr_string(f->file, f->path, "source", source, false);
    if (rc == 0) rc = pn_hdf5_write_attr_string(f->file, f->path, "tokenizer", "bytes", false);
    if (rc == 0) rc = pn_hdf5_write_attr_int(f->file, f->path, "vocab_size", PN_TEXT_VOCAB);
    if (rc == 0) rc = pn_hdf5_write_attr_int(f->file, f->path, "num_classes", PN_TEXT_VOCAB);
    if (rc == 0) rc = pn_hdf5_write_attr_int(f->file, f->path, "seq", f->seq);
    if (rc == 0) rc = pn_hdf5_write_attr_int(f->file, f->path, "stride", f->seq);
    return rc;
}

int pn_token_file_close(pn_token_file *f, int rc)
{
    rc = close_datasets(f, rc);
    if (f->file != H5I_INVALID_HID) rc = pn_hdf5_close_after(f->file, f->path, rc);
    f->file = H5I_INVALID_HID;
    return rc;
}
