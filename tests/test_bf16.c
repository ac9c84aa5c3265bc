/* math/bf16_math.h against the definition: every one of the 65536 bf16 values widens
 * and narrows back to itself (a NaN to a NaN of the same sign); narrowing agrees with
 * a nearest-value search in double (ties to even, overflow to infinity) over a sweep
 * of floats with every tie and near-tie pattern; a few floats narrow to their known
 * bf16; and pn_gemm under PN_PRECISION_BF16 multiplies the rounded operands. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "math/bf16_math.h"
#include "math/ops.h"
#include "math/precision.h"
#include "float_bits.h"
#include "testutil.h"

static bool bf16_is_nan(pn_bf16 h) { return (h & 0x7f80) == 0x7f80 && (h & 0x007f); }

/* Check's assertions report every pass to the runner (a write per call): the loops
 * over millions of values fail through this instead. */
#define EXPECT(cond, ...)                                                                 \
    do {                                                                                  \
        if (!(cond)) ck_abort_msg(__VA_ARGS__);                                           \
    } while (0)

START_TEST(every_bf16_round_trips)
{
    int nans = 0;
    for (uint32_t h = 0; h <= 0xffff; h++) {
        float f = pn_bf16_to_float((pn_bf16)h);
        EXPECT(bits_of(f) == h << 16, "0x%04x widens to 0x%08x", h, bits_of(f));
        pn_bf16 back = pn_bf16_from_float(f);
        if (bf16_is_nan((pn_bf16)h)) {
            nans++;
            EXPECT(isnan(f) && bf16_is_nan(back) && (back & 0x8000) == (h & 0x8000),
                          "NaN 0x%04x comes back as 0x%04x", h, back);
        } else {
            EXPECT(back == h, "0x%04x comes back as 0x%04x", h, back);
        }
    }
    ck_assert_int_eq(nans, 2 * 127); /* both signs, 7 significand bits not all zero */
}
END_TEST

/* The nearest bf16 to the float u, found by distance in double: the two bf16s that
 * bracket |u| (the truncation and the next one up, 2^128 past the largest, which is
 * infinity's pattern), the nearer, the even one on a tie. u is not NaN. */
static pn_bf16 nearest_by_search(uint32_t u)
{
    uint32_t sign = u & 0x80000000u, mag = u & 0x7fffffffu;
    if (mag == 0x7f800000u) return (pn_bf16)((sign | mag) >> 16); /* infinity */
    uint32_t lo = mag & 0xffff0000u, hi = lo + 0x10000u;
    double x = float_of(mag), dlo = x - float_of(lo);
    double dhi = (hi == 0x7f800000u ? ldexp(1.0, 128) : (double)float_of(hi)) - x;
    uint32_t pick = dlo < dhi ? lo : dhi < dlo ? hi : ((lo >> 16) & 1) ? hi : lo;
    return (pn_bf16)((sign | pick) >> 16);
}

START_TEST(narrowing_matches_nearest_search)
{
    long checked = 0;
    static const uint32_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff};
    for (uint32_t top = 0; top <= 0xffff; top++)
        for (int l = 0; l < 6; l++) {
            uint32_t u = top << 16 | lows[l];
            if (isnan(float_of(u))) continue;
            pn_bf16 got = pn_bf16_from_float(float_of(u)), want = nearest_by_search(u);
            EXPECT(got == want, "0x%08x narrows to 0x%04x, the nearest is 0x%04x", u, got,
                          want);
            checked++;
        }
    for (uint64_t u = 0; u <= 0xffffffffu; u += 251) {
        float f = float_of((uint32_t)u);
        if (isnan(f)) {
            EXPECT(bf16_is_nan(pn_bf16_from_float(f)), "NaN 0x%08x narrows to 0x%04x",
                          (unsigned)u, pn_bf16_from_float(f));
            continue;
        }
        pn_bf16 got = pn_bf16_from_float(f), want = nearest_by_search((uint32_t)u);
        EXPECT(got == want, "0x%08x narrows to 0x%04x, the nearest is 0x%04x",
                      (unsigned)u, got, want);
        checked++;
    }
    ck_assert_int_gt(checked, 17000000);
}
END_TEST

START_TEST(known_values)
{
    static const struct {
        uint32_t in;
        pn_bf16 out;
        const char *why;
    } cases[] = {
        {0x3f800000, 0x3f80, "1"},
        {0x3f808000, 0x3f80, "1 + 2^-8: a tie, to the even 1"},
        {0x3f818000, 0x3f82, "1 + 3 2^-8: a tie, up to the even 1 + 2^-6"},
        {0x3f808001, 0x3f81, "just past the tie: up"},
        {0x3f807fff, 0x3f80, "just short of it: down"},
        {0xbf818000, 0xbf82, "-(1 + 3 2^-8): ties to even by magnitude"},
        {0x7f7fffff, 0x7f80, "FLT_MAX overflows to infinity"},
        {0xff7fffff, 0xff80, "-FLT_MAX to -infinity"},
        {0x7f7f8000, 0x7f80, "the tie below FLT_MAX: 0x7f7f is odd, so up, to infinity"},
        {0x7f7f7fff, 0x7f7f, "short of that tie: the largest finite bf16"},
        {0x7f800000, 0x7f80, "infinity"},
        {0x80000000, 0x8000, "-0 keeps its sign"},
        {0x00008000, 0x0000, "a subnormal tie: to +0"},
        {0x00018000, 0x0002, "a subnormal tie: up to the even 0x0002"},
        {0x007fffff, 0x0080, "the largest subnormal: up to the least normal"},
        {0x80000001, 0x8000, "the least negative subnormal: to -0"},
        {0x7f800001, 0x7fc0, "a signalling NaN whose payload is below bit 16: a quiet NaN"},
        {0xffc00000, 0xffc0, "a negative quiet NaN"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        pn_bf16 got = pn_bf16_from_float(float_of(cases[k].in));
        ck_assert_msg(got == cases[k].out, "0x%08x narrows to 0x%04x, not 0x%04x (%s)",
                      cases[k].in, got, cases[k].out, cases[k].why);
    }
    ck_assert_uint_eq(pn_bf16_from_float(FLT_MAX), 0x7f80);
    ck_assert_uint_eq(pn_bf16_from_float(1.0f + 0x1p-8f), 0x3f80);
    ck_assert_uint_eq(pn_bf16_from_float(1.0f + 3 * 0x1p-8f), 0x3f82);
    ck_assert(isnan(pn_bf16_round(NAN)));
}
END_TEST

/* pn_gemm on the CPU under each precision: 1 + 2^-8 and 1 - 2^-9 (ties, both to 1 in
 * bf16) times rows of ones sum to k in bf16 and to the exact sum in fp32. */
START_TEST(gemm_follows_the_precision)
{
    enum { M = 3, K = 8, N = 2 };
    pn_matrix a = tu_alloc(M, K, 1), b = tu_alloc(K, N, 2), c = tu_alloc(M, N, 0);
    for (int i = 0; i < M; i++)
        for (int l = 0; l < K; l++) a.data[i * a.ld + l] = l % 2 ? 1.0f + 0x1p-8f : 1.0f - 0x1p-9f;
    for (int l = 0; l < K; l++)
        for (int j = 0; j < N; j++) b.data[l * b.ld + j] = 1.0f;
    double exact = K / 2 * (1.0 + 0x1p-8) + K / 2 * (1.0 - 0x1p-9);
    pn_math_set_precision(PN_PRECISION_BF16);
    ck_assert_int_eq(pn_gemm(false, false, 1.0f, &a, &b, 0.0f, &c), PN_OK);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) ck_assert_float_eq(c.data[i * c.ld + j], (float)K);
    pn_math_set_precision(PN_PRECISION_FP32);
    ck_assert_int_eq(pn_gemm(false, false, 1.0f, &a, &b, 0.0f, &c), PN_OK);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) ck_assert_float_eq(c.data[i * c.ld + j], (float)exact);
    tu_free(&a);
    tu_free(&b);
    tu_free(&c);
}
END_TEST

static Suite *bf16_suite(void)
{
    Suite *s = suite_create("bf16");
    TCase *tc = tcase_create("conversions");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, every_bf16_round_trips);
    tcase_add_test(tc, narrowing_matches_nearest_search);
    tcase_add_test(tc, known_values);
    tcase_add_test(tc, gemm_follows_the_precision);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    pn_math_set_threads(1);
    return tu_run_suite(bf16_suite());
}
