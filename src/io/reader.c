/* pn_reader: this caller's slice of every global batch of a dataset HDF5 file. The
 * epoch's order is a Fisher-Yates permutation keyed by (seed, epoch) only. A worker
 * thread reads the next batch into one of two buffers while the caller uses the
 * other; the batch's rows are read in file order, each straight into its place.
 * Unfiltered chunks get no chunk cache, so HDF5 reads just the rows asked for.
 * A file whose fields fit the caller's cache budget is read whole at open, and its
 * batches are then copied from memory in the caller's thread (no HDF5 call, no
 * lock, no thread competing with BLAS for a core). A virtual or external dataset
 * is read only when all its values are there (pn_hdf5_check_storage: at open, and
 * at each epoch's start for one read from its files).
 * HDF5 converts the file's element type to what a field reads (reader_types.h):
 * wide ids pass through a staging buffer of one batch (or 1 MiB when caching) and
 * are narrowed with checks, so no dataset is ever held whole in a wider type.
 * Everything is allocated at open. */
#include "io/reader.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "base/names.h"
#include "io/hdf5_util.h"
#include "io/reader_csr.h"
#include "io/reader_types.h"
#include "io/sample_order.h"

enum { MESSAGE_CAP = 1024 };

/* Chunk cache of a compressed dataset, whose chunks must be decompressed whole. */
static const size_t FILTERED_CACHE_MAX = (size_t)256 << 20;

/* Wide ids read into memory whole are staged in pieces of at least this many bytes. */
static const size_t STAGE_BYTES = (size_t)1 << 20;

typedef struct field {
    const char *name;   /* dataset name as the caller gave it */
    hid_t dset;
    hid_t fspace;       /* file dataspace, reselected for every batch */
    hid_t mspace;       /* memory dataspace [count, ...]: one slot's buffer */
    int rank;
    hsize_t dims[PN_HDF5_MAX_RANK];
    bool ids;
    size_t elems;       /* values per sample: width * seq, or seq ids */
    char *cache;        /* the whole dataset in memory, or NULL */
    bool elsewhere;     /* virtual or external: its values are in other files */
    pn_reader_field spec; /* as the caller gave it: the bounds on ids, names for messages */
    pn_hdf5_elem elem;  /* what the file holds */
    pn_hdf5_type mem;   /* what HDF5 converts it to: float32, int32, or wide ids */
    char *stage;        /* wide ids: stage_rows samples of 8-byte values, else NULL */
    long stage_rows;
    pn_csr_source *csr; /* a sparse field's CSR group (reader_csr.h), else NULL */
} field;

/* One buffer of the double buffer: a batch and the outcome of loading it. */
typedef struct slot {
    pn_batch batch;
    void **data;        /* [n_fields] count * elems values */
    bool ready;
    int rc;
    char message[MESSAGE_CAP];
} slot;

struct pn_reader {
    char *path;
    hid_t file;
    int n_fields;
    field *fields;
    pn_reader_options opt;
    long samples, batches;

    /* worker only */
    long *perm;         /* permutation of perm_epoch (shuffle only) */
    long perm_epoch;
    pn_row_ref *order;     /* [count] */

    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    /* under mu */
    bool stop, job_pending, busy;
    int job_slot;
    long job_epoch, job_index;
    slot slots[2];

    /* caller only: slots[current] holds or will hold batch (epoch, index) */
    int current;
    long epoch, index;
};

/* Checks one sample's values (row `row` of the file), as reader_types.h says. */
static int check_sample(const pn_reader *r, const field *f, long row, const void *values)
{
    return pn_reader_check_values(r->path, f->name, &f->spec, &f->elem, row, values, f->elems);
}

/* Reads the rows order[0..rows) (sorted by file row) of field f into out, each at
 * its position in the batch: one H5Dread per run of rows consecutive both in the
 * file and in the batch (in file order the whole batch is one run). Memory and
 * file selections have the same shape, which keeps HDF5 on its fast path. For
 * 128 random rows of 784 floats this took 0.2-0.5 ms; one union of row
 * hyperslabs per batch took 3-4 ms, a point selection 25-30 ms. */
static int read_field(pn_reader *r, field *f, long rows, void *out, pn_csr *csr)
{
    if (f->csr) return pn_csr_read(f->csr, r->order, rows, csr);
    void *dst = f->stage ? f->stage : out; /* wide ids: narrowed below */
    const pn_row_ref *order = r->order;
    if (f->cache) {
        size_t bytes = f->elems * 4;
        for (long k = 0; k < rows; k++)
            memcpy((char *)out + (size_t)order[k].pos * bytes,
                   f->cache + (size_t)order[k].row * bytes, bytes);
        return 0;
    }
    hsize_t fstart[PN_HDF5_MAX_RANK] = {0}, mstart[PN_HDF5_MAX_RANK] = {0};
    hsize_t count[PN_HDF5_MAX_RANK];
    for (int k = 1; k < f->rank; k++) count[k] = f->dims[k];
    hid_t type = pn_hdf5_mem_type(f->mem);
    int rc = 0;
    pn_hdf5_lock();
    for (long k = 0; k < rows && rc == 0;) {
        long run = 1;
        while (k + run < rows && order[k + run].row == order[k].row + run &&
               order[k + run].pos == order[k].pos + run)
            run++;
        fstart[0] = (hsize_t)order[k].row;
        mstart[0] = (hsize_t)order[k].pos;
        count[0] = (hsize_t)run;
        const char *what = "%s: cannot read dataset '/%s' (rows from %ld)";
        PN_HDF5_CHECK(rc, H5Sselect_hyperslab(f->fspace, H5S_SELECT_SET, fstart, NULL, count, NULL),
                      what, r->path, f->name, order[k].row);
        PN_HDF5_CHECK(rc, H5Sselect_hyperslab(f->mspace, H5S_SELECT_SET, mstart, NULL, count, NULL),
                      what, r->path, f->name, order[k].row);
        PN_HDF5_CHECK(rc, H5Dread(f->dset, type, f->mspace, f->fspace, H5P_DEFAULT, dst), what,
                      r->path, f->name, order[k].row);
        k += run;
    }
    pn_hdf5_unlock();
    for (long k = 0; k < rows && rc == 0; k++) { /* what the file held: check it */
        size_t pos = (size_t)order[k].pos * f->elems;
        if (f->stage)
            rc = pn_reader_narrow_ids(r->path, f->name, &f->spec, f->mem, order[k].row,
                                      f->stage + pos * 8, f->elems, (int *)out + pos);
        if (rc == 0) rc = check_sample(r, f, order[k].row, (const char *)out + pos * 4);
    }
    return rc;
}

/* Fills slot s with this caller's rows of batch index of epoch (worker thread). */
static int load_batch(pn_reader *r, slot *s, long epoch, long index)
{
    const pn_reader_options *o = &r->opt;
    long start = index * o->global_batch, size = r->samples - start;
    if (size > o->global_batch) size = o->global_batch;
    long rows = size - o->first;
    rows = rows < 0 ? 0 : rows > o->count ? o->count : rows;
    s->batch.epoch = epoch;
    s->batch.index = index;
    s->batch.rows = (int)rows;
    s->batch.sample0 = o->first;
    if (o->shuffle && r->perm_epoch != epoch) {
        pn_sample_permutation(r->samples, true, o->seed, epoch, r->perm);
        r->perm_epoch = epoch;
    }
    for (long k = 0; k < rows; k++) {
        long at = start + o->first + k;
        r->order[k].row = o->shuffle ? r->perm[at] : at;
        r->order[k].pos = k;
    }
    pn_sort_rows(r->order, (size_t)rows);
    for (int f = 0; f < r->n_fields && index == 0; f++) /* sources checked again each epoch */
        if (r->fields[f].elsewhere && !r->fields[f].cache)
            PN_TRY(pn_hdf5_check_storage(r->fields[f].dset, r->path, r->fields[f].name));
    for (int f = 0; f < r->n_fields; f++) /* a CSR field of no rows says so (fuzz_csr) */
        if (rows > 0 || r->fields[f].csr)
            PN_TRY(read_field(r, &r->fields[f], rows, s->data[f], &s->batch.csr[f]));
    return 0;
}

static void *worker_main(void *arg)
{
    pn_reader *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->stop && !r->job_pending) pthread_cond_wait(&r->wake, &r->mu);
        if (r->stop) break;
        slot *s = &r->slots[r->job_slot];
        long epoch = r->job_epoch, index = r->job_index;
        r->job_pending = false;
        r->busy = true;
        pthread_mutex_unlock(&r->mu);

        pn_error_clear();
        int rc = load_batch(r, s, epoch, index);

        pthread_mutex_lock(&r->mu);
        s->rc = rc;
        if (rc < 0) snprintf(s->message, sizeof s->message, "%s", pn_error_message());
        s->ready = true;
        r->busy = false;
        pthread_cond_broadcast(&r->done);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* Queues batch (epoch, index) into slots[current] and records it as the cursor;
 * the worker must be idle. */
static void request(pn_reader *r, long epoch, long index)
{
    r->epoch = epoch;
    r->index = index;
    if (r->fields[0].cache || (r->fields[0].csr && r->fields[0].csr->cols)) {
        /* a memory copy: cheaper inline than waking a thread */
        slot *s = &r->slots[r->current];
        s->rc = load_batch(r, s, epoch, index);
        if (s->rc < 0) snprintf(s->message, sizeof s->message, "%s", pn_error_message());
        s->ready = true;
        return;
    }
    pthread_mutex_lock(&r->mu);
    r->slots[r->current].ready = false;
    r->job_slot = r->current;
    r->job_epoch = epoch;
    r->job_index = index;
    r->job_pending = true;
    pthread_cond_signal(&r->wake);
    pthread_mutex_unlock(&r->mu);
}

static int check_options(const char *path, const pn_reader_field *fields, int n_fields,
                         const pn_reader_options *o)
{
    if (n_fields < 1) return pn_error_set(PN_ERR_INVALID, "%s: a reader needs a field", path);
    if (o->global_batch < 1 || o->first < 0 || o->count < 1 ||
        o->first + o->count > o->global_batch)
        return pn_error_set(PN_ERR_INVALID,
                            "%s: rows [%d, %d + %d) do not fit a global batch of %d", path,
                            o->first, o->first, o->count, o->global_batch);
    for (int i = 0; i < n_fields; i++) {
        const pn_reader_field *f = &fields[i];
        if (!f->dataset || !f->dataset[0])
            return pn_error_set(PN_ERR_INVALID, "%s: field %d names no dataset", path, i);
        if (f->shape.seq < 1 || (!f->shape.ids && !f->shape.sparse && f->shape.width < 1))
            return pn_error_set(PN_ERR_INVALID, "%s: dataset '/%s': bad sample shape %dx%d",
                                path, f->dataset, f->shape.seq, f->shape.width);
    }
    return 0;
}

/* Checks field f's element type and shape against spec, and says once (unless
 * spec->quiet) when HDF5 converts its values. */
static int check_field(pn_reader *r, field *f, const pn_reader_field *spec)
{
    PN_TRY(pn_hdf5_dataset_elem(f->dset, r->path, f->name, &f->elem));
    PN_TRY(pn_reader_mem_type(r->path, f->name, spec, &f->elem, &f->mem));
    hsize_t dims[H5S_MAX_RANK];
    PN_TRY(pn_hdf5_dataset_extent(f->dset, r->path, f->name, &f->rank, dims));
    PN_TRY(pn_reader_check_shape(r->path, f->name, spec, f->rank, dims));
    for (int k = 0; k < PN_HDF5_MAX_RANK; k++) f->dims[k] = k < f->rank ? dims[k] : 1;
    PN_TRY(pn_hdf5_check_storage(f->dset, r->path, f->name));
    char note[128];
    pn_reader_type_note(&f->elem, f->mem, note, sizeof note);
    if (note[0] && !spec->quiet) pn_log_info("%s: dataset '/%s': %s", r->path, f->name, note);
    return 0;
}

/* Opens field i, checks it against what the model expects and makes its dataspaces. */
static int open_field(pn_reader *r, int i, const pn_reader_field *spec)
{
    field *f = &r->fields[i];
    f->spec = *spec;
    f->name = spec->dataset[0] == '/' ? spec->dataset + 1 : spec->dataset;
    f->ids = spec->shape.ids;
    f->elems = (size_t)spec->shape.seq * (f->ids ? 1 : (size_t)spec->shape.width);
    if (spec->shape.sparse) { /* a CSR group: one "value" a sample for the counts here */
        if (!(f->csr = malloc(sizeof *f->csr)))
            return pn_error_set(PN_ERR_NOMEM, "%s: out of memory", r->path);
        PN_TRY(pn_csr_open(f->csr, r->file, r->path, spec, r->opt.count));
        f->rank = 1, f->elems = 1, f->dims[0] = (hsize_t)f->csr->n;
        return 0;
    }
    char purpose[PN_NAME_MAX + 64];
    if (spec->input)
        snprintf(purpose, sizeof purpose, "the model's input '%s' reads it", spec->input);
    PN_TRY(pn_hdf5_open_dataset(r->file, r->path, f->name, spec->input ? purpose : NULL,
                                &f->dset));
    PN_TRY(check_field(r, f, spec));
    pn_hdf5_storage storage = pn_hdf5_storage_kind(f->dset);
    f->elsewhere = storage == PN_HDF5_VIRTUAL || storage == PN_HDF5_EXTERNAL;
    pn_hdf5_lock();
    int rc = pn_hdf5_cache_filtered(r->file, r->path, f->name, f->rank, f->dims, f->elem.bytes,
                                    FILTERED_CACHE_MAX, &f->dset);
    hsize_t mdims[PN_HDF5_MAX_RANK];
    memcpy(mdims, f->dims, sizeof mdims);
    mdims[0] = (hsize_t)r->opt.count;
    const char *what = "%s: dataset '/%s': cannot make its dataspaces";
    PN_HDF5_CHECK(rc, f->fspace = H5Dget_space(f->dset), what, r->path, f->name);
    PN_HDF5_CHECK(rc, f->mspace = H5Screate_simple(f->rank, mdims, NULL), what, r->path, f->name);
    pn_hdf5_unlock();
    return rc;
}

/* A field's bytes for n samples; false when that does not fit a size_t. */
static bool field_bytes(const field *f, size_t n, size_t *bytes)
{
    if (f->csr) return pn_csr_cache_bytes(f->csr, bytes); /* cached whole (never per batch) */
    return !__builtin_mul_overflow(n, f->elems * 4, bytes); /* elems * 4 <= 2^62 (count_samples) */
}

/* The staging buffer of a field of wide ids: room for a batch's samples (read at
 * their positions, as into the slot), and for STAGE_BYTES of samples (or all of
 * them) when load_cache reads the dataset whole piece by piece. */
static bool allocate_stage(pn_reader *r, field *f)
{
    if (!pn_reader_type_is_wide(f->mem)) return true;
    size_t per = f->elems * 8, bytes; /* elems * 4 <= 2^62 (count_samples) */
    long piece = (long)(STAGE_BYTES / per) < r->samples ? (long)(STAGE_BYTES / per) : r->samples;
    f->stage_rows = piece > r->opt.count ? piece : r->opt.count;
    return !__builtin_mul_overflow((size_t)f->stage_rows, per, &bytes) &&
           (f->stage = malloc(bytes));
}

/* Allocates the permutation and sort arrays, staging buffers and both slots' buffers. */
static int allocate_buffers(pn_reader *r)
{
    size_t count = (size_t)r->opt.count, bytes;
    bool ok = (r->order = malloc(count * sizeof *r->order)) &&
              (!r->opt.shuffle || (r->perm = malloc((size_t)r->samples * sizeof *r->perm)));
    for (int f = 0; ok && f < r->n_fields; f++) ok = allocate_stage(r, &r->fields[f]);
    for (int s = 0; ok && s < 2; s++) {
        slot *sl = &r->slots[s];
        ok = (sl->data = calloc((size_t)r->n_fields, sizeof *sl->data)) &&
             (sl->batch.values = calloc((size_t)r->n_fields, sizeof *sl->batch.values)) &&
             (sl->batch.ids = calloc((size_t)r->n_fields, sizeof *sl->batch.ids)) &&
             (sl->batch.csr = calloc((size_t)r->n_fields, sizeof *sl->batch.csr));
        for (int f = 0; ok && f < r->n_fields; f++) {
            if (r->fields[f].csr) { /* room for the bound: the most a batch can hold */
                if (pn_csr_batch_alloc(r->fields[f].csr, (long)count, &sl->batch.csr[f]) < 0)
                    return PN_ERR_NOMEM;
                continue;
            }
            ok = field_bytes(&r->fields[f], count, &bytes) && (sl->data[f] = malloc(bytes));
            if (r->fields[f].ids)
                sl->batch.ids[f] = sl->data[f];
            else
                sl->batch.values[f] = sl->data[f];
        }
    }
    return ok ? 0 : pn_error_set(PN_ERR_NOMEM, "%s: out of memory for reader buffers", r->path);
}

/* Reads field f of wide ids whole into its cache, stage_rows samples at a time into
 * the staging buffer, narrowing each sample with checks. */
static int cache_wide(pn_reader *r, field *f)
{
    hsize_t start[PN_HDF5_MAX_RANK] = {0}, zero[PN_HDF5_MAX_RANK] = {0}, count[PN_HDF5_MAX_RANK];
    memcpy(count, f->dims, sizeof count);
    count[0] = (hsize_t)f->stage_rows;
    hid_t mspace = H5I_INVALID_HID;
    int rc = 0;
    const char *what = "%s: dataset '/%s': checksum mismatch or unreadable data (rows from %ld)";
    pn_hdf5_lock();
    PN_HDF5_CHECK(rc, mspace = H5Screate_simple(f->rank, count, NULL), what, r->path, f->name, 0L);
    for (long row = 0; rc == 0 && row < r->samples; row += f->stage_rows) {
        long n = r->samples - row < f->stage_rows ? r->samples - row : f->stage_rows;
        start[0] = (hsize_t)row;
        count[0] = (hsize_t)n;
        PN_HDF5_CHECK(rc, H5Sselect_hyperslab(f->fspace, H5S_SELECT_SET, start, NULL, count, NULL),
                      what, r->path, f->name, row);
        PN_HDF5_CHECK(rc, H5Sselect_hyperslab(mspace, H5S_SELECT_SET, zero, NULL, count, NULL),
                      what, r->path, f->name, row);
        PN_HDF5_CHECK(rc, H5Dread(f->dset, pn_hdf5_mem_type(f->mem), mspace, f->fspace,
                                  H5P_DEFAULT, f->stage),
                      what, r->path, f->name, row);
        for (long k = 0; rc == 0 && k < n; k++)
            rc = pn_reader_narrow_ids(r->path, f->name, &f->spec, f->mem, row + k,
                                      f->stage + (size_t)k * f->elems * 8, f->elems,
                                      (int *)f->cache + (size_t)(row + k) * f->elems);
    }
    if (mspace >= 0) H5Sclose(mspace);
    pn_hdf5_unlock();
    return rc;
}

/* Reads every field whole into memory when together they fit opt.cache_bytes. */
static int load_cache(pn_reader *r)
{
    size_t total = 0, bytes;
    for (int f = 0; f < r->n_fields; f++)
        if (!field_bytes(&r->fields[f], (size_t)r->samples, &bytes) ||
            bytes > r->opt.cache_bytes - total)
            return 0;
        else
            total += bytes;
    int rc = 0;
    for (int i = 0; rc == 0 && i < r->n_fields; i++) {
        field *f = &r->fields[i];
        if (f->csr) {
            rc = pn_csr_cache(f->csr);
            continue;
        }
        if (!field_bytes(f, (size_t)r->samples, &bytes) || !(f->cache = malloc(bytes + 1)))
            return pn_error_set(PN_ERR_NOMEM, "%s: out of memory caching dataset '/%s'",
                                r->path, f->name);
        rc = f->stage ? cache_wide(r, f)
                      : pn_hdf5_read_all(f->dset, r->path, f->name, f->mem, f->cache);
        for (long row = 0; row < r->samples && rc == 0; row++) /* once, for every epoch */
            rc = check_sample(r, f, row, f->cache + (size_t)row * f->elems * 4);
    }
    return rc;
}

/* Checks that all fields hold the same number of samples and sets the batch count.
 * An extent of over 2^62 bytes cannot have been written (HDF5 then miscounts it as
 * allocated) and sizes computed from it would wrap: it is refused. */
static int count_samples(pn_reader *r)
{
    const pn_reader_options *o = &r->opt;
    for (int f = 0; f < r->n_fields; f++)
        if (r->fields[f].dims[0] > ((uint64_t)1 << 62) / 4 / r->fields[f].elems)
            return pn_error_set(PN_ERR_INVALID, "%s: dataset '/%s' declares %llu samples of %zu "
                                "values: more than any file holds",
                                r->path, r->fields[f].name,
                                (unsigned long long)r->fields[f].dims[0], r->fields[f].elems);
    r->samples = (long)r->fields[0].dims[0];
    for (int f = 1; f < r->n_fields; f++)
        if ((long)r->fields[f].dims[0] != r->samples)
            return pn_error_set(PN_ERR_INVALID, "%s: dataset '/%s' holds %ld samples but '/%s' "
                                "holds %ld",
                                r->path, r->fields[f].name, (long)r->fields[f].dims[0],
                                r->fields[0].name, r->samples);
    r->batches = o->drop_last ? r->samples / o->global_batch
                              : (r->samples + o->global_batch - 1) / o->global_batch;
    if (r->batches == 0)
        return pn_error_set(PN_ERR_INVALID, "%s: %ld samples, fewer than one batch of %d",
                            r->path, r->samples, o->global_batch);
    return 0;
}

int pn_reader_open(pn_reader **out, const char *path, const pn_reader_field *fields,
                   int n_fields, const pn_reader_options *options)
{
    *out = NULL;
    PN_TRY(check_options(path, fields, n_fields, options));
    pn_reader *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path)) ||
        !(r->fields = calloc((size_t)n_fields, sizeof *r->fields))) {
        if (r) free(r->path);
        free(r);
        return pn_error_set(PN_ERR_NOMEM, "%s: out of memory for a reader", path);
    }
    r->file = H5I_INVALID_HID;
    r->n_fields = n_fields;
    r->opt = *options;
    r->perm_epoch = -1;
    for (int f = 0; f < n_fields; f++)
        r->fields[f].dset = r->fields[f].fspace = r->fields[f].mspace = H5I_INVALID_HID;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->wake, NULL);
    pthread_cond_init(&r->done, NULL);

    int rc = 0;
    pn_hdf5_lock();
    /* HDF5's default 1 MiB chunk cache loads a whole chunk for every random row
     * (77 MB read for a 128-row batch of Fashion-MNIST); with w0 = 1 it never
     * evicts and grows to the whole dataset. No cache reads just the rows. */
    hid_t fapl = H5I_INVALID_HID;
    PN_HDF5_CHECK(rc, fapl = H5Pcreate(H5P_FILE_ACCESS), "%s: cannot make a file access list",
                  path);
    PN_HDF5_CHECK(rc, H5Pset_cache(fapl, 0, 1, 0, 0.75), "%s: cannot make a file access list",
                  path);
    if (rc == 0) rc = pn_hdf5_open_file(path, fapl, &r->file);
    if (fapl >= 0) H5Pclose(fapl);
    pn_hdf5_unlock();
    for (int f = 0; rc == 0 && f < n_fields; f++) rc = open_field(r, f, &fields[f]);
    if (rc == 0) rc = count_samples(r);
    if (rc == 0) rc = allocate_buffers(r); /* the staging buffers first: load_cache uses them */
    if (rc == 0) rc = load_cache(r);
    if (rc == 0) {
        if (pthread_create(&r->thread, NULL, worker_main, r) != 0)
            rc = pn_error_set(PN_ERR_INTERNAL, "%s: cannot start the prefetch thread", path);
        r->thread_started = rc == 0;
    }
    if (rc < 0) {
        pn_reader_close(r);
        return rc;
    }
    request(r, 0, 0);
    *out = r;
    return 0;
}

void pn_reader_close(pn_reader *r)
{
    if (!r) return;
    if (r->thread_started) {
        pthread_mutex_lock(&r->mu);
        r->stop = true;
        pthread_cond_signal(&r->wake);
        pthread_mutex_unlock(&r->mu);
        pthread_join(r->thread, NULL);
    }
    for (int f = 0; f < r->n_fields; f++) {
        free(r->fields[f].cache);
        free(r->fields[f].stage);
        if (r->fields[f].csr) pn_csr_close(r->fields[f].csr);
        free(r->fields[f].csr);
        pn_hdf5_close(r->fields[f].mspace, r->path);
        pn_hdf5_close(r->fields[f].fspace, r->path);
        pn_hdf5_close(r->fields[f].dset, r->path);
    }
    pn_hdf5_close(r->file, r->path);
    for (int s = 0; s < 2; s++) {
        slot *sl = &r->slots[s];
        for (int f = 0; sl->data && f < r->n_fields; f++) free(sl->data[f]);
        for (int f = 0; sl->batch.csr && f < r->n_fields; f++)
            pn_csr_batch_free(&sl->batch.csr[f]);
        free(sl->batch.csr);
        free(sl->data);
        free(sl->batch.values);
        free(sl->batch.ids);
    }
    pthread_cond_destroy(&r->done);
    pthread_cond_destroy(&r->wake);
    pthread_mutex_destroy(&r->mu);
    free(r->perm);
    free(r->order);
    free(r->fields);
    free(r->path);
    free(r);
}

long pn_reader_samples(const pn_reader *r) { return r->samples; }

long pn_reader_batches_per_epoch(const pn_reader *r) { return r->batches; }

int pn_reader_seek(pn_reader *r, long epoch, long index)
{
    if (epoch < 0 || index < 0 || index >= r->batches)
        return pn_error_set(PN_ERR_INVALID,
                            "%s: cannot seek to batch %ld of epoch %ld (epochs have %ld batches)",
                            r->path, index, epoch, r->batches);
    pthread_mutex_lock(&r->mu);
    while (r->job_pending || r->busy) pthread_cond_wait(&r->done, &r->mu);
    pthread_mutex_unlock(&r->mu);
    request(r, epoch, index);
    return 0;
}

int pn_reader_next(pn_reader *r, const pn_batch **batch)
{
    *batch = NULL;
    slot *s = &r->slots[r->current];
    pthread_mutex_lock(&r->mu);
    while (!s->ready) pthread_cond_wait(&r->done, &r->mu);
    pthread_mutex_unlock(&r->mu);
    if (s->rc < 0) {
        int rc = pn_error_set(s->rc, "%s", s->message);
        request(r, r->epoch, r->index);
        return rc;
    }
    *batch = &s->batch;
    long epoch = r->epoch, index = r->index + 1;
    if (index == r->batches) epoch++, index = 0;
    r->current ^= 1;
    request(r, epoch, index);
    return 0;
}

int pn_reader_permutation(const pn_reader *r, long epoch, long *out)
{
    if (epoch < 0)
        return pn_error_set(PN_ERR_INVALID, "%s: no permutation for epoch %ld", r->path, epoch);
    pn_sample_permutation(r->samples, r->opt.shuffle, r->opt.seed, epoch, out);
    return 0;
}

int pn_reader_probe(const char *path, const char *const *datasets, int n, bool *exists)
{
    hid_t file;
    PN_TRY(pn_hdf5_open_file(path, H5P_DEFAULT, &file));
    for (int i = 0; i < n; i++) exists[i] = pn_hdf5_link_exists(file, datasets[i]);
    return pn_hdf5_close(file, path);
}

pn_reader_field pn_reader_lengths_field(const char *input, const char *dataset, int seq)
{
    return (pn_reader_field){.dataset = dataset, .shape = {.seq = 1, .ids = true}, .input = input,
                             .id_user = input, .length_max = seq};
}
