/* pn_reader: batches from a dataset HDF5 file (DESIGN.md section 3), shuffled
 * globally by (seed, epoch) and prefetched in a background thread.
 *
 * The reader knows the *global* batch: every step takes the next `global_batch`
 * indices of the epoch's permutation; a caller that holds only part of the batch
 * (a data-parallel replica) asks for rows [first, first + count) of it. With
 * drop_last the last incomplete batch of an epoch is dropped, so every step has the
 * same size; without it (evaluation) that batch comes short.
 * Each field is one dataset of the file, checked at open against the shape and
 * type the model expects: floats [N, width*seq] (or [N, seq, width], or [N] for one
 * value a sample) for float inputs, integers [N] or [N, seq] for ids, integers [N]
 * for lengths; HDF5 converts any float width to float32 and any integer width (or
 * floats holding whole numbers) to int32 (reader_types.h). Every error names the
 * file and dataset, and says what to write instead.
 * Values are checked as they are read (the whole dataset once when it is cached in
 * memory, else every batch): floats must be finite, ids whole numbers in int32's
 * range and within the field's bound, lengths in [1, length_max];
 * an error names the sample (its row in the file).
 * A sparse field (shape.sparse) reads a CSR group instead, into the batch's csr
 * (io/reader_csr.h says what it checks and how it reads). */
#ifndef PN_READER_H
#define PN_READER_H

#include <stdbool.h>
#include <stdint.h>

#include "layers/arg.h"

typedef struct pn_reader pn_reader;

typedef struct pn_reader_field {
    const char *dataset; /* dataset name in the file, without the leading '/' */
    pn_shape shape;      /* per-sample shape the model expects */
    const char *input;   /* model input that reads it, named in errors; may be NULL */
    int id_limit;        /* ids must lie in [0, id_limit); 0: unchecked */
    const char *id_user; /* the layer that sets id_limit, named in errors */
    int length_max;      /* > 0: the field holds sequence lengths (int32 [N], shape ids of
                            seq 1), each in [1, length_max]; id_user names their input */
    bool quiet;          /* true: do not log that the file's values are converted (another
                            reader of the run says it) */
} pn_reader_field;

/* The field of input's lengths, dataset int32 [N], each in [1, seq]. */
pn_reader_field pn_reader_lengths_field(const char *input, const char *dataset, int seq);

typedef struct pn_reader_options {
    int global_batch;  /* samples per step, over all replicas */
    int first, count;  /* this caller's rows of each global batch */
    bool shuffle;      /* false: file order (evaluation) */
    uint64_t seed;     /* permutation of epoch e depends on (seed, e) only */
    bool drop_last;    /* drop the last incomplete batch (training); else keep it */
    size_t cache_bytes; /* when all fields fit in this many bytes, read them into memory
                           once at open and serve batches from there (0: never) */
} pn_reader_options;

/* One batch in host memory: values[f] (floats) or ids[f] (int32) per field, rows
 * = count * shape.seq, in the order of the epoch's permutation. */
typedef struct pn_batch {
    long epoch;
    long index;       /* batch number within the epoch */
    int rows;         /* samples in this batch for this caller (count, or fewer at the end) */
    long sample0;     /* position of this caller's first sample in the global batch */
    float **values;   /* [n_fields], NULL for id fields */
    int **ids;        /* [n_fields], NULL for float fields */
    pn_csr *csr;      /* [n_fields]: a sparse field's rows (reader_csr.h), else empty */
} pn_batch;

/* Opens path, checks every field, and starts prefetching batch 0 of epoch 0. */
int pn_reader_open(pn_reader **out, const char *path, const pn_reader_field *fields,
                   int n_fields, const pn_reader_options *options);
void pn_reader_close(pn_reader *r);

/* Samples in the file, and full batches per epoch. */
long pn_reader_samples(const pn_reader *r);
long pn_reader_batches_per_epoch(const pn_reader *r);

/* Positions the reader at batch `index` of `epoch` (resume), and starts prefetching. */
int pn_reader_seek(pn_reader *r, long epoch, long index);

/* The next batch; valid until the next call. At the end of an epoch it moves on to
 * the next epoch (batch->epoch tells). */
int pn_reader_next(pn_reader *r, const pn_batch **batch);

/* Which of datasets[0 .. n) the dataset file at path holds, into exists[]. */
int pn_reader_probe(const char *path, const char *const *datasets, int n, bool *exists);

/* The permutation of epoch (length pn_reader_samples), for tests and tools. */
int pn_reader_permutation(const pn_reader *r, long epoch, long *out);

#endif
