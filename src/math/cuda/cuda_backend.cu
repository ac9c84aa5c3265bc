/* The CUDA backend's table. This step wires the seam: device memory for the pool,
 * host<->device copies, cuBLAS GEMM and a fill kernel. Slots left empty are reported
 * as unsupported on cuda by the dispatch (math/ops.c) until their kernels land. */
extern "C" {
#include "base/error.h"
#include "math/backend.h"
}

#include <cublas_v2.h>
#include <cuda_runtime.h>

#define CUDA_CHECK(call)                                                                  \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess)                                                            \
            return pn_error_set(PN_ERR_DEVICE, "%s:%d: %s: %s", __FILE__, __LINE__, #call, \
                                cudaGetErrorString(e_));                                  \
    } while (0)

#define CUBLAS_CHECK(call)                                                              \
    do {                                                                                \
        cublasStatus_t s_ = (call);                                                     \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                \
            return pn_error_set(PN_ERR_DEVICE, "%s:%d: %s: cuBLAS status %d", __FILE__, \
                                __LINE__, #call, (int)s_);                              \
    } while (0)

static cublasHandle_t blas_handles[PN_MAX_CUDA_DEVICES];

static int blas_handle(cublasHandle_t *out)
{
    int dev;
    CUDA_CHECK(cudaGetDevice(&dev));
    if (!blas_handles[dev]) CUBLAS_CHECK(cublasCreate(&blas_handles[dev]));
    *out = blas_handles[dev];
    return PN_OK;
}

extern "C" int pn_cuda_device_count(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

static void *cuda_alloc(int device_index, size_t bytes)
{
    void *p = NULL;
    if (cudaSetDevice(device_index) != cudaSuccess) return NULL;
    return cudaMalloc(&p, bytes) == cudaSuccess ? p : NULL;
}

static void cuda_free(int device_index, void *ptr)
{
    cudaSetDevice(device_index);
    cudaFree(ptr);
}

static int cuda_zero(void *ptr, size_t bytes)
{
    CUDA_CHECK(cudaMemset(ptr, 0, bytes));
    return PN_OK;
}

static int cuda_copy_from_host(void *dst, const void *src, size_t bytes)
{
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    return PN_OK;
}

static int cuda_copy_to_host(void *dst, const void *src, size_t bytes)
{
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    return PN_OK;
}

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands. */
static int cuda_gemm(bool trans_a, bool trans_b, float alpha, const pn_matrix *a,
                     const pn_matrix *b, float beta, pn_matrix *c)
{
    cublasHandle_t h;
    PN_TRY(blas_handle(&h));
    int k = trans_a ? a->rows : a->cols;
    if (c->rows == 0 || c->cols == 0) return PN_OK;
    CUBLAS_CHECK(cublasSgemm(h, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                             trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, c->cols, c->rows, k, &alpha,
                             b->data, b->ld, a->data, a->ld, &beta, c->data, c->ld));
    return PN_OK;
}

__global__ static void fill_kernel(float *data, int rows, int cols, int ld, float value)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (long)rows * cols) data[(i / cols) * ld + i % cols] = value;
}

static int cuda_fill(pn_matrix *m, float value)
{
    long n = (long)m->rows * m->cols;
    if (n == 0) return PN_OK;
    int threads = 256;
    fill_kernel<<<(unsigned)((n + threads - 1) / threads), threads>>>(m->data, m->rows, m->cols,
                                                                     m->ld, value);
    CUDA_CHECK(cudaGetLastError());
    return PN_OK;
}

extern "C" const pn_backend pn_cuda_backend = {
    /* .name = */ "cuda",
    /* .alloc = */ cuda_alloc,
    /* .free = */ cuda_free,
    /* .zero = */ cuda_zero,
    /* .copy_from_host = */ cuda_copy_from_host,
    /* .copy_to_host = */ cuda_copy_to_host,
    /* .gemm = */ cuda_gemm,
    /* .fill = */ cuda_fill,
    /* every later slot: not yet on cuda */
};
