/* Row-wise and reduction CUDA kernels: column sums, the sum of squares, softmax
 * (forward with the causal mask, and its backward), cross-entropy, mse and layer
 * norm. A row is one block; a column sum is one block of 32 columns x 8 row lanes.
 * Every reduction adds in a fixed order (pn_block_sum), so a kernel gives the same
 * bits on every run; what a value is made of once the sums are known is the CPU's
 * text (math/row_math.h, math/act_math.h). Never run on a GPU yet. */
#include "math/cuda/cuda_common.h"

#include <float.h>

extern "C" {
#include "math/act_math.h"
#include "math/row_math.h"
}

enum { COL_TILE = 32, ROW_LANES = 8 };

/* out[j] = accum(beta, out[j], sum_i m[i, j]) for 32 columns per block: the 8 row
 * lanes each add every 8th row, then the lanes are added in order. */
__global__ static void col_sums_kernel(pn_matrix m, float beta, pn_matrix out)
{
    __shared__ float part[ROW_LANES][COL_TILE];
    int j = blockIdx.x * COL_TILE + threadIdx.x;
    float s = 0.0f;
    if (j < m.cols)
        for (int i = threadIdx.y; i < m.rows; i += ROW_LANES) s += pn_at(m, i, j);
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && j < m.cols) {
        float t = 0.0f;
        for (int r = 0; r < ROW_LANES; r++) t += part[r][threadIdx.x];
        out.data[j] = pn_am_accum(beta, out.data[j], t);
    }
}

int pn_cuda_col_sums(const pn_matrix *m, float beta, pn_matrix *out)
{
    if (out->cols == 0) return PN_OK;
    cudaStream_t s;
    PN_TRY(pn_cuda_stream(&s));
    dim3 block(COL_TILE, ROW_LANES);
    col_sums_kernel<<<(out->cols + COL_TILE - 1) / COL_TILE, block, 0, s>>>(*m, beta, *out);
    CUDA_LAUNCHED();
    return PN_OK;
}

enum { SQ_BLOCKS = 256 };

/* Pass 1: block b adds the squares of elements b, b + stride, ... in double into
 * part[b]; pass 2: one block adds the parts. The grid is fixed, so is the order. */
__global__ static void sum_squares_kernel(pn_matrix m, double *part)
{
    __shared__ double shared[32];
    long n = (long)m.rows * m.cols;
    double s = 0.0;
    for (long k = (long)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += (long)gridDim.x * blockDim.x) {
        float v = pn_at(m, k / m.cols, k % m.cols);
        s += (double)v * v;
    }
    s = pn_block_sum(s, shared);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

__global__ static void sum_parts_kernel(const double *part, int n, double *out)
{
    __shared__ double shared[32];
    double s = 0.0;
    for (int k = threadIdx.x; k < n; k += blockDim.x) s += part[k];
    s = pn_block_sum(s, shared);
    if (threadIdx.x == 0) *out = s;
}

int pn_cuda_sum_squares(const pn_matrix *m, double *out)
{
    cudaStream_t s;
    double *part;
    PN_TRY(pn_cuda_stream(&s));
    PN_TRY(pn_cuda_scratch((SQ_BLOCKS + 1) * sizeof(double), (void **)&part));
    sum_squares_kernel<<<SQ_BLOCKS, PN_CUDA_THREADS, 0, s>>>(*m, part);
    CUDA_LAUNCHED();
    sum_parts_kernel<<<1, PN_CUDA_THREADS, 0, s>>>(part, SQ_BLOCKS, part + SQ_BLOCKS);
    CUDA_LAUNCHED();
    CUDA_CHECK(cudaMemcpyAsync(out, part + SQ_BLOCKS, sizeof *out, cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    return PN_OK;
}

/* One block per row: the max of the row's visible columns, their exps (written to y),
 * their sum, then y scaled by 1 / sum and the masked columns set to 0. */
__global__ static void softmax_kernel(pn_matrix x, float scale, int period, pn_matrix y)
{
    __shared__ float shared[32];
    int i = blockIdx.x, n = pn_rm_causal_cols(i, period, y.cols);
    float max = -FLT_MAX;
    for (int j = threadIdx.x; j < n; j += blockDim.x) max = fmaxf(max, scale * pn_at(x, i, j));
    max = pn_block_max(max, shared);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float e = pn_am_exp(scale * pn_at(x, i, j) - max);
        pn_at(y, i, j) = e;
        sum += e;
    }
    sum = pn_block_sum(sum, shared);
    float inv = 1.0f / sum;
    for (int j = threadIdx.x; j < y.cols; j += blockDim.x)
        pn_at(y, i, j) = j < n ? pn_at(y, i, j) * inv : 0.0f;
}

int pn_cuda_softmax_rows(const pn_matrix *x, float scale, int causal_period, pn_matrix *y)
{
    if (y->rows == 0 || y->cols == 0) return PN_OK;
    cudaStream_t s;
    PN_TRY(pn_cuda_stream(&s));
    softmax_kernel<<<y->rows, pn_row_threads(y->cols), 0, s>>>(*x, scale, causal_period, *y);
    CUDA_LAUNCHED();
    return PN_OK;
}

/* dx = accum(beta, dx, y (dy - dot)) with dot = sum_j dy_j y_j, one block per row. */
__global__ static void softmax_back_kernel(pn_matrix y, pn_matrix dy, float beta, pn_matrix dx)
{
    __shared__ float shared[32];
    int i = blockIdx.x;
    float dot = 0.0f;
    for (int j = threadIdx.x; j < dx.cols; j += blockDim.x) dot += pn_at(dy, i, j) * pn_at(y, i, j);
    dot = pn_block_sum(dot, shared);
    for (int j = threadIdx.x; j < dx.cols; j += blockDim.x)
        pn_at(dx, i, j) = pn_am_accum(beta, pn_at(dx, i, j),
                                      pn_am_softmax_back(pn_at(y, i, j), pn_at(dy, i, j), dot));
}

int pn_cuda_softmax_backward(const pn_matrix *y, const pn_matrix *dy, float beta, pn_matrix *dx)
{
    if (dx->rows == 0 || dx->cols == 0) return PN_OK;
    cudaStream_t s;
    PN_TRY(pn_cuda_stream(&s));
    softmax_back_kernel<<<dx->rows, pn_row_threads(dx->cols), 0, s>>>(*y, *dy, beta, *dx);
    CUDA_LAUNCHED();
    return PN_OK;
}

/* One warp per row: the argmax (the first column on ties, as the CPU's loop) and the
 * loss; hits are counted in *hits (integer adds: any order gives the same count). */
__global__ static void xent_kernel(pn_matrix probs, const int *labels, pn_matrix loss,
                                   unsigned long long *fault, int *hits)
{
    int i = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (i >= probs.rows) return;
    int label = labels[i];
    if (label < 0 || label >= probs.cols) {
        if (lane == 0) pn_cuda_fault(fault, i, label);
        return;
    }
    float best = -FLT_MAX;
    int arg = probs.cols; /* no column yet */
    /* The CPU's loop keeps column 0 unless a later value is greater: a NaN never wins
     * (p > best is false), except a NaN in column 0, which nothing beats (below). */
    for (int j = lane; j < probs.cols; j += 32) {
        float p = pn_at(probs, i, j);
        if ((arg == probs.cols && !isnan(p)) || p > best) best = p, arg = j;
    }
    for (int o = 16; o > 0; o >>= 1) {
        float b = __shfl_down_sync(0xffffffffu, best, o);
        int a = __shfl_down_sync(0xffffffffu, arg, o);
        if (a != probs.cols && (arg == probs.cols || b > best || (b == best && a < arg)))
            best = b, arg = a;
    }
    if (lane == 0) {
        if (isnan(pn_at(probs, i, 0))) arg = 0;
        if (arg == label) atomicAdd(hits, 1);
        loss.data[(long)i * loss.ld] = pn_rm_xent_loss(pn_at(probs, i, label));
    }
}

enum { ROWS_PER_BLOCK = 8 }; /* warps per block of a warp-per-row kernel */

int pn_cuda_xent_forward(const pn_matrix *probs, const int *labels, pn_matrix *loss,
                         double *correct)
{
    cudaStream_t s;
    unsigned long long *fault;
    int *hits, host_hits = 0;
    *correct = 0.0;
    if (probs->rows == 0) return PN_OK;
    PN_TRY(pn_cuda_stream(&s));
    PN_TRY(pn_cuda_fault_ptr(&fault));
    PN_TRY(pn_cuda_scratch(sizeof(int), (void **)&hits));
    CUDA_CHECK(cudaMemsetAsync(hits, 0, sizeof(int), s));
    int blocks = (probs->rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK;
    xent_kernel<<<blocks, 32 * ROWS_PER_BLOCK, 0, s>>>(*probs, labels, *loss, fault, hits);
    CUDA_LAUNCHED();
    CUDA_CHECK(cudaMemcpyAsync(&host_hits, hits, sizeof(int), cudaMemcpyDeviceToHost, s));
    bool hit;
    int row, label;
    PN_TRY(pn_cuda_fault_take(&hit, &row, &label)); /* synchronizes the stream */
    if (hit)
        return pn_error_set(PN_ERR_INVALID, "label %d at row %d is outside [0, %d)", label, row,
                            probs->cols);
    *correct = host_hits;
    return PN_OK;
}

struct xent_back_op {
    pn_matrix probs, dloss, dlogits;
    const int *labels;
    float beta;
    unsigned long long *fault;
    __device__ void operator()(long i, long j) const
    {
        int label = labels[i];
        if (label < 0 || label >= probs.cols) {
            if (j == 0) pn_cuda_fault(fault, (int)i, label);
            return;
        }
        float g = dloss.data[i * dloss.ld];
        pn_at(dlogits, i, j) = pn_am_accum(beta, pn_at(dlogits, i, j),
                                           pn_rm_xent_grad(g, pn_at(probs, i, j), j == label));
    }
};

int pn_cuda_xent_backward(const pn_matrix *probs, const int *labels, const pn_matrix *dloss,
                          float beta, pn_matrix *dlogits)
{
    unsigned long long *fault;
    if (probs->rows == 0) return PN_OK;
    PN_TRY(pn_cuda_fault_ptr(&fault));
    PN_TRY(pn_map2d(probs->rows, probs->cols,
                    xent_back_op{*probs, *dloss, *dlogits, labels, beta, fault}));
    bool hit;
    int row, label;
    PN_TRY(pn_cuda_fault_take(&hit, &row, &label));
    if (hit)
        return pn_error_set(PN_ERR_INVALID, "label %d at row %d is outside [0, %d)", label, row,
                            probs->cols);
    return PN_OK;
}

/* One block per row: the mean of the squared differences, summed in double. */
__global__ static void mse_kernel(pn_matrix p, pn_matrix t, pn_matrix loss)
{
    __shared__ double shared[32];
    int i = blockIdx.x;
    double s = 0.0;
    for (int j = threadIdx.x; j < p.cols; j += blockDim.x) {
        double d = (double)pn_at(p, i, j) - pn_at(t, i, j);
        s += d * d;
    }
    s = pn_block_sum(s, shared);
    if (threadIdx.x == 0) loss.data[(long)i * loss.ld] = (float)(s / p.cols);
}

int pn_cuda_mse_forward(const pn_matrix *p, const pn_matrix *t, pn_matrix *loss)
{
    if (p->rows == 0) return PN_OK;
    cudaStream_t s;
    PN_TRY(pn_cuda_stream(&s));
    mse_kernel<<<p->rows, pn_row_threads(p->cols), 0, s>>>(*p, *t, *loss);
    CUDA_LAUNCHED();
    return PN_OK;
}

/* dp and dt are empty views when absent. */
struct mse_back_op {
    pn_matrix p, t, dloss, dp, dt;
    __device__ void operator()(long i, long j) const
    {
        float g = pn_rm_mse_factor(dloss.data[i * dloss.ld], p.cols);
        float v = g * (pn_at(p, i, j) - pn_at(t, i, j));
        if (dp.data) pn_at(dp, i, j) += v;
        if (dt.data) pn_at(dt, i, j) -= v;
    }
};

int pn_cuda_mse_backward(const pn_matrix *p, const pn_matrix *t, const pn_matrix *dloss,
                         pn_matrix *dp, pn_matrix *dt)
{
    pn_matrix none = {0};
    return pn_map2d(p->rows, p->cols, mse_back_op{*p, *t, *dloss, dp ? *dp : none,
                                                  dt ? *dt : none});
}

/* One block per row: the mean, then the squared deviations from it (both summed in
 * double, as the CPU's), then y; mean and rstd are kept for the backward. */
__global__ static void layernorm_kernel(pn_matrix x, pn_matrix gamma, pn_matrix beta, float eps,
                                        pn_matrix y, pn_matrix mean, pn_matrix rstd)
{
    __shared__ double shared[32];
    int i = blockIdx.x, n = x.cols;
    double s = 0.0, ss = 0.0;
    for (int j = threadIdx.x; j < n; j += blockDim.x) s += pn_at(x, i, j);
    s = pn_block_sum(s, shared);
    float mu = (float)(s / n);
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        double d = pn_at(x, i, j) - mu;
        ss += d * d;
    }
    ss = pn_block_sum(ss, shared);
    float rs = pn_rm_rstd(ss, n, eps);
    for (int j = threadIdx.x; j < n; j += blockDim.x)
        pn_at(y, i, j) = pn_rm_layernorm_y(pn_at(x, i, j), mu, rs, gamma.data[j], beta.data[j]);
    if (threadIdx.x == 0) {
        mean.data[(long)i * mean.ld] = mu;
        rstd.data[(long)i * rstd.ld] = rs;
    }
}

int pn_cuda_layernorm_forward(const pn_matrix *x, const pn_matrix *gamma,
                              const pn_matrix *beta, float eps, pn_matrix *y, pn_matrix *mean,
                              pn_matrix *rstd)
{
    if (x->rows == 0 || x->cols == 0) return PN_OK;
    cudaStream_t s;
    PN_TRY(pn_cuda_stream(&s));
    layernorm_kernel<<<x->rows, pn_row_threads(x->cols), 0, s>>>(*x, *gamma, *beta, eps, *y,
                                                                 *mean, *rstd);
    CUDA_LAUNCHED();
    return PN_OK;
}

/* dx += rs (g - mean(g) - xhat mean(g xhat)), g = dy gamma: one block per row. */
__global__ static void layernorm_dx_kernel(pn_matrix x, pn_matrix gamma, pn_matrix mean,
                                           pn_matrix rstd, pn_matrix dy, pn_matrix dx)
{
    __shared__ double shared[32];
    int i = blockIdx.x, n = x.cols;
    float mu = mean.data[(long)i * mean.ld], rs = rstd.data[(long)i * rstd.ld];
    double sum_g = 0.0, sum_gx = 0.0;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float xhat = pn_rm_xhat(pn_at(x, i, j), mu, rs), g = pn_at(dy, i, j) * gamma.data[j];
        sum_g += g;
        sum_gx += (double)g * xhat;
    }
    sum_g = pn_block_sum(sum_g, shared);
    sum_gx = pn_block_sum(sum_gx, shared);
    float mg = (float)(sum_g / n), mgx = (float)(sum_gx / n);
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float xhat = pn_rm_xhat(pn_at(x, i, j), mu, rs), g = pn_at(dy, i, j) * gamma.data[j];
        pn_at(dx, i, j) += pn_rm_layernorm_dx(rs, g, mg, xhat, mgx);
    }
}

/* dgamma[j] += sum_i dy xhat, dbeta[j] += sum_i dy: 32 columns x 8 row lanes per
 * block, the lanes added in order (as col_sums_kernel). */
__global__ static void layernorm_params_kernel(pn_matrix x, pn_matrix mean, pn_matrix rstd,
                                               pn_matrix dy, pn_matrix dgamma, pn_matrix dbeta)
{
    __shared__ float part_g[ROW_LANES][COL_TILE], part_b[ROW_LANES][COL_TILE];
    int j = blockIdx.x * COL_TILE + threadIdx.x;
    float sg = 0.0f, sb = 0.0f;
    if (j < x.cols)
        for (int i = threadIdx.y; i < x.rows; i += ROW_LANES) {
            float mu = mean.data[(long)i * mean.ld], rs = rstd.data[(long)i * rstd.ld];
            float d = pn_at(dy, i, j);
            sg += d * pn_rm_xhat(pn_at(x, i, j), mu, rs);
            sb += d;
        }
    part_g[threadIdx.y][threadIdx.x] = sg;
    part_b[threadIdx.y][threadIdx.x] = sb;
    __syncthreads();
    if (threadIdx.y == 0 && j < x.cols) {
        float tg = 0.0f, tb = 0.0f;
        for (int r = 0; r < ROW_LANES; r++) tg += part_g[r][threadIdx.x], tb += part_b[r][threadIdx.x];
        dgamma.data[j] += tg;
        dbeta.data[j] += tb;
    }
}

int pn_cuda_layernorm_backward(const pn_matrix *x, const pn_matrix *gamma,
                               const pn_matrix *mean, const pn_matrix *rstd,
                               const pn_matrix *dy, pn_matrix *dx, pn_matrix *dgamma,
                               pn_matrix *dbeta)
{
    if (x->rows == 0 || x->cols == 0) return PN_OK;
    cudaStream_t s;
    PN_TRY(pn_cuda_stream(&s));
    /* The parameter sums first: they read all of dy and x, which the CPU reads for a
     * row before it adds to that row's dx (a dx that is dy or x stays correct). */
    dim3 block(COL_TILE, ROW_LANES);
    layernorm_params_kernel<<<(x->cols + COL_TILE - 1) / COL_TILE, block, 0, s>>>(
        *x, *mean, *rstd, *dy, *dgamma, *dbeta);
    CUDA_LAUNCHED();
    if (dx) {
        layernorm_dx_kernel<<<x->rows, pn_row_threads(x->cols), 0, s>>>(*x, *gamma, *mean,
                                                                         *rstd, *dy, *dx);
        CUDA_LAUNCHED();
    }
    return PN_OK;
}
