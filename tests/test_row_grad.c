/* Row-sparse gradients (layers/row_grad.h) and their update: the structure (empty,
 * duplicates summed in append order, ids sorted, micro-batches sealed into partials
 * that the merge sums in micro-batch order, growth keeps entries, bad ids and late
 * appends refused); the arena gives a row-sparse table no gradient room; sgd
 * on row-sparse gradients equals the dense update bit for bit; lazy momentum and
 * adam (and decay, and clipping's scale) equal a reference that runs the formulas
 * on the touched rows only. */
#include <string.h>

#include "base/error.h"
#include "layers/params.h"
#include "layers/row_grad.h"
#include "math/ops.h"
#include "optimizer_ref.h"
#include "optim/optimizer.h"
#include "testutil.h"

static pn_matrix host_rows(float *data, int rows, int cols)
{
    return (pn_matrix){data, rows, cols, cols, pn_device_host()};
}

START_TEST(empty_merges_to_nothing)
{
    pn_row_grad g;
    pn_row_grad_init(&g, 10, 3, pn_device_host());
    ck_assert_int_eq(pn_row_grad_merge(&g), 0);
    ck_assert_int_eq(g.n, 0);
    ck_assert_int_eq(pn_row_grad_rows(&g).rows, 0);
    float table[30] = {0};
    pn_matrix t = host_rows(table, 10, 3);
    ck_assert_int_eq(pn_row_grad_add_to(&g, &t), 0);
    for (int k = 0; k < 30; k++) ck_assert(table[k] == 0.0f);
    pn_row_grad_release(&g);
}
END_TEST

/* Row 4's first column gets 1e8, -1e8, 1 in that order: in float (1e8 - 1e8) + 1 is
 * 1, while adding 1 before either (1 vanishes beside 1e8) gives 0: the sum shows the
 * order it was added in. */
START_TEST(duplicates_sum_in_append_order)
{
    pn_row_grad g;
    pn_row_grad_init(&g, 10, 2, pn_device_host());
    int ids1[] = {4, 7, 4};
    float r1[] = {1e8f, 1, 5, 6, -1e8f, 2};
    int ids2[] = {0, 4};
    float r2[] = {3, 3, 1, 4};
    pn_matrix m1 = host_rows(r1, 3, 2), m2 = host_rows(r2, 2, 2);
    ck_assert_int_eq(pn_row_grad_append(&g, ids1, &m1), 0);
    ck_assert_int_eq(pn_row_grad_append(&g, ids2, &m2), 0);
    ck_assert_int_eq(g.n, 5);
    ck_assert_int_eq(pn_row_grad_merge(&g), 0);
    ck_assert_int_eq(g.n, 3);
    ck_assert_int_eq(g.ids[0], 0);
    ck_assert_int_eq(g.ids[1], 4);
    ck_assert_int_eq(g.ids[2], 7);
    pn_matrix rows = pn_row_grad_rows(&g);
    const float want[] = {3, 3, 1, 1 + 2 + 4, 5, 6};
    for (int k = 0; k < 6; k++)
        ck_assert_msg(rows.data[k] == want[k], "merged element %d: %g, want %g", k,
                      (double)rows.data[k], (double)want[k]);
    ck_assert_int_eq(pn_row_grad_merge(&g), 0); /* again: nothing changes */
    ck_assert_int_eq(g.n, 3);
    ck_assert_int_eq(pn_row_grad_append(&g, ids2, &m2), PN_ERR_INTERNAL);
    pn_row_grad_reset(&g);
    ck_assert_int_eq(g.n, 0);
    ck_assert_int_eq(pn_row_grad_append(&g, ids2, &m2), 0);
    pn_row_grad_release(&g);
}
END_TEST

/* Ids of a table of 10^7 rows, 24 bits: the sort's every pass matters (ids equal in
 * their low 11 or 22 bits). */
START_TEST(ids_of_a_big_table_sort)
{
    pn_row_grad g;
    pn_row_grad_init(&g, 10000000, 1, pn_device_host());
    int ids[] = {9999999, 2048 + 5, 5, 4194304 + 5, 2048 + 5, 0, 9999999};
    float r[] = {1, 2, 3, 4, 5, 6, 7};
    pn_matrix m = host_rows(r, 7, 1);
    ck_assert_int_eq(pn_row_grad_append(&g, ids, &m), 0);
    ck_assert_int_eq(pn_row_grad_merge(&g), 0);
    const int want_ids[] = {0, 5, 2048 + 5, 4194304 + 5, 9999999};
    const float want[] = {6, 3, 2 + 5, 4, 1 + 7};
    ck_assert_int_eq(g.n, 5);
    for (int k = 0; k < 5; k++) {
        ck_assert_int_eq(g.ids[k], want_ids[k]);
        ck_assert(pn_row_grad_rows(&g).data[k] == want[k]);
    }
    pn_row_grad_release(&g);
}
END_TEST

/* Two micro-batches, ids repeated within and across them, each sealed after it is
 * appended, then merged: each id's gradient is its partials (a micro-batch's entries
 * summed in append order, onto 0) summed in micro-batch order, computed here by hand
 * in floats. Id 4's first column tells the grouping apart: micro-batch 0 gives 1,
 * micro-batch 1 gives 1e8, 3, -1e8 (0 as its own partial: 3 vanishes beside 1e8), so
 * the partials sum to 1, while adding the five entries in one run gives 0. */
START_TEST(sealed_partials_sum_in_micro_batch_order)
{
    enum { W = 2, M0 = 4, M1 = 5 };
    const int ids[M0 + M1] = {7, 4, 2, 7, /* micro-batch 1: */ 4, 2, 4, 9, 4};
    const float r[(M0 + M1) * W] = {0.5f, 1, 1, 2, 0.25f, 3, 1.5f, 4,
                                    1e8f, 5, 0.75f, 6, 3, 7, 2, 8, -1e8f, 9};
    pn_row_grad g;
    pn_row_grad_init(&g, 10, W, pn_device_host());
    pn_matrix m0 = host_rows((float *)r, M0, W), m1 = host_rows((float *)r + M0 * W, M1, W);
    ck_assert_int_eq(pn_row_grad_append(&g, ids, &m0), 0);
    ck_assert_int_eq(pn_row_grad_seal(&g), 0);
    ck_assert_int_eq(g.n, 3); /* 2, 4, 7 */
    ck_assert_int_eq(g.sealed, 3);
    ck_assert_int_eq(pn_row_grad_seal(&g), 0); /* nothing new: nothing changes */
    ck_assert_int_eq(g.n, 3);
    ck_assert_int_eq(pn_row_grad_append(&g, ids + M0, &m1), 0);
    ck_assert_int_eq(pn_row_grad_seal(&g), 0);
    ck_assert_int_eq(g.n, 6); /* and 2, 4, 9: one entry per (micro-batch, id) */
    const int want_partial_ids[] = {2, 4, 7, 2, 4, 9};
    for (int k = 0; k < 6; k++) ck_assert_int_eq(g.ids[k], want_partial_ids[k]);
    ck_assert_int_eq(pn_row_grad_merge(&g), 0);

    float want[10 * W] = {0};
    bool seen[10] = {false};
    for (int mb = 0, first = 0; mb < 2; first += mb ? M1 : M0, mb++) {
        float part[10 * W] = {0};
        for (int k = first; k < first + (mb ? M1 : M0); k++)
            for (int j = 0; j < W; j++) part[ids[k] * W + j] += r[k * W + j];
        for (int k = 0; k < 10 * W; k++) want[k] += part[k];
        for (int k = first; k < first + (mb ? M1 : M0); k++) seen[ids[k]] = true;
    }
    ck_assert(want[4 * W] == 1.0f); /* the grouping shows */
    ck_assert_int_eq(g.n, 4);
    pn_matrix rows = pn_row_grad_rows(&g);
    for (int k = 0, id = 0; id < 10; id++) {
        if (!seen[id]) continue;
        ck_assert_int_eq(g.ids[k], id);
        for (int j = 0; j < W; j++)
            ck_assert_msg(rows.data[k * W + j] == want[id * W + j], "id %d col %d: %.9g, want %.9g",
                          id, j, (double)rows.data[k * W + j], (double)want[id * W + j]);
        k++;
    }
    ck_assert_int_eq(pn_row_grad_seal(&g), PN_ERR_INTERNAL); /* not after the merge */
    pn_row_grad_reset(&g);
    ck_assert_int_eq(g.sealed, 0);
    pn_row_grad_release(&g);
}
END_TEST

START_TEST(growth_keeps_entries_and_bad_ids_are_refused)
{
    pn_row_grad g;
    pn_row_grad_init(&g, 1000, 3, pn_device_host());
    float dense[3000] = {0}, want[3000] = {0};
    for (int step = 0; step < 50; step++) { /* many small appends: several growths */
        int ids[7];
        float r[21];
        for (int k = 0; k < 7; k++) {
            ids[k] = (step * 37 + k * 101) % 1000;
            for (int j = 0; j < 3; j++) {
                r[k * 3 + j] = (float)(step + k + j);
                want[ids[k] * 3 + j] += r[k * 3 + j];
            }
        }
        pn_matrix m = host_rows(r, 7, 3);
        ck_assert_int_eq(pn_row_grad_append(&g, ids, &m), 0);
    }
    ck_assert_int_eq(g.n, 350);
    ck_assert_int_eq(pn_row_grad_merge(&g), 0);
    pn_matrix t = host_rows(dense, 1000, 3);
    ck_assert_int_eq(pn_row_grad_add_to(&g, &t), 0);
    for (int k = 0; k < 3000; k++) ck_assert(dense[k] == want[k]);
    for (int k = 1; k < g.n; k++) ck_assert_int_lt(g.ids[k - 1], g.ids[k]);
    pn_row_grad_reset(&g);
    int bad[] = {3, 1000};
    float r[6] = {0};
    pn_matrix m = host_rows(r, 2, 3);
    ck_assert_int_eq(pn_row_grad_append(&g, bad, &m), PN_ERR_INVALID);
    ck_assert_msg(strstr(pn_error_message(), "id 1000 at entry 1"), "%s", pn_error_message());
    pn_row_grad_release(&g);
}
END_TEST

/* A table of 10^6 x 16 beside a 3 x 4 dense parameter: the gradient buffer holds the
 * dense one only (padded to 16 floats). */
START_TEST(a_row_sparse_table_takes_no_gradient_room)
{
    pn_params *p;
    int t, w;
    ck_assert_int_eq(pn_params_create(&p, pn_device_host()), 0);
    ck_assert_int_eq(pn_params_declare(p, "emb/table", 1000000, 16, (pn_init){PN_INIT_ZEROS, 0},
                                       true, &t), 0);
    ck_assert_int_eq(pn_params_set_row_sparse(p, t), 0);
    ck_assert_int_eq(pn_params_declare(p, "fc/w", 3, 4, (pn_init){PN_INIT_ZEROS, 0}, true, &w), 0);
    ck_assert_int_eq(pn_params_finalize(p), 0);
    ck_assert_uint_eq(pn_params_grad_size(p), 16);
    ck_assert_uint_ge(pn_params_size(p), 16000000);
    ck_assert_int_eq(pn_params_grad(p, t).rows, 0);
    ck_assert_int_eq(pn_params_grad(p, w).rows, 3);
    ck_assert_ptr_nonnull(pn_params_row_grad(p, t));
    ck_assert_ptr_null(pn_params_row_grad(p, w));
    ck_assert_int_eq(pn_params_row_grad(p, t)->cap, 0); /* nothing until a backward */
    pn_params_free(p);
}
END_TEST

/* --- the update on touched rows -------------------------------------------------- */

enum { ROWS = 12, COLS = 5, STEPS = 4, TOUCH = 6 };

/* Step s touches rows (s * 5 + k * 3) mod ROWS for k < TOUCH (some twice), with a
 * varied gradient per (step, entry, column). */
static int touched_row(long s, int k) { return (int)((s * 5 + (k % 4) * 3) % ROWS); }
static float entry_grad(long s, int k, int j)
{
    return (float)(0.3 * cos(0.7 * k + 1.1 * j + 1.9 * (double)s) + 0.02 * (double)k);
}

static pn_params *arena(bool row_sparse, double *ref_w)
{
    pn_params *p;
    int t;
    ck_assert_int_eq(pn_params_create(&p, pn_device_host()), 0);
    ck_assert_int_eq(pn_params_declare(p, "emb/table", ROWS, COLS, (pn_init){PN_INIT_ZEROS, 0},
                                       true, &t), 0);
    if (row_sparse) ck_assert_int_eq(pn_params_set_row_sparse(p, t), 0);
    ck_assert_int_eq(pn_params_finalize(p), 0);
    pn_matrix w = pn_params_value(p, t);
    for (int k = 0; k < ROWS * COLS; k++) {
        w.data[k] = (float)(0.4 * sin(1.3 * k + 0.2));
        if (ref_w) ref_w[k] = w.data[k];
    }
    return p;
}

/* Step s's entries into p's gradient: appended (row-sparse) or scatter-added. */
static void backward(pn_params *p, long s)
{
    int ids[TOUCH];
    float r[TOUCH * COLS];
    for (int k = 0; k < TOUCH; k++) {
        ids[k] = touched_row(s, k);
        for (int j = 0; j < COLS; j++) r[k * COLS + j] = entry_grad(s, k, j);
    }
    pn_matrix m = host_rows(r, TOUCH, COLS);
    pn_row_grad *rg = pn_params_row_grad(p, 0);
    if (rg) {
        ck_assert_int_eq(pn_row_grad_append(rg, ids, &m), 0);
    } else {
        pn_matrix g = pn_params_grad(p, 0);
        ck_assert_int_eq(pn_scatter_add_rows(&m, ids, &g), 0);
    }
}

START_TEST(sgd_on_touched_rows_is_the_dense_update_bit_for_bit)
{
    pn_optimizer_config cfg;
    pn_optimizer_config_default(&cfg, PN_OPT_SGD, 0.3);
    pn_params *dense = arena(false, NULL), *sparse = arena(true, NULL);
    pn_optimizer *od, *os;
    ck_assert_int_eq(pn_optimizer_create(&od, &cfg, dense), 0);
    ck_assert_int_eq(pn_optimizer_create(&os, &cfg, sparse), 0);
    for (long s = 0; s < STEPS; s++) {
        backward(dense, s);
        backward(sparse, s);
        ck_assert_int_eq(pn_optimizer_step(od, dense, s, 0.7), 0);
        ck_assert_msg(pn_optimizer_step(os, sparse, s, 0.7) == 0, "%s", pn_error_message());
        ck_assert_int_eq(pn_params_row_grad(sparse, 0)->n, 0); /* reset for the next step */
        const float *a = pn_params_value(dense, 0).data, *b = pn_params_value(sparse, 0).data;
        for (int k = 0; k < ROWS * COLS; k++)
            ck_assert_msg(a[k] == b[k], "step %ld element %d: dense %.9g, row-sparse %.9g", s,
                          k, (double)a[k], (double)b[k]);
    }
    pn_optimizer_free(od), pn_optimizer_free(os);
    pn_params_free(dense), pn_params_free(sparse);
}
END_TEST

/* The lazy rules against the formulas run on the touched rows only (the gradient of
 * a row: its entries summed), adam's t the global step; untouched rows and their
 * slots stay as they were. */
static void check_lazy(const pn_optimizer_config *cfg, double scale)
{
    double w[ROWS * COLS], s1[ROWS * COLS] = {0}, s2[ROWS * COLS] = {0};
    pn_params *p = arena(true, w);
    pn_optimizer *o;
    ck_assert_int_eq(pn_optimizer_create(&o, cfg, p), 0);
    int n_slots = pn_params_n_slots(p);
    for (long s = 0; s < STEPS; s++) {
        backward(p, s);
        double g[ROWS * COLS] = {0};
        bool touched[ROWS] = {false};
        for (int k = 0; k < TOUCH; k++) {
            touched[touched_row(s, k)] = true;
            for (int j = 0; j < COLS; j++)
                g[touched_row(s, k) * COLS + j] += (float)entry_grad(s, k, j);
        }
        for (int i = 0; i < ROWS; i++)
            for (int j = 0; touched[i] && j < COLS; j++) {
                int e = i * COLS + j;
                ref_update(cfg, s, scale, true, g[e], &w[e], &s1[e], &s2[e]);
            }
        ck_assert_msg(pn_optimizer_step(o, p, s, scale) == 0, "%s", pn_error_message());
        const double *want[3] = {w, s1, s2};
        for (int a = 0; a <= n_slots; a++) {
            const float *got = a == 0 ? pn_params_value(p, 0).data : pn_params_slot(p, a - 1, 0).data;
            for (int e = 0; e < ROWS * COLS; e++)
                ck_assert_msg(tu_close(got[e], want[a][e], 2e-5, 2e-6), /* steps ~ lr */
                              "%s: %s of row %d col %d after step %ld: %.9g, want %.9g",
                              pn_opt_kind_name(cfg->kind), a ? "slot" : "value", e / COLS,
                              e % COLS, s, (double)got[e], want[a][e]);
        }
    }
    pn_optimizer_free(o);
    pn_params_free(p);
}

START_TEST(lazy_rules_update_touched_rows_only)
{
    static const pn_opt_kind kinds[] = {PN_OPT_SGD, PN_OPT_MOMENTUM, PN_OPT_ADAM, PN_OPT_ADAMW};
    for (int k = 0; k < 4; k++) {
        pn_optimizer_config cfg;
        pn_optimizer_config_default(&cfg, kinds[k], 0.05);
        check_lazy(&cfg, 1.0);
        cfg.weight_decay = 0.1; /* decay on the touched rows only */
        cfg.nesterov = kinds[k] == PN_OPT_MOMENTUM;
        check_lazy(&cfg, 0.6);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("row-sparse gradients");
    TCase *t = tcase_create("row_grad");
    tcase_add_test(t, empty_merges_to_nothing);
    tcase_add_test(t, duplicates_sum_in_append_order);
    tcase_add_test(t, ids_of_a_big_table_sort);
    tcase_add_test(t, sealed_partials_sum_in_micro_batch_order);
    tcase_add_test(t, growth_keeps_entries_and_bad_ids_are_refused);
    tcase_add_test(t, a_row_sparse_table_takes_no_gradient_room);
    tcase_add_test(t, sgd_on_touched_rows_is_the_dense_update_bit_for_bit);
    tcase_add_test(t, lazy_rules_update_touched_rows_only);
    suite_add_tcase(s, t);
    return tu_run_suite(s);
}
