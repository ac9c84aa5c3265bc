/* The CUDA backend's bfloat16 slots: the conversions between float views (any ld)
 * and dense bf16 arrays, as per-element kernels running the CPU's own text
 * (math/bf16_math.h: the same bits, NaN and ties included), and the GEMM whose
 * operands enter as bf16 with fp32 accumulation: a and b are narrowed into the
 * device's operand block, then cuBLAS GemmEx multiplies them (bf16 inputs, fp32
 * output and compute) into c. Not yet run on a GPU, only on the stand-in
 * (tools/cuda-sim): scripts/gpu_checks.sh runs its cases on the next one. */
#include "math/cuda/cuda_blas.h"
#include "math/cuda/cuda_common.h"
#include "math/cuda/cuda_exports.h"

extern "C" {
#include "math/bf16_math.h"
}

struct round_op {
    pn_matrix m;
    __device__ void operator()(long i, long j) const { pn_at(m, i, j) = pn_bf16_round(pn_at(m, i, j)); }
};

struct to_op {
    pn_matrix src;
    uint16_t *dst;
    __device__ void operator()(long i, long j) const
    {
        dst[i * src.cols + j] = pn_bf16_from_float(pn_at(src, i, j));
    }
};

struct from_op {
    const uint16_t *src;
    pn_matrix dst;
    __device__ void operator()(long i, long j) const
    {
        pn_at(dst, i, j) = pn_bf16_to_float(src[i * dst.cols + j]);
    }
};

int pn_cuda_round_bf16(pn_matrix *m) { return pn_map2d(m->rows, m->cols, round_op{*m}); }

int pn_cuda_to_bf16(const pn_matrix *src, uint16_t *dst)
{
    return pn_map2d(src->rows, src->cols, to_op{*src, dst});
}

int pn_cuda_from_bf16(const uint16_t *src, pn_matrix *dst)
{
    return pn_map2d(dst->rows, dst->cols, from_op{src, *dst});
}

/* Bytes of a dense bf16 copy of m, rounded up to 256 so that the second operand
 * starts where cudaMalloc would put a block (what GemmEx's fastest kernels want). */
static size_t operand_bytes(const pn_matrix *m)
{
    size_t bytes = pn_matrix_count(*m) * sizeof(uint16_t);
    return (bytes + 255) & ~(size_t)255;
}

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, as cuda_gemm. The
 * conversions, the GEMM and a later growth of the block all run on the compute stream
 * (the handle's), in that order: nothing waits, and the block is never reused before
 * the GEMM that reads it has run. */
int pn_cuda_gemm_bf16(bool trans_a, bool trans_b, float alpha, const pn_matrix *a,
                      const pn_matrix *b, float beta, pn_matrix *c)
{
    int k = trans_a ? a->rows : a->cols;
    if (c->rows == 0 || c->cols == 0) return PN_OK;
    if (k == 0) /* nothing to round: C = beta C, the fp32 GEMM's way */
        return pn_cuda_backend.gemm(trans_a, trans_b, alpha, a, b, beta, c);
    cublasHandle_t h;
    PN_TRY(pn_cuda_blas_handle(&h));
    size_t a_bytes = operand_bytes(a);
    char *block;
    PN_TRY(pn_cuda_operand_scratch(a_bytes + operand_bytes(b), (void **)&block));
    uint16_t *a16 = (uint16_t *)block, *b16 = (uint16_t *)(block + a_bytes);
    PN_TRY(pn_cuda_to_bf16(a, a16));
    PN_TRY(pn_cuda_to_bf16(b, b16));
    CUBLAS_CHECK(cublasGemmEx(h, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                              trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, c->cols, c->rows, k, &alpha,
                              b16, CUDA_R_16BF, b->cols, a16, CUDA_R_16BF, a->cols, &beta,
                              c->data, CUDA_R_32F, c->ld, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
    return PN_OK;
}
