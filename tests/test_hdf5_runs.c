/* Runs of values in row-major order (a sharded optimizer's part of a slot,
 * docs/snapshots.md): a virtual dataset over 1-D sources, each a run cut anywhere
 * (inside one row, across rows, from or to a row's edge), reads back as the whole,
 * passes the index's part check, and every run of it, and of a plain dataset, reads
 * back with pn_hdf5_read_run. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "io/hdf5_util.h"
#include "testutil.h"

enum { ROWS = 5, COLS = 7, N = ROWS * COLS };

static char dir[PATH_MAX];

static void setup(void) { tu_make_temp_dir(dir, sizeof dir, "hdf5_runs"); }

static void teardown(void) { tu_remove_tree(dir); }

/* Cuts of 0 .. N into runs: one inside a row, one value, one across rows from mid-row
 * to mid-row with a whole row between, one from mid-row to a row's end, the rest. */
static const int cuts[] = {0, 3, 4, 17, 20, 21, 35};
enum { RUNS = sizeof cuts / sizeof cuts[0] - 1 };

/* dir/runs.part-<k>.h5 holding run k of 0 .. N - 1 as "/x" [n], checksummed; then
 * dir/runs.h5 with "/x" [ROWS, COLS] virtual over them and "/plain" written whole. */
static void write_files(char *index, size_t cap)
{
    float all[N];
    for (int i = 0; i < N; i++) all[i] = (float)i;
    char names[RUNS][64];
    pn_hdf5_source src[RUNS];
    for (int k = 0; k < RUNS; k++) {
        char path[PATH_MAX + 64];
        snprintf(names[k], sizeof names[k], "runs.part-%d.h5", k);
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        hid_t f;
        ck_assert_int_eq(pn_hdf5_create_file(path, false, &f), 0);
        hsize_t n = (hsize_t)(cuts[k + 1] - cuts[k]), dims[1] = {n}, chunk[1] = {n};
        ck_assert_int_eq(pn_hdf5_write_checksummed(f, path, "/x", 1, dims, chunk, all + cuts[k]),
                         0);
        ck_assert_int_eq(pn_hdf5_close(f, path), 0);
        src[k] = (pn_hdf5_source){names[k], "/x", 0, 1, 0, (hsize_t)cuts[k], n};
    }
    snprintf(index, cap, "%s/runs.h5", dir);
    hid_t f;
    ck_assert_int_eq(pn_hdf5_create_file(index, false, &f), 0);
    hsize_t dims[2] = {ROWS, COLS}, chunk[2] = {2, COLS};
    ck_assert_int_eq(pn_hdf5_write_virtual(f, index, "/x", 2, dims, src, RUNS), 0);
    ck_assert_int_eq(pn_hdf5_write_checksummed(f, index, "/plain", 2, dims, chunk, all), 0);
    ck_assert_int_eq(pn_hdf5_close(f, index), 0);
}

START_TEST(runs_map_and_read_back)
{
    char index[PATH_MAX + 16];
    write_files(index, sizeof index);
    hid_t f, d;
    ck_assert_int_eq(pn_hdf5_open_file(index, H5P_DEFAULT, &f), 0);
    ck_assert_int_eq(pn_hdf5_open_dataset(f, index, "/x", NULL, &d), 0);
    ck_assert_msg(pn_hdf5_check_parts(d, index, "/x", "runs.part-") == 0, "%s",
                  pn_error_message());
    pn_hdf5_close(d, index);
    for (int plain = 0; plain < 2; plain++) {
        const char *name = plain ? "/plain" : "/x";
        float got[N];
        ck_assert_int_eq(pn_hdf5_read_run(f, index, name, 0, N, got), 0); /* the whole */
        for (int i = 0; i < N; i++) ck_assert_float_eq(got[i], (float)i);
        for (int at = 0; at < N; at++) /* every run */
            for (int n = 1; at + n <= N; n++) {
                for (int i = 0; i < n; i++) got[i] = -1.0f;
                ck_assert_msg(pn_hdf5_read_run(f, index, name, (hsize_t)at, (hsize_t)n, got) == 0,
                              "%s", pn_error_message());
                for (int i = 0; i < n; i++)
                    ck_assert_msg(got[i] == (float)(at + i), "%s: run %d + %d: value %d is %g",
                                  name, at, n, i, got[i]);
            }
    }
    /* past the end: an error naming the file and the dataset, nothing read */
    float one[2];
    pn_error_clear();
    ck_assert_int_eq(pn_hdf5_read_run(f, index, "/x", N - 1, 2, one), PN_ERR_INTERNAL);
    ck_assert_ptr_nonnull(strstr(pn_error_message(), index));
    ck_assert_ptr_nonnull(strstr(pn_error_message(), "'/x'"));
    pn_hdf5_close(f, index);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hdf5_runs");
    TCase *tc = tcase_create("runs");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, runs_map_and_read_back);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
