/* Activation benchmark: ns per element of gelu forward + backward, tanh and sigmoid
 * forward and softmax over rows, through the ops (pn_act_forward/backward,
 * pn_softmax_rows: math/act_math.h) and, interleaved in the same run, through the
 * float libm loops they replaced (kept here only, as the reference). Last, fc's
 * bias add then gelu (two ops, two passes) against one fused loop over the rows.
 * Default shape: the MLP of a small GPT (batch 16 x T 64 rows, width 512).
 *
 * usage: bench_act [--rows R] [--cols C] [--reps N] [--rounds R] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/error.h"
#include "base/rng.h"
#include "bench_util.h"
#include "math/act_math.h"
#include "math/buffer.h"
#include "math/cpu/cpu_kernels.h"
#include "math/ops.h"

#define CHECK(call)                                                                    \
    do {                                                                               \
        if ((call) < 0) {                                                              \
            fprintf(stderr, "bench_act: %s: %s\n", #call, pn_error_message());         \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

/* --- the loops before math/act_math.h: one libm call per element ----------------- */

static float old_gelu(float x)
{
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

static float old_gelu_grad(float x)
{
    float t = tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x));
    return 0.5f * (1.0f + t) +
           0.5f * x * (1.0f - t * t) * 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * x * x);
}

static void old_act_forward(pn_act act, const pn_matrix *x, pn_matrix *y)
{
    for (int i = 0; i < y->rows; i++) {
        const float *xr = x->data + (size_t)i * x->ld;
        float *yr = y->data + (size_t)i * y->ld;
        for (int j = 0; j < y->cols; j++)
            yr[j] = act == PN_ACT_GELU   ? old_gelu(xr[j])
                    : act == PN_ACT_TANH ? tanhf(xr[j])
                                         : 1.0f / (1.0f + expf(-xr[j]));
    }
}

static void old_gelu_backward(const pn_matrix *x, const pn_matrix *dy, pn_matrix *dx)
{
    for (int i = 0; i < dx->rows; i++) {
        const float *xr = x->data + (size_t)i * x->ld, *dyr = dy->data + (size_t)i * dy->ld;
        float *dxr = dx->data + (size_t)i * dx->ld;
        for (int j = 0; j < dx->cols; j++) dxr[j] = dyr[j] * old_gelu_grad(xr[j]);
    }
}

static void old_softmax_rows(const pn_matrix *x, pn_matrix *y)
{
    for (int i = 0; i < y->rows; i++) {
        const float *xr = x->data + (size_t)i * x->ld;
        float *yr = y->data + (size_t)i * y->ld;
        int n = y->cols;
        float max = -INFINITY, sum = 0.0f;
        for (int j = 0; j < n; j++) max = fmaxf(max, xr[j]);
        for (int j = 0; j < n; j++) {
            yr[j] = expf(xr[j] - max);
            sum += yr[j];
        }
        for (int j = 0; j < n; j++) yr[j] *= 1.0f / sum;
    }
}

/* One pass: pre += bias, y = gelu(pre); a candidate fc kernel, vectorized as the
 * CPU backend's are (PN_VECTOR_CLONES). */
PN_VECTOR_CLONES static void fused_bias_gelu(const pn_matrix *bias, pn_matrix *pre, pn_matrix *y)
{
    for (int i = 0; i < pre->rows; i++) {
        float *pr = pre->data + (size_t)i * pre->ld, *yr = y->data + (size_t)i * y->ld;
        const float *b = bias->data;
        for (int j = 0; j < pre->cols; j++) {
            pr[j] += b[j];
            yr[j] = pn_am_gelu(pr[j]);
        }
    }
}

/* --- the cases --------------------------------------------------------------------- */

typedef struct data {
    pn_matrix x, y, dy, dx, bias, pre;
} data;

enum { GELU_FB, TANH_F, SIGMOID_F, SOFTMAX, BIAS_GELU, N_CASES };
static const char *const case_names[N_CASES] = {
    "gelu forward + backward", "tanh forward", "sigmoid forward", "softmax rows (T wide)",
    "bias + gelu forward"};

static void run_new(int c, data *d, const pn_matrix *sm_x, pn_matrix *sm_y)
{
    switch (c) {
    case GELU_FB:
        CHECK(pn_act_forward(PN_ACT_GELU, &d->x, &d->y));
        CHECK(pn_act_backward(PN_ACT_GELU, &d->x, &d->y, &d->dy, 0.0f, &d->dx));
        break;
    case TANH_F: CHECK(pn_act_forward(PN_ACT_TANH, &d->x, &d->y)); break;
    case SIGMOID_F: CHECK(pn_act_forward(PN_ACT_SIGMOID, &d->x, &d->y)); break;
    case SOFTMAX: CHECK(pn_softmax_rows(sm_x, 1.0f, 0, sm_y)); break;
    default: /* what fc's forward does after its GEMM: two passes over pre */
        CHECK(pn_add_row_vector(&d->bias, &d->pre));
        CHECK(pn_act_forward(PN_ACT_GELU, &d->pre, &d->y));
    }
}

static void run_old(int c, data *d, const pn_matrix *sm_x, pn_matrix *sm_y)
{
    switch (c) {
    case GELU_FB:
        old_act_forward(PN_ACT_GELU, &d->x, &d->y);
        old_gelu_backward(&d->x, &d->dy, &d->dx);
        break;
    case TANH_F: old_act_forward(PN_ACT_TANH, &d->x, &d->y); break;
    case SIGMOID_F: old_act_forward(PN_ACT_SIGMOID, &d->x, &d->y); break;
    case SOFTMAX: old_softmax_rows(sm_x, sm_y); break;
    default: fused_bias_gelu(&d->bias, &d->pre, &d->y);
    }
}

static pn_matrix alloc(pn_buffer *buf, int rows, int cols, pn_rng *rng, float scale)
{
    CHECK(pn_buffer_acquire(buf, pn_device_host(), (size_t)rows * cols * sizeof(float)));
    pn_matrix m = pn_matrix_on(buf, rows, cols);
    for (size_t k = 0; k < (size_t)rows * cols; k++)
        m.data[k] = scale * (2.0f * (float)pn_rng_uniform(rng) - 1.0f);
    return m;
}

int main(int argc, char **argv)
{
    int rows = 16 * 64, cols = 512, reps = 20, rounds = 9;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rows") && i + 1 < argc) rows = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cols") && i + 1 < argc) cols = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_act [--rows R] [--cols C] [--reps N] [--rounds R]\n");
            return 2;
        }
    }
    pn_math_set_threads(1);
    pn_rng rng;
    pn_rng_init(&rng, 7, 0);
    pn_buffer bufs[8] = {0};
    data d = {.x = alloc(&bufs[0], rows, cols, &rng, 4.0f), .y = alloc(&bufs[1], rows, cols, &rng, 1.0f),
              .dy = alloc(&bufs[2], rows, cols, &rng, 1.0f), .dx = alloc(&bufs[3], rows, cols, &rng, 1.0f),
              .bias = alloc(&bufs[4], 1, cols, &rng, 0.0f), /* zero: pre += bias repeats */
              .pre = alloc(&bufs[5], rows, cols, &rng, 4.0f)};
    int sm_cols = 64; /* attention's score rows: T wide */
    int sm_rows = (int)((size_t)rows * cols / (size_t)sm_cols);
    pn_matrix sm_x = alloc(&bufs[6], sm_rows, sm_cols, &rng, 8.0f);
    pn_matrix sm_y = alloc(&bufs[7], sm_rows, sm_cols, &rng, 1.0f);
    double elems = (double)rows * cols;
    printf("%d x %d floats (x uniform in [-4, 4]), median of %d rounds x %d reps, 1 thread\n",
           rows, cols, rounds, reps);
    printf("%-26s %14s %14s %9s\n", "ns per element", "libm loops", "act_math", "speedup");
    double *t_old = calloc((size_t)rounds, sizeof *t_old), *t_new = calloc((size_t)rounds, sizeof *t_new);
    for (int c = 0; c < N_CASES; c++) {
        run_old(c, &d, &sm_x, &sm_y), run_new(c, &d, &sm_x, &sm_y); /* warm-up */
        for (int r = 0; r < rounds; r++) { /* interleaved, so noise hits both alike */
            double t0 = pn_now();
            for (int k = 0; k < reps; k++) run_old(c, &d, &sm_x, &sm_y);
            double t1 = pn_now();
            for (int k = 0; k < reps; k++) run_new(c, &d, &sm_x, &sm_y);
            double t2 = pn_now();
            t_old[r] = (t1 - t0) / reps / elems * 1e9;
            t_new[r] = (t2 - t1) / reps / elems * 1e9;
        }
        double mo = bench_median(t_old, rounds), mn = bench_median(t_new, rounds);
        if (c == BIAS_GELU)
            printf("%-26s %14s %14s\n%-26s %14.3f %14.3f %8.2fx\n", "", "fused loop", "2 ops",
                   case_names[c], mo, mn, mn / mo);
        else
            printf("%-26s %14.3f %14.3f %8.1fx\n", case_names[c], mo, mn, mo / mn);
    }
    free(t_old), free(t_new);
    for (int b = 0; b < 8; b++) pn_buffer_release(&bufs[b]);
    return 0;
}
