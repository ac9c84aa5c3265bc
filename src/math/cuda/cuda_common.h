/* What the CUDA backend's files share (included by .cu files only): error checks,
 * the rank's compute stream, launch geometry for per-element kernels, block
 * reductions in a fixed order, the device-side fault record through which a kernel
 * reports a bad id, label or length, and the kernels of each file for the table.
 *
 * Placement of integer arrays: ids, labels, lengths and seq_max's arg live on the
 * device, like the matrices they index (math/ops.h); the CUDA kernels read them
 * there. A bad value is found by the kernel, recorded in the fault record (the
 * lowest row wins, as the CPU loop reports the first) and reported by the host
 * after the kernel, which costs one synchronization per such op. */
#ifndef PN_CUDA_COMMON_H
#define PN_CUDA_COMMON_H

extern "C" {
#include "base/error.h"
#include "math/backend.h"
}

#include <cuda_runtime.h>
#include <stdint.h>

#include "math/cuda/cuda_check.h"

/* After a launch: a bad configuration or an earlier asynchronous fault. */
#define CUDA_LAUNCHED() CUDA_CHECK(cudaGetLastError())

/* The stream every kernel, copy and cuBLAS call of this process runs on, one per
 * device (a rank uses one device): created on first use. */
int pn_cuda_stream(cudaStream_t *out);

/* Waits for everything queued on the stream. */
int pn_cuda_sync(void);

/* The fault record: one 64-bit word on the current device, all ones when clear, else
 * (row << 32 | (uint32) value) of the lowest faulty row. */
int pn_cuda_fault_ptr(unsigned long long **out);
/* Waits for the stream, reads the record and clears it: *hit, and the row and value. */
int pn_cuda_fault_take(bool *hit, int *row, int *value);

/* A scratch block on the current device of at least bytes (grows, never shrinks):
 * partial sums and counters of reductions that return a value to the host. For work
 * on the compute stream only: it grows in stream order (cudaMallocAsync). */
int pn_cuda_scratch(size_t bytes, void **out);

/* A second block of the same kind, for the bf16 GEMM's operands (cuda_bf16.cu): kept
 * apart so that the reductions' block stays small. */
int pn_cuda_operand_scratch(size_t bytes, void **out);

/* Records (row, value) in the fault record unless a lower row is there already. */
__device__ __forceinline__ void pn_cuda_fault(unsigned long long *fault, int row, int value)
{
    unsigned long long key = ((unsigned long long)(unsigned)row << 32) | (unsigned)value;
    atomicMin(fault, key);
}

/* Element (i, j) of a row-major view. */
__device__ __forceinline__ float &pn_at(const pn_matrix &m, long i, long j)
{
    return m.data[i * m.ld + j];
}

/* Threads per block of the per-element and fixed-size kernels; the most a row kernel
 * (one block per row, pn_row_threads) takes; the largest gridDim.y. Every kernel
 * declares the largest block it is launched with (__launch_bounds__), so that the
 * compiler keeps its registers within what such a block may hold (65536 per block
 * on sm_80 and sm_90: 64 a thread at 1024 threads); tests/test_cuda_resources.sh
 * checks it with the real compiler. */
enum { PN_CUDA_THREADS = 256, PN_ROW_MAX_THREADS = 1024, PN_CUDA_MAX_GRID_Y = 65535 };

/* Runs f(i, j) once for every element of a rows x cols grid: blocks of tx columns x ty
 * rows, grid-stride loops both ways, so any size fits one launch (gridDim.y is at most
 * 65535). No division per element: the flattened index's k / cols and k % cols were
 * 64-bit divisions, a long integer routine on the GPU, in every elementwise kernel. */
template <class F>
__global__ void __launch_bounds__(PN_CUDA_THREADS) pn_map2d_kernel(long rows, long cols, F f)
{
    for (long i = (long)blockIdx.y * blockDim.y + threadIdx.y; i < rows;
         i += (long)gridDim.y * blockDim.y) {
        /* kept rolled: unrolled, it computes its trip count, a 64-bit division */
#pragma unroll 1
        for (long j = (long)blockIdx.x * blockDim.x + threadIdx.x; j < cols;
             j += (long)gridDim.x * blockDim.x)
            f(i, j);
    }
}

/* tx: the power of two that covers cols, at most 256 (a narrow matrix puts several
 * rows in one warp); ty = 256 / tx. */
template <class F>
static int pn_map2d(long rows, long cols, F f)
{
    if (rows <= 0 || cols <= 0) return PN_OK;
    cudaStream_t s;
    PN_TRY(pn_cuda_stream(&s));
    unsigned tx = 1;
    while (tx < cols && tx < PN_CUDA_THREADS) tx *= 2;
    unsigned ty = PN_CUDA_THREADS / tx;
    long gx = (cols + tx - 1) / tx, gy = (rows + ty - 1) / ty;
    if (gy > PN_CUDA_MAX_GRID_Y) gy = PN_CUDA_MAX_GRID_Y;
    pn_map2d_kernel<<<dim3((unsigned)gx, (unsigned)gy), dim3(tx, ty), 0, s>>>(rows, cols, f);
    CUDA_LAUNCHED();
    return PN_OK;
}

/* The sum of v over a block of blockDim.x threads (a multiple of 32, at most 1024), in
 * a fixed order (so the same inputs give the same bits); every thread gets it. shared
 * holds 32 values of T.
 * Only warp 0 reads the warps' partials: when every warp read shared[lane], lane 0 of
 * warps 1.. read shared[0] while thread 0 wrote the total there with no barrier
 * between (a data race, though the value read was unused). The order of the adds is
 * unchanged: the same bits. */
template <class T>
__device__ T pn_block_sum(T v, T *shared)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    __syncthreads(); /* shared may still be read by a previous reduction */
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    if (warp == 0) {
        T t = lane < warps ? shared[lane] : (T)0;
        for (int o = 16; o > 0; o >>= 1) t += __shfl_down_sync(0xffffffffu, t, o);
        __syncwarp(); /* warp 0's reads of shared before lane 0 writes shared[0] */
        if (lane == 0) shared[0] = t;
    }
    __syncthreads();
    return shared[0];
}

/* The maximum of v over a block, fmaxf's way (NaN skipped), every thread gets it; only
 * warp 0 reads the partials, as in pn_block_sum. */
__device__ __forceinline__ float pn_block_max(float v, float *shared)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float t = lane < warps ? shared[lane] : -3.402823466e38f;
        for (int o = 16; o > 0; o >>= 1) t = fmaxf(t, __shfl_down_sync(0xffffffffu, t, o));
        __syncwarp();
        if (lane == 0) shared[0] = t;
    }
    __syncthreads();
    return shared[0];
}

/* Threads per block of a row kernel: enough for cols, a multiple of 32, at most
 * PN_ROW_MAX_THREADS. */
static inline int pn_row_threads(int cols)
{
    int t = 32;
    while (t < cols && t < PN_ROW_MAX_THREADS) t *= 2;
    return t;
}

/* The kernels of each file, for the table in cuda_backend.cu. */
int pn_cuda_copy(const pn_matrix *src, pn_matrix *dst);
int pn_cuda_scale(pn_matrix *m, float alpha);
int pn_cuda_axpy(float alpha, const pn_matrix *x, pn_matrix *y);
int pn_cuda_mul(const pn_matrix *a, const pn_matrix *b, float beta, pn_matrix *c);
int pn_cuda_act_forward(pn_act act, const pn_matrix *x, pn_matrix *y);
int pn_cuda_act_backward(pn_act act, const pn_matrix *x, const pn_matrix *y,
                         const pn_matrix *dy, float beta, pn_matrix *dx);
int pn_cuda_dropout_forward(const pn_matrix *x, float rate, uint64_t key, long row0,
                            pn_matrix *mask, pn_matrix *y);
int pn_cuda_add_row_vector(const pn_matrix *v, pn_matrix *m);

int pn_cuda_col_sums(const pn_matrix *m, float beta, pn_matrix *out);
int pn_cuda_sum_squares(const pn_matrix *m, double *out);
int pn_cuda_softmax_rows(const pn_matrix *x, float scale, int causal_period, pn_matrix *y);
int pn_cuda_softmax_backward(const pn_matrix *y, const pn_matrix *dy, float beta,
                             pn_matrix *dx);
int pn_cuda_xent_forward(const pn_matrix *probs, const int *labels, pn_matrix *loss,
                         double *correct);
int pn_cuda_xent_backward(const pn_matrix *probs, const int *labels, const pn_matrix *dloss,
                          float beta, pn_matrix *dlogits);
int pn_cuda_mse_forward(const pn_matrix *p, const pn_matrix *t, pn_matrix *loss);
int pn_cuda_mse_backward(const pn_matrix *p, const pn_matrix *t, const pn_matrix *dloss,
                         pn_matrix *dp, pn_matrix *dt);
int pn_cuda_layernorm_forward(const pn_matrix *x, const pn_matrix *gamma,
                              const pn_matrix *beta, float eps, pn_matrix *y, pn_matrix *mean,
                              pn_matrix *rstd);
int pn_cuda_layernorm_backward(const pn_matrix *x, const pn_matrix *gamma,
                               const pn_matrix *mean, const pn_matrix *rstd,
                               const pn_matrix *dy, pn_matrix *dx, pn_matrix *dgamma,
                               pn_matrix *dbeta);

int pn_cuda_gather_rows(const pn_matrix *table, const int *ids, pn_matrix *out);
int pn_cuda_scatter_add_rows(const pn_matrix *dout, const int *ids, pn_matrix *dtable);
int pn_cuda_seq_max_forward(const pn_matrix *x, int period, const int *lengths, pn_matrix *y,
                            int *arg);
int pn_cuda_seq_max_backward(const pn_matrix *dy, const int *arg, pn_matrix *dx);

int pn_cuda_optimizer_update_rows(const pn_update_hparams *hp, pn_matrix *w, const int *ids,
                                  pn_matrix *g, pn_matrix *slot1, pn_matrix *slot2);
int pn_cuda_optimizer_update(const pn_update_hparams *hp, pn_matrix *w, pn_matrix *g,
                             pn_matrix *slot1, pn_matrix *slot2);

int pn_cuda_gemm_bf16(bool trans_a, bool trans_b, float alpha, const pn_matrix *a,
                      const pn_matrix *b, float beta, pn_matrix *c);
int pn_cuda_round_bf16(pn_matrix *m);
int pn_cuda_to_bf16(const pn_matrix *src, uint16_t *dst);
int pn_cuda_from_bf16(const uint16_t *src, pn_matrix *dst);

#endif
