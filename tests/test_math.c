/* Math ops of the CPU backend against naive double-precision loops, on strided
 * views and odd sizes; the buffer pool's reuse; dispatch errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "math/buffer.h"
#include "math/cuda_module.h"
#include "math/ops.h"
#include "testutil.h"

static const double RTOL = 1e-5, ATOL = 1e-5;

static double at(const pn_matrix *m, int i, int j) { return m->data[(size_t)i * m->ld + j]; }

/* --- GEMM ---------------------------------------------------------------------- */

static void check_gemm(int m, int n, int k, bool ta, bool tb, float alpha, float beta)
{
    pn_rng rng;
    pn_rng_init(&rng, 1, (uint64_t)(m * 1000 + n * 100 + k * 10 + ta * 2 + tb));
    pn_matrix a = ta ? tu_alloc(k, m, 3) : tu_alloc(m, k, 3);
    pn_matrix b = tb ? tu_alloc(n, k, 1) : tu_alloc(k, n, 1);
    pn_matrix c = tu_alloc(m, n, 2);
    tu_fill_uniform(&a, &rng, 1.0f);
    tu_fill_uniform(&b, &rng, 1.0f);
    tu_fill_uniform(&c, &rng, 1.0f);
    double *want = malloc(sizeof(double) * (size_t)(m * n + 1));
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0.0;
            for (int p = 0; p < k; p++)
                s += (ta ? at(&a, p, i) : at(&a, i, p)) * (tb ? at(&b, j, p) : at(&b, p, j));
            want[i * n + j] = alpha * s + beta * at(&c, i, j);
        }
    ck_assert_int_eq(pn_gemm(ta, tb, alpha, &a, &b, beta, &c), 0);
    tu_assert_matrix_near(&c, want, 1e-5, 1e-5, "gemm");
    free(want);
    tu_free(&a), tu_free(&b), tu_free(&c);
}

START_TEST(gemm_matches_naive)
{
    static const int sizes[][3] = {{1, 1, 1}, {7, 5, 3}, {13, 1, 9}, {4, 17, 1}, {33, 31, 29}};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (int t = 0; t < 4; t++) {
            check_gemm(sizes[s][0], sizes[s][1], sizes[s][2], t & 1, t & 2, 1.0f, 0.0f);
            check_gemm(sizes[s][0], sizes[s][1], sizes[s][2], t & 1, t & 2, 0.5f, 1.0f);
        }
}
END_TEST

START_TEST(gemm_rejects_mismatch)
{
    pn_matrix a = tu_alloc(3, 4, 0), b = tu_alloc(5, 2, 0), c = tu_alloc(3, 2, 0);
    ck_assert_int_eq(pn_gemm(false, false, 1.0f, &a, &b, 0.0f, &c), PN_ERR_INTERNAL);
    ck_assert_ptr_nonnull(strstr(pn_error_message(), "gemm"));
    tu_free(&a), tu_free(&b), tu_free(&c);
}
END_TEST

/* --- elementwise ---------------------------------------------------------------- */

START_TEST(elementwise_ops_match_naive)
{
    pn_rng rng;
    pn_rng_init(&rng, 2, 0);
    int r = 5, c = 7;
    pn_matrix x = tu_alloc(r, c, 2), y = tu_alloc(r, c, 1), z = tu_alloc(r, c, 3);
    tu_fill_uniform(&x, &rng, 2.0f);
    tu_fill_uniform(&y, &rng, 2.0f);
    tu_fill_uniform(&z, &rng, 2.0f);
    double want[35];

    /* axpy */
    for (int i = 0; i < r; i++)
        for (int j = 0; j < c; j++) want[i * c + j] = at(&y, i, j) + 0.25 * at(&x, i, j);
    ck_assert_int_eq(pn_axpy(0.25f, &x, &y), 0);
    tu_assert_matrix_near(&y, want, RTOL, ATOL, "axpy");

    /* mul with beta */
    for (int i = 0; i < r; i++)
        for (int j = 0; j < c; j++) want[i * c + j] = 0.5 * at(&z, i, j) + at(&x, i, j) * at(&y, i, j);
    ck_assert_int_eq(pn_mul(&x, &y, 0.5f, &z), 0);
    tu_assert_matrix_near(&z, want, RTOL, ATOL, "mul");

    /* scale */
    for (int i = 0; i < r; i++)
        for (int j = 0; j < c; j++) want[i * c + j] = -3.0 * at(&z, i, j);
    ck_assert_int_eq(pn_scale(&z, -3.0f), 0);
    tu_assert_matrix_near(&z, want, RTOL, ATOL, "scale");

    /* copy onto a strided view, fill leaves the padding alone */
    ck_assert_int_eq(pn_copy(&x, &z), 0);
    for (int i = 0; i < r; i++)
        for (int j = 0; j < c; j++) want[i * c + j] = at(&x, i, j);
    tu_assert_matrix_near(&z, want, 0, 0, "copy");

    /* copy between overlapping views of one matrix, both ways: every row arrives */
    for (int down = 0; down < 2; down++) {
        ck_assert_int_eq(pn_copy(&x, &z), 0);
        pn_matrix from = z, to = z; /* rows 1.. onto rows 0.., or 0.. onto 1.. */
        from.rows--, to.rows--;
        (down ? &to : &from)->data += z.ld;
        ck_assert_int_eq(pn_copy(&from, &to), 0);
        for (int i = 0; i < r; i++)
            for (int j = 0; j < c; j++)
                want[i * c + j] = at(&x, down ? (i ? i - 1 : 0) : (i < r - 1 ? i + 1 : i), j);
        tu_assert_matrix_near(&z, want, 0, 0, down ? "copy one row down" : "copy one row up");
    }
    ck_assert_int_eq(pn_copy(&x, &z), 0);
    z.data[c] = 42.0f; /* padding of row 0 */
    ck_assert_int_eq(pn_fill(&z, 1.5f), 0);
    for (int k = 0; k < r * c; k++) want[k] = 1.5;
    tu_assert_matrix_near(&z, want, 0, 0, "fill");
    ck_assert_float_eq(z.data[c], 42.0f);
    tu_free(&x), tu_free(&y), tu_free(&z);
}
END_TEST

static double ref_act(pn_act act, double x)
{
    switch (act) {
    case PN_ACT_RELU: return x > 0 ? x : 0;
    case PN_ACT_TANH: return tanh(x);
    case PN_ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case PN_ACT_GELU: return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    default: return x;
    }
}

START_TEST(activations_match_naive)
{
    pn_rng rng;
    pn_rng_init(&rng, 3, 0);
    int r = 3, c = 9;
    pn_matrix x = tu_alloc(r, c, 1), y = tu_alloc(r, c, 2), dy = tu_alloc(r, c, 0);
    pn_matrix dx = tu_alloc(r, c, 1);
    tu_fill_uniform(&x, &rng, 3.0f);
    tu_fill_uniform(&dy, &rng, 1.0f);
    double want[27];
    for (int a = PN_ACT_NONE; a <= PN_ACT_GELU; a++) {
        for (int i = 0; i < r; i++)
            for (int j = 0; j < c; j++) want[i * c + j] = ref_act(a, at(&x, i, j));
        ck_assert_int_eq(pn_act_forward(a, &x, &y), 0);
        tu_assert_matrix_near(&y, want, 1e-5, 1e-6, pn_act_name(a));
        /* backward vs the derivative by a centered difference of the double reference */
        tu_fill_uniform(&dx, &rng, 1.0f);
        for (int i = 0; i < r; i++)
            for (int j = 0; j < c; j++) {
                double v = at(&x, i, j), h = 1e-6;
                double d = (ref_act(a, v + h) - ref_act(a, v - h)) / (2 * h);
                want[i * c + j] = 2.0 * at(&dx, i, j) + d * at(&dy, i, j);
            }
        ck_assert_int_eq(pn_act_backward(a, &x, &y, &dy, 2.0f, &dx), 0);
        tu_assert_matrix_near(&dx, want, 1e-4, 1e-5, pn_act_name(a));
    }
    tu_free(&x), tu_free(&y), tu_free(&dy), tu_free(&dx);
}
END_TEST

/* Widths below, past (with a tail in a block the row holds, or not) and at
 * multiples of the kernel's 16 lanes. */
static const int softmax_widths[] = {4, 21, 64};

START_TEST(softmax_rows_causal_and_scaled)
{
    pn_rng rng;
    pn_rng_init(&rng, 4, 0);
    int t = softmax_widths[_i], r = 2 * t; /* two causal blocks of t rows */
    pn_matrix x = tu_alloc(r, t, 1), y = tu_alloc(r, t, 0), z = tu_alloc(r, t, 3);
    tu_fill_uniform(&x, &rng, 4.0f);
    double *want = malloc((size_t)r * t * sizeof *want);
    for (int causal = 0; causal <= 1; causal++) {
        for (int i = 0; i < r; i++) {
            int n = causal ? i % t + 1 : t;
            double mx = -1e300, sum = 0.0;
            for (int j = 0; j < n; j++) mx = fmax(mx, 0.7 * at(&x, i, j));
            for (int j = 0; j < n; j++) sum += exp(0.7 * at(&x, i, j) - mx);
            for (int j = 0; j < t; j++)
                want[i * t + j] = j < n ? exp(0.7 * at(&x, i, j) - mx) / sum : 0.0;
        }
        ck_assert_int_eq(pn_softmax_rows(&x, 0.7f, causal ? t : 0, &y), 0);
        tu_assert_matrix_near(&y, want, 1e-5, 1e-7, causal ? "causal softmax" : "softmax");
        /* in place, as attention runs it; a causal row's masked columns hold NaN */
        for (int i = 0; i < r; i++)
            for (int j = 0; j < t; j++)
                z.data[i * z.ld + j] = causal && j > i % t ? NAN : (float)at(&x, i, j);
        ck_assert_int_eq(pn_softmax_rows(&z, 0.7f, causal ? t : 0, &z), 0);
        tu_assert_matrix_near(&z, want, 1e-5, 1e-7, "softmax in place");
    }
    free(want);
    tu_free(&x), tu_free(&y), tu_free(&z);
}
END_TEST

/* Softmax's backward against y (dy - sum(dy y)) in double, at the same widths
 * (lanes and tails of its dot product), added to 2 dx. */
START_TEST(softmax_backward_matches_closed_form)
{
    pn_rng rng;
    pn_rng_init(&rng, 14, 0);
    int c = softmax_widths[_i], r = 3;
    pn_matrix x = tu_alloc(r, c, 1), y = tu_alloc(r, c, 2), dy = tu_alloc(r, c, 0);
    pn_matrix dx = tu_alloc(r, c, 3);
    tu_fill_uniform(&x, &rng, 3.0f);
    tu_fill_uniform(&dy, &rng, 1.0f);
    tu_fill_uniform(&dx, &rng, 1.0f);
    ck_assert_int_eq(pn_act_forward(PN_ACT_SOFTMAX, &x, &y), 0);
    double *want = malloc((size_t)r * c * sizeof *want);
    for (int i = 0; i < r; i++) {
        double dot = 0.0;
        for (int j = 0; j < c; j++) dot += at(&dy, i, j) * at(&y, i, j);
        for (int j = 0; j < c; j++)
            want[i * c + j] = 2.0 * at(&dx, i, j) + at(&y, i, j) * (at(&dy, i, j) - dot);
    }
    ck_assert_int_eq(pn_act_backward(PN_ACT_SOFTMAX, NULL, &y, &dy, 2.0f, &dx), 0);
    tu_assert_matrix_near(&dx, want, 1e-5, 1e-6, "softmax backward");
    free(want);
    tu_free(&x), tu_free(&y), tu_free(&dy), tu_free(&dx);
}
END_TEST

/* --- reductions and row-wise ----------------------------------------------------- */

START_TEST(row_vector_and_sums)
{
    pn_rng rng;
    pn_rng_init(&rng, 5, 0);
    int r = 6, c = 5;
    pn_matrix m = tu_alloc(r, c, 2), v = tu_alloc(1, c, 0), s = tu_alloc(1, c, 0);
    tu_fill_uniform(&m, &rng, 1.0f);
    tu_fill_uniform(&v, &rng, 1.0f);
    tu_fill_uniform(&s, &rng, 1.0f);
    double want[30], sums[5];
    for (int j = 0; j < c; j++) sums[j] = 0.5 * at(&s, 0, j);
    for (int i = 0; i < r; i++)
        for (int j = 0; j < c; j++) {
            want[i * c + j] = at(&m, i, j) + at(&v, 0, j);
            sums[j] += want[i * c + j];
        }
    ck_assert_int_eq(pn_add_row_vector(&v, &m), 0);
    tu_assert_matrix_near(&m, want, RTOL, ATOL, "add_row_vector");
    ck_assert_int_eq(pn_col_sums(&m, 0.5f, &s), 0);
    tu_assert_matrix_near(&s, sums, RTOL, ATOL, "col_sums");
    double ss = 0.0, got;
    for (int k = 0; k < r * c; k++) ss += want[k] * want[k];
    ck_assert_int_eq(pn_sum_squares(&m, &got), 0);
    ck_assert(tu_close(got, ss, 1e-6, 0));
    tu_free(&m), tu_free(&v), tu_free(&s);
}
END_TEST

START_TEST(xent_matches_naive)
{
    pn_rng rng;
    pn_rng_init(&rng, 6, 0);
    int r = 5, c = 4;
    int labels[5] = {0, 3, 1, 1, 2};
    pn_matrix logits = tu_alloc(r, c, 0), p = tu_alloc(r, c, 1), loss = tu_alloc(r, 1, 0);
    pn_matrix dl = tu_alloc(r, 1, 0), dx = tu_alloc(r, c, 0);
    tu_fill_uniform(&logits, &rng, 2.0f);
    tu_fill_uniform(&dl, &rng, 1.0f);
    ck_assert_int_eq(pn_softmax_rows(&logits, 1.0f, 0, &p), 0);
    double correct, want_loss[5], want_dx[20], hits = 0;
    for (int i = 0; i < r; i++) {
        int best = 0;
        for (int j = 0; j < c; j++)
            if (at(&p, i, j) > at(&p, i, best)) best = j;
        hits += best == labels[i];
        want_loss[i] = -log(at(&p, i, labels[i]));
        for (int j = 0; j < c; j++)
            want_dx[i * c + j] = at(&dl, i, 0) * (at(&p, i, j) - (j == labels[i]));
    }
    ck_assert_int_eq(pn_xent_forward(&p, labels, &loss, &correct), 0);
    tu_assert_matrix_near(&loss, want_loss, 1e-5, 1e-6, "xent loss");
    ck_assert_double_eq(correct, hits);
    ck_assert_int_eq(pn_xent_backward(&p, labels, &dl, 0.0f, &dx), 0);
    tu_assert_matrix_near(&dx, want_dx, 1e-5, 1e-6, "xent grad");
    labels[2] = 4; /* out of range: an error naming the row, not a wild read */
    ck_assert_int_eq(pn_xent_forward(&p, labels, &loss, &correct), PN_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(pn_error_message(), "row 2"));
    tu_free(&logits), tu_free(&p), tu_free(&loss), tu_free(&dl), tu_free(&dx);
}
END_TEST

/* The accuracy count takes the first column of a row's maximum, as a scan with
 * `>` does: ties go to the first, NaN never wins, NaN in column 0 keeps column 0;
 * maxima in the 16-lane blocks and in the tail (37 columns). */
START_TEST(xent_counts_the_first_maximum)
{
    int r = 5, c = 37;
    pn_matrix p = tu_alloc(r, c, 2), loss = tu_alloc(r, 1, 0);
    for (int i = 0; i < r; i++)
        for (int j = 0; j < c; j++) p.data[i * p.ld + j] = 0.01f * (float)((i * 7 + j * 3) % 11);
    float *row[5];
    for (int i = 0; i < r; i++) row[i] = p.data + i * p.ld;
    row[0][20] = 0.9f;                   /* label 20: hit */
    row[1][5] = row[1][30] = 0.9f;       /* label 30: a miss, the tie goes to 5 */
    row[2][0] = NAN, row[2][10] = 0.9f;  /* label 0: hit */
    row[3][3] = NAN, row[3][33] = 0.9f;  /* label 33: hit, in the tail */
    row[4][17] = row[4][36] = 0.9f;      /* label 17: hit */
    int labels[5] = {20, 30, 0, 33, 17};
    double correct = -1.0;
    ck_assert_int_eq(pn_xent_forward(&p, labels, &loss, &correct), 0);
    ck_assert_double_eq(correct, 4.0);
    labels[1] = 5;
    ck_assert_int_eq(pn_xent_forward(&p, labels, &loss, &correct), 0);
    ck_assert_double_eq(correct, 5.0);
    tu_free(&p), tu_free(&loss);
}
END_TEST

START_TEST(mse_matches_naive)
{
    pn_rng rng;
    pn_rng_init(&rng, 7, 0);
    int r = 3, c = 5;
    pn_matrix p = tu_alloc(r, c, 1), t = tu_alloc(r, c, 0), loss = tu_alloc(r, 1, 0);
    pn_matrix dl = tu_alloc(r, 1, 0), dp = tu_alloc(r, c, 0), dt = tu_alloc(r, c, 0);
    tu_fill_uniform(&p, &rng, 1.0f);
    tu_fill_uniform(&t, &rng, 1.0f);
    tu_fill_uniform(&dl, &rng, 1.0f);
    double want_loss[3], want_dp[15], want_dt[15];
    for (int i = 0; i < r; i++) {
        double s = 0;
        for (int j = 0; j < c; j++) {
            double d = at(&p, i, j) - at(&t, i, j);
            s += d * d;
            want_dp[i * c + j] = at(&dl, i, 0) * 2 * d / c;
            want_dt[i * c + j] = -want_dp[i * c + j];
        }
        want_loss[i] = s / c;
    }
    ck_assert_int_eq(pn_mse_forward(&p, &t, &loss), 0);
    tu_assert_matrix_near(&loss, want_loss, 1e-5, 1e-7, "mse");
    ck_assert_int_eq(pn_mse_backward(&p, &t, &dl, &dp, &dt), 0);
    tu_assert_matrix_near(&dp, want_dp, 1e-5, 1e-7, "mse dp");
    tu_assert_matrix_near(&dt, want_dt, 1e-5, 1e-7, "mse dt");
    tu_free(&p), tu_free(&t), tu_free(&loss), tu_free(&dl), tu_free(&dp), tu_free(&dt);
}
END_TEST

/* Naive layer norm of row i of x in double: mean, 1 / std, and xhat into xh. */
static void naive_norm(const pn_matrix *x, int i, double eps, double *mu, double *rs, double *xh)
{
    int c = x->cols;
    double m = 0, var = 0;
    for (int j = 0; j < c; j++) m += at(x, i, j) / c;
    for (int j = 0; j < c; j++) var += (at(x, i, j) - m) * (at(x, i, j) - m) / c;
    *mu = m;
    *rs = 1.0 / sqrt(var + eps);
    for (int j = 0; j < c; j++) xh[j] = (at(x, i, j) - m) * *rs;
}

/* Widths below, at and past the kernel's 16 lanes, with a tail; padded rows. */
static const int ln_widths[] = {7, 16, 37, 128};

START_TEST(layernorm_forward_matches_naive)
{
    pn_rng rng;
    pn_rng_init(&rng, 8, 0);
    int r = 4, c = ln_widths[_i];
    pn_matrix x = tu_alloc(r, c, 1), y = tu_alloc(r, c, 3), g = tu_alloc(1, c, 0);
    pn_matrix b = tu_alloc(1, c, 0), mean = tu_alloc(r, 1, 0), rstd = tu_alloc(r, 1, 0);
    tu_fill_uniform(&x, &rng, 3.0f);
    tu_fill_uniform(&g, &rng, 1.0f);
    tu_fill_uniform(&b, &rng, 1.0f);
    double *want = malloc((size_t)r * c * sizeof *want), xh[128], mu, rs;
    for (int i = 0; i < r; i++) {
        naive_norm(&x, i, 1e-5, &mu, &rs, xh);
        for (int j = 0; j < c; j++) want[i * c + j] = xh[j] * at(&g, 0, j) + at(&b, 0, j);
    }
    ck_assert_int_eq(pn_layernorm_forward(&x, &g, &b, 1e-5f, &y, &mean, &rstd), 0);
    tu_assert_matrix_near(&y, want, 1e-5, 1e-5, "layernorm");
    free(want);
    tu_free(&x), tu_free(&y), tu_free(&g), tu_free(&b), tu_free(&mean), tu_free(&rstd);
}
END_TEST

/* Backward against the closed form in double: dx = rs (g - mean(g) - xhat mean(g xhat))
 * with g = dy gamma, added to what dx, dgamma and dbeta held. */
START_TEST(layernorm_backward_matches_naive)
{
    pn_rng rng;
    pn_rng_init(&rng, 18, 0);
    int r = 5, c = ln_widths[_i];
    pn_matrix x = tu_alloc(r, c, 2), y = tu_alloc(r, c, 0), g = tu_alloc(1, c, 0);
    pn_matrix b = tu_alloc(1, c, 0), mean = tu_alloc(r, 1, 0), rstd = tu_alloc(r, 1, 0);
    pn_matrix dy = tu_alloc(r, c, 1), dx = tu_alloc(r, c, 3);
    pn_matrix dg = tu_alloc(1, c, 0), db = tu_alloc(1, c, 0);
    tu_fill_uniform(&x, &rng, 3.0f);
    tu_fill_uniform(&g, &rng, 1.0f);
    tu_fill_uniform(&dy, &rng, 1.0f);
    tu_fill_uniform(&dx, &rng, 1.0f);
    tu_fill_uniform(&dg, &rng, 1.0f);
    tu_fill_uniform(&db, &rng, 1.0f);
    double *want_dx = malloc((size_t)r * c * sizeof *want_dx), want_dg[128], want_db[128];
    for (int j = 0; j < c; j++) want_dg[j] = at(&dg, 0, j), want_db[j] = at(&db, 0, j);
    for (int i = 0; i < r; i++) {
        double xh[128], mu, rs, mg = 0, mgx = 0;
        naive_norm(&x, i, 1e-5, &mu, &rs, xh);
        for (int j = 0; j < c; j++) {
            double gj = at(&dy, i, j) * at(&g, 0, j);
            mg += gj / c;
            mgx += gj * xh[j] / c;
            want_dg[j] += at(&dy, i, j) * xh[j];
            want_db[j] += at(&dy, i, j);
        }
        for (int j = 0; j < c; j++)
            want_dx[i * c + j] = at(&dx, i, j) + rs * (at(&dy, i, j) * at(&g, 0, j) - mg - xh[j] * mgx);
    }
    ck_assert_int_eq(pn_layernorm_forward(&x, &g, &b, 1e-5f, &y, &mean, &rstd), 0);
    ck_assert_int_eq(pn_layernorm_backward(&x, &g, &mean, &rstd, &dy, &dx, &dg, &db), 0);
    tu_assert_matrix_near(&dx, want_dx, 1e-4, 1e-5, "layernorm dx");
    tu_assert_matrix_near(&dg, want_dg, 1e-5, 1e-5, "layernorm dgamma");
    tu_assert_matrix_near(&db, want_db, 1e-5, 1e-5, "layernorm dbeta");
    free(want_dx);
    tu_free(&x), tu_free(&y), tu_free(&g), tu_free(&b), tu_free(&mean), tu_free(&rstd);
    tu_free(&dy), tu_free(&dx), tu_free(&dg), tu_free(&db);
}
END_TEST

START_TEST(gather_and_scatter_rows)
{
    pn_rng rng;
    pn_rng_init(&rng, 9, 0);
    int vocab = 5, c = 3, n = 6;
    int ids[6] = {4, 0, 4, 2, 1, 4};
    pn_matrix table = tu_alloc(vocab, c, 1), out = tu_alloc(n, c, 0), dt = tu_alloc(vocab, c, 0);
    tu_fill_uniform(&table, &rng, 1.0f);
    tu_fill_uniform(&out, &rng, 1.0f);
    double want[18], want_dt[15] = {0};
    for (int i = 0; i < n; i++)
        for (int j = 0; j < c; j++) want[i * c + j] = at(&table, ids[i], j);
    ck_assert_int_eq(pn_gather_rows(&table, ids, &out), 0);
    tu_assert_matrix_near(&out, want, 0, 0, "gather");
    for (int i = 0; i < n; i++)
        for (int j = 0; j < c; j++) want_dt[ids[i] * c + j] += want[i * c + j];
    ck_assert_int_eq(pn_scatter_add_rows(&out, ids, &dt), 0);
    tu_assert_matrix_near(&dt, want_dt, 1e-6, 1e-7, "scatter_add");
    ids[3] = 5;
    ck_assert_int_eq(pn_gather_rows(&table, ids, &out), PN_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(pn_error_message(), "id 5 at row 3"));
    tu_free(&table), tu_free(&out), tu_free(&dt);
}
END_TEST

START_TEST(seq_max_respects_lengths)
{
    pn_rng rng;
    pn_rng_init(&rng, 11, 0);
    int period = 4, batch = 3, c = 5, lengths[3] = {1, 4, 3}, arg[15];
    pn_matrix x = tu_alloc(batch * period, c, 2), y = tu_alloc(batch, c, 1);
    pn_matrix dx = tu_alloc(batch * period, c, 0);
    tu_fill_uniform(&x, &rng, 1.0f);
    tu_fill_uniform(&dx, &rng, 1.0f);
    double want[15], want_dx[60];
    for (int i = 0; i < batch * period; i++)
        for (int j = 0; j < c; j++) want_dx[i * c + j] = at(&dx, i, j);
    for (int b = 0; b < batch; b++)
        for (int j = 0; j < c; j++) {
            int best = b * period;
            for (int t = 1; t < lengths[b]; t++)
                if (at(&x, b * period + t, j) > at(&x, best, j)) best = b * period + t;
            want[b * c + j] = at(&x, best, j);
            want_dx[best * c + j] += want[b * c + j];
        }
    ck_assert_int_eq(pn_seq_max_forward(&x, period, lengths, &y, arg), 0);
    tu_assert_matrix_near(&y, want, 0, 0, "seq_max");
    ck_assert_int_eq(pn_seq_max_backward(&y, arg, &dx), 0);
    tu_assert_matrix_near(&dx, want_dx, 1e-6, 1e-7, "seq_max_backward");
    ck_assert_int_eq(pn_seq_max_forward(&x, period, NULL, &y, arg), 0); /* all 4 long */
    for (int j = 0; j < c; j++) {
        double m = at(&x, 4, j);
        for (int t = 5; t < 8; t++) m = fmax(m, at(&x, t, j));
        ck_assert(at(&y, 1, j) == m);
    }
    lengths[2] = 5;
    ck_assert_int_eq(pn_seq_max_forward(&x, period, lengths, &y, arg), PN_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(pn_error_message(), "sample 2 has length 5"));
    tu_free(&x), tu_free(&y), tu_free(&dx);
}
END_TEST

START_TEST(dropout_mask_depends_on_global_row)
{
    int r = 64, c = 33;
    float rate = 0.3f;
    pn_matrix x = tu_alloc(r, c, 0), y = tu_alloc(r, c, 0), mask = tu_alloc(r, c, 0);
    ck_assert_int_eq(pn_fill(&x, 2.0f), 0);
    ck_assert_int_eq(pn_dropout_forward(&x, rate, 1234, 100, &mask, &y), 0);
    int dropped = 0;
    for (int i = 0; i < r; i++)
        for (int j = 0; j < c; j++) {
            float m = (float)at(&mask, i, j);
            ck_assert(m == 0.0f || fabsf(m - 1.0f / (1.0f - rate)) < 1e-6f);
            ck_assert_float_eq(at(&y, i, j), 2.0 * m);
            dropped += m == 0.0f;
        }
    double frac = (double)dropped / (r * c);
    ck_assert_msg(frac > 0.25 && frac < 0.35, "dropped fraction %.3f for rate 0.3", frac);
    /* rows 10..19 computed alone, as another rank would, give the same mask */
    pn_matrix xs = pn_matrix_rows(x, 10, 10), ys = tu_alloc(10, c, 0), ms = tu_alloc(10, c, 0);
    ck_assert_int_eq(pn_dropout_forward(&xs, rate, 1234, 110, &ms, &ys), 0);
    for (int i = 0; i < 10; i++)
        for (int j = 0; j < c; j++) ck_assert_float_eq(at(&ms, i, j), at(&mask, 10 + i, j));
    tu_free(&x), tu_free(&y), tu_free(&mask), tu_free(&ys), tu_free(&ms);
}
END_TEST

/* --- buffers and dispatch ----------------------------------------------------------- */

START_TEST(pool_reuses_blocks)
{
    pn_device host = pn_device_host();
    pn_buffer a = {0}, b = {0};
    ck_assert_int_eq(pn_buffer_acquire(&a, host, 1000), 0);
    ck_assert_uint_ge(a.capacity, 1000);
    ck_assert_uint_le(a.capacity, 1250);
    memset(a.data, 0x7f, a.bytes);
    pn_buffer_release(&a);
    ck_assert_ptr_null(a.data);
    pn_pool_stats before, after;
    pn_pool_stats_get(host, &before);
    for (int round = 0; round < 10; round++) { /* a steady-state loop: no new blocks */
        ck_assert_int_eq(pn_buffer_acquire(&a, host, 1000), 0);
        ck_assert_int_eq(pn_buffer_reserve(&b, host, 900), 0);
        ck_assert_int_eq(pn_buffer_reserve(&b, host, 700), 0); /* fits: keeps the block */
        for (size_t k = 0; k < a.bytes; k++) ck_assert_int_eq(((unsigned char *)a.data)[k], 0);
        pn_buffer_release(&a);
    }
    pn_pool_stats_get(host, &after);
    ck_assert_uint_eq(after.system_allocs, before.system_allocs + 1); /* b's one block */
    ck_assert_uint_ge(after.reuses, before.reuses + 10);
    pn_buffer_release(&b);
    pn_pool_trim(host);
    pn_pool_stats_get(host, &after);
    ck_assert_uint_eq(after.bytes_cached, 0);
}
END_TEST

START_TEST(buffer_copies_check_bounds)
{
    pn_buffer a = {0};
    float in[4] = {1, 2, 3, 4}, out[4] = {0};
    ck_assert_int_eq(pn_buffer_acquire(&a, pn_device_host(), sizeof in), 0);
    ck_assert_int_eq(pn_buffer_write(&a, 0, in, sizeof in), 0);
    ck_assert_int_eq(pn_buffer_read(&a, 0, out, sizeof out), 0);
    ck_assert_mem_eq(in, out, sizeof in);
    ck_assert_int_eq(pn_buffer_write(&a, 4, in, sizeof in), PN_ERR_INTERNAL);
    pn_buffer_release(&a);
}
END_TEST

START_TEST(dispatch_reports_devices)
{
    float d[4] = {0};
    pn_matrix host = pn_matrix_host(d, 2, 2), gpu = host;
    gpu.device = pn_device_cuda(0);
    /* operands on two devices are refused before any kernel runs */
    ck_assert_int_eq(pn_axpy(1.0f, &host, &gpu), PN_ERR_INTERNAL);
    if (!pn_cuda_module_built()) { /* no table for a GPU, and the loader says why */
        ck_assert_int_eq(pn_fill(&gpu, 1.0f), PN_ERR_UNSUPPORTED);
        ck_assert_ptr_nonnull(strstr(pn_error_message(), "without CUDA"));
    }
    ck_assert_int_eq(pn_act_from_name("gelu"), PN_ACT_GELU);
    ck_assert_int_eq(pn_act_from_name("swish"), -1);
}
END_TEST

static Suite *math_suite(void)
{
    Suite *s = suite_create("math");
    TCase *tc = tcase_create("cpu");
    tcase_add_test(tc, gemm_matches_naive);
    tcase_add_test(tc, gemm_rejects_mismatch);
    tcase_add_test(tc, elementwise_ops_match_naive);
    tcase_add_test(tc, activations_match_naive);
    tcase_add_loop_test(tc, softmax_rows_causal_and_scaled, 0, 3);
    tcase_add_loop_test(tc, softmax_backward_matches_closed_form, 0, 3);
    tcase_add_test(tc, row_vector_and_sums);
    tcase_add_test(tc, xent_matches_naive);
    tcase_add_test(tc, xent_counts_the_first_maximum);
    tcase_add_test(tc, mse_matches_naive);
    tcase_add_loop_test(tc, layernorm_forward_matches_naive, 0, 4);
    tcase_add_loop_test(tc, layernorm_backward_matches_naive, 0, 4);
    tcase_add_test(tc, gather_and_scatter_rows);
    tcase_add_test(tc, seq_max_respects_lengths);
    tcase_add_test(tc, dropout_mask_depends_on_global_row);
    tcase_add_test(tc, pool_reuses_blocks);
    tcase_add_test(tc, buffer_copies_check_bounds);
    tcase_add_test(tc, dispatch_reports_devices);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    pn_math_set_threads(1);
    return tu_run_suite(math_suite());
}
