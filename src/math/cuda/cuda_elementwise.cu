/* Per-element CUDA kernels: copies, scale, axpy, mul, activations, dropout, bias.
 * Each is a functor run once per element by pn_map2d (cuda_common.h); the math is
 * the CPU's own text (math/act_math.h, math/dropout_math.h), so dropout draws the
 * same mask bits as the CPU. Never run on a GPU yet (see cuda_backend.cu). */
#include "math/cuda/cuda_common.h"

extern "C" {
#include "math/act_math.h"
#include "math/dropout_math.h"
}

struct copy_op {
    pn_matrix src, dst;
    __device__ void operator()(long i, long j) const { pn_at(dst, i, j) = pn_at(src, i, j); }
};

/* The bytes a view spans, first element to last: [lo, hi). */
static void view_span(const pn_matrix *m, const char **lo, const char **hi)
{
    *lo = (const char *)m->data;
    *hi = *lo + (((size_t)m->rows - 1) * (size_t)m->ld + (size_t)m->cols) * sizeof(float);
}

int pn_cuda_copy(const pn_matrix *src, pn_matrix *dst)
{
    if (dst->rows == 0 || dst->cols == 0) return PN_OK;
    if (src->data == dst->data && src->ld == dst->ld) return PN_OK;
    cudaStream_t s;
    PN_TRY(pn_cuda_stream(&s));
    const char *slo, *shi, *dlo, *dhi;
    view_span(src, &slo, &shi);
    view_span(dst, &dlo, &dhi);
    if (slo < dhi && dlo < shi) {
        /* Overlapping spans: the CPU's row-wise memmove reads a row before writing it;
         * cudaMemcpyAsync on overlapping ranges is undefined and copy_op would race.
         * Stage src densely in the scratch block, then copy it into place. */
        size_t row = (size_t)dst->cols * sizeof(float);
        void *tmp;
        PN_TRY(pn_cuda_scratch(row * (size_t)dst->rows, &tmp));
        CUDA_CHECK(cudaMemcpy2DAsync(tmp, row, src->data, (size_t)src->ld * sizeof(float), row,
                                     (size_t)dst->rows, cudaMemcpyDeviceToDevice, s));
        CUDA_CHECK(cudaMemcpy2DAsync(dst->data, (size_t)dst->ld * sizeof(float), tmp, row, row,
                                     (size_t)dst->rows, cudaMemcpyDeviceToDevice, s));
        return PN_OK;
    }
    if (pn_matrix_dense(*src) && pn_matrix_dense(*dst)) { /* one memcpy */
        CUDA_CHECK(cudaMemcpyAsync(dst->data, src->data, pn_matrix_count(*dst) * sizeof(float),
                                   cudaMemcpyDeviceToDevice, s));
        return PN_OK;
    }
    return pn_map2d(dst->rows, dst->cols, copy_op{*src, *dst});
}

struct scale_op {
    pn_matrix m;
    float alpha;
    __device__ void operator()(long i, long j) const { pn_at(m, i, j) *= alpha; }
};

int pn_cuda_scale(pn_matrix *m, float alpha) { return pn_map2d(m->rows, m->cols, scale_op{*m, alpha}); }

struct axpy_op {
    float alpha;
    pn_matrix x, y;
    __device__ void operator()(long i, long j) const { pn_at(y, i, j) += alpha * pn_at(x, i, j); }
};

int pn_cuda_axpy(float alpha, const pn_matrix *x, pn_matrix *y)
{
    return pn_map2d(y->rows, y->cols, axpy_op{alpha, *x, *y});
}

struct mul_op {
    pn_matrix a, b, c;
    float beta;
    __device__ void operator()(long i, long j) const
    {
        float v = pn_at(a, i, j) * pn_at(b, i, j);
        pn_at(c, i, j) = beta == 0.0f ? v : beta * pn_at(c, i, j) + v;
    }
};

int pn_cuda_mul(const pn_matrix *a, const pn_matrix *b, float beta, pn_matrix *c)
{
    return pn_map2d(c->rows, c->cols, mul_op{*a, *b, *c, beta});
}

struct act_op {
    pn_act act;
    pn_matrix x, y;
    __device__ void operator()(long i, long j) const
    {
        float v = pn_at(x, i, j), r;
        switch (act) {
        case PN_ACT_RELU: r = pn_am_relu(v); break;
        case PN_ACT_TANH: r = pn_am_tanh(v); break;
        case PN_ACT_SIGMOID: r = pn_am_sigmoid(v); break;
        case PN_ACT_GELU: r = pn_am_gelu(v); break;
        default: r = v; break;
        }
        pn_at(y, i, j) = r;
    }
};

int pn_cuda_act_forward(pn_act act, const pn_matrix *x, pn_matrix *y)
{
    switch (act) {
    case PN_ACT_SOFTMAX: return pn_cuda_softmax_rows(x, 1.0f, 0, y);
    case PN_ACT_NONE: return pn_cuda_copy(x, y);
    case PN_ACT_RELU: case PN_ACT_TANH: case PN_ACT_SIGMOID: case PN_ACT_GELU:
        return pn_map2d(y->rows, y->cols, act_op{act, *x, *y});
    }
    return pn_error_set(PN_ERR_INTERNAL, "act_forward: bad activation %d", (int)act);
}

/* x or y is an empty view when the activation does not need it. */
struct act_back_op {
    pn_act act;
    pn_matrix x, y, dy, dx;
    float beta;
    __device__ void operator()(long i, long j) const
    {
        float d = pn_at(dy, i, j), g;
        switch (act) {
        case PN_ACT_RELU: g = pn_am_relu_back(pn_at(y, i, j), d); break;
        case PN_ACT_TANH: g = pn_am_tanh_back(pn_at(y, i, j), d); break;
        case PN_ACT_SIGMOID: g = pn_am_sigmoid_back(pn_at(y, i, j), d); break;
        case PN_ACT_GELU: g = pn_am_gelu_back(pn_at(x, i, j), d); break;
        default: g = d; break;
        }
        pn_at(dx, i, j) = pn_am_accum(beta, pn_at(dx, i, j), g);
    }
};

int pn_cuda_act_backward(pn_act act, const pn_matrix *x, const pn_matrix *y,
                         const pn_matrix *dy, float beta, pn_matrix *dx)
{
    if (act == PN_ACT_SOFTMAX) return pn_cuda_softmax_backward(y, dy, beta, dx);
    if (act < PN_ACT_NONE || act > PN_ACT_GELU)
        return pn_error_set(PN_ERR_INTERNAL, "act_backward: bad activation %d", (int)act);
    pn_matrix none = {0};
    return pn_map2d(dx->rows, dx->cols,
                    act_back_op{act, x ? *x : none, y ? *y : none, *dy, *dx, beta});
}

struct dropout_op {
    pn_matrix x, mask, y;
    float rate, keep_scale;
    uint64_t key;
    long row0;
    __device__ void operator()(long i, long j) const
    {
        float m = pn_dropout_mask(pn_dropout_row_key(key, row0 + i), (int)j, rate, keep_scale);
        pn_at(mask, i, j) = m;
        pn_at(y, i, j) = pn_at(x, i, j) * m;
    }
};

int pn_cuda_dropout_forward(const pn_matrix *x, float rate, uint64_t key, long row0,
                            pn_matrix *mask, pn_matrix *y)
{
    return pn_map2d(y->rows, y->cols,
                    dropout_op{*x, *mask, *y, rate, pn_dropout_keep_scale(rate), key, row0});
}

struct add_row_op {
    pn_matrix v, m;
    __device__ void operator()(long i, long j) const { pn_at(m, i, j) += v.data[j]; }
};

int pn_cuda_add_row_vector(const pn_matrix *v, pn_matrix *m)
{
    return pn_map2d(m->rows, m->cols, add_row_op{*v, *m});
}
