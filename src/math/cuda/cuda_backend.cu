/* The CUDA backend's table and what its kernels share: device memory for the pool,
 * host<->device copies, the one compute stream per device (so per rank), the fault
 * record and scratch block of cuda_common.h, cuBLAS GEMM and fill. The kernels of
 * the other slots are in cuda_elementwise.cu, cuda_rowwise.cu, cuda_index.cu,
 * cuda_optimizer.cu and cuda_bf16.cu. Every slot is filled.
 *
 * Status: compiled for sm_80 and sm_90 on machines without a GPU; every slot but the
 * bf16 ones has run on an H200 (docs/running.md, GPU runs: scripts/gpu_checks.sh on
 * 2026-11-25 and -26). tests/test_backend_ops.c and tests/test_cuda.c compare every
 * slot with the CPU's where a GPU is visible: run them first on one. */
#include "math/cuda/cuda_blas.h"
#include "math/cuda/cuda_common.h"
#include "math/cuda/cuda_exports.h"

/* Per device: the stream, the cuBLAS handle bound to it, the fault record, the
 * scratch block and the bf16 GEMM's operand block. */
typedef struct device_state {
    cudaStream_t stream;
    cublasHandle_t blas;
    unsigned long long *fault;
    void *scratch;
    size_t scratch_bytes;
    void *operands;
    size_t operand_bytes;
} device_state;

static device_state devices[PN_MAX_CUDA_DEVICES];

static int current(device_state **out)
{
    int dev;
    CUDA_CHECK(cudaGetDevice(&dev));
    if (dev < 0 || dev >= PN_MAX_CUDA_DEVICES)
        return pn_error_set(PN_ERR_DEVICE, "CUDA device %d is past the %d this build handles",
                            dev, PN_MAX_CUDA_DEVICES);
    device_state *d = &devices[dev];
    if (!d->stream) CUDA_CHECK(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking));
    *out = d;
    return PN_OK;
}

int pn_cuda_stream(cudaStream_t *out)
{
    device_state *d;
    PN_TRY(current(&d));
    *out = d->stream;
    return PN_OK;
}

int pn_cuda_sync(void)
{
    device_state *d;
    PN_TRY(current(&d));
    CUDA_CHECK(cudaStreamSynchronize(d->stream));
    return PN_OK;
}

/* The fault record and the scratch block are used by the compute stream only, and
 * first asked for during the first step, when NCCL kernels of other streams may be
 * in flight: they are allocated and freed in stream order (cudaMallocAsync and
 * cudaFreeAsync on the compute stream, CUDA 11.2+, the default memory pool of the
 * device), which waits for nothing. cudaMalloc and cudaFree synchronize the whole
 * device (the stream-ordered allocator's documentation), so the host sat in them
 * until every stream's work was done, where the stall watchdog cannot run. */
int pn_cuda_fault_ptr(unsigned long long **out)
{
    device_state *d;
    PN_TRY(current(&d));
    if (!d->fault) {
        CUDA_CHECK(cudaMallocAsync((void **)&d->fault, sizeof *d->fault, d->stream));
        CUDA_CHECK(cudaMemsetAsync(d->fault, 0xff, sizeof *d->fault, d->stream));
    }
    *out = d->fault;
    return PN_OK;
}

int pn_cuda_fault_take(bool *hit, int *row, int *value)
{
    device_state *d;
    unsigned long long *f, key = 0;
    PN_TRY(pn_cuda_fault_ptr(&f));
    PN_TRY(current(&d));
    CUDA_CHECK(cudaMemcpyAsync(&key, f, sizeof key, cudaMemcpyDeviceToHost, d->stream));
    CUDA_CHECK(cudaStreamSynchronize(d->stream));
    *hit = key != ~0ULL;
    if (*hit) {
        *row = (int)(key >> 32);
        *value = (int)(unsigned)(key & 0xffffffffu);
        CUDA_CHECK(cudaMemsetAsync(f, 0xff, sizeof *f, d->stream));
    }
    return PN_OK;
}

/* *block grown to at least bytes, on the compute stream: the old block is freed once
 * the kernels queued before that use it are done, the new one is there for those
 * queued after; neither call waits. */
static int grow(device_state *d, void **block, size_t *have, size_t bytes)
{
    if (*have < bytes) {
        if (*block) {
            CUDA_CHECK(cudaFreeAsync(*block, d->stream));
            *block = NULL, *have = 0;
        }
        CUDA_CHECK(cudaMallocAsync(block, bytes, d->stream));
        *have = bytes;
    }
    return PN_OK;
}

int pn_cuda_scratch(size_t bytes, void **out)
{
    device_state *d;
    PN_TRY(current(&d));
    PN_TRY(grow(d, &d->scratch, &d->scratch_bytes, bytes));
    *out = d->scratch;
    return PN_OK;
}

int pn_cuda_operand_scratch(size_t bytes, void **out)
{
    device_state *d;
    PN_TRY(current(&d));
    PN_TRY(grow(d, &d->operands, &d->operand_bytes, bytes));
    *out = d->operands;
    return PN_OK;
}

/* The compute stream of the current device, for the NCCL transport (src/mpi), which
 * orders its communication streams after it with events. */
int pn_cuda_compute_stream(void **out)
{
    cudaStream_t s;
    PN_TRY(pn_cuda_stream(&s));
    *out = (void *)s;
    return PN_OK;
}

int pn_cuda_device_count(void)
{
    int n = 0; /* no driver or no device: none (cudaErrorNoDevice is not kept) */
    return pn_cuda_forget(cudaGetDeviceCount(&n)) == cudaSuccess ? n : 0;
}

/* GPU index's PCI domain, bus and device packed into one non-negative int (domain
 * 15 bits, bus 8, device 5): what two processes that see the GPU under different
 * indices share; -1 when CUDA cannot say. On an H200 it told two ranks of the one
 * GPU alike (tests/test_cuda_ranks.sh, 2026-11-26). */
int pn_cuda_pci_id(int index)
{
    int domain = 0, bus = 0, device = 0;
    if (pn_cuda_forget(cudaDeviceGetAttribute(&domain, cudaDevAttrPciDomainId, index)) !=
            cudaSuccess ||
        pn_cuda_forget(cudaDeviceGetAttribute(&bus, cudaDevAttrPciBusId, index)) != cudaSuccess ||
        pn_cuda_forget(cudaDeviceGetAttribute(&device, cudaDevAttrPciDeviceId, index)) !=
            cudaSuccess)
        return -1;
    return (domain & 0x7fff) << 13 | (bus & 0xff) << 5 | (device & 0x1f);
}

int pn_cuda_set_device(int index)
{
    CUDA_CHECK(cudaSetDevice(index));
    return PN_OK;
}

/* The pool's blocks. cudaMalloc'd memory is ready for any stream (the pool's blocks
 * are used by the compute stream and the NCCL transport's). cudaFree waits for the
 * whole device: the pool calls it only from pn_pool_trim (never during a run: the
 * library does not call it on a device pool) and from pn_buffer_release when the host
 * has no memory left for a free-list node (the run is failing then). The pool still
 * grows with cudaMalloc during the first step (layers' scratch), which the guide also
 * says may synchronize the device: to watch for on a GPU with NCCL links. */
static void *cuda_alloc(int device_index, size_t bytes)
{
    void *p = NULL; /* a failure is the pool's "cannot allocate", not a later launch's */
    if (pn_cuda_forget(cudaSetDevice(device_index)) != cudaSuccess) return NULL;
    return pn_cuda_forget(cudaMalloc(&p, bytes)) == cudaSuccess ? p : NULL;
}

static void cuda_free(int device_index, void *ptr)
{
    pn_cuda_forget(cudaSetDevice(device_index));
    pn_cuda_forget(cudaFree(ptr));
}

static int cuda_zero(void *ptr, size_t bytes)
{
    cudaStream_t s;
    PN_TRY(pn_cuda_stream(&s));
    CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, s));
    return PN_OK;
}

/* Copies run on the stream, after the kernels that produce or read the memory, and
 * return once done: the host side may be reused at once. */
static int cuda_copy_from_host(void *dst, const void *src, size_t bytes)
{
    cudaStream_t s;
    PN_TRY(pn_cuda_stream(&s));
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    return PN_OK;
}

static int cuda_copy_to_host(void *dst, const void *src, size_t bytes)
{
    cudaStream_t s;
    PN_TRY(pn_cuda_stream(&s));
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    return PN_OK;
}

int pn_cuda_blas_handle(cublasHandle_t *out)
{
    device_state *d;
    PN_TRY(current(&d));
    if (!d->blas) {
        CUBLAS_CHECK(cublasCreate(&d->blas));
        CUBLAS_CHECK(cublasSetStream(d->blas, d->stream));
    }
    *out = d->blas;
    return PN_OK;
}

struct fill_op {
    pn_matrix m;
    float value;
    __device__ void operator()(long i, long j) const { pn_at(m, i, j) = value; }
};

static int cuda_fill(pn_matrix *m, float value)
{
    return pn_map2d(m->rows, m->cols, fill_op{*m, value});
}

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
 * cuBLAS's default math mode: full fp32, no TF32. */
static int cuda_gemm(bool trans_a, bool trans_b, float alpha, const pn_matrix *a,
                     const pn_matrix *b, float beta, pn_matrix *c)
{
    cublasHandle_t h;
    PN_TRY(pn_cuda_blas_handle(&h));
    int k = trans_a ? a->rows : a->cols;
    if (c->rows == 0 || c->cols == 0) return PN_OK;
    if (k == 0) { /* as the CPU's: C = beta C, and exactly 0 when beta is 0 (NaN too) */
        if (beta == 0.0f) return cuda_fill(c, 0.0f);
        return beta == 1.0f ? PN_OK : pn_cuda_scale(c, beta);
    }
    CUBLAS_CHECK(cublasSgemm(h, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                             trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, c->cols, c->rows, k, &alpha,
                             b->data, b->ld, a->data, a->ld, &beta, c->data, c->ld));
    return PN_OK;
}

const pn_backend pn_cuda_backend = {
    /* .name = */ "cuda",
    /* .memory = */ {cuda_alloc, cuda_free, cuda_zero, cuda_copy_from_host,
                     cuda_copy_to_host},
    /* .gemm = */ cuda_gemm,
    /* .gemm_bf16 = */ pn_cuda_gemm_bf16,
    /* .round_bf16 = */ pn_cuda_round_bf16,
    /* .to_bf16 = */ pn_cuda_to_bf16,
    /* .from_bf16 = */ pn_cuda_from_bf16,
    /* .fill = */ cuda_fill,
    /* .copy = */ pn_cuda_copy,
    /* .scale = */ pn_cuda_scale,
    /* .axpy = */ pn_cuda_axpy,
    /* .mul = */ pn_cuda_mul,
    /* .act_forward = */ pn_cuda_act_forward,
    /* .act_backward = */ pn_cuda_act_backward,
    /* .dropout_forward = */ pn_cuda_dropout_forward,
    /* .add_row_vector = */ pn_cuda_add_row_vector,
    /* .col_sums = */ pn_cuda_col_sums,
    /* .sum_squares = */ pn_cuda_sum_squares,
    /* .softmax_rows = */ pn_cuda_softmax_rows,
    /* .xent_forward = */ pn_cuda_xent_forward,
    /* .xent_backward = */ pn_cuda_xent_backward,
    /* .mse_forward = */ pn_cuda_mse_forward,
    /* .mse_backward = */ pn_cuda_mse_backward,
    /* .layernorm_forward = */ pn_cuda_layernorm_forward,
    /* .layernorm_backward = */ pn_cuda_layernorm_backward,
    /* .gather_rows = */ pn_cuda_gather_rows,
    /* .scatter_add_rows = */ pn_cuda_scatter_add_rows,
    /* .seq_max_forward = */ pn_cuda_seq_max_forward,
    /* .seq_max_backward = */ pn_cuda_seq_max_backward,
    /* .optimizer_update = */ pn_cuda_optimizer_update,
    /* .optimizer_update_rows = */ pn_cuda_optimizer_update_rows,
};
