/* The dataset reader on CSR groups (io/reader_csr.h), files written by
 * tests/csr_fixture.c: shuffled batches and replica slices hold each sample's
 * features as the file has them (read row by row, or copied from memory when
 * cached), empty samples included; 'data' stands for 'values', and no values reads
 * as ones; every malformed group and bad feature is refused naming the file, the
 * group and, for a feature, the sample. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "csr_fixture.h"
#include "io/hdf5_util.h"
#include "io/reader.h"
#include "testutil.h"

enum { N = 97, COLUMNS = 50, FIELDS = 3 };

static char dir[PATH_MAX], path[PATH_MAX + 16];

static void setup(void)
{
    tu_make_temp_dir(dir, sizeof dir, "reader_csr");
    snprintf(path, sizeof path, "%s/csr.h5", dir);
    hid_t f;
    ck_assert_int_eq(pn_hdf5_create_file(path, false, &f), 0);
    pn_hdf5_lock();
    ck_assert_int_eq(csr_write_example(f, "features", N, COLUMNS, FIELDS, true), 0);
    ck_assert_int_eq(csr_write_example(f, "plain", N, COLUMNS, 0, false), 0);
    pn_hdf5_unlock();
    ck_assert_int_eq(pn_hdf5_close(f, path), 0);
}

static void teardown(void) { tu_remove_tree(dir); }

static pn_reader_field sparse_field(const char *group, int64_t columns, int fields)
{
    return (pn_reader_field){.dataset = group,
                             .shape = {.seq = 1, .sparse = true, .fields = fields,
                                       .columns = columns},
                             .input = "x"};
}

/* Checks row k of b's CSR against the example's sample r. */
static void check_sample(const pn_csr *c, int k, long r, int fields, bool ones)
{
    int at = c->offsets[k], len = c->offsets[k + 1] - at;
    ck_assert_int_eq(len, csr_example_len(r));
    for (int j = 0; j < len; j++) {
        ck_assert_int_eq(c->cols[at + j], csr_example_id(r, j, COLUMNS));
        ck_assert_float_eq(c->vals[at + j], ones ? 1.0f : csr_example_value(r, j));
        if (fields) ck_assert_int_eq(c->fields[at + j], csr_example_field(r, j, fields));
    }
}

/* Every batch of two epochs of replica `first` of 2, shuffled, against the
 * permutation; loop: cached or read row by row. */
START_TEST(batches_hold_each_samples_features)
{
    pn_reader_field f[2] = {sparse_field("features", COLUMNS, FIELDS),
                            {.dataset = "labels", .shape = {.seq = 1, .ids = true}}};
    for (int first = 0; first < 16; first += 8) {
        pn_reader_options o = {.global_batch = 16, .first = first, .count = 8, .shuffle = true,
                               .seed = 5, .drop_last = true,
                               .cache_bytes = _i ? (size_t)1 << 30 : 0};
        pn_reader *r;
        ck_assert_msg(pn_reader_open(&r, path, f, 2, &o) == 0, "%s", pn_error_message());
        long perm[N], empty = 0;
        for (long e = 0; e < 2; e++) {
            ck_assert_int_eq(pn_reader_permutation(r, e, perm), 0);
            for (long i = 0; i < pn_reader_batches_per_epoch(r); i++) {
                const pn_batch *b;
                ck_assert_msg(pn_reader_next(r, &b) == 0, "%s", pn_error_message());
                ck_assert_int_eq(b->csr[0].rows, 8);
                ck_assert_int_eq(b->csr[0].nnz, b->csr[0].offsets[8]);
                for (int k = 0; k < 8; k++) {
                    long row = perm[i * 16 + first + k];
                    check_sample(&b->csr[0], k, row, FIELDS, false);
                    ck_assert_int_eq(b->ids[1][k], csr_example_label(row));
                    empty += csr_example_len(row) == 0;
                }
            }
        }
        ck_assert(empty > 0); /* empty samples were among them */
        pn_reader_close(r);
    }
}
END_TEST

/* The whole file as one batch in file order (the bound: every feature), and a
 * group without fields; fields in the file that the model does not read are left. */
START_TEST(file_order_and_no_fields)
{
    pn_reader_field f[2] = {sparse_field("plain", COLUMNS, 0), sparse_field("features", 64, 0)};
    pn_reader_options o = {.global_batch = N, .first = 0, .count = N, .drop_last = false};
    pn_reader *r;
    ck_assert_msg(pn_reader_open(&r, path, f, 2, &o) == 0, "%s", pn_error_message());
    const pn_batch *b;
    ck_assert_msg(pn_reader_next(r, &b) == 0, "%s", pn_error_message());
    for (int k = 0; k < N; k++) {
        check_sample(&b->csr[0], k, k, 0, false);
        check_sample(&b->csr[1], k, k, 0, false);
    }
    ck_assert_ptr_null(b->csr[0].fields);
    ck_assert_ptr_null(b->csr[1].fields);
    pn_reader_close(r);
}
END_TEST

/* A sample longer than the reader's span buffer (65536 features) between short
 * ones is read in place, shuffled or not, cached or not. */
START_TEST(a_long_sample_reads_whole)
{
    enum { LONG = 70000, ROWS = 5 };
    static const int lens[ROWS] = {2, 0, LONG, 1, 3};
    char file[PATH_MAX + 16];
    snprintf(file, sizeof file, "%s/long.h5", dir);
    int64_t indptr[ROWS + 1] = {0};
    for (int r = 0; r < ROWS; r++) indptr[r + 1] = indptr[r] + lens[r];
    int64_t *ids = malloc((size_t)indptr[ROWS] * sizeof *ids);
    float *vals = malloc((size_t)indptr[ROWS] * sizeof *vals);
    for (int64_t j = 0; j < indptr[ROWS]; j++) ids[j] = j % 97, vals[j] = (float)(j % 13);
    hid_t f;
    ck_assert_int_eq(pn_hdf5_create_file(file, false, &f), 0);
    csr_spec spec = {.n = ROWS, .columns = 97, .indptr = indptr, .indices = ids, .values = vals};
    pn_hdf5_lock();
    ck_assert_int_eq(csr_write(f, "g", &spec), 0);
    pn_hdf5_unlock();
    ck_assert_int_eq(pn_hdf5_close(f, file), 0);
    pn_reader_field field = sparse_field("g", 97, 0);
    for (int mode = 0; mode < 4; mode++) {
        pn_reader_options o = {.global_batch = ROWS, .count = ROWS, .shuffle = mode & 1,
                               .seed = 9, .drop_last = true,
                               .cache_bytes = mode & 2 ? (size_t)1 << 30 : 0};
        pn_reader *r;
        ck_assert_msg(pn_reader_open(&r, file, &field, 1, &o) == 0, "%s", pn_error_message());
        long perm[ROWS];
        ck_assert_int_eq(pn_reader_permutation(r, 0, perm), 0);
        const pn_batch *b;
        ck_assert_msg(pn_reader_next(r, &b) == 0, "%s", pn_error_message());
        for (int k = 0; k < ROWS; k++) {
            const pn_csr *c = &b->csr[0];
            long row = perm[k];
            ck_assert_int_eq(c->offsets[k + 1] - c->offsets[k], lens[row]);
            for (int j = 0; j < lens[row]; j++) {
                ck_assert_int_eq(c->cols[c->offsets[k] + j], ids[indptr[row] + j]);
                ck_assert_float_eq(c->vals[c->offsets[k] + j], vals[indptr[row] + j]);
            }
        }
        pn_reader_close(r);
    }
    free(ids);
    free(vals);
}
END_TEST

/* A group written by hand: n samples of the given offsets and features. */
typedef struct hand {
    const char *note;
    int64_t indptr[8];
    int64_t indices[8];
    float values[8];
    int32_t fields[8];
    int n, num_fields;
    int64_t columns, indptr_len; /* < 0: indptr as it should be, indices of -this values */
    const char *values_name;
    bool no_values, no_shape, both, fields_on;
    const char *want; /* in the message, after "<file>: " */
} hand;

static const hand hands[] = {
    {"ok", {0, 2, 2, 3}, {1, 4, 0}, {1, 2, 3}, {0}, 3, 0, 5, 0, NULL, false, false, false, false,
     NULL},
    {"data", {0, 2, 2, 3}, {1, 4, 0}, {1, 2, 3}, {0}, 3, 0, 5, 0, "data", false, false, false,
     false, NULL},
    {"ones", {0, 2, 2, 3}, {1, 4, 0}, {1, 1, 1}, {0}, 3, 0, 5, 0, NULL, true, false, false, false,
     NULL},
    {"indptr[0]", {1, 2, 2, 3}, {1, 4, 0}, {1, 2, 3}, {0}, 3, 0, 5, 0, NULL, false, false, false,
     false, "dataset '/g/indptr': indptr[0] is 1, not 0"},
    {"decreasing", {0, 2, 1, 3}, {1, 4, 0}, {1, 2, 3}, {0}, 3, 0, 5, 0, NULL, false, false, false,
     false, "group '/g', sample 1: indptr[2] = 1 is less than indptr[1] = 2"},
    {"indptr length", {0, 2, 2, 3}, {1, 4, 0}, {1, 2, 3}, {0}, 3, 0, 5, 3, NULL, false, false,
     false, false, "dataset '/g/indptr' holds 3 values, but the group's shape says 3 samples"},
    {"short indices", {0, 2, 2, 3}, {1, 4, 0}, {1, 2, 3}, {0}, 3, 0, 5, -2, NULL, false, false,
     false, false, "dataset '/g/indices' holds 2 values, but indptr[N] says 3 features"},
    {"negative", {0, 2, 2, 3}, {1, -4, 0}, {1, 2, 3}, {0}, 3, 0, 5, 0, NULL, false, false, false,
     false, "group '/g', sample 0: index -4 (position 1 of 'indices') is outside [0, 5)"},
    {"too big", {0, 2, 2, 3}, {1, 4, 5}, {1, 2, 3}, {0}, 3, 0, 5, 0, NULL, false, false, false,
     false, "group '/g', sample 2: index 5 (position 2 of 'indices') is outside [0, 5)"},
    {"nan", {0, 2, 2, 3}, {1, 4, 0}, {1, NAN, 3}, {0}, 3, 0, 5, 0, NULL, false, false, false,
     false, "group '/g', sample 0: value 1 of 'values' is nan (data must be finite)"},
    {"inf in data", {0, 2, 2, 3}, {1, 4, 0}, {1, 2, INFINITY}, {0}, 3, 0, 5, 0, "data", false,
     false, false, false, "group '/g', sample 2: value 2 of 'data' is inf"},
    {"field", {0, 2, 2, 3}, {1, 4, 0}, {1, 2, 3}, {0, 1, 2}, 3, 2, 5, 0, NULL, false, false,
     false, true, "group '/g', sample 2: field 2 (position 2 of 'fields') is outside [0, 2)"},
    {"negative field", {0, 2, 2, 3}, {1, 4, 0}, {1, 2, 3}, {0, -1, 1}, 3, 2, 5, 0, NULL, false,
     false, false, true, "group '/g', sample 0: field -1 (position 1 of 'fields')"},
    {"both", {0, 2, 2, 3}, {1, 4, 0}, {1, 2, 3}, {0}, 3, 0, 5, 0, NULL, false, false, true, false,
     "group '/g' holds both 'values' and 'data'"},
    {"no shape", {0, 2, 2, 3}, {1, 4, 0}, {1, 2, 3}, {0}, 3, 0, 5, 0, NULL, false, true, false,
     false, "group '/g' has no attribute 'shape'"},
    {"columns", {0, 2, 2, 3}, {1, 4, 0}, {1, 2, 3}, {0}, 3, 0, 9, 0, NULL, false, false, false,
     false, "group '/g' has 9 columns (attribute 'shape'), more than the \"columns\": 8 of input 'x'"},
};
enum { N_HANDS = sizeof hands / sizeof *hands };

static void write_hand(const char *file, const hand *h)
{
    hid_t f;
    ck_assert_int_eq(pn_hdf5_create_file(file, false, &f), 0);
    csr_spec s = {.n = h->n, .columns = h->columns, .indptr = h->indptr, .indices = h->indices,
                  .values = h->no_values ? NULL : h->values, .values_name = h->values_name,
                  .fields = h->fields_on ? h->fields : NULL, .num_fields = h->num_fields,
                  .indptr_len = h->indptr_len > 0 ? h->indptr_len : 0,
                  .indices_len = h->indptr_len < 0 ? -h->indptr_len : 0,
                  .no_shape = h->no_shape};
    pn_hdf5_lock();
    ck_assert_int_eq(csr_write(f, "g", &s), 0);
    if (h->both) { /* a 'data' beside the 'values' */
        hid_t g = H5Gopen2(f, "g", H5P_DEFAULT);
        hsize_t n = 3;
        hid_t sp = H5Screate_simple(1, &n, NULL);
        hid_t d = H5Dcreate2(g, "data", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        ck_assert(d >= 0 && H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                     h->values) >= 0);
        H5Dclose(d), H5Sclose(sp), H5Gclose(g);
    }
    pn_hdf5_unlock();
    ck_assert_int_eq(pn_hdf5_close(f, file), 0);
}

/* Opens and reads one batch of all 3 samples: the error message, or "" when clean
 * (then the batch is checked against the hand's features). */
static void read_hand(const char *file, const hand *h, bool cached, char *msg, size_t cap)
{
    pn_reader_field f = sparse_field("g", 8, h->num_fields ? 4 : 0);
    pn_reader_options o = {.global_batch = 3, .first = 0, .count = 3, .drop_last = false,
                           .cache_bytes = cached ? (size_t)1 << 20 : 0};
    pn_reader *r;
    const pn_batch *b = NULL;
    int rc = pn_reader_open(&r, file, &f, 1, &o);
    if (rc == 0) {
        rc = pn_reader_next(r, &b);
        if (rc == 0 && !h->want) {
            ck_assert_int_eq(b->csr[0].nnz, 3);
            for (int k = 0; k < 4; k++) ck_assert_int_eq(b->csr[0].offsets[k], h->indptr[k]);
            for (int j = 0; j < 3; j++) {
                ck_assert_int_eq(b->csr[0].cols[j], h->indices[j]);
                ck_assert_float_eq(b->csr[0].vals[j], h->no_values ? 1.0f : h->values[j]);
            }
        }
        pn_reader_close(r);
    }
    snprintf(msg, cap, "%s", rc == 0 ? "" : pn_error_message());
}

START_TEST(malformed_groups_are_refused_by_name)
{
    const hand *h = &hands[_i];
    char file[PATH_MAX + 32], msg[2048], want[PATH_MAX + 512];
    snprintf(file, sizeof file, "%s/hand%d.h5", dir, _i);
    write_hand(file, h);
    for (int cached = 0; cached < 2; cached++) {
        read_hand(file, h, cached, msg, sizeof msg);
        if (!h->want) {
            ck_assert_msg(msg[0] == '\0', "%s: %s", h->note, msg);
            continue;
        }
        snprintf(want, sizeof want, "%s: %s", file, h->want);
        ck_assert_msg(strstr(msg, want), "%s (cached %d): got '%s', want '%s'", h->note, cached,
                      msg, want);
    }
}
END_TEST

/* What is no CSR group is refused by name: a dataset, a missing group, missing
 * fields where the model reads them. */
START_TEST(what_is_no_csr_group_is_refused)
{
    char msg[2048], want[PATH_MAX + 256];
    pn_reader_options o = {.global_batch = 4, .first = 0, .count = 4, .drop_last = true};
    pn_reader *r;
    struct { pn_reader_field f; const char *want; } cases[] = {
        {sparse_field("labels", COLUMNS, 0), "'/labels' is a dataset, but input 'x' is sparse"},
        {sparse_field("nothing", COLUMNS, 0), "no group '/nothing' (the model's input 'x'"},
        {sparse_field("plain", COLUMNS, 2), "group '/plain' has no dataset 'fields', but input "
                                            "'x' reads 2 fields"},
        {sparse_field("features", COLUMNS, 2), "group '/features': attribute 'num_fields' is 3, "
                                               "but input 'x' reads 1 to 2 fields"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        ck_assert_int_ne(pn_reader_open(&r, path, &cases[k].f, 1, &o), 0);
        snprintf(msg, sizeof msg, "%s", pn_error_message());
        snprintf(want, sizeof want, "%s: %s", path, cases[k].want);
        ck_assert_msg(strstr(msg, want), "got '%s', want '%s'", msg, want);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("reader csr");
    TCase *tc = tcase_create("csr");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, batches_hold_each_samples_features, 0, 2);
    tcase_add_test(tc, file_order_and_no_fields);
    tcase_add_test(tc, a_long_sample_reads_whole);
    tcase_add_loop_test(tc, malformed_groups_are_refused_by_name, 0, N_HANDS);
    tcase_add_test(tc, what_is_no_csr_group_is_refused);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
