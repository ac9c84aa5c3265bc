/* The dataset reader on small files this test writes: permutations keyed by (seed,
 * epoch) only, replica slices of the global batch, resume by seek, evaluation order
 * with a short last batch, errors naming file and dataset (and what to write
 * instead), bad values and unwritten rows refused (other element types:
 * test_reader_types.c; the importer's: test_import_fashion.c). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "io/hdf5_util.h"
#include "io/reader.h"
#include "reader_fixture.h"
#include "testutil.h"

enum { N = 103, WIDTH = 5, SEQ = 3 };

static char dir[PATH_MAX], data_path[PATH_MAX + 16];


static void write_float(hid_t f, const char *name, int rank, const hsize_t *dims,
                        float (*value)(long i, int k))
{
    size_t per = 1;
    for (int k = 1; k < rank; k++) per *= dims[k];
    float *v = malloc(N * per * sizeof *v);
    for (long i = 0; i < N; i++)
        for (size_t k = 0; k < per; k++) v[i * per + k] = value(i, (int)k);
    ck_assert_int_eq(pn_hdf5_write_dataset(f, data_path, name, PN_HDF5_FLOAT32, rank, dims, 16, v),
                     0);
    free(v);
}

static float seq_value(long i, int k) { return (float)(i * 100 + k); }

/* data.h5: /features [N, 5], /labels [N], /tokens [N, 3], /seq2d [N, 6] and
 * /seq3d [N, 2, 3] with the same values, /wide_int64 int64 [N, 5], /short [N-1],
 * /lens [N] (sample i is 1 + i % 3 long). */
static void make_data_file(void)
{
    hid_t f;
    ck_assert_int_eq(pn_hdf5_create_file(data_path, false, &f), 0);
    hsize_t d2[2] = {N, WIDTH}, d3[3] = {N, 2, 3}, s2[2] = {N, 6}, t2[2] = {N, SEQ}, n1 = N;
    write_float(f, "features", 2, d2, rf_feature);
    write_float(f, "seq2d", 2, s2, seq_value);
    write_float(f, "seq3d", 3, d3, seq_value);
    int labels[N], tokens[N * SEQ], lens[N];
    long long wide[N * WIDTH] = {0};
    for (int i = 0; i < N; i++) {
        labels[i] = i % 7;
        lens[i] = 1 + i % SEQ;
        for (int s = 0; s < SEQ; s++) tokens[i * SEQ + s] = i * 10 + s;
    }
    ck_assert_int_eq(
        pn_hdf5_write_dataset(f, data_path, "labels", PN_HDF5_INT32, 1, &n1, 16, labels), 0);
    ck_assert_int_eq(
        pn_hdf5_write_dataset(f, data_path, "tokens", PN_HDF5_INT32, 2, t2, 16, tokens), 0);
    ck_assert_int_eq(pn_hdf5_write_dataset(f, data_path, "lens", PN_HDF5_INT32, 1, &n1, 16, lens),
                     0);
    hsize_t short_n = N - 1;
    ck_assert_int_eq(
        pn_hdf5_write_dataset(f, data_path, "short", PN_HDF5_INT32, 1, &short_n, 16, labels), 0);
    pn_hdf5_lock();
    hid_t space = H5Screate_simple(2, d2, NULL);
    hid_t d = H5Dcreate2(f, "wide_int64", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT,
                         H5P_DEFAULT);
    ck_assert(d >= 0 && H5Dwrite(d, H5T_NATIVE_LLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, wide) >= 0);
    H5Dclose(d);
    H5Sclose(space);
    pn_hdf5_unlock();
    ck_assert_int_eq(pn_hdf5_close(f, data_path), 0);
}

static void setup(void)
{
    tu_make_temp_dir(dir, sizeof dir, "reader");
    snprintf(data_path, sizeof data_path, "%s/data.h5", dir);
    make_data_file();
}

static void teardown(void) { tu_remove_tree(dir); }

static const pn_reader_field fields[] = {
    {"features", {WIDTH, 1, false}, "x", 0, NULL, 0, false},
    {"labels", {0, 1, true}, "y", 0, NULL, 0, false},
    {"tokens", {0, SEQ, true}, "t", 0, NULL, 0, false},
};

/* Training readers of the current test read from the file (0) or from memory. */
static size_t cache_bytes;

static pn_reader *open_train(int global_batch, int first, int count, uint64_t seed)
{
    pn_reader_options o = {.global_batch = global_batch, .first = first, .count = count,
                           .shuffle = true, .seed = seed, .drop_last = true,
                           .cache_bytes = cache_bytes};
    pn_reader *r;
    ck_assert_msg(pn_reader_open(&r, data_path, fields, 3, &o) == 0, "%s", pn_error_message());
    return r;
}


/* The sample index held by row k of b, after checking every field of that row. */
static long sample_of(const pn_batch *b, int k)
{
    long i = lroundf(b->values[0][k * WIDTH]);
    ck_assert(i >= 0 && i < N);
    for (int j = 0; j < WIDTH; j++) ck_assert_float_eq(b->values[0][k * WIDTH + j], rf_feature(i, j));
    ck_assert_int_eq(b->ids[1][k], i % 7);
    for (int s = 0; s < SEQ; s++) ck_assert_int_eq(b->ids[2][k * SEQ + s], i * 10 + s);
    ck_assert_ptr_null(b->ids[0]);
    ck_assert_ptr_null(b->values[1]);
    return i;
}

START_TEST(permutation_is_keyed_by_seed_and_epoch)
{
    pn_reader *r = open_train(10, 0, 10, 42), *other_batch = open_train(7, 0, 7, 42);
    pn_reader *other_seed = open_train(10, 0, 10, 43);
    ck_assert_int_eq(pn_reader_samples(r), N);
    ck_assert_int_eq(pn_reader_batches_per_epoch(r), 10);
    long p0[N], again[N], p1[N], q0[N], s0[N];
    int seen[N] = {0}, fixed = 0;
    ck_assert_int_eq(pn_reader_permutation(r, 0, p0), 0);
    for (int i = 0; i < N; i++) {
        ck_assert(p0[i] >= 0 && p0[i] < N);
        seen[p0[i]]++;
        fixed += p0[i] == i;
    }
    for (int i = 0; i < N; i++) ck_assert_int_eq(seen[i], 1);
    ck_assert_int_lt(fixed, 10);
    ck_assert_int_eq(pn_reader_permutation(r, 0, again), 0);
    ck_assert_int_eq(pn_reader_permutation(r, 1, p1), 0);
    ck_assert_int_eq(pn_reader_permutation(other_batch, 0, q0), 0);
    ck_assert_int_eq(pn_reader_permutation(other_seed, 0, s0), 0);
    ck_assert(memcmp(p0, again, sizeof p0) == 0);
    ck_assert(memcmp(p0, q0, sizeof p0) == 0);
    ck_assert(memcmp(p0, p1, sizeof p0) != 0);
    ck_assert(memcmp(p0, s0, sizeof p0) != 0);
    pn_reader_close(r), pn_reader_close(other_batch), pn_reader_close(other_seed);
}
END_TEST

START_TEST(batches_follow_the_permutation_and_drop_the_tail)
{
    cache_bytes = _i ? (size_t)1 << 30 : 0; /* both ways of reading */
    pn_reader *r = open_train(10, 0, 10, 42);
    long p0[N], p1[N];
    int seen[N] = {0};
    pn_reader_permutation(r, 0, p0);
    pn_reader_permutation(r, 1, p1);
    for (int index = 0; index < 10; index++) {
        const pn_batch *b = rf_next_batch(r);
        ck_assert_int_eq(b->epoch, 0);
        ck_assert_int_eq(b->index, index);
        ck_assert_int_eq(b->rows, 10);
        ck_assert_int_eq(b->sample0, 0);
        for (int k = 0; k < 10; k++) {
            long i = sample_of(b, k);
            ck_assert_int_eq(i, p0[index * 10 + k]);
            seen[i]++;
        }
    }
    for (int i = 0; i < N; i++) ck_assert_int_le(seen[i], 1);
    for (int k = 100; k < N; k++) ck_assert_int_eq(seen[p0[k]], 0);
    const pn_batch *b = rf_next_batch(r);
    ck_assert_int_eq(b->epoch, 1);
    ck_assert_int_eq(b->index, 0);
    for (int k = 0; k < 10; k++) ck_assert_int_eq(sample_of(b, k), p1[k]);
    pn_reader_close(r);
}
END_TEST

START_TEST(replicas_split_the_global_batch)
{
    cache_bytes = _i ? (size_t)1 << 30 : 0; /* both ways of reading */
    pn_reader *whole = open_train(10, 0, 10, 7), *a = open_train(10, 0, 4, 7);
    pn_reader *b = open_train(10, 4, 6, 7);
    for (int step = 0; step < 12; step++) {
        const pn_batch *w = rf_next_batch(whole), *x = rf_next_batch(a), *y = rf_next_batch(b);
        ck_assert_int_eq(x->rows, 4);
        ck_assert_int_eq(y->rows, 6);
        ck_assert_int_eq(x->sample0, 0);
        ck_assert_int_eq(y->sample0, 4);
        ck_assert_int_eq(x->epoch, w->epoch);
        ck_assert_int_eq(y->index, w->index);
        for (int k = 0; k < 4; k++) ck_assert_int_eq(sample_of(x, k), sample_of(w, k));
        for (int k = 0; k < 6; k++) ck_assert_int_eq(sample_of(y, k), sample_of(w, 4 + k));
    }
    pn_reader_close(whole), pn_reader_close(a), pn_reader_close(b);
}
END_TEST

START_TEST(seek_resumes_where_sequential_reading_is)
{
    cache_bytes = _i ? (size_t)1 << 30 : 0; /* both ways of reading */
    pn_reader *seq = open_train(10, 0, 10, 5), *r = open_train(10, 0, 10, 5);
    for (int step = 0; step < 23; step++) rf_next_batch(seq);
    rf_next_batch(r);
    ck_assert_int_eq(pn_reader_seek(r, 2, 3), 0);
    for (int step = 0; step < 8; step++) {
        const pn_batch *s = rf_next_batch(seq), *b = rf_next_batch(r);
        ck_assert_int_eq(b->epoch, s->epoch);
        ck_assert_int_eq(b->index, s->index);
        for (int k = 0; k < 10; k++) ck_assert_int_eq(sample_of(b, k), sample_of(s, k));
    }
    ck_assert_int_eq(pn_reader_seek(r, 0, 10), PN_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(pn_error_message(), data_path));
    ck_assert_int_eq(pn_reader_seek(r, -1, 0), PN_ERR_INVALID);
    pn_reader_close(seq), pn_reader_close(r);
}
END_TEST

START_TEST(eval_reads_file_order_and_keeps_the_short_batch)
{
    pn_reader_options o = {.global_batch = 10, .first = 0, .count = 10, .shuffle = false,
                           .seed = 1, .drop_last = false};
    pn_reader *r, *tail;
    ck_assert_int_eq(pn_reader_open(&r, data_path, fields, 3, &o), 0);
    ck_assert_int_eq(pn_reader_batches_per_epoch(r), 11);
    for (int index = 0; index < 11; index++) {
        const pn_batch *b = rf_next_batch(r);
        ck_assert_int_eq(b->index, index);
        ck_assert_int_eq(b->rows, index < 10 ? 10 : 3);
        for (int k = 0; k < b->rows; k++) ck_assert_int_eq(sample_of(b, k), index * 10 + k);
    }
    const pn_batch *b = rf_next_batch(r);
    ck_assert_int_eq(b->epoch, 1);
    ck_assert_int_eq(sample_of(b, 0), 0);
    /* a replica whose rows lie past the end of the short batch gets none */
    o.first = 4, o.count = 6;
    ck_assert_int_eq(pn_reader_open(&tail, data_path, fields, 3, &o), 0);
    ck_assert_int_eq(pn_reader_seek(tail, 0, 10), 0);
    ck_assert_int_eq(rf_next_batch(tail)->rows, 0);
    ck_assert_int_eq(rf_next_batch(tail)->rows, 6);
    pn_reader_close(r), pn_reader_close(tail);
}
END_TEST

START_TEST(sequences_read_from_flat_or_3d_datasets)
{
    const pn_reader_field seq_fields[] = {{"seq2d", {3, 2, false}, NULL, 0, NULL, 0, false},
                                          {"/seq3d", {3, 2, false}, NULL, 0, NULL, 0, false}};
    pn_reader_options o = {.global_batch = 8, .first = 0, .count = 8, .shuffle = true,
                           .seed = 3, .drop_last = true};
    pn_reader *r;
    ck_assert_msg(pn_reader_open(&r, data_path, seq_fields, 2, &o) == 0, "%s",
                  pn_error_message());
    long p[N];
    pn_reader_permutation(r, 0, p);
    const pn_batch *b = rf_next_batch(r);
    for (int k = 0; k < 8; k++)
        for (int e = 0; e < 6; e++) {
            ck_assert_float_eq(b->values[0][k * 6 + e], seq_value(p[k], e));
            ck_assert_float_eq(b->values[1][k * 6 + e], seq_value(p[k], e));
        }
    pn_reader_close(r);
}
END_TEST


START_TEST(errors_name_the_file_and_the_dataset)
{
    char missing[PATH_MAX + 16], text[PATH_MAX + 16], want[3 * PATH_MAX];
    pn_reader_field x = {"features", {WIDTH, 1, false}, "x", 0, NULL, 0, false};
    snprintf(missing, sizeof missing, "%s/missing.h5", dir);
    snprintf(want, sizeof want, "cannot open '%s': No such file or directory", missing);
    rf_expect_open_error(missing, x, PN_ERR_IO, want);

    snprintf(text, sizeof text, "%s/notes.h5", dir);
    FILE *f = fopen(text, "w");
    fputs("not hdf5\n", f);
    fclose(f);
    snprintf(want, sizeof want, "cannot open '%s': not an HDF5 file", text);
    rf_expect_open_error(text, x, PN_ERR_IO, want);

    snprintf(want, sizeof want, "%s: no dataset '/nope' (the model's input 'y' reads it)",
             data_path);
    rf_expect_open_error(data_path, (pn_reader_field){"nope", {0, 1, true}, "y", 0, NULL, 0, false}, PN_ERR_INVALID, want);

    snprintf(want, sizeof want, "%s: dataset '/wide_int64' holds int64, but input 'x' reads "
             "floats: if they are class ids, write \"ids\": true on input 'x' in place of its "
             "\"size\"; if they are values, write floats (numpy: a.astype('float32'))",
             data_path);
    rf_expect_open_error(data_path, (pn_reader_field){"wide_int64", {WIDTH, 1, false}, "x", 0, NULL, 0, false},
                      PN_ERR_INVALID, want);

    /* floats are taken for ids (whole numbers are checked as they are read): the shape
     * is what does not fit here */
    snprintf(want, sizeof want, "%s: dataset '/features': shape [103, 5] does not fit input 'y' "
             "(one id a sample): write [103] or [103, 1], or set \"seq\": 5 on input 'y'",
             data_path);
    rf_expect_open_error(data_path, (pn_reader_field){"features", {0, 1, true}, "y", 0, NULL, 0, false}, PN_ERR_INVALID,
                      want);

    snprintf(want, sizeof want, "%s: dataset '/features': shape [103, 5] does not fit input 'x' "
             "(6 values a sample): write [103, 6], or set \"size\": 5 on input 'x'", data_path);
    rf_expect_open_error(data_path, (pn_reader_field){"features", {6, 1, false}, "x", 0, NULL, 0, false}, PN_ERR_INVALID,
                      want);

    snprintf(want, sizeof want, "%s: dataset '/seq3d': shape [103, 2, 3] does not fit input 'x' "
             "(6 values a sample): write [103, 6] (numpy: a.reshape(len(a), -1))", data_path);
    rf_expect_open_error(data_path, (pn_reader_field){"seq3d", {6, 1, false}, "x", 0, NULL, 0, false}, PN_ERR_INVALID,
                      want);

    snprintf(want, sizeof want, "%s: dataset '/tokens': shape [103, 3] does not fit input 'y' "
             "(one id a sample): write [103] or [103, 1], or set \"seq\": 3 on input 'y'",
             data_path);
    rf_expect_open_error(data_path, (pn_reader_field){"tokens", {0, 1, true}, "y", 0, NULL, 0, false}, PN_ERR_INVALID, want);

    snprintf(want, sizeof want, "%s: dataset '/labels': shape [103] does not fit input 't' "
             "(3 ids a sample): write [103, 3], or leave \"seq\" out of input 't'", data_path);
    rf_expect_open_error(data_path, (pn_reader_field){"labels", {0, SEQ, true}, "t", 0, NULL, 0, false},
                      PN_ERR_INVALID, want);

    pn_reader_field two[] = {{"features", {WIDTH, 1, false}, "x", 0, NULL, 0, false}, {"short", {0, 1, true}, "y", 0, NULL, 0, false}};
    pn_reader_options o = {.global_batch = 10, .first = 0, .count = 10, .drop_last = true};
    pn_reader *r;
    ck_assert_int_eq(pn_reader_open(&r, data_path, two, 2, &o), PN_ERR_INVALID);
    snprintf(want, sizeof want, "%s: dataset '/short' holds 102 samples but '/features' holds 103",
             data_path);
    ck_assert_str_eq(pn_error_message(), want);

    o.global_batch = 200, o.count = 200;
    ck_assert_int_eq(pn_reader_open(&r, data_path, two, 1, &o), PN_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(pn_error_message(), "fewer than one batch"));
    o.global_batch = 10, o.first = 5, o.count = 6;
    ck_assert_int_eq(pn_reader_open(&r, data_path, two, 1, &o), PN_ERR_INVALID);
}
END_TEST

/* bad.h5: /features [N, 5] with a NaN (sample 42, value 3) and an infinity (sample
 * 60), /labels [N] with label 9 at sample 17 (7 classes). */
static void make_bad_file(const char *path)
{
    hid_t f;
    ck_assert_int_eq(pn_hdf5_create_file(path, false, &f), 0);
    float v[N * WIDTH];
    int labels[N], lens[N];
    for (int i = 0; i < N; i++) {
        labels[i] = i == 17 ? 9 : i % 7;
        lens[i] = i == 23 ? SEQ + 1 : i == 31 ? 0 : 1 + i % SEQ;
        for (int j = 0; j < WIDTH; j++) v[i * WIDTH + j] = rf_feature(i, j);
    }
    v[42 * WIDTH + 3] = NAN;
    v[60 * WIDTH] = INFINITY;
    hsize_t d2[2] = {N, WIDTH}, n1 = N;
    ck_assert_int_eq(pn_hdf5_write_dataset(f, path, "features", PN_HDF5_FLOAT32, 2, d2, 16, v), 0);
    ck_assert_int_eq(pn_hdf5_write_dataset(f, path, "labels", PN_HDF5_INT32, 1, &n1, 16, labels),
                     0);
    ck_assert_int_eq(pn_hdf5_write_dataset(f, path, "lens", PN_HDF5_INT32, 1, &n1, 16, lens), 0);
    ck_assert_int_eq(pn_hdf5_close(f, path), 0);
}


/* Rows a writer declared but never wrote have no storage in HDF5 and would read as
 * zeros: refused, naming the dataset and the first such row (chunked: the first
 * missing chunk; contiguous: never allocated at all). */
START_TEST(unwritten_rows_are_refused)
{
    char path[PATH_MAX + 16], want[PATH_MAX + 256];
    snprintf(path, sizeof path, "%s/partial.h5", dir);
    hid_t f, d;
    hsize_t dims[2] = {N, WIDTH}, n1 = N;
    float rows[48 * WIDTH] = {0};
    ck_assert_int_eq(pn_hdf5_create_file(path, false, &f), 0);
    ck_assert_int_eq(pn_hdf5_create_dataset(f, path, "part", PN_HDF5_FLOAT32, 2, dims, 16, &d), 0);
    ck_assert_int_eq(pn_hdf5_write_rows(d, path, "part", PN_HDF5_FLOAT32, 0, 48, rows), 0);
    ck_assert_int_eq(pn_hdf5_close(d, path), 0);
    pn_hdf5_lock();
    hid_t space = H5Screate_simple(1, &n1, NULL);
    d = H5Dcreate2(f, "never", H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ck_assert(d >= 0);
    H5Dclose(d);
    H5Sclose(space);
    pn_hdf5_unlock();
    ck_assert_int_eq(pn_hdf5_close(f, path), 0);

    const char *tail = "(HDF5 holds no storage for them, so they would read as its fill value): "
                       "was the file written to the end?";
    snprintf(want, sizeof want, "%s: dataset '/part': rows from 48 on (of 103) were never "
             "written %s", path, tail);
    rf_expect_open_error(path, (pn_reader_field){"part", {WIDTH, 1, false}, "x", 0, NULL, 0, false},
                      PN_ERR_INVALID, want);
    snprintf(want, sizeof want, "%s: dataset '/never': rows from 0 on (of 103) were never "
             "written %s", path, tail);
    rf_expect_open_error(path, (pn_reader_field){"never", {0, 1, true}, "y", 0, NULL, 0, false},
                      PN_ERR_INVALID, want);
}
END_TEST

/* HDF5's reasons can hold newlines; messages stay one line. */
START_TEST(hdf5_reasons_are_one_line)
{
    pn_hdf5_lock();
    H5Epush2(H5E_DEFAULT, __FILE__, __func__, __LINE__, H5E_ERR_CLS, H5E_ARGS, H5E_BADVALUE,
             "%s", "  can't do it.\n    The following caused it:\n\tthis \r\n");
    int rc = pn_hdf5_fail("dset = H5Dopen2(f, name, H5P_DEFAULT)", "%s: cannot open", "f.h5");
    pn_hdf5_unlock();
    ck_assert_int_eq(rc, PN_ERR_IO);
    ck_assert_str_eq(pn_error_message(),
                     "f.h5: cannot open (H5Dopen2: can't do it. The following caused it: this)");
}
END_TEST

START_TEST(bad_values_name_file_dataset_and_sample)
{
    char path[PATH_MAX + 16], want[PATH_MAX + 128];
    snprintf(path, sizeof path, "%s/bad.h5", dir);
    make_bad_file(path);
    pn_reader_field x = {"features", {WIDTH, 1, false}, "x", 0, NULL, 0, false};
    pn_reader_field y = {"labels", {0, 1, true}, "y", 7, "loss", 0, false};
    bool cached = _i;
    /* cached: the file's first bad sample; streamed: whichever a batch meets first */
    snprintf(want, sizeof want, "%s: dataset '/features', sample %s", path, cached ? "42" : "");
    rf_expect_bad_value(path, x, cached, want);
    rf_expect_bad_value(path, x, cached, "(data must be finite)");
    snprintf(want, sizeof want,
             "%s: dataset '/labels', sample 17: id 9 is outside [0, 7) (layer 'loss')", path);
    rf_expect_bad_value(path, y, cached, want);
    y.id_limit = 10; /* within the bound: reads cleanly */
    pn_reader_options o = {.global_batch = 10, .first = 0, .count = 10, .drop_last = true,
                           .cache_bytes = cached ? (size_t)1 << 30 : 0};
    pn_reader *r;
    ck_assert_msg(pn_reader_open(&r, path, &y, 1, &o) == 0, "%s", pn_error_message());
    for (int i = 0; i < 10; i++) {
        const pn_batch *b;
        ck_assert_msg(pn_reader_next(r, &b) == 0, "%s", pn_error_message());
    }
    pn_reader_close(r);
}
END_TEST

/* A lengths field (int32 [N]) comes with its sequences, row for row; a length
 * outside [1, seq] is refused naming the file, the dataset, the sample and the input. */
START_TEST(lengths_are_read_beside_their_field_and_checked)
{
    cache_bytes = _i ? (size_t)1 << 30 : 0;
    const pn_reader_field lf[] = {
        {"tokens", {0, SEQ, true}, "t", 0, NULL, 0, false},
        {"lens", {0, 1, true}, "t", 0, "t", SEQ, false},
    };
    pn_reader_options o = {.global_batch = 10, .first = 2, .count = 5, .shuffle = true,
                           .seed = 9, .drop_last = true, .cache_bytes = cache_bytes};
    pn_reader *r;
    ck_assert_msg(pn_reader_open(&r, data_path, lf, 2, &o) == 0, "%s", pn_error_message());
    for (int step = 0; step < 12; step++) {
        const pn_batch *b = rf_next_batch(r);
        for (int k = 0; k < b->rows; k++) {
            int i = b->ids[0][k * SEQ] / 10;
            ck_assert_int_eq(b->ids[1][k], 1 + i % SEQ);
        }
    }
    pn_reader_close(r);

    char path[PATH_MAX + 16], want[PATH_MAX + 128];
    snprintf(path, sizeof path, "%s/bad.h5", dir);
    make_bad_file(path);
    pn_reader_field lens = lf[1];
    /* cached: the file's first bad sample; streamed: whichever a batch meets first */
    snprintf(want, sizeof want, "%s: dataset '/lens', sample %s", path, _i ? "23: length 4" : "");
    rf_expect_bad_value(path, lens, _i, want);
    rf_expect_bad_value(path, lens, _i, "is outside [1, 3] (input 't')");
}
END_TEST
END_TEST

int main(void)
{
    Suite *s = suite_create("reader");
    TCase *tc = tcase_create("reader");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_test(tc, permutation_is_keyed_by_seed_and_epoch);
    tcase_add_loop_test(tc, batches_follow_the_permutation_and_drop_the_tail, 0, 2);
    tcase_add_loop_test(tc, replicas_split_the_global_batch, 0, 2);
    tcase_add_loop_test(tc, seek_resumes_where_sequential_reading_is, 0, 2);
    tcase_add_test(tc, eval_reads_file_order_and_keeps_the_short_batch);
    tcase_add_test(tc, sequences_read_from_flat_or_3d_datasets);
    tcase_add_test(tc, errors_name_the_file_and_the_dataset);
    tcase_add_loop_test(tc, bad_values_name_file_dataset_and_sample, 0, 2);
    tcase_add_loop_test(tc, lengths_are_read_beside_their_field_and_checked, 0, 2);
    tcase_add_test(tc, unwritten_rows_are_refused);
    tcase_add_test(tc, hdf5_reasons_are_one_line);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
