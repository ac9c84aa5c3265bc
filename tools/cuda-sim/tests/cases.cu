/* The stand-in's own cases (tools/cuda-sim/tests/run.sh): `cases NAME` runs one. "ok"
 * cases must finish with the right result; the others are kernels and calls with a
 * deliberate mistake that the stand-in must catch, each the way a GPU shows it where
 * it can (an error code), else with a message that names the place (run.sh checks it).
 * Exit 0 and "result right" when the computed result is right, 1 and "result wrong"
 * when not: a missing barrier or stream wait must give a wrong result. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            printf("%s: %s\n", #call, cudaGetErrorString(e_));                                     \
            exit(3);                                                                               \
        }                                                                                          \
    } while (0)

/* The sum of v over a block (blockDim.x a multiple of 32), with or without the barrier
 * between the warps' partial sums and their reading. */
template <bool barrier> __device__ float block_sum(float v, float *shared)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    if (barrier) __syncthreads();
    float t = 0.0f;
    if (warp == 0) {
        t = lane < warps ? shared[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) t += __shfl_down_sync(0xffffffffu, t, o);
    }
    return t;
}

template <bool barrier> __global__ void __launch_bounds__(1024) sums(const float *x, float *out)
{
    __shared__ float shared[32];
    float t = block_sum<barrier>(x[blockIdx.x * blockDim.x + threadIdx.x], shared);
    if (threadIdx.x == 0) out[blockIdx.x] = t;
}

/* The block maximum as pipenet's pn_block_max read before the review: every warp reads
 * the partials, lane 0 of warps 1.. reading shared[0] while thread 0 writes the total
 * there, with no barrier between. The value read is not used, so the result is right:
 * only ThreadSanitizer sees the race (the tsan toolkit). */
__global__ void __launch_bounds__(256) racy_max(const float *x, float *out)
{
    __shared__ float shared[32];
    float v = x[blockIdx.x * blockDim.x + threadIdx.x];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    float t = lane < warps ? shared[lane] : -1e30f;
    if (warp == 0)
        for (int o = 16; o > 0; o >>= 1) t = fmaxf(t, __shfl_down_sync(0xffffffffu, t, o));
    if (threadIdx.x == 0) shared[0] = t;
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = shared[0];
}

__global__ void __launch_bounds__(256) scale(float *x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}

__global__ void __launch_bounds__(256) copy(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}

__global__ void __launch_bounds__(128) bounded(float *x) { x[threadIdx.x] = 1.0f; }

struct view {
    float *data;
    int n;
};

__global__ void __launch_bounds__(256) fill_view(view v)
{
    if ((int)threadIdx.x < v.n) v.data[threadIdx.x] = 2.0f;
}

__global__ void __launch_bounds__(64) early_exit_barrier(float *x)
{
    if (threadIdx.x >= 16) return;
    __syncthreads();
    x[threadIdx.x] = 1.0f;
}

__global__ void __launch_bounds__(64) two_barriers(float *x)
{
    if (threadIdx.x % 2) {
        __syncthreads();
    } else {
        __syncthreads();
    }
    x[threadIdx.x] = 1.0f;
}

__global__ void __launch_bounds__(32) shuffle_exited(float *x)
{
    float v = (float)threadIdx.x;
    if (threadIdx.x >= 16) return;
    x[threadIdx.x] = __shfl_down_sync(0xffffffffu, v, 1);
}

__global__ void __launch_bounds__(32) shuffle_outside_mask(float *x)
{
    float v = (float)threadIdx.x;
    if (threadIdx.x < 16) x[threadIdx.x] = __shfl_down_sync(0x0000ffffu, v, 1);
}

__global__ void __launch_bounds__(256) read_past(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i % n] = x[i]; /* i reaches n: one element past the end */
}

static bool near(float a, float b) { return a == b || (a - b < 1e-5f && b - a < 1e-5f); }

static int report(bool right)
{
    printf("result %s\n", right ? "right" : "wrong");
    return right ? 0 : 1;
}

/* Block sums of 4 blocks of 256 ones: 256 each. */
template <bool barrier> static int run_sums()
{
    float host[1024], *x, *out, got[4];
    for (int i = 0; i < 1024; i++) host[i] = 1.0f;
    CHECK(cudaMalloc(&x, sizeof host));
    CHECK(cudaMalloc(&out, sizeof got));
    CHECK(cudaMemcpy(x, host, sizeof host, cudaMemcpyHostToDevice));
    sums<barrier><<<4, 256>>>(x, out);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(got, out, sizeof got, cudaMemcpyDeviceToHost));
    bool right = true;
    for (int b = 0; b < 4; b++) right &= near(got[b], 256.0f);
    return report(right);
}

/* x scaled on stream a, copied on stream b: with the event, b waits for a. */
static int run_streams(bool wait)
{
    const int n = 1024;
    float host[n], *x, *y;
    for (int i = 0; i < n; i++) host[i] = (float)i;
    cudaStream_t a, b;
    cudaEvent_t scaled;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&scaled, cudaEventDisableTiming));
    CHECK(cudaMalloc(&x, sizeof host));
    CHECK(cudaMalloc(&y, sizeof host));
    CHECK(cudaMemcpyAsync(x, host, sizeof host, cudaMemcpyHostToDevice, a));
    scale<<<n / 256, 256, 0, a>>>(x, 2.0f, n);
    CHECK(cudaEventRecord(scaled, a));
    if (wait) CHECK(cudaStreamWaitEvent(b, scaled, 0));
    copy<<<n / 256, 256, 0, b>>>(x, y, n);
    CHECK(cudaMemcpyAsync(host, y, sizeof host, cudaMemcpyDeviceToHost, b));
    CHECK(cudaStreamSynchronize(b));
    bool right = true;
    for (int i = 0; i < n; i++) right &= host[i] == 2.0f * i;
    return report(right);
}

/* cublasGemmEx with bf16 A and B (column-major, lda and ldb past their rows) into fp32
 * C, beta 1: every value is a bf16 whose low significand bits matter (1 + 2^-7 and
 * friends), so reading A or B as floats, a wrong ld or a rounding of C shows; the
 * sums are exact in float, so the result must be exact. */
static int run_gemm_ex()
{
    const int m = 2, n = 3, k = 4, lda = 3, ldb = 5, ldc = 2;
    uint16_t a[lda * k], b[ldb * n];
    float af[m * k], bf[k * n], c[ldc * n], want[m * n];
    for (int j = 0; j < k; j++)
        for (int i = 0; i < lda; i++) {
            a[j * lda + i] = i < m ? (uint16_t)(0x3f81 + i + 2 * j) : 0x7fc0; /* NaN padding */
            uint32_t bits = (uint32_t)a[j * lda + i] << 16;
            if (i < m) memcpy(&af[j * m + i], &bits, 4);
        }
    for (int j = 0; j < n; j++)
        for (int i = 0; i < ldb; i++) {
            b[j * ldb + i] = i < k ? (uint16_t)(0xbf83 - i - j) : 0x7fc0;
            uint32_t bits = (uint32_t)b[j * ldb + i] << 16;
            if (i < k) memcpy(&bf[j * k + i], &bits, 4);
        }
    for (int x = 0; x < ldc * n; x++) c[x] = 0.25f * (float)x;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double sum = 0;
            for (int l = 0; l < k; l++) sum += (double)af[l * m + i] * bf[j * k + l];
            want[j * m + i] = (float)(0.5 * sum + c[j * ldc + i]);
        }
    void *da, *db;
    float *dc;
    CHECK(cudaMalloc(&da, sizeof a));
    CHECK(cudaMalloc(&db, sizeof b));
    CHECK(cudaMalloc(&dc, sizeof c));
    CHECK(cudaMemcpy(da, a, sizeof a, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, b, sizeof b, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dc, c, sizeof c, cudaMemcpyHostToDevice));
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 3;
    float alpha = 0.5f, beta = 1.0f;
    cublasStatus_t half = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, da,
                                       CUDA_R_16F, lda, db, CUDA_R_16F, ldb, &beta, dc,
                                       CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    printf("fp16 operands: %s\n", cublasGetStatusName(half));
    cublasStatus_t st = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, da,
                                     CUDA_R_16BF, lda, db, CUDA_R_16BF, ldb, &beta, dc,
                                     CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    printf("bf16 operands: %s\n", cublasGetStatusName(st));
    CHECK(cudaMemcpy(c, dc, sizeof c, cudaMemcpyDeviceToHost));
    bool right = half == CUBLAS_STATUS_NOT_SUPPORTED && st == CUBLAS_STATUS_SUCCESS;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) right &= c[j * ldc + i] == want[j * m + i];
    return report(right);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: cases NAME\n");
        return 2;
    }
    const char *c = argv[1];
    setvbuf(stdout, NULL, _IONBF, 0);
    float *d;
    CHECK(cudaSetDevice(0));
    CHECK(cudaMalloc(&d, 1024 * sizeof(float)));
    if (!strcmp(c, "sums")) return run_sums<true>();
    if (!strcmp(c, "removed-barrier")) return run_sums<false>();
    if (!strcmp(c, "streams")) return run_streams(true);
    if (!strcmp(c, "missing-stream-wait")) return run_streams(false);
    if (!strcmp(c, "gemm-ex-bf16")) return run_gemm_ex();
    if (!strcmp(c, "racy-max")) {
        float host[1024], got[4];
        for (int i = 0; i < 1024; i++) host[i] = (float)(i % 300);
        float *out;
        CHECK(cudaMalloc(&out, sizeof got));
        CHECK(cudaMemcpy(d, host, sizeof host, cudaMemcpyHostToDevice));
        racy_max<<<4, 256>>>(d, out);
        CHECK(cudaMemcpy(got, out, sizeof got, cudaMemcpyDeviceToHost));
        return report(got[0] == 255.0f && got[1] == 299.0f);
    }
    if (!strcmp(c, "event-not-ready")) {
        cudaEvent_t e;
        CHECK(cudaEventCreate(&e));
        scale<<<4, 256>>>(d, 1.0f, 1024);
        CHECK(cudaEventRecord(e, 0));
        cudaError_t first = cudaEventQuery(e);
        printf("first query: %s\n", cudaGetErrorString(first));
        cudaGetLastError();
        while (cudaEventQuery(e) == cudaErrorNotReady) {}
        printf("then: %s\n", cudaGetErrorString(cudaEventQuery(e)));
        return first == cudaErrorNotReady ? 0 : 1;
    }
    if (!strcmp(c, "host-pointer-arg")) {
        static float host[1024];
        copy<<<4, 256>>>(host, d, 1024);
    } else if (!strcmp(c, "host-pointer-in-struct")) {
        static float host[256];
        fill_view<<<1, 256>>>(view{host, 256});
    } else if (!strcmp(c, "freed-pointer-arg")) {
        float *gone;
        CHECK(cudaMalloc(&gone, 1024));
        CHECK(cudaFree(gone));
        scale<<<1, 256>>>(gone, 2.0f, 256);
    } else if (!strcmp(c, "divergent-barrier")) {
        early_exit_barrier<<<1, 64>>>(d);
    } else if (!strcmp(c, "barrier-elsewhere")) {
        two_barriers<<<1, 64>>>(d);
    } else if (!strcmp(c, "shuffle-exited-lane")) {
        shuffle_exited<<<1, 32>>>(d);
    } else if (!strcmp(c, "shuffle-outside-mask")) {
        shuffle_outside_mask<<<1, 32>>>(d);
    } else if (!strcmp(c, "host-reads-device")) {
        printf("%g\n", d[0]);
    } else if (!strcmp(c, "kernel-reads-past-end")) {
        float *e;
        CHECK(cudaMalloc(&e, 1024 * sizeof(float)));
        read_past<<<5, 256>>>(e, d, 1024); /* block 4 reads e[1024..1279] */
    } else if (!strcmp(c, "grid-zero")) {
        scale<<<0, 256>>>(d, 1.0f, 1024);
        printf("launch: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 0;
    } else if (!strcmp(c, "block-too-big")) {
        scale<<<1, 1025>>>(d, 1.0f, 1024);
        printf("launch: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 0;
    } else if (!strcmp(c, "grid-y-too-big")) {
        scale<<<dim3(1, 65536), 256>>>(d, 1.0f, 1024);
        printf("launch: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 0;
    } else if (!strcmp(c, "over-launch-bounds")) {
        bounded<<<1, 256>>>(d);
        printf("launch: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 0;
    } else if (!strcmp(c, "copy-past-end")) {
        float host[1025];
        printf("copy: %s\n",
               cudaGetErrorString(cudaMemcpy(host, d, sizeof host, cudaMemcpyDeviceToHost)));
        return 0;
    } else if (!strcmp(c, "copy-wrong-kind")) {
        float host[16];
        printf("copy: %s\n",
               cudaGetErrorString(cudaMemcpy(host, d, sizeof host, cudaMemcpyHostToDevice)));
        return 0;
    } else if (!strcmp(c, "error-kept")) {
        float *huge;
        cudaError_t e = cudaMalloc(&huge, (size_t)1 << 40);
        printf("malloc: %s; ", cudaGetErrorString(e));
        scale<<<4, 256>>>(d, 1.0f, 1024);
        printf("launch, then cudaGetLastError: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 0;
    } else {
        fprintf(stderr, "cases: no case '%s'\n", c);
        return 2;
    }
    CHECK(cudaDeviceSynchronize());
    printf("not caught\n");
    return 0;
}
