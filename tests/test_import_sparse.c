/* The sparse importers' pure parts: the planted model's exact AUC (ties count half,
 * against a count over every positive-negative pair) and the CSR writer's rows
 * across blocks, read back through HDF5 by the reader's own helpers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/error.h"
#include "io/csr_file.h"
#include "io/hdf5_util.h"
#include "io/import_sparse.h"
#include "testutil.h"

/* The AUC by definition: every positive-negative pair, ties half. */
static double pairwise_auc(const pn_scored *s, long n)
{
    double wins = 0, pairs = 0;
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++)
            if (s[i].label && !s[j].label) {
                pairs += 1;
                wins += s[i].score > s[j].score ? 1 : s[i].score == s[j].score ? 0.5 : 0;
            }
    return wins / pairs;
}

START_TEST(auc_counts_ties_half)
{
    pn_scored s[] = {{0.5, 1}, {0.5, 0}, {0.9, 1}, {0.1, 0}};
    ck_assert(fabs(pn_ctr_auc(s, 4) - 0.875) < 1e-12); /* 3 wins and one tie of 4 pairs */
    pn_scored one_class[] = {{1, 1}, {2, 1}};
    ck_assert(isnan(pn_ctr_auc(one_class, 2)));
    pn_rng r;
    pn_rng_init(&r, 3, 4);
    enum { N = 500 };
    pn_scored many[N], copy[N];
    for (int i = 0; i < N; i++) /* few distinct scores: many ties */
        many[i] = copy[i] = (pn_scored){floor(pn_rng_uniform(&r) * 7), pn_rng_uniform(&r) < 0.4};
    double want = pairwise_auc(copy, N);
    ck_assert_msg(fabs(pn_ctr_auc(many, N) - want) < 1e-12, "AUC %.15g, pairs say %.15g",
                  pn_ctr_auc(many, N), want);
}
END_TEST

/* Rows of 0..4 entries through blocks of 3 values: indptr and indices as written. */
START_TEST(csr_rows_cross_blocks)
{
    char dir[256], path[300];
    tu_make_temp_dir(dir, sizeof dir, "csr");
    snprintf(path, sizeof path, "%s/a.h5", dir);
    pn_csr_file f;
    int rc = pn_csr_file_create(&f, path, true, true, 3);
    int64_t idx[4];
    float val[4];
    int32_t fld[4];
    long nnz = 0;
    for (int row = 0; rc == 0 && row < 40; row++) {
        int n = row % 5;
        for (int k = 0; k < n; k++) idx[k] = nnz + k, val[k] = (float)(nnz + k), fld[k] = k;
        nnz += n;
        rc = pn_csr_file_add_row(&f, row % 2, n, idx, val, fld);
    }
    rc = pn_csr_file_close(&f, pn_csr_file_finish(&f, 1000, 4, rc));
    ck_assert_msg(rc == 0, "%s", pn_error_message());
    hid_t file, d;
    ck_assert_int_eq(pn_hdf5_open_file(path, H5P_DEFAULT, &file), 0);
    int64_t indptr[41], indices[80];
    ck_assert_int_eq(pn_hdf5_open_dataset(file, path, "features/indptr", NULL, &d), 0);
    ck_assert_int_eq(pn_hdf5_read_all(d, path, "indptr", PN_HDF5_INT64, indptr), 0);
    pn_hdf5_close(d, path);
    ck_assert_int_eq(pn_hdf5_open_dataset(file, path, "features/indices", NULL, &d), 0);
    ck_assert_int_eq(pn_hdf5_read_all(d, path, "indices", PN_HDF5_INT64, indices), 0);
    pn_hdf5_close(d, path);
    pn_hdf5_close(file, path);
    long at = 0;
    for (int row = 0; row < 40; row++) {
        ck_assert_int_eq(indptr[row], at);
        at += row % 5;
    }
    ck_assert_int_eq(indptr[40], nnz);
    for (long k = 0; k < nnz; k++) ck_assert_int_eq(indices[k], k);
    tu_remove_tree(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("import_sparse");
    TCase *tc = tcase_create("import_sparse");
    tcase_add_test(tc, auc_counts_ties_half);
    tcase_add_test(tc, csr_rows_cross_blocks);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
