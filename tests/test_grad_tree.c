/* pn_grad_tree, the deterministic gradient sum: pushed leaves and gathered blocks
 * add up in the fixed binary tree, bit for bit as plain float additions in that
 * tree would, whatever the order they were computed in. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "math/ops.h"
#include "pipeline/grad_tree.h"
#include "testutil.h"

enum { N = 37, MAX_LEAVES = 16 };

/* The tree sum of rows [lo, hi) of leaves into out, in plain C:
 * sum(lo, hi) = sum(lo, mid) + sum(mid, hi), mid = lo + the largest power of two
 * below hi - lo. */
static void reference(const float *leaves, int lo, int hi, float *out)
{
    if (hi - lo == 1) {
        memcpy(out, leaves + (size_t)lo * N, N * sizeof *out);
        return;
    }
    int half = 1;
    while (half * 2 < hi - lo) half *= 2;
    float left[N], right[N];
    reference(leaves, lo, lo + half, left);
    reference(leaves, lo + half, hi, right);
    for (int i = 0; i < N; i++) out[i] = left[i] + right[i];
}

/* Leaves of very different magnitudes, so that another order gives other bits. */
static void fill(float *leaves, int count, uint64_t seed)
{
    pn_rng rng;
    pn_rng_init(&rng, seed, 0);
    for (int k = 0; k < count * N; k++)
        leaves[k] = (float)((2 * pn_rng_uniform(&rng) - 1) * (k % 3 ? 1e-4 : 1e4));
}

START_TEST(pushed_leaves_add_in_the_tree)
{
    for (int leaves = 1; leaves <= MAX_LEAVES; leaves *= 2) {
        float data[MAX_LEAVES * N], want[N];
        fill(data, leaves, (uint64_t)leaves);
        reference(data, 0, leaves, want);
        pn_grad_tree t;
        ck_assert_int_eq(pn_grad_tree_init(&t, pn_device_host(), N, leaves), 0);
        for (int round = 0; round < 2; round++) { /* reset makes a fresh sum */
            pn_grad_tree_reset(&t);
            for (int k = 0; k < leaves; k++) {
                pn_matrix leaf = pn_matrix_host(data + (size_t)k * N, 1, N);
                ck_assert_int_eq(pn_grad_tree_push(&t, &leaf), 0);
            }
            pn_matrix got = pn_grad_tree_result(&t);
            ck_assert_int_eq(got.cols, N);
            ck_assert_msg(!memcmp(got.data, want, sizeof want), "%d leaves, round %d", leaves,
                          round);
        }
        pn_grad_tree_free(&t);
    }
}
END_TEST

START_TEST(blocks_add_in_the_tree)
{
    for (int count = 1; count <= 7; count++) {
        float data[7 * N], want[N], out[N];
        fill(data, count, 100 + (uint64_t)count);
        reference(data, 0, count, want);
        pn_matrix blocks = pn_matrix_host(data, count, N), dst = pn_matrix_host(out, 1, N);
        ck_assert_int_eq(pn_grad_tree_sum_blocks(&blocks, &dst), 0);
        ck_assert_msg(!memcmp(out, want, sizeof want), "%d blocks", count);
    }
}
END_TEST

START_TEST(leaf_counts_must_be_powers_of_two)
{
    pn_grad_tree t;
    ck_assert_int_eq(pn_grad_tree_init(&t, pn_device_host(), N, 6), PN_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(pn_error_message(), "power-of-two"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("grad tree");
    TCase *tc = tcase_create("tree");
    tcase_add_test(tc, pushed_leaves_add_in_the_tree);
    tcase_add_test(tc, blocks_add_in_the_tree);
    tcase_add_test(tc, leaf_counts_must_be_powers_of_two);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
