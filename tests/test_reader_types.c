/* The dataset reader on numpy's element types (docs/formats.md, "Element types"):
 * other widths converted by HDF5 from the file and from memory, a target [N] for one
 * value a sample, wide ids checked as they narrow to int32, and types it cannot read
 * refused saying what to write. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "io/hdf5_util.h"
#include "io/reader.h"
#include "reader_fixture.h"
#include "testutil.h"

enum { N = 103, WIDTH = 5, SEQ = 3 };

static char dir[PATH_MAX];

static void setup(void) { tu_make_temp_dir(dir, sizeof dir, "reader_types"); }

static void teardown(void) { tu_remove_tree(dir); }


/* Writes dataset name of file type ftype from data of memory type mtype (contiguous,
 * as h5py writes by default). */
static void write_typed(hid_t f, const char *name, hid_t ftype, hid_t mtype, int rank,
                        const hsize_t *dims, const void *data)
{
    pn_hdf5_lock();
    hid_t space = H5Screate_simple(rank, dims, NULL);
    hid_t d = H5Dcreate2(f, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ck_assert(d >= 0 && H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    H5Dclose(d);
    H5Sclose(space);
    pn_hdf5_unlock();
}

/* types.h5, numpy's dtypes: /x float64 [N, 5] (rf_feature(i, j)), /y int64 [N] (i % 7),
 * /y8 uint8 [N], /yf float64 [N] (the same ids as floats), /t int64 [N, 3] (i * 10 +
 * s), /target float64 [N] (i / 2); bad ones: /big int64 [N] with 5e9 at sample 17,
 * /u32 uint32 [N] with 3e9 at sample 20, /frac float32 [N] with 2.5 at sample 30,
 * /tbad int64 [N, 3] with -3e9 at sample 40, position 2, /lenf float64 [N] (lengths 1
 * + i % 3) with 2.5 at sample 30. */
static void make_types_file(const char *path)
{
    hid_t f;
    ck_assert_int_eq(pn_hdf5_create_file(path, false, &f), 0);
    static double x[N * WIDTH], yf[N], target[N], lenf[N];
    static long long y[N], big[N], t[N * SEQ], tbad[N * SEQ];
    static unsigned char y8[N];
    static unsigned u32[N];
    static float frac[N];
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < WIDTH; j++) x[i * WIDTH + j] = rf_feature(i, j);
        y[i] = big[i] = y8[i] = u32[i] = i % 7;
        yf[i] = frac[i] = (float)(i % 7);
        target[i] = i / 2.0;
        lenf[i] = i == 30 ? 2.5 : 1 + i % SEQ;
        for (int k = 0; k < SEQ; k++) t[i * SEQ + k] = tbad[i * SEQ + k] = i * 10 + k;
    }
    big[17] = 5000000000LL, u32[20] = 3000000000u, frac[30] = 2.5f, tbad[40 * SEQ + 2] = -3000000000LL;
    hsize_t d2[2] = {N, WIDTH}, t2[2] = {N, SEQ}, n1 = N;
    write_typed(f, "x", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 2, d2, x);
    write_typed(f, "y", H5T_STD_I64LE, H5T_NATIVE_LLONG, 1, &n1, y);
    write_typed(f, "y8", H5T_STD_U8LE, H5T_NATIVE_UCHAR, 1, &n1, y8);
    write_typed(f, "yf", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, &n1, yf);
    write_typed(f, "t", H5T_STD_I64BE, H5T_NATIVE_LLONG, 2, t2, t);
    write_typed(f, "target", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, &n1, target);
    write_typed(f, "big", H5T_STD_I64LE, H5T_NATIVE_LLONG, 1, &n1, big);
    write_typed(f, "u32", H5T_STD_U32LE, H5T_NATIVE_UINT, 1, &n1, u32);
    write_typed(f, "frac", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 1, &n1, frac);
    write_typed(f, "tbad", H5T_STD_I64LE, H5T_NATIVE_LLONG, 2, t2, tbad);
    write_typed(f, "lenf", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, &n1, lenf);
    ck_assert_int_eq(pn_hdf5_close(f, path), 0);
}

/* numpy's default dtypes read as float32 and int32 through HDF5's conversion, read
 * from the file and from memory alike, and a target of shape [N] for one value a
 * sample; every value comes out as written. */
START_TEST(other_widths_are_converted)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/types.h5", dir);
    make_types_file(path);
    const pn_reader_field tf[] = {
        {"x", {WIDTH, 1, false}, "x", 0, NULL, 0, false}, {"y", {0, 1, true}, "y", 7, "loss", 0, false},
        {"y8", {0, 1, true}, "y", 0, NULL, 0, false},     {"yf", {0, 1, true}, "y", 0, NULL, 0, false},
        {"t", {0, SEQ, true}, "t", 0, NULL, 0, false},    {"target", {1, 1, false}, "r", 0, NULL, 0, false},
    };
    pn_reader_options o = {.global_batch = 10, .first = 3, .count = 7, .shuffle = true,
                           .seed = 5, .drop_last = true, .cache_bytes = _i ? (size_t)1 << 30 : 0};
    pn_reader *r;
    ck_assert_msg(pn_reader_open(&r, path, tf, 6, &o) == 0, "%s", pn_error_message());
    for (int step = 0; step < 12; step++) {
        const pn_batch *b = rf_next_batch(r);
        for (int k = 0; k < b->rows; k++) {
            long i = lroundf(b->values[0][k * WIDTH]);
            for (int j = 0; j < WIDTH; j++)
                ck_assert_float_eq(b->values[0][k * WIDTH + j], rf_feature(i, j));
            for (int f = 1; f <= 3; f++) ck_assert_int_eq(b->ids[f][k], i % 7);
            for (int s = 0; s < SEQ; s++) ck_assert_int_eq(b->ids[4][k * SEQ + s], i * 10 + s);
            ck_assert_float_eq(b->values[5][k], i / 2.0f);
        }
    }
    pn_reader_close(r);
}
END_TEST

/* HDF5 would clip an int64 or uint32 beyond int32 and cut a fraction off without a
 * word: the reader refuses them, naming the file, dataset, sample (position) and value. */
START_TEST(wide_ids_are_checked)
{
    char path[PATH_MAX + 16], want[PATH_MAX + 256];
    snprintf(path, sizeof path, "%s/types.h5", dir);
    make_types_file(path);
    bool cached = _i;
    const char *range = "is outside int32's range, [-2147483648, 2147483647]";
    snprintf(want, sizeof want, "%s: dataset '/big', sample 17: id 5000000000 %s (input 'y')",
             path, range);
    rf_expect_bad_value(path, (pn_reader_field){"big", {0, 1, true}, "y", 0, NULL, 0, false}, cached, want);
    snprintf(want, sizeof want, "%s: dataset '/u32', sample 20: id 3000000000 %s (input 'y')",
             path, range);
    rf_expect_bad_value(path, (pn_reader_field){"u32", {0, 1, true}, "y", 0, NULL, 0, false}, cached, want);
    snprintf(want, sizeof want, "%s: dataset '/frac', sample 30: id 2.5 is not a whole number "
             "(input 'y'; a regression target takes a \"size\" in place of \"ids\": true)", path);
    rf_expect_bad_value(path, (pn_reader_field){"frac", {0, 1, true}, "y", 0, NULL, 0, false}, cached, want);
    snprintf(want, sizeof want, "%s: dataset '/tbad', sample 40, position 2: id -3000000000 %s "
             "(input 't')", path, range);
    rf_expect_bad_value(path, (pn_reader_field){"tbad", {0, SEQ, true}, "t", 0, NULL, 0, false}, cached,
                     want);
    snprintf(want, sizeof want, "%s: dataset '/lenf', sample 30: length 2.5 is not a whole number "
             "(input 't')", path);
    rf_expect_bad_value(path, pn_reader_lengths_field("t", "lenf", SEQ), cached, want);
}
END_TEST

/* A dataset of wide ids read into memory is staged in pieces (1 MiB): every piece
 * lands at its rows, and a bad value in a later piece is named at its own row. */
START_TEST(wide_ids_are_cached_in_pieces)
{
    enum { ROWS = 300000 };
    char path[PATH_MAX + 16], want[PATH_MAX + 256];
    snprintf(path, sizeof path, "%s/long.h5", dir);
    long long *y = malloc(ROWS * sizeof *y);
    for (int i = 0; i < ROWS; i++) y[i] = i % 7 + (i / 7) % 3 * 100;
    hid_t f;
    hsize_t n = ROWS;
    ck_assert_int_eq(pn_hdf5_create_file(path, false, &f), 0);
    write_typed(f, "y", H5T_STD_I64LE, H5T_NATIVE_LLONG, 1, &n, y);
    y[250001] = -(1LL << 40);
    write_typed(f, "bad", H5T_STD_I64LE, H5T_NATIVE_LLONG, 1, &n, y);
    ck_assert_int_eq(pn_hdf5_close(f, path), 0);
    pn_reader_field yf = {"y", {0, 1, true}, "y", 0, NULL, 0, false};
    pn_reader_options o = {.global_batch = ROWS / 3, .first = 0, .count = ROWS / 3,
                           .drop_last = true, .cache_bytes = (size_t)1 << 30};
    pn_reader *r;
    ck_assert_msg(pn_reader_open(&r, path, &yf, 1, &o) == 0, "%s", pn_error_message());
    for (int batch = 0; batch < 3; batch++) {
        const pn_batch *b = rf_next_batch(r);
        for (int k = 0; k < b->rows; k++) {
            int i = batch * (ROWS / 3) + k;
            if (b->ids[0][k] != i % 7 + (i / 7) % 3 * 100)
                ck_abort_msg("row %d: %d", i, b->ids[0][k]);
        }
    }
    pn_reader_close(r);
    snprintf(want, sizeof want, "%s: dataset '/bad', sample 250001: id -1099511627776 is outside",
             path);
    rf_expect_bad_value(path, (pn_reader_field){"bad", {0, 1, true}, "y", 0, NULL, 0, false}, true, want);
    free(y);
}
END_TEST

/* Element types no conversion makes numbers of are refused, saying what to write. */
START_TEST(other_types_say_what_to_write)
{
    char path[PATH_MAX + 16], want[PATH_MAX + 256];
    snprintf(path, sizeof path, "%s/strings.h5", dir);
    hid_t f;
    ck_assert_int_eq(pn_hdf5_create_file(path, false, &f), 0);
    char names[N][8] = {{0}};
    for (int i = 0; i < N; i++) snprintf(names[i], sizeof names[i], "c%d", i % 7);
    hsize_t n1 = N;
    pn_hdf5_lock();
    hid_t str = H5Tcopy(H5T_C_S1);
    H5Tset_size(str, 8);
    pn_hdf5_unlock();
    write_typed(f, "names", str, str, 1, &n1, names);
    H5Tclose(str);
    ck_assert_int_eq(pn_hdf5_close(f, path), 0);
    snprintf(want, sizeof want, "%s: dataset '/names' holds strings, but input 'y' reads integer "
             "ids: write integers (numpy: class names become ids with np.unique(a, "
             "return_inverse=True)[1])", path);
    rf_expect_open_error(path, (pn_reader_field){"names", {0, 1, true}, "y", 0, NULL, 0, false},
                      PN_ERR_INVALID, want);
    snprintf(want, sizeof want, "%s: dataset '/names' holds strings, but input 'x' reads floats: "
             "write floats (numpy: a.astype('float32'))", path);
    rf_expect_open_error(path, (pn_reader_field){"names", {1, 1, false}, "x", 0, NULL, 0, false},
                      PN_ERR_INVALID, want);
}

int main(void)
{
    Suite *s = suite_create("reader_types");
    TCase *tc = tcase_create("reader_types");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, other_widths_are_converted, 0, 2);
    tcase_add_loop_test(tc, wide_ids_are_checked, 0, 2);
    tcase_add_test(tc, wide_ids_are_cached_in_pieces);
    tcase_add_test(tc, other_types_say_what_to_write);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
