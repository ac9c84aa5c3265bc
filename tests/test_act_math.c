/* Accuracy of math/act_math.h against double-precision libm over a dense sweep of
 * floats (every 613th bit pattern: all magnitudes, both signs, subnormals, inf, NaN)
 * and a fine grid over [-20, 20], with the bounds the header states; the special
 * values one by one; and the CPU kernels on them (saturation, NaN propagation).
 * Prints the measured worst errors of the new functions and, beside them, of the
 * float libm formulas they replaced. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "math/act_math.h"
#include "math/ops.h"
#include "testutil.h"

typedef enum { F_EXP, F_TANH, F_SIGMOID, F_GELU, F_GELU_GRAD, N_FUNCS } func;
static const char *const func_names[N_FUNCS] = {"exp", "tanh", "sigmoid", "gelu", "gelu'"};

static const double GELU_C = 0.7978845608028654, GELU_A = 0.044715;

/* The true value, in double: gelu as x * sigmoid(2u), which does not cancel. */
static double ref(func f, double x)
{
    double u2 = 2.0 * GELU_C * (x + GELU_A * x * x * x);
    switch (f) {
    case F_EXP: return exp(x);
    case F_TANH: return tanh(x);
    case F_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case F_GELU: return x == -INFINITY ? -0.0 : x / (1.0 + exp(-u2));
    default: {
        if (isinf(x)) return x > 0 ? 1.0 : 0.0;
        double s = 1.0 / (1.0 + exp(-u2)), t = 1.0 / (1.0 + exp(u2)); /* s, 1 - s */
        return s + x * 2.0 * GELU_C * (1.0 + 3.0 * GELU_A * x * x) * s * t;
    }
    }
}

static float fast(func f, float x)
{
    switch (f) {
    case F_EXP: return pn_am_exp(x);
    case F_TANH: return pn_am_tanh(x);
    case F_SIGMOID: return pn_am_sigmoid(x);
    case F_GELU: return pn_am_gelu(x);
    default: return pn_am_gelu_grad(x);
    }
}

/* The float formulas with libm calls that pn_cpu_act_* used before act_math.h. */
static float libm_float(func f, float x)
{
    float t = tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x));
    switch (f) {
    case F_EXP: return expf(x);
    case F_TANH: return tanhf(x);
    case F_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case F_GELU: return 0.5f * x * (1.0f + t);
    default:
        return 0.5f * (1.0f + t) +
               0.5f * x * (1.0f - t * t) * 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * x * x);
    }
}

/* Worst errors seen: relative (in FLT_EPSILON) where the true value is at least
 * `tiny` (FLT_MIN, or more: see bounds), absolute where it is smaller; and the
 * inputs where they occurred. */
typedef struct err_stats {
    double rel, abs, rel_at, abs_at;
    long specials_wrong; /* NaN, inf or saturation answered wrong */
    double wrong_at;
} err_stats;

static void account(err_stats *e, double tiny, float x, float y, double r)
{
    float rf = (float)r; /* what a correctly rounded float function returns */
    if (isnan(r) || isinf(rf)) {
        bool ok = isnan(r) ? isnan(y) : y == rf;
        if (!ok) e->specials_wrong++, e->wrong_at = x;
        return;
    }
    if (!isfinite(y)) {
        e->specials_wrong++, e->wrong_at = x;
        return;
    }
    double d = fabs((double)y - r);
    if (fabs(r) >= tiny) {
        double rel = d / fabs(r) / FLT_EPSILON;
        if (rel > e->rel) e->rel = rel, e->rel_at = x;
    } else if (d > e->abs) {
        e->abs = d, e->abs_at = x;
    }
}

static void sweep(func f, double tiny, err_stats *fast_err, err_stats *libm_err)
{
    memset(fast_err, 0, sizeof *fast_err);
    memset(libm_err, 0, sizeof *libm_err);
    for (uint64_t b = 0; b < (1ull << 32); b += 613) {
        uint32_t bits = (uint32_t)b;
        float x;
        memcpy(&x, &bits, sizeof x);
        double r = ref(f, x);
        account(fast_err, tiny, x, fast(f, x), r);
        account(libm_err, tiny, x, libm_float(f, x), r);
    }
    for (int i = -20 * 8192; i <= 20 * 8192; i++) {
        float x = (float)i / 8192.0f;
        double r = ref(f, x);
        account(fast_err, tiny, x, fast(f, x), r);
        account(libm_err, tiny, x, libm_float(f, x), r);
    }
}

/* Bounds the header states: relative in FLT_EPSILON units where the true value is
 * at least tiny, absolute below. gelu's is 1.2e-37, its value at x = -10: below, as
 * in the libm formula, exp(-2u) overflows and the result is -0. */
static const struct {
    double rel, abs, tiny;
} bounds[N_FUNCS] = {
    [F_EXP] = {1.0, 2.9e-45, FLT_MIN},     [F_TANH] = {2.0, 0, FLT_MIN},
    [F_SIGMOID] = {2.0, 3e-39, FLT_MIN},   [F_GELU] = {128.0, 1.2e-37, 1.2e-37},
    [F_GELU_GRAD] = {0, 0, FLT_MIN}, /* checked below, absolutely */
};

START_TEST(dense_sweep_within_bounds)
{
    printf("%-8s %28s %28s   %s\n", "function", "new: max rel (eps) at x", "max abs (tiny) at x",
           "float libm formulas before: max rel (eps), max abs (tiny)");
    for (int f = 0; f < N_FUNCS; f++) {
        err_stats e, old;
        sweep((func)f, bounds[f].tiny, &e, &old);
        printf("%-8s %14.2f %13.6g %14.3g %13.6g   %.3g, %.3g%s\n", func_names[f], e.rel, e.rel_at,
               e.abs, e.abs_at, old.rel, old.abs,
               old.specials_wrong ? " (and wrong specials)" : "");
        ck_assert_msg(e.specials_wrong == 0, "%s: %ld specials wrong, e.g. at %g", func_names[f],
                      e.specials_wrong, e.wrong_at);
        if (f == F_GELU_GRAD) { /* its relative error means nothing where it crosses 0 */
            printf("         (gelu' relative errors above: not bounded, see its absolute test)\n");
            continue;
        }
        ck_assert_msg(e.rel <= bounds[f].rel, "%s: relative error %.2f eps at %g > %.1f",
                      func_names[f], e.rel, e.rel_at, bounds[f].rel);
        ck_assert_msg(e.abs <= bounds[f].abs, "%s: absolute error %g at %g > %g", func_names[f],
                      e.abs, e.abs_at, bounds[f].abs);
    }
}
END_TEST

/* gelu's relative error grows with |2u| for negative x, as exp(-2u) carries the
 * rounding of u (2u = -6.4 at x = -3, -87 at x = -10): 10 eps above -3, 128 below. */
START_TEST(gelu_relative_error_above_minus_3)
{
    double worst = 0, at = 0;
    for (int i = -3 * 65536; i <= 20 * 65536; i++) {
        float x = (float)i / 65536.0f;
        double r = ref(F_GELU, x);
        if (r == 0) continue;
        double rel = fabs(pn_am_gelu(x) - r) / fabs(r) / FLT_EPSILON;
        if (rel > worst) worst = rel, at = x;
    }
    printf("gelu     max rel error %.2f eps at x = %g (over [-3, 20] in steps of 2^-16)\n", worst,
           at);
    ck_assert_msg(worst <= 10.0, "gelu relative error %.2f eps at %g", worst, at);
}
END_TEST

/* gelu' takes values in about [-0.17, 1.13] and crosses 0: its error is absolute. */
START_TEST(gelu_grad_absolute_error)
{
    double worst = 0, at = 0;
    for (int i = -40 * 8192; i <= 40 * 8192; i++) {
        float x = (float)i / 8192.0f;
        double d = fabs(pn_am_gelu_grad(x) - ref(F_GELU_GRAD, x));
        if (d > worst) worst = d, at = x;
    }
    printf("gelu'    max abs error %.3g at x = %g (over [-40, 40] in steps of 2^-13)\n", worst, at);
    ck_assert_msg(worst <= 3e-7, "gelu' absolute error %g at %g", worst, at);
}
END_TEST

START_TEST(special_values)
{
    const float inf = INFINITY, nan = NAN;
    ck_assert(isnan(pn_am_exp(nan)) && isnan(pn_am_tanh(nan)) && isnan(pn_am_sigmoid(nan)));
    ck_assert(isnan(pn_am_gelu(nan)) && isnan(pn_am_gelu_grad(nan)));
    ck_assert(pn_am_exp(inf) == inf && pn_am_exp(-inf) == 0.0f && pn_am_exp(0.0f) == 1.0f);
    ck_assert(pn_am_exp(88.8f) == inf && pn_am_exp(-200.0f) == 0.0f && pn_am_exp(FLT_MAX) == inf);
    ck_assert(pn_am_exp(88.7f) < inf && pn_am_exp(-100.0f) > 0.0f); /* subnormal */
    ck_assert(pn_am_tanh(inf) == 1.0f && pn_am_tanh(-inf) == -1.0f && pn_am_tanh(30.0f) == 1.0f);
    ck_assert(pn_am_tanh(-0.0f) == 0.0f && signbit(pn_am_tanh(-0.0f)));
    ck_assert(pn_am_tanh(1e-30f) == 1e-30f && pn_am_tanh(-FLT_MAX) == -1.0f);
    ck_assert(pn_am_sigmoid(inf) == 1.0f && pn_am_sigmoid(-inf) == 0.0f);
    ck_assert(pn_am_sigmoid(-FLT_MAX) == 0.0f && pn_am_sigmoid(FLT_MAX) == 1.0f);
    ck_assert(pn_am_gelu(inf) == inf && pn_am_gelu(-inf) == 0.0f && pn_am_gelu(FLT_MAX) == FLT_MAX);
    ck_assert(pn_am_gelu(-FLT_MAX) == 0.0f && pn_am_gelu(1e20f) == 1e20f && pn_am_gelu(0.0f) == 0.0f);
    ck_assert(pn_am_gelu_grad(inf) == 1.0f && fabsf(pn_am_gelu_grad(-inf)) < 1e-35f);
    ck_assert(pn_am_gelu_grad(FLT_MAX) == 1.0f && fabsf(pn_am_gelu_grad(-FLT_MAX)) < 1e-35f);
    ck_assert(pn_am_gelu_grad(0.0f) == 0.5f);
}
END_TEST

/* The CPU kernels use the header: specials come through pn_act_* and softmax. */
START_TEST(kernels_saturate_and_propagate_nan)
{
    enum { N = 7 };
    const float in[N] = {-INFINITY, -1e30f, -3.0f, 0.0f, 2.0f, 1e30f, INFINITY};
    pn_matrix x = tu_alloc(2, N, 0), y = tu_alloc(2, N, 0), dy = tu_alloc(2, N, 0);
    pn_matrix dx = tu_alloc(2, N, 0);
    for (int j = 0; j < N; j++) x.data[j] = in[j], x.data[x.ld + j] = NAN;
    ck_assert_int_eq(pn_fill(&dy, 1.0f), 0);
    for (pn_act a = PN_ACT_TANH; a <= PN_ACT_GELU; a++) {
        ck_assert_int_eq(pn_act_forward(a, &x, &y), 0);
        ck_assert_int_eq(pn_act_backward(a, &x, &y, &dy, 0.0f, &dx), 0);
        for (int j = 0; j < N; j++) {
            float v = y.data[j], g = dx.data[j], lo = a == PN_ACT_TANH ? -1.0f : 0.0f;
            ck_assert_msg(isnan(y.data[y.ld + j]) && isnan(dx.data[dx.ld + j]), "%s: NaN lost",
                          pn_act_name(a));
            ck_assert_msg(!isnan(v) && !isnan(g), "%s(%g) gives NaN", pn_act_name(a), in[j]);
            if (j == 0) ck_assert_msg(v == lo, "%s(-inf) = %g", pn_act_name(a), v);
            if (j == N - 1)
                ck_assert_msg(v == (a == PN_ACT_GELU ? INFINITY : 1.0f), "%s(inf) = %g",
                              pn_act_name(a), v);
        }
    }
    /* softmax: a -inf logit gets 0, a huge one takes everything, NaN stays NaN */
    const float row[N] = {0.0f, -INFINITY, 1000.0f, -1000.0f, 999.0f, 0.0f, 1.0f};
    for (int j = 0; j < N; j++) x.data[j] = row[j];
    ck_assert_int_eq(pn_softmax_rows(&x, 1.0f, 0, &y), 0);
    ck_assert(y.data[1] == 0.0f && y.data[3] == 0.0f && y.data[0] == 0.0f);
    ck_assert(fabsf(y.data[2] - 0.7310586f) < 1e-6f && fabsf(y.data[4] - 0.2689414f) < 1e-6f);
    ck_assert(isnan(y.data[y.ld]));
    tu_free(&x), tu_free(&y), tu_free(&dy), tu_free(&dx);
}
END_TEST

static Suite *act_math_suite(void)
{
    Suite *s = suite_create("act_math");
    TCase *tc = tcase_create("accuracy");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, dense_sweep_within_bounds);
    tcase_add_test(tc, gelu_relative_error_above_minus_3);
    tcase_add_test(tc, gelu_grad_absolute_error);
    tcase_add_test(tc, special_values);
    tcase_add_test(tc, kernels_saturate_and_propagate_nan);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    pn_math_set_threads(1);
    return tu_run_suite(act_math_suite());
}
