/* Row-wise and reduction CUDA kernels: column sums, the sum of squares, softmax
 * (forward with the causal mask, and its backward), cross-entropy, mse and layer
 * norm. A row is one block; a column sum is blocks of 32 columns x 8 row lanes over
 * chunks of rows, the chunks then added in order.
 * Every reduction adds in a fixed order (pn_block_sum), so a kernel gives the same
 * bits on every run; what a value is made of once the sums are known is the CPU's
 * text (math/row_math.h, math/act_math.h). Never run on a GPU yet. */
#include "math/cuda/cuda_common.h"

#include <float.h>

extern "C" {
#include "math/act_math.h"
#include "math/row_math.h"
}

/* Column sums (col_sums, layer norm's dgamma and dbeta) are blocks of 32 columns x 8
 * row lanes, one per (column tile, chunk of rows): with the rows in one chunk, a tall
 * matrix (batch x hidden) gave hidden / 32 blocks, a few SMs of the GPU each walking
 * thousands of rows. Each chunk's sums go to the scratch block and a second kernel
 * adds the chunks in order; one chunk writes the result directly. The partition
 * depends on the shape only, so the bits do not change from run to run. */
enum { COL_TILE = 32, ROW_LANES = 8, CHUNK_ROWS = 256, MAX_CHUNKS = 128 };

struct row_chunks {
    int n, per; /* chunks, rows per chunk (the last may have fewer) */
};

static row_chunks chunks_of(int rows)
{
    int n = (rows + CHUNK_ROWS - 1) / CHUNK_ROWS;
    n = n < 1 ? 1 : n > MAX_CHUNKS ? MAX_CHUNKS : n;
    return row_chunks{n, (rows + n - 1) / n};
}

/* The sum over the 8 row lanes of column threadIdx.x, in lane order (valid in lane 0;
 * every thread of the block must call it). */
__device__ static float lanes_sum(float v, float (*part)[COL_TILE])
{
    part[threadIdx.y][threadIdx.x] = v;
    __syncthreads();
    float t = 0.0f;
    if (threadIdx.y == 0)
        for (int r = 0; r < ROW_LANES; r++) t += part[r][threadIdx.x];
    return t;
}

/* Chunk blockIdx.y's sum of column j: into chunk_sums[chunk][j], or with one chunk
 * straight into out[j] = accum(beta, out[j], sum). */
__global__ static void __launch_bounds__(COL_TILE * ROW_LANES)
col_sums_kernel(pn_matrix m, int per, float beta, pn_matrix out, float *chunk_sums)
{
    __shared__ float part[ROW_LANES][COL_TILE];
    int j = blockIdx.x * COL_TILE + threadIdx.x, lo = blockIdx.y * per;
    int hi = lo + per < m.rows ? lo + per : m.rows;
    float s = 0.0f;
    if (j < m.cols)
        for (int i = lo + threadIdx.y; i < hi; i += ROW_LANES) s += pn_at(m, i, j);
    float t = lanes_sum(s, part);
    if (threadIdx.y != 0 || j >= m.cols) return;
    if (chunk_sums)
        chunk_sums[(long)blockIdx.y * m.cols + j] = t;
    else
        out.data[j] = pn_am_accum(beta, out.data[j], t);
}

/* out[j] = accum(beta, out[j], sum over the chunks of chunk_sums[c][j]), in chunk order. */
__global__ static void __launch_bounds__(PN_CUDA_THREADS)
add_chunks_kernel(const float *chunk_sums, int chunks, int cols, float beta, float *out)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    float t = 0.0f;
    for (int c = 0; c < chunks; c++) t += chunk_sums[(long)c * cols + j];
    out[j] = pn_am_accum(beta, out[j], t);
}

static int add_chunks(cudaStream_t s, const float *chunk_sums, int chunks, int cols, float beta,
                      float *out)
{
    add_chunks_kernel<<<(cols + PN_CUDA_THREADS - 1) / PN_CUDA_THREADS, PN_CUDA_THREADS, 0, s>>>(
        chunk_sums, chunks, cols, beta, out);
    CUDA_LAUNCHED();
    return PN_OK;
}

int pn_cuda_col_sums(const pn_matrix *m, float beta, pn_matrix *out)
{
    if (out->cols == 0) return PN_OK;
    cudaStream_t s;
    PN_TRY(pn_cuda_stream(&s));
    row_chunks rc = chunks_of(m->rows);
    float *chunk_sums = NULL;
    if (rc.n > 1)
        PN_TRY(pn_cuda_scratch((size_t)rc.n * (size_t)out->cols * sizeof(float),
                               (void **)&chunk_sums));
    dim3 block(COL_TILE, ROW_LANES), grid((out->cols + COL_TILE - 1) / COL_TILE, rc.n);
    col_sums_kernel<<<grid, block, 0, s>>>(*m, rc.per, beta, *out, chunk_sums);
    CUDA_LAUNCHED();
    if (chunk_sums) PN_TRY(add_chunks(s, chunk_sums, rc.n, out->cols, beta, out->data));
    return PN_OK;
}

enum { SQ_BLOCKS = 256 };

/* Pass 1: block b adds the squares of its elements in double into part[b] (a dense m:
 * elements b * threads + t, then a grid's stride on; a strided m: rows b, b + grid,
 * ... split over the threads, no division per element); pass 2: one block adds the
 * parts. The grid depends on the shape only (enough blocks for one element or row a
 * thread or block, at most SQ_BLOCKS: a bias of 16 takes one block, not 256 mostly
 * idle ones), so the order, and the bits, are the same on every run. */
__global__ static void __launch_bounds__(PN_CUDA_THREADS)
sum_squares_kernel(pn_matrix m, bool dense, double *part)
{
    __shared__ double shared[32];
    double s = 0.0;
    if (dense) {
        long n = (long)m.rows * m.cols;
        for (long k = (long)blockIdx.x * blockDim.x + threadIdx.x; k < n;
             k += (long)gridDim.x * blockDim.x) {
            float v = m.data[k];
            s += (double)v * v;
        }
    } else {
        for (long i = blockIdx.x; i < m.rows; i += gridDim.x)
            for (int j = threadIdx.x; j < m.cols; j += blockDim.x) {
                float v = pn_at(m, i, j);
                s += (double)v * v;
            }
    }
    s = pn_block_sum(s, shared);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

__global__ static void __launch_bounds__(PN_CUDA_THREADS)
sum_parts_kernel(const double *part, int n, double *out)
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
    bool dense = pn_matrix_dense(*m);
    long work = dense ? ((long)m->rows * m->cols + PN_CUDA_THREADS - 1) / PN_CUDA_THREADS
                      : (long)m->rows;
    int blocks = work < 1 ? 1 : work > SQ_BLOCKS ? SQ_BLOCKS : (int)work;
    PN_TRY(pn_cuda_scratch((SQ_BLOCKS + 1) * sizeof(double), (void **)&part));
    sum_squares_kernel<<<blocks, PN_CUDA_THREADS, 0, s>>>(*m, dense, part);
    CUDA_LAUNCHED();
    sum_parts_kernel<<<1, PN_CUDA_THREADS, 0, s>>>(part, blocks, part + SQ_BLOCKS);
    CUDA_LAUNCHED();
    CUDA_CHECK(cudaMemcpyAsync(out, part + SQ_BLOCKS, sizeof *out, cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    return PN_OK;
}

/* One block per row: the max of the row's visible columns, their exps (written to y),
 * their sum, then y scaled by 1 / sum and the masked columns set to 0. */
__global__ static void __launch_bounds__(PN_ROW_MAX_THREADS)
softmax_kernel(pn_matrix x, float scale, int period, pn_matrix y)
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
__global__ static void __launch_bounds__(PN_ROW_MAX_THREADS)
softmax_back_kernel(pn_matrix y, pn_matrix dy, float beta, pn_matrix dx)
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

enum { ROWS_PER_BLOCK = 8 }; /* warps per block of a warp-per-row kernel */

/* One warp per row: the argmax (the first column on ties, as the CPU's loop) and the
 * loss; hits are counted in *hits (integer adds: any order gives the same count). */
__global__ static void __launch_bounds__(32 * ROWS_PER_BLOCK)
xent_kernel(pn_matrix probs, const int *labels, pn_matrix loss, unsigned long long *fault,
            int *hits)
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
__global__ static void __launch_bounds__(PN_ROW_MAX_THREADS)
mse_kernel(pn_matrix p, pn_matrix t, pn_matrix loss)
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
__global__ static void __launch_bounds__(PN_ROW_MAX_THREADS)
layernorm_kernel(pn_matrix x, pn_matrix gamma, pn_matrix beta, float eps, pn_matrix y,
                 pn_matrix mean, pn_matrix rstd)
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
__global__ static void __launch_bounds__(PN_ROW_MAX_THREADS)
layernorm_dx_kernel(pn_matrix x, pn_matrix gamma, pn_matrix mean, pn_matrix rstd, pn_matrix dy,
                    pn_matrix dx)
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

/* dgamma[j] += sum_i dy xhat, dbeta[j] += sum_i dy over chunk blockIdx.y of the rows
 * (as col_sums_kernel): into chunk_sums (dgamma's chunks, then dbeta's), or with one
 * chunk straight into dgamma and dbeta. */
__global__ static void __launch_bounds__(COL_TILE * ROW_LANES)
layernorm_params_kernel(pn_matrix x, pn_matrix mean, pn_matrix rstd, pn_matrix dy, int per,
                        pn_matrix dgamma, pn_matrix dbeta, float *chunk_sums)
{
    __shared__ float part_g[ROW_LANES][COL_TILE], part_b[ROW_LANES][COL_TILE];
    int j = blockIdx.x * COL_TILE + threadIdx.x, lo = blockIdx.y * per;
    int hi = lo + per < x.rows ? lo + per : x.rows;
    float sg = 0.0f, sb = 0.0f;
    if (j < x.cols)
        for (int i = lo + threadIdx.y; i < hi; i += ROW_LANES) {
            float mu = mean.data[(long)i * mean.ld], rs = rstd.data[(long)i * rstd.ld];
            float d = pn_at(dy, i, j);
            sg += d * pn_rm_xhat(pn_at(x, i, j), mu, rs);
            sb += d;
        }
    float tg = lanes_sum(sg, part_g), tb = lanes_sum(sb, part_b);
    if (threadIdx.y != 0 || j >= x.cols) return;
    if (chunk_sums) {
        long at = (long)blockIdx.y * x.cols + j;
        chunk_sums[at] = tg;
        chunk_sums[(long)gridDim.y * x.cols + at] = tb;
    } else {
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
    row_chunks rc = chunks_of(x->rows);
    float *chunk_sums = NULL;
    size_t per_param = (size_t)rc.n * (size_t)x->cols;
    if (rc.n > 1) PN_TRY(pn_cuda_scratch(2 * per_param * sizeof(float), (void **)&chunk_sums));
    dim3 block(COL_TILE, ROW_LANES), grid((x->cols + COL_TILE - 1) / COL_TILE, rc.n);
    layernorm_params_kernel<<<grid, block, 0, s>>>(*x, *mean, *rstd, *dy, rc.per, *dgamma,
                                                   *dbeta, chunk_sums);
    CUDA_LAUNCHED();
    if (chunk_sums) {
        PN_TRY(add_chunks(s, chunk_sums, rc.n, x->cols, 1.0f, dgamma->data));
        PN_TRY(add_chunks(s, chunk_sums + per_param, rc.n, x->cols, 1.0f, dbeta->data));
    }
    if (dx) {
        layernorm_dx_kernel<<<x->rows, pn_row_threads(x->cols), 0, s>>>(*x, *gamma, *mean,
                                                                         *rstd, *dy, *dx);
        CUDA_LAUNCHED();
    }
    return PN_OK;
}
