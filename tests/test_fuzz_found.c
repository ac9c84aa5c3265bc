/* Regressions for what the fuzz targets (fuzz/) found: each test is one finding,
 * named after what must hold, with the input that broke it written out small. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "csr_fixture.h"
#include "io/hdf5_util.h"
#include "io/reader.h"
#include "io/snapshot_file.h"
#include "testutil.h"

static char path[PATH_MAX];

static void setup(void)
{
    snprintf(path, sizeof path, "%s/pipenet-fuzz-found-%ld.h5",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid());
}

static void teardown(void) { unlink(path); }

static bool prime(size_t n)
{
    for (size_t d = 2; d * d <= n; d++)
        if (n % d == 0) return false;
    return n >= 2;
}

/* fuzz_dataset: a compressed dataset of one-float chunks made the reader ask HDF5
 * for a chunk cache of 100 slots per chunk: 838 MB of hash table for a 4 MB
 * dataset (and an allocation failure for a larger one). */
START_TEST(chunk_cache_tables_stay_small_for_tiny_chunks)
{
    size_t small = pn_hdf5_chunk_cache_slots((size_t)4 << 20, 4);
    ck_assert_msg(small <= ((size_t)1 << 20) + 1000 && prime(small), "%zu slots", small);
    size_t huge = pn_hdf5_chunk_cache_slots((size_t)256 << 20, 1);
    ck_assert_msg(huge <= ((size_t)1 << 20) + 1000 && prime(huge), "%zu slots", huge);
    size_t few = pn_hdf5_chunk_cache_slots((size_t)1 << 20, (size_t)64 << 10); /* 17 chunks */
    ck_assert_msg(few >= 100 * 17 && few < 100 * 17 + 200 && prime(few), "%zu slots", few);
}
END_TEST

/* fuzz_dataset: ids [2^62] in chunks of one, never written, with a fill value.
 * HDF5 counts 2^62 x 4 bytes as 0 and calls that storage allocated, so the check
 * for unwritten rows let it through; the reader's cache size wrapped to 1 byte and
 * HDF5 read the whole extent into it. */
START_TEST(reader_refuses_an_extent_no_file_holds)
{
    hsize_t dims = (hsize_t)1 << 62, chunk = 1;
    int fill = -7;
    pn_hdf5_lock();
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t space = H5Screate_simple(1, &dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    ck_assert(f >= 0 && H5Pset_chunk(dcpl, 1, &chunk) >= 0 &&
              H5Pset_fill_value(dcpl, H5T_NATIVE_INT, &fill) >= 0);
    hid_t d = H5Dcreate2(f, "labels", H5T_STD_I32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ck_assert(d >= 0);
    H5Dclose(d), H5Pclose(dcpl), H5Sclose(space), H5Fclose(f);
    pn_hdf5_unlock();
    pn_reader_field y = {.dataset = "labels", .shape = {.seq = 1, .ids = true}, .id_limit = 3};
    for (int cached = 0; cached < 2; cached++) {
        pn_reader_options o = {.global_batch = 4, .count = 4, .drop_last = true,
                               .cache_bytes = cached ? (size_t)1 << 30 : 0};
        pn_reader *r = NULL;
        ck_assert_int_eq(pn_reader_open(&r, path, &y, 1, &o), PN_ERR_INVALID);
        ck_assert_msg(strstr(pn_error_message(), "dataset '/labels' declares 4611686018427387904 "
                                                 "samples of 1 values: more than any file holds"),
                      "%s", pn_error_message());
    }
}
END_TEST

/* fuzz_csr: a batch whose samples were all empty, read from the file (not cached),
 * took an offset from the cache's NULL array (UBSan: "applying non-zero offset to
 * null pointer"); it reads as empty samples. */
START_TEST(a_batch_of_empty_samples_reads_from_the_file)
{
    const int64_t indptr[4] = {0, 0, 0, 2}, ids[2] = {1, 3};
    const float vals[2] = {0.5f, 2.0f};
    csr_spec spec = {.n = 3, .columns = 4, .indptr = indptr, .indices = ids, .values = vals};
    pn_hdf5_lock();
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ck_assert(f >= 0 && csr_write(f, "g", &spec) == 0);
    H5Fclose(f);
    pn_hdf5_unlock();
    pn_reader_field x = {.dataset = "g", .input = "x",
                         .shape = {.seq = 1, .sparse = true, .columns = 4}};
    pn_reader_options o = {.global_batch = 2, .count = 2, .drop_last = false};
    pn_reader *r = NULL;
    ck_assert_msg(pn_reader_open(&r, path, &x, 1, &o) == 0, "%s", pn_error_message());
    const pn_batch *b;
    ck_assert_msg(pn_reader_next(r, &b) == 0, "%s", pn_error_message());
    ck_assert_int_eq(b->csr[0].nnz, 0);
    ck_assert_msg(pn_reader_next(r, &b) == 0, "%s", pn_error_message());
    ck_assert_int_eq(b->csr[0].nnz, 2);
    ck_assert_int_eq(b->csr[0].cols[1], 3);
    ck_assert_float_eq(b->csr[0].vals[0], 0.5f);
    pn_reader_close(r);
}
END_TEST

/* fuzz_csr: a replica's share of a short last batch holds no samples, and its CSR
 * kept the previous batch's rows and features; it holds none. */
START_TEST(an_empty_share_of_a_batch_holds_no_features)
{
    int64_t indptr[10], ids[9];
    for (int r = 0; r < 9; r++) indptr[r] = r, ids[r] = r % 4;
    indptr[9] = 9;
    csr_spec spec = {.n = 9, .columns = 4, .indptr = indptr, .indices = ids};
    pn_hdf5_lock();
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ck_assert(f >= 0 && csr_write(f, "g", &spec) == 0);
    H5Fclose(f);
    pn_hdf5_unlock();
    pn_reader_field x = {.dataset = "g", .input = "x",
                         .shape = {.seq = 1, .sparse = true, .columns = 4}};
    pn_reader_options o = {.global_batch = 4, .first = 2, .count = 2, .drop_last = false};
    pn_reader *r = NULL;
    ck_assert_msg(pn_reader_open(&r, path, &x, 1, &o) == 0, "%s", pn_error_message());
    const pn_batch *b;
    for (int k = 0; k < 2; k++) { /* samples 2, 3 and 6, 7, in the two buffers */
        ck_assert_msg(pn_reader_next(r, &b) == 0, "%s", pn_error_message());
        ck_assert_int_eq(b->csr[0].rows, 2);
    }
    ck_assert_msg(pn_reader_next(r, &b) == 0, "%s", pn_error_message()); /* sample 8 only */
    ck_assert_int_eq(b->rows, 0);
    ck_assert_int_eq(b->csr[0].rows, 0);
    ck_assert_int_eq(b->csr[0].nnz, 0);
    ck_assert_int_eq(b->csr[0].offsets[0], 0);
    pn_reader_close(r);
}
END_TEST

/* fuzz_snapshot: a state without parameters was written without a /params group,
 * which the reader requires: export wrote a model file that nothing could read. */
START_TEST(a_state_without_parameters_reads_back)
{
    const char *formats[] = {PN_FORMAT_MODEL, PN_FORMAT_SNAPSHOT};
    for (int k = 0; k < 2; k++) {
        pn_train_state *st, *back = NULL;
        ck_assert_int_eq(pn_train_state_create(&st, formats[k]), 0);
        ck_assert_int_eq(pn_train_state_set_config(st, "{\"inputs\": {}}"), 0);
        ck_assert_msg(pn_snapshot_file_write(path, st, NULL) == 0, "%s", pn_error_message());
        ck_assert_msg(pn_snapshot_read(path, formats[k], &back) == 0, "%s", pn_error_message());
        ck_assert_int_eq(back->n_params, 0);
        ck_assert_str_eq(back->config, st->config);
        pn_train_state_free(back);
        pn_train_state_free(st);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fuzz_found");
    TCase *tc = tcase_create("fuzz_found");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_test(tc, chunk_cache_tables_stay_small_for_tiny_chunks);
    tcase_add_test(tc, reader_refuses_an_extent_no_file_holds);
    tcase_add_test(tc, a_state_without_parameters_reads_back);
    tcase_add_test(tc, a_batch_of_empty_samples_reads_from_the_file);
    tcase_add_test(tc, an_empty_share_of_a_batch_holds_no_features);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
