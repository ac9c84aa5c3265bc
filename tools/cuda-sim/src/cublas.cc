/* libcublas.so of pipenet's CUDA stand-in (tools/cuda-sim): the cuBLAS calls pipenet's
 * CUDA backend makes, queued on the handle's stream and run there by OpenBLAS's
 * column-major SGEMM (GemmEx's bf16 operands widened to float first: exact, and the
 * product of two bf16 values is exact in float, so that is bf16 inputs with fp32
 * accumulation, what cuBLAS computes up to its order of adds). As cuBLAS: scalars are read from the host when the call is made
 * (pointer mode host), beta 0 overwrites C without reading it (NaN in C included), a
 * leading dimension too small for its operand is CUBLAS_STATUS_INVALID_VALUE, and every
 * matrix must be device memory of the handle's GPU. */
#include <cblas.h>
#include <stdio.h>
#include <string.h>

#include "cublas_v2.h"
#include "cuda_sim_api.h"

struct cublasContext {
    int device;
    cudaStream_t stream;
    cublasMath_t math;
};

extern "C" cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
    int dev;
    if (cudaGetDevice(&dev) != cudaSuccess) return CUBLAS_STATUS_NOT_INITIALIZED;
    *handle = new cublasContext{dev, 0, CUBLAS_DEFAULT_MATH};
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream)
{
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    int dev = cuda_sim_stream_device(stream);
    if (stream && dev != handle->device) {
        cuda_sim_warn("cublasSetStream: the stream belongs to GPU %d, the handle to GPU %d", dev,
                      handle->device);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t *stream)
{
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    *stream = handle->stream;
    return CUBLAS_STATUS_SUCCESS;
}

/* Tensor-op and TF32 modes round inputs on a GPU: here every mode is full fp32. */
extern "C" cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode)
{
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    return mode == CUBLAS_POINTER_MODE_HOST ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
}

struct gemm {
    CBLAS_TRANSPOSE ta, tb;
    int m, n, k, lda, ldb, ldc;
    float alpha, beta;
    const void *a, *b;
    float *c;
    bool bf16; /* a and b hold bf16 values (uint16_t, the top half of a float) */
};

/* The rows x cols column-major bf16 operand p (leading dimension ld) as floats,
 * dense (ld = rows): exact. */
static float *widened(const void *p, int rows, int cols, int ld)
{
    float *out = new float[(size_t)rows * (size_t)cols];
    for (int j = 0; j < cols; j++)
        for (int i = 0; i < rows; i++) {
            uint32_t bits = (uint32_t)((const uint16_t *)p)[(size_t)j * ld + i] << 16;
            memcpy(&out[(size_t)j * rows + i], &bits, sizeof bits);
        }
    return out;
}

static void run_gemm(void *ctx)
{
    gemm *g = (gemm *)ctx;
    if (g->beta == 0.0f) /* beta 0: C is written, never read */
        for (int j = 0; j < g->n; j++)
            memset(g->c + (size_t)j * g->ldc, 0, (size_t)g->m * sizeof(float));
    if (g->k == 0) {
        if (g->beta != 0.0f && g->beta != 1.0f)
            for (int j = 0; j < g->n; j++) cblas_sscal(g->m, g->beta, g->c + (size_t)j * g->ldc, 1);
        return;
    }
    const float *a = (const float *)g->a, *b = (const float *)g->b;
    float *wa = NULL, *wb = NULL;
    int lda = g->lda, ldb = g->ldb;
    if (g->bf16) { /* read now, when the stream runs the call, as a GPU would */
        int a_rows = g->ta == CblasNoTrans ? g->m : g->k, b_rows = g->tb == CblasNoTrans ? g->k : g->n;
        a = wa = widened(g->a, a_rows, g->ta == CblasNoTrans ? g->k : g->m, g->lda);
        b = wb = widened(g->b, b_rows, g->tb == CblasNoTrans ? g->n : g->k, g->ldb);
        lda = a_rows, ldb = b_rows;
    }
    cblas_sgemm(CblasColMajor, g->ta, g->tb, g->m, g->n, g->k, g->alpha, a, lda, b, ldb, g->beta,
                g->c, g->ldc);
    delete[] wa;
    delete[] wb;
}

static void delete_gemm(void *ctx) { delete (gemm *)ctx; }

/* A column-major rows x cols operand with leading dimension ld: in one live allocation
 * of the handle's GPU. */
static bool operand_ok(const cublasContext *h, const char *call, const char *name, const void *p,
                       int rows, int cols, int ld, size_t elem)
{
    if (rows == 0 || cols == 0) return true;
    size_t bytes = ((size_t)(cols - 1) * (size_t)ld + (size_t)rows) * elem;
    int live = 0, dev = cuda_sim_device_of(p, bytes, &live);
    if (dev == h->device && live) return true;
    cuda_sim_warn("%s: %s (%p, %d x %d, ld %d) is %s", call, name, p, rows, cols, ld,
                  dev < 0            ? "not device memory"
                  : dev != h->device ? "another GPU's memory"
                                     : "not inside one live allocation");
    return false;
}

/* Checks and queues one GEMM (Sgemm, or GemmEx with element size elem of A and B). */
static cublasStatus_t queue_gemm(cublasHandle_t h, const char *call, cublasOperation_t transa,
                                 cublasOperation_t transb, int m, int n, int k, const float *alpha,
                                 const void *A, int lda, const void *B, int ldb, const float *beta,
                                 float *C, int ldc, bool bf16)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
    int a_rows = transa == CUBLAS_OP_N ? m : k, a_cols = transa == CUBLAS_OP_N ? k : m;
    int b_rows = transb == CUBLAS_OP_N ? k : n, b_cols = transb == CUBLAS_OP_N ? n : k;
    if (lda < (a_rows > 1 ? a_rows : 1) || ldb < (b_rows > 1 ? b_rows : 1) || ldc < (m > 1 ? m : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
    if (!alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
    size_t elem = bf16 ? sizeof(uint16_t) : sizeof(float);
    if (!operand_ok(h, call, "A", A, a_rows, a_cols, lda, elem) ||
        !operand_ok(h, call, "B", B, b_rows, b_cols, ldb, elem) ||
        !operand_ok(h, call, "C", C, m, n, ldc, sizeof(float)))
        return CUBLAS_STATUS_INVALID_VALUE;
    gemm *g = new gemm{transa == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
                       transb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
                       m,
                       n,
                       k,
                       lda,
                       ldb,
                       ldc,
                       *alpha,
                       *beta,
                       A,
                       B,
                       C,
                       bf16};
    if (cuda_sim_enqueue_host(h->stream, run_gemm, delete_gemm, g, call) != cudaSuccess)
        return CUBLAS_STATUS_EXECUTION_FAILED;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float *alpha, const float *A, int lda,
                                         const float *B, int ldb, const float *beta, float *C,
                                         int ldc)
{
    return queue_gemm(h, "cublasSgemm", transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C,
                      ldc, false);
}

/* What cuBLAS documents for these types: fp32 C with bf16 or fp32 A and B under a
 * 32F compute type takes float scalars. Other combinations exist on GPUs but not
 * here: a loud NOT_SUPPORTED rather than a GEMM in the wrong precision. */
extern "C" cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t transa,
                                       cublasOperation_t transb, int m, int n, int k,
                                       const void *alpha, const void *A, cudaDataType Atype,
                                       int lda, const void *B, cudaDataType Btype, int ldb,
                                       const void *beta, void *C, cudaDataType Ctype, int ldc,
                                       cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    bool types = Atype == Btype && (Atype == CUDA_R_16BF || Atype == CUDA_R_32F) &&
                 Ctype == CUDA_R_32F;
    bool compute = computeType == CUBLAS_COMPUTE_32F || computeType == CUBLAS_COMPUTE_32F_PEDANTIC;
    if (!types || !compute) {
        cuda_sim_warn("cublasGemmEx: types A %d, B %d, C %d with compute type %d: the stand-in "
                      "runs bf16 or fp32 A and B into fp32 C under CUBLAS_COMPUTE_32F only",
                      (int)Atype, (int)Btype, (int)Ctype, (int)computeType);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    /* algo picks among cuBLAS's kernels, one here */
    return queue_gemm(h, "cublasGemmEx", transa, transb, m, n, k, (const float *)alpha, A, lda, B,
                      ldb, (const float *)beta, (float *)C, ldc, Atype == CUDA_R_16BF);
}

extern "C" const char *cublasGetStatusString(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    default: return "an internal operation failed";
    }
}

extern "C" const char *cublasGetStatusName(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_INTERNAL_ERROR";
    }
}
