/* The cases of tests/test_backend_ops.c for the bfloat16 slots. Beside the runner's
 * comparison with the CPU's run, each checks its own run against the host reference
 * (math/bf16_math.h, and a GEMM in double), so the CPU table is checked too:
 *  - the conversions to the bit: ties to even, NaN (signalling ones too) still NaN,
 *    overflow to infinity, -0, subnormals, strided views' padding and the memory past
 *    a dense array untouched;
 *  - gemm_bf16 near the GEMM of the operands rounded first (fp32 accumulation), and far
 *    from the GEMM of the unrounded ones: the test sees that rounding happened. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_ops.h"
#include "float_bits.h"
#include "math/bf16_math.h"

#define BE (c->be)

/* The floats that decide a narrowing, first in every input, then random ones. */
static const uint32_t float_specials[] = {
    0x00000000, 0x80000000,             /* +-0 */
    0x3f800000, 0x3f808000, 0x3f818000, /* 1; 1 + 2^-8 (a tie: to 1); 1 + 3 2^-8 (up) */
    0x3f808001, 0x3f807fff, 0xbf818000, /* just past and short of a tie; a negative tie */
    0x7f7fffff, 0xff7fffff, 0x7f7f8000, /* +-FLT_MAX and the tie below it: infinity */
    0x7f7f7fff,                         /* short of that tie: the largest finite bf16 */
    0x7f800000, 0xff800000,             /* +-inf */
    0x7fc00000, 0xffc00001, 0x7f800001, /* NaNs: quiet, negative, signalling whose */
    0x7fbfffff, 0x7f80ffff,             /* payload is below bit 16 (truncated: inf) */
    0x00000001, 0x00008000, 0x00018000, /* subnormals: the least; ties to 0 and up */
    0x007fffff, 0x807fffff, 0x00ff8000, /* the largest (up to the least normal) */
    0x80008001, 0x0000ffff,
};
enum { N_FLOAT_SPECIALS = sizeof float_specials / sizeof *float_specials };

static const uint16_t bf16_specials[] = {0x0000, 0x8000, 0x3f80, 0x7f7f, 0xff7f, 0x7f80, 0xff80,
                                         0x7fc0, 0x7f81, 0xffff, 0x0001, 0x8001, 0x007f, 0x0080};
enum { N_BF16_SPECIALS = sizeof bf16_specials / sizeof *bf16_specials };

/* Element k of an input: a special, or random bits (every class), an exact tie, or a
 * pattern one below or above a tie. */
static uint32_t input_bits(ctx *c, size_t k)
{
    if (k < N_FLOAT_SPECIALS) return float_specials[k];
    uint64_t r = pn_rng_next(&c->rng);
    uint32_t top = (uint32_t)(r >> 32) & 0xffff0000u;
    static const uint32_t lows[] = {0x8000, 0x7fff, 0x8001, 0x0000};
    switch (r & 3) {
    case 0: return (uint32_t)(r >> 32);
    case 1: return top | 0x8000u;
    default: return top | lows[(r >> 2) & 3];
    }
}

/* A rows x cols view with ld = cols + pad of such floats (padding included): the
 * host block is returned in *host (free it). */
static pn_matrix bits_matrix(ctx *c, shape s, float **host)
{
    int ld = s.cols + s.pad;
    size_t n = (size_t)s.rows * (size_t)ld;
    float *h = malloc((n ? n : 1) * sizeof *h);
    for (size_t k = 0; k < n; k++) h[k] = float_of(input_bits(c, k));
    pn_matrix m = {dev_block(c, (n ? n : 1) * sizeof *h), s.rows, s.cols, ld, c->dev};
    if (m.data && n) check_rc(c, BE->memory.copy_from_host(m.data, h, n * sizeof *h), "copy_from_host");
    *host = h;
    return m;
}

/* The whole block of m (padding included) read back. */
static float *read_block(ctx *c, const pn_matrix *m)
{
    size_t n = (size_t)m->rows * (size_t)m->ld;
    float *h = calloc(n ? n : 1, sizeof *h);
    if (n) check_rc(c, BE->memory.copy_to_host(h, m->data, n * sizeof *h), "copy_to_host");
    return h;
}

/* Fails the run at the first element of got whose bits are not want's; the padding of
 * the view (columns cols..ld) must be before's. */
static void expect_view(ctx *c, const char *what, const pn_matrix *m, const float *got,
                        const float *before, uint32_t (*want)(float before))
{
    for (int i = 0; i < m->rows; i++)
        for (int j = 0; j < m->ld; j++) {
            size_t k = (size_t)i * m->ld + j;
            uint32_t w = j < m->cols ? want(before[k]) : bits_of(before[k]);
            if (bits_of(got[k]) == w) continue;
            char msg[200];
            snprintf(msg, sizeof msg, "%s: (%d, %d)%s of 0x%08x is 0x%08x, not 0x%08x", what, i,
                     j, j < m->cols ? "" : " (padding)", bits_of(before[k]), bits_of(got[k]), w);
            fail(c, msg);
            return;
        }
}

static uint32_t rounded_bits(float f) { return bits_of(pn_bf16_round(f)); }

void case_round_bf16(ctx *c, shape s, int v)
{
    float *host;
    pn_matrix m = bits_matrix(c, s, &host);
    check_rc(c, BE->round_bf16(&m), "round_bf16");
    float *got = read_block(c, &m);
    expect_view(c, "round_bf16", &m, got, host, rounded_bits);
    out_mat(c, "m", &m, OUT_EXACT);
    free(got);
    free(host);
}

enum { GUARD = 37 }; /* bf16 elements past a dense array, which must stay as they were */

void case_to_bf16(ctx *c, shape s, int v)
{
    float *host;
    pn_matrix src = bits_matrix(c, s, &host);
    size_t n = pn_matrix_count(src), total = n + GUARD;
    uint16_t *init = malloc(total * sizeof *init), *got = malloc(total * sizeof *got);
    for (size_t k = 0; k < total; k++) init[k] = (uint16_t)(0xa5a5u + k);
    uint16_t *dst = dev_block(c, total * sizeof *dst);
    if (dst) check_rc(c, BE->memory.copy_from_host(dst, init, total * sizeof *dst), "copy_from_host");
    check_rc(c, BE->to_bf16(&src, dst), "to_bf16");
    if (dst) check_rc(c, BE->memory.copy_to_host(got, dst, total * sizeof *got), "copy_to_host");
    for (size_t k = 0; k < total && !c->error[0]; k++) {
        uint32_t in = k < n ? bits_of(host[(k / s.cols) * src.ld + k % s.cols]) : 0;
        uint16_t want = k < n ? pn_bf16_from_float(float_of(in)) : init[k];
        if (got[k] == want) continue;
        char msg[200];
        snprintf(msg, sizeof msg, "to_bf16: element %zu%s of 0x%08x is 0x%04x, not 0x%04x", k,
                 k < n ? "" : " (past the array)", in, got[k], want);
        fail(c, msg);
    }
    float *after = read_block(c, &src);
    if (memcmp(after, host, (size_t)src.rows * src.ld * sizeof *after))
        fail(c, "to_bf16: the source changed");
    out_ints(c, "dst", dst, total, sizeof *dst);
    free(after);
    free(init);
    free(got);
    free(host);
}

/* The bf16 input k of from_bf16: a special, then random patterns. */
static uint16_t bf16_input(ctx *c, size_t k)
{
    return k < N_BF16_SPECIALS ? bf16_specials[k] : (uint16_t)(pn_rng_next(&c->rng) >> 48);
}

static uint32_t widened_bits(float before) { return bits_of(before); }

void case_from_bf16(ctx *c, shape s, int v)
{
    size_t n = (size_t)s.rows * s.cols;
    uint16_t *in = malloc((n ? n : 1) * sizeof *in);
    for (size_t k = 0; k < n; k++) in[k] = bf16_input(c, k);
    uint16_t *src = dev_block(c, (n ? n : 1) * sizeof *src);
    if (src && n) check_rc(c, BE->memory.copy_from_host(src, in, n * sizeof *src), "copy_from_host");
    pn_matrix dst = mat(c, s.rows, s.cols, s.pad, -1, 1);
    float *before = read_block(c, &dst);
    check_rc(c, BE->from_bf16(src, &dst), "from_bf16");
    float *got = read_block(c, &dst);
    /* the expected block: the widened values in the view, the padding as it was */
    for (int i = 0; i < s.rows; i++)
        for (int j = 0; j < s.cols; j++)
            before[(size_t)i * dst.ld + j] = pn_bf16_to_float(in[(size_t)i * s.cols + j]);
    expect_view(c, "from_bf16", &dst, got, before, widened_bits);
    out_mat(c, "dst", &dst, OUT_EXACT);
    free(got);
    free(before);
    free(in);
}

/* sum (x - y)^2 over n values. */
static double dist2(const double *x, const float *y, size_t n)
{
    double s = 0;
    for (size_t k = 0; k < n; k++) s += (x[k] - y[k]) * (x[k] - y[k]);
    return s;
}

/* out (m x n) = alpha op(a) op(b) + beta c0 in double, the operands rounded to bf16
 * first when `round` is set. a and b are dense host copies. */
static void host_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float *a,
                      const float *b, float beta, const float *c0, bool round, double *out)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double sum = 0;
            for (int l = 0; l < k; l++) {
                float x = ta ? a[(size_t)l * m + i] : a[(size_t)i * k + l];
                float y = tb ? b[(size_t)j * k + l] : b[(size_t)l * n + j];
                if (round) x = pn_bf16_round(x), y = pn_bf16_round(y);
                sum += (double)x * y;
            }
            out[(size_t)i * n + j] = alpha * sum + (beta != 0.0f ? beta * c0[(size_t)i * n + j] : 0);
        }
}

static float *uniform_host(ctx *c, size_t n)
{
    float *h = malloc((n ? n : 1) * sizeof *h);
    for (size_t k = 0; k < n; k++) h[k] = uniform(c, -1, 1);
    return h;
}

/* Variants as case_gemm's: bit 0 transposes a, bit 1 b, bit 2 sets beta to 1. */
void case_gemm_bf16(ctx *c, shape s, int v)
{
    bool ta = v & 1, tb = v & 2;
    float alpha = 0.5f, beta = (v & 4) ? 1.0f : 0.0f;
    int m = s.rows, n = s.cols, k = (s.rows + s.cols) / 2 + 1;
    size_t mn = (size_t)m * n;
    float *ha = uniform_host(c, (size_t)m * k), *hb = uniform_host(c, (size_t)k * n);
    float *hc = uniform_host(c, mn);
    pn_matrix a = ta ? mat_from(c, k, m, s.pad, ha, -1, 1) : mat_from(c, m, k, s.pad, ha, -1, 1);
    pn_matrix b = tb ? mat_from(c, n, k, s.pad, hb, -1, 1) : mat_from(c, k, n, s.pad, hb, -1, 1);
    pn_matrix out = mat_from(c, m, n, s.pad, hc, -1, 1);
    check_rc(c, BE->gemm_bf16(ta, tb, alpha, &a, &b, beta, &out), "gemm_bf16");
    int slot = c->n_outs;
    out_mat(c, "c", &out, OUT_NEAR);
    double *rounded = malloc(mn * sizeof *rounded), *exact = malloc(mn * sizeof *exact);
    host_gemm(ta, tb, m, n, k, alpha, ha, hb, beta, hc, true, rounded);
    host_gemm(ta, tb, m, n, k, alpha, ha, hb, beta, hc, false, exact);
    const float *got = c->outs[slot].data;
    double norm = 0, gap = 0;
    for (size_t q = 0; q < mn; q++) {
        norm += rounded[q] * rounded[q];
        gap += (rounded[q] - exact[q]) * (rounded[q] - exact[q]);
    }
    /* fp32 accumulation against double: ~1e-14 of the norm; rounding the operands moves
     * the product by ~1e-6 of it */
    double err = dist2(rounded, got, mn);
    char msg[256];
    if (!c->error[0] && !(err <= 1e-10 * norm)) {
        snprintf(msg, sizeof msg, "gemm_bf16: %.3g from the GEMM of the rounded operands "
                 "(norm %.3g): not fp32 accumulation of bf16 operands", err, norm);
        fail(c, msg);
    } else if (!c->error[0] && !(gap > 1e-9 * norm && err * 1e4 < gap)) {
        snprintf(msg, sizeof msg, "gemm_bf16: %.3g from the GEMM of the rounded operands, "
                 "%.3g between that and the unrounded one: were the operands rounded?",
                 err, gap);
        fail(c, msg);
    }
    free(rounded);
    free(exact);
    free(ha);
    free(hb);
    free(hc);
}
