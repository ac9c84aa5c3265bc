/* Elementwise CPU kernels: each walks rows (views may be strided) and keeps the
 * inner loop over contiguous columns simple enough for the compiler to vectorize.
 * The activations' math is math/act_math.h (no libm call per element) and dropout's
 * mask math/dropout_math.h: the CUDA kernels compile the same text. */
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "math/act_math.h"
#include "math/dropout_math.h"
#include "math/cpu/cpu_kernels.h"

PN_VECTOR_CLONES int pn_cpu_fill(pn_matrix *m, float value)
{
    for (int i = 0; i < m->rows; i++) {
        float *r = pn_cpu_row(m, i);
        for (int j = 0; j < m->cols; j++) r[j] = value;
    }
    return PN_OK;
}

int pn_cpu_copy(const pn_matrix *src, pn_matrix *dst)
{
    /* rows in the order that reads each source row before an overlapping destination
     * row overwrites it: downwards when the destination starts later */
    bool down = dst->data > src->data;
    for (int k = 0; k < dst->rows; k++) {
        int i = down ? dst->rows - 1 - k : k;
        memmove(pn_cpu_row(dst, i), pn_cpu_row(src, i), (size_t)dst->cols * sizeof(float));
    }
    return PN_OK;
}

int pn_cpu_scale(pn_matrix *m, float alpha)
{
    for (int i = 0; i < m->rows; i++) {
        float *r = pn_cpu_row(m, i);
        for (int j = 0; j < m->cols; j++) r[j] *= alpha;
    }
    return PN_OK;
}

PN_VECTOR_CLONES int pn_cpu_axpy(float alpha, const pn_matrix *x, pn_matrix *y)
{
    for (int i = 0; i < y->rows; i++) {
        const float *xr = pn_cpu_row(x, i);
        float *yr = pn_cpu_row(y, i);
        for (int j = 0; j < y->cols; j++) yr[j] += alpha * xr[j];
    }
    return PN_OK;
}

PN_VECTOR_CLONES int pn_cpu_mul(const pn_matrix *a, const pn_matrix *b, float beta, pn_matrix *c)
{
    for (int i = 0; i < c->rows; i++) {
        const float *ar = pn_cpu_row(a, i), *br = pn_cpu_row(b, i);
        float *cr = pn_cpu_row(c, i);
        if (beta == 0.0f)
            for (int j = 0; j < c->cols; j++) cr[j] = ar[j] * br[j];
        else
            for (int j = 0; j < c->cols; j++) cr[j] = beta * cr[j] + ar[j] * br[j];
    }
    return PN_OK;
}

PN_VECTOR_CLONES int pn_cpu_act_forward(pn_act act, const pn_matrix *x, pn_matrix *y)
{
    if (act == PN_ACT_SOFTMAX) return pn_cpu_softmax_rows(x, 1.0f, 0, y);
    for (int i = 0; i < y->rows; i++) {
        const float *xr = pn_cpu_row(x, i);
        float *yr = pn_cpu_row(y, i);
        int n = y->cols;
        switch (act) {
        case PN_ACT_NONE: memmove(yr, xr, (size_t)n * sizeof(float)); break;
        case PN_ACT_RELU: for (int j = 0; j < n; j++) yr[j] = pn_am_relu(xr[j]); break;
        case PN_ACT_TANH: for (int j = 0; j < n; j++) yr[j] = pn_am_tanh(xr[j]); break;
        case PN_ACT_SIGMOID: for (int j = 0; j < n; j++) yr[j] = pn_am_sigmoid(xr[j]); break;
        case PN_ACT_GELU: for (int j = 0; j < n; j++) yr[j] = pn_am_gelu(xr[j]); break;
        default: return pn_error_set(PN_ERR_INTERNAL, "act_forward: bad activation %d", act);
        }
    }
    return PN_OK;
}

/* sum_j dy_j y_j in DOT_LANES independent float lanes (vector registers), the tail
 * first, then the lanes in order: one running sum was a chain of dependent adds,
 * ~4 cycles per element, over a third of attention's softmax backward (rows of
 * T = 64). The order of the additions is not the plain loop's. */
enum { DOT_LANES = 16 };

static inline __attribute__((always_inline)) float softmax_dot(const float *restrict dy,
                                                               const float *restrict y, int n)
{
    float lanes[DOT_LANES] = {0.0f}, dot = 0.0f;
    int j = 0;
    for (; j + DOT_LANES <= n; j += DOT_LANES)
        for (int k = 0; k < DOT_LANES; k++) lanes[k] += dy[j + k] * y[j + k];
    for (; j < n; j++) dot += dy[j] * y[j];
    for (int k = 0; k < DOT_LANES; k++) dot += lanes[k];
    return dot;
}

/* dx = beta * dx + g with g the local gradient: one specialized loop per
 * activation, so each vectorizes (no per-element switch). */
#define BACKWARD_LOOP(expr)                                                        \
    do {                                                                           \
        if (beta == 0.0f)                                                          \
            for (int j = 0; j < n; j++) dxr[j] = (expr);                           \
        else                                                                       \
            for (int j = 0; j < n; j++) dxr[j] = beta * dxr[j] + (expr);           \
    } while (0)

PN_VECTOR_CLONES int pn_cpu_act_backward(pn_act act, const pn_matrix *x, const pn_matrix *y,
                        const pn_matrix *dy, float beta, pn_matrix *dx)
{
    int n = dx->cols;
    for (int i = 0; i < dx->rows; i++) {
        const float *xr = x ? pn_cpu_row(x, i) : NULL, *yr = y ? pn_cpu_row(y, i) : NULL;
        const float *dyr = pn_cpu_row(dy, i);
        float *dxr = pn_cpu_row(dx, i);
        switch (act) {
        case PN_ACT_NONE: BACKWARD_LOOP(dyr[j]); break;
        case PN_ACT_RELU: BACKWARD_LOOP(pn_am_relu_back(yr[j], dyr[j])); break;
        case PN_ACT_TANH: BACKWARD_LOOP(pn_am_tanh_back(yr[j], dyr[j])); break;
        case PN_ACT_SIGMOID: BACKWARD_LOOP(pn_am_sigmoid_back(yr[j], dyr[j])); break;
        case PN_ACT_GELU: BACKWARD_LOOP(pn_am_gelu_back(xr[j], dyr[j])); break;
        case PN_ACT_SOFTMAX: {
            float dot = softmax_dot(dyr, yr, n); /* sum_j dy_j y_j */
            BACKWARD_LOOP(pn_am_softmax_back(yr[j], dyr[j], dot));
            break;
        }
        }
    }
    return PN_OK;
}

int pn_cpu_dropout_forward(const pn_matrix *x, float rate, uint64_t key, long row0,
                           pn_matrix *mask, pn_matrix *y)
{
    enum { SPAN = 512 }; /* columns whose hashes are made once for all rows */
    float keep_scale = pn_dropout_keep_scale(rate);
    uint64_t col_hash[SPAN];
    for (int c0 = 0; c0 < y->cols; c0 += SPAN) {
        int n = y->cols - c0 < SPAN ? y->cols - c0 : SPAN;
        for (int j = 0; j < n; j++) col_hash[j] = pn_dropout_col_hash(c0 + j);
        for (int i = 0; i < y->rows; i++) {
            uint64_t row_key = pn_dropout_row_key(key, row0 + i);
            const float *xr = pn_cpu_row(x, i) + c0;
            float *mr = pn_cpu_row(mask, i) + c0, *yr = pn_cpu_row(y, i) + c0;
            for (int j = 0; j < n; j++) {
                mr[j] = pn_dropout_mask_at(row_key, col_hash[j], rate, keep_scale);
                yr[j] = xr[j] * mr[j];
            }
        }
    }
    return PN_OK;
}
