/* Per-element float math of the activations and of softmax, shared by the backends:
 * exp, tanh, sigmoid and gelu (tanh form) with their derivatives, as branch-free
 * static inline functions that call no libm function but fabsf and copysignf. In a
 * plain C loop gcc vectorizes them (selects become blends, the bit casts integer
 * lanes); nvcc compiles the same text for the device (PN_AM_FN). Selects are bit
 * masks (pn_am_where): gcc (under -ftrapping-math, the default) keeps `x > c ? c : x`
 * as a branch, and a loop with a branch inside is not vectorized.
 *
 * Accuracy against double-precision libm, measured by tests/test_act_math.c over every
 * 613th float bit pattern and a 2^-13 grid on [-20, 20] (eps = FLT_EPSILON = 2^-23):
 *   pn_am_exp       relative <= 0.67 eps while exp(x) is a normal float; subnormal
 *                   results (x < -87.34) within 1.1e-45 absolute.
 *   pn_am_tanh      relative <= 1.1 eps.
 *   pn_am_sigmoid   relative <= 1.3 eps while the result is a normal float; below
 *                   (x < -87.3) it is 0 or subnormal, within 3e-39.
 *   pn_am_gelu      relative <= 8.5 eps for x >= -3, growing with |2u| below (101 eps
 *                   at x = -9.6: exp(-2u) carries u's rounding); for x < -10 it is
 *                   within 1.2e-37 of 0. The float libm formula before cancelled there.
 *   pn_am_gelu_grad absolute <= 2e-7 (its values lie in [-0.17, 1.13]).
 * The activations' per-element backward steps (relu, tanh and sigmoid from y, gelu
 * from x) are here too, so both backends run the same expression.
 * Specials: NaN gives NaN; exp(+inf) = +inf, exp(-inf) = 0; tanh and sigmoid saturate
 * to +-1 and 0/1; gelu(+inf) = +inf, gelu(-inf) = -0; gelu'(+inf) = 1, gelu'(-inf) is
 * within 3e-36 of 0; overflow gives +inf, not NaN. */
#ifndef PN_ACT_MATH_H
#define PN_ACT_MATH_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "math/kernel_fn.h"

#define PN_AM_FN PN_KERNEL_FN

PN_AM_FN int32_t pn_am_bits(float f)
{
#if defined(__CUDA_ARCH__)
    return __float_as_int(f);
#else
    int32_t i;
    memcpy(&i, &f, sizeof i);
    return i;
#endif
}

PN_AM_FN float pn_am_float(int32_t i)
{
#if defined(__CUDA_ARCH__)
    return __int_as_float(i);
#else
    float f;
    memcpy(&f, &i, sizeof f);
    return f;
#endif
}

/* c ? a : b for c in {0, 1}, by bit masks. */
PN_AM_FN float pn_am_where(int c, float a, float b)
{
    int32_t m = -c;
    return pn_am_float((pn_am_bits(a) & m) | (pn_am_bits(b) & ~m));
}

/* exp(x) = 2^k * exp(r), k = round(x / ln 2), |r| <= ln 2 / 2 (ln 2 in two parts so
 * that k * ln2_hi is exact); exp(r) by Cephes' degree-7 polynomial. k comes from the
 * float sum with 1.5 * 2^23 (no float-to-int conversion, defined for NaN too), and
 * 2^k is two factors 2^(k/2) * 2^(k - k/2) so that k in [-150, 128] covers both the
 * subnormal results and the overflow to +inf. Comparisons are false for NaN, so the
 * clamps let it through and it propagates. */
PN_AM_FN float pn_am_exp(float x)
{
    const float magic = 12582912.0f; /* 1.5 * 2^23 */
    int hi = x > 89.0f, lo = x < -104.0f; /* exp(89) overflows, exp(-104) rounds to 0 */
    x = pn_am_where(hi, 89.0f, x);
    x = pn_am_where(lo, -104.0f, x);
    float kf = x * 1.44269504088896341f + magic;
    int32_t k = pn_am_bits(kf) - pn_am_bits(magic);
    kf -= magic;
    float r = x - kf * 0.693359375f;
    r = r - kf * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    /* 2^k1 and 2^k2 as exponent bits; unsigned, because a NaN x gives a k far out of
     * range (the product with p's NaN is NaN whatever those bits are) */
    int32_t k1 = k / 2, k2 = k - k1;
    return p * pn_am_float((int32_t)((uint32_t)(k1 + 127) << 23)) *
           pn_am_float((int32_t)((uint32_t)(k2 + 127) << 23));
}

/* tanh: below |x| = 0.625 Cephes' odd polynomial (no cancellation near 0), above
 * 1 - 2 / (exp(2|x|) + 1), which reaches 1 as exp overflows; both computed, one kept. */
PN_AM_FN float pn_am_tanh(float x)
{
    float a = fabsf(x), z = x * x;
    float p = -5.70498872745e-3f;
    p = p * z + 2.06390887954e-2f;
    p = p * z - 5.37397155531e-2f;
    p = p * z + 1.33314422036e-1f;
    p = p * z - 3.33332819422e-1f;
    float small = a + a * z * p, big = 1.0f - 2.0f / (pn_am_exp(2.0f * a) + 1.0f);
    int near0 = a < 0.625f;
    return copysignf(pn_am_where(near0, small, big), x); /* tanh(-0) = -0 */
}

PN_AM_FN float pn_am_sigmoid(float x) { return 1.0f / (1.0f + pn_am_exp(-x)); }

/* gelu (tanh form): 0.5 x (1 + tanh(u)) = x * sigmoid(2u), u = c (x + a x^3), written
 * as x / (1 + exp(-2u)): no cancellation for negative x, and one exp. */
#define PN_AM_GELU_C 0.7978845608028654f /* sqrt(2 / pi) */
#define PN_AM_GELU_A 0.044715f

PN_AM_FN float pn_am_gelu(float x)
{
    float u2 = 2.0f * PN_AM_GELU_C * (x + PN_AM_GELU_A * x * x * x);
    float y = x / (1.0f + pn_am_exp(-u2));
    int minus_inf = x < -FLT_MAX; /* -inf / inf would be NaN */
    return pn_am_where(minus_inf, -0.0f, y);
}

/* d gelu / dx = s + x * 2u' * s (1 - s), s = sigmoid(2u), 1 - s = e s with e =
 * exp(-2u); x is clamped to [-10, 10] first: past it the result is 1, or within
 * 3e-36 of 0, and inside e stays finite (an overflowing x^3 would give inf * 0). */
PN_AM_FN float pn_am_gelu_grad(float x)
{
    int hi = x > 10.0f, lo = x < -10.0f;
    x = pn_am_where(hi, 10.0f, x);
    x = pn_am_where(lo, -10.0f, x);
    float x2 = x * x;
    float u2 = 2.0f * PN_AM_GELU_C * (x + PN_AM_GELU_A * x2 * x);
    float du2 = 2.0f * PN_AM_GELU_C * (1.0f + 3.0f * PN_AM_GELU_A * x2);
    float e = pn_am_exp(-u2), s = 1.0f / (1.0f + e);
    return s + x * du2 * (e * s * s);
}

/* relu and the backward steps: dy times the activation's derivative, written from
 * y = act(x) (relu, tanh, sigmoid) or from x (gelu), in the CPU loops' order. */
PN_AM_FN float pn_am_relu(float x) { return x > 0.0f ? x : 0.0f; }
PN_AM_FN float pn_am_relu_back(float y, float dy) { return y > 0.0f ? dy : 0.0f; }
PN_AM_FN float pn_am_tanh_back(float y, float dy) { return dy * (1.0f - y * y); }
PN_AM_FN float pn_am_sigmoid_back(float y, float dy) { return dy * y * (1.0f - y); }
PN_AM_FN float pn_am_gelu_back(float x, float dy) { return dy * pn_am_gelu_grad(x); }
/* softmax over a row, given dot = sum_j dy_j y_j */
PN_AM_FN float pn_am_softmax_back(float y, float dy, float dot) { return y * (dy - dot); }

/* dx = beta * dx + v, where beta = 0 overwrites (an uninitialized dx may hold NaN). */
PN_AM_FN float pn_am_accum(float beta, float dx, float v) { return beta == 0.0f ? v : beta * dx + v; }

#endif
