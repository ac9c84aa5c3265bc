/* Fashion-MNIST IDX (gzip, big-endian header: magic 0x00000803 then count, rows,
 * cols for images; 0x00000801 then count for labels) to dataset HDF5. Labels are
 * read and checked first, then images are streamed a chunk at a time, so memory
 * stays small; a gzip stream must end exactly where its header says. */
#include "io/import_fashion.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/error.h"
#include "io/hdf5_util.h"
#include "io/import_util.h"

enum {
    IMAGE_MAGIC = 0x00000803,
    LABEL_MAGIC = 0x00000801,
    SIDE = 28,
    PIXELS = SIDE * SIDE,
    NUM_CLASSES = 10,
    CHUNK_ROWS = 256 /* samples per HDF5 chunk and per streamed block */
};

/* One IDX file being read. */
typedef struct idx_file {
    char path[PATH_MAX];
    gzFile gz;
    long count;
} idx_file;

static int gz_failure(idx_file *f)
{
    int err;
    const char *msg = gzerror(f->gz, &err);
    size_t len = strlen(f->path); /* zlib's message starts with "<path>: " */
    if (!strncmp(msg, f->path, len) && !strncmp(msg + len, ": ", 2)) msg += len + 2;
    if (err == Z_ERRNO)
        return pn_error_set(PN_ERR_IO, "%s: read failed: %s", f->path, strerror(errno));
    return pn_error_set(PN_ERR_INVALID, "%s: corrupt gzip data (%s)", f->path, msg);
}

/* Reads exactly n bytes; a short read is a truncated file (what says of what). */
static int read_exact(idx_file *f, void *buf, size_t n, const char *what)
{
    size_t got = 0;
    while (got < n) {
        size_t want = n - got < ((size_t)1 << 30) ? n - got : (size_t)1 << 30;
        int k = gzread(f->gz, (char *)buf + got, (unsigned)want);
        if (k < 0) return gz_failure(f);
        if (k == 0) break;
        got += (size_t)k;
    }
    if (got == n) return 0;
    int err;
    gzerror(f->gz, &err);
    if (err != Z_OK && err != Z_BUF_ERROR) return gz_failure(f);
    return pn_error_set(PN_ERR_INVALID, "%s: truncated: %s", f->path, what);
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Opens dir/name and reads its header: magic, then n_dims extents into dims. */
static int idx_open(idx_file *f, const char *dir, const char *name, uint32_t magic, int n_dims,
                    uint32_t *dims)
{
    if ((size_t)snprintf(f->path, sizeof f->path, "%s/%s", dir, name) >= sizeof f->path)
        return pn_error_set(PN_ERR_INVALID, "path too long: %s/%s", dir, name);
    errno = 0;
    if (!(f->gz = gzopen(f->path, "rb")))
        return pn_error_set(PN_ERR_IO, "cannot open '%s': %s", f->path,
                            errno ? strerror(errno) : "out of memory");
    gzbuffer(f->gz, 1 << 18);
    unsigned char header[4 * 4];
    PN_TRY(read_exact(f, header, 4 * (size_t)(1 + n_dims), "the file ends inside its IDX header"));
    uint32_t found = be32(header);
    if (found != magic)
        return pn_error_set(PN_ERR_INVALID, "%s: bad magic 0x%08x, expected 0x%08x (IDX %s)",
                            f->path, found, magic,
                            magic == IMAGE_MAGIC ? "images" : "labels");
    for (int k = 0; k < n_dims; k++) dims[k] = be32(header + 4 * (k + 1));
    f->count = (long)dims[0];
    return 0;
}

/* Checks that the stream ends right after the data (which also makes zlib verify
 * the gzip CRC and length) and closes it. */
static int idx_finish(idx_file *f, const char *items)
{
    char extra;
    int k = gzread(f->gz, &extra, 1), err;
    if (k < 0) return gz_failure(f);
    if (k > 0)
        return pn_error_set(PN_ERR_INVALID, "%s: data continues after the %ld %s its header "
                            "announces",
                            f->path, f->count, items);
    gzerror(f->gz, &err);
    if (err == Z_BUF_ERROR)
        return pn_error_set(PN_ERR_INVALID, "%s: truncated gzip stream (unexpected end of file)",
                            f->path);
    int rc = gzclose_r(f->gz);
    f->gz = NULL;
    if (rc != Z_OK)
        return pn_error_set(PN_ERR_INVALID, "%s: corrupt gzip data (zlib error %d)", f->path, rc);
    return 0;
}

static void idx_close(idx_file *f)
{
    if (f->gz) gzclose_r(f->gz);
    f->gz = NULL;
}

/* Reads all labels of f into labels[f->count], each in 0..9. */
static int read_labels(idx_file *f, int32_t *labels)
{
    unsigned char block[4096];
    char what[128];
    snprintf(what, sizeof what, "the header announces %ld labels but the data ends early",
             f->count);
    for (long i = 0; i < f->count;) {
        size_t n = f->count - i < (long)sizeof block ? (size_t)(f->count - i) : sizeof block;
        PN_TRY(read_exact(f, block, n, what));
        for (size_t k = 0; k < n; k++, i++) {
            if (block[k] >= NUM_CLASSES)
                return pn_error_set(PN_ERR_INVALID, "%s: label %d of sample %ld is outside 0..%d",
                                    f->path, block[k], i, NUM_CLASSES - 1);
            labels[i] = block[k];
        }
    }
    return idx_finish(f, "labels");
}

/* Streams the images of f into dataset dset of the HDF5 file out, scaled to [0, 1],
 * through the buffers pixels and values of CHUNK_ROWS images each. */
static int copy_images(idx_file *f, hid_t dset, const char *out, unsigned char *pixels,
                       float *values)
{
    char what[128];
    snprintf(what, sizeof what,
             "the header announces %ld images of %dx%d but the data ends early", f->count, SIDE,
             SIDE);
    for (long row = 0; row < f->count;) {
        long rows = f->count - row < CHUNK_ROWS ? f->count - row : CHUNK_ROWS;
        PN_TRY(read_exact(f, pixels, (size_t)rows * PIXELS, what));
        for (size_t k = 0; k < (size_t)rows * PIXELS; k++) values[k] = pixels[k] / 255.0f;
        PN_TRY(pn_hdf5_write_rows(dset, out, "features", PN_HDF5_FLOAT32, (hsize_t)row,
                                  (hsize_t)rows, values));
        row += rows;
    }
    return idx_finish(f, "images");
}

/* Writes the HDF5 file tmp from the open IDX files (labels already read). */
static int write_split(const char *tmp, idx_file *images, idx_file *labels_file,
                       const int32_t *labels)
{
    hid_t file, features = H5I_INVALID_HID;
    PN_TRY(pn_hdf5_create_file(tmp, false, &file));
    hsize_t dims[2] = {(hsize_t)images->count, PIXELS};
    char source[2 * PATH_MAX + 64];
    snprintf(source, sizeof source, "Fashion-MNIST IDX from %s and %s", images->path,
             labels_file->path);
    int rc = pn_hdf5_create_dataset(file, tmp, "features", PN_HDF5_FLOAT32, 2, dims, CHUNK_ROWS,
                                    &features);
    unsigned char *pixels = NULL;
    float *values = NULL;
    if (rc == 0 && (!(pixels = malloc(CHUNK_ROWS * PIXELS)) ||
                    !(values = malloc(CHUNK_ROWS * PIXELS * sizeof *values))))
        rc = pn_error_set(PN_ERR_NOMEM, "%s: out of memory for image buffers", tmp);
    if (rc == 0) rc = copy_images(images, features, tmp, pixels, values);
    free(pixels);
    free(values);
    if (features >= 0) {
        int rc_close = pn_hdf5_close(features, tmp);
        if (rc == 0) rc = rc_close;
    }
    if (rc == 0)
        rc = pn_hdf5_write_dataset(file, tmp, "labels", PN_HDF5_INT32, 1, dims, CHUNK_ROWS,
                                   labels);
    if (rc == 0) rc = pn_hdf5_write_attr_string(file, tmp, "source", source, false);
    if (rc == 0) rc = pn_hdf5_write_attr_int(file, tmp, "num_classes", NUM_CLASSES);
    int rc_close = pn_hdf5_close(file, tmp);
    return rc < 0 ? rc : rc_close;
}

/* Imports one split (IDX prefix "train" or "t10k") into out; *samples = its size. */
static int import_split(const char *src, const char *prefix, const char *out, long *samples)
{
    idx_file images = {0}, labels_file = {0};
    uint32_t image_dims[3], label_dims[1];
    char name[64], tmp[PATH_MAX + 32];
    int32_t *labels = NULL;
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte.gz", prefix);
    int rc = idx_open(&labels_file, src, name, LABEL_MAGIC, 1, label_dims);
    snprintf(name, sizeof name, "%s-images-idx3-ubyte.gz", prefix);
    if (rc == 0) rc = idx_open(&images, src, name, IMAGE_MAGIC, 3, image_dims);
    if (rc == 0 && (image_dims[1] != SIDE || image_dims[2] != SIDE))
        rc = pn_error_set(PN_ERR_INVALID, "%s: images are %ux%u, expected %dx%d", images.path,
                          image_dims[1], image_dims[2], SIDE, SIDE);
    if (rc == 0 && images.count != labels_file.count)
        rc = pn_error_set(PN_ERR_INVALID, "%s holds %ld images but %s holds %ld labels",
                          images.path, images.count, labels_file.path, labels_file.count);
    if (rc == 0 && images.count == 0)
        rc = pn_error_set(PN_ERR_INVALID, "%s holds no images", images.path);
    if (rc == 0 && !(labels = malloc((size_t)labels_file.count * sizeof *labels)))
        rc = pn_error_set(PN_ERR_NOMEM, "%s: out of memory for %ld labels", labels_file.path,
                          labels_file.count);
    if (rc == 0) rc = read_labels(&labels_file, labels);
    if (rc == 0) rc = pn_import_tmp_name(out, tmp, sizeof tmp);
    if (rc == 0) rc = pn_import_finish(tmp, out, write_split(tmp, &images, &labels_file, labels));
    free(labels);
    idx_close(&images);
    idx_close(&labels_file);
    *samples = images.count;
    return rc;
}

int pn_import_fashion_mnist(const char *src_dir, const char *out_dir,
                            pn_import_progress progress, void *ctx)
{
    static const char *const prefixes[2] = {"train", "t10k"};
    PN_TRY(pn_import_make_dirs(out_dir));
    for (int s = 0; s < 2; s++) {
        char out[PATH_MAX];
        long samples;
        PN_TRY(pn_import_output(out_dir, s, out, sizeof out));
        PN_TRY(import_split(src_dir, prefixes[s], out, &samples));
        if (progress) progress(out, samples, ctx);
    }
    return 0;
}
