/* What the CUDA files that call cuBLAS share (cuda_backend.cu, cuda_bf16.cu): the
 * status check and the device's handle, bound to the compute stream. */
#ifndef PN_CUDA_BLAS_H
#define PN_CUDA_BLAS_H

#include <cublas_v2.h>

#include "math/cuda/cuda_common.h"

#define CUBLAS_CHECK(call)                                                              \
    do {                                                                                \
        cublasStatus_t s_ = (call);                                                     \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                \
            return pn_error_set(PN_ERR_DEVICE, "%s:%d: %s: cuBLAS status %d", __FILE__, \
                                __LINE__, #call, (int)s_);                              \
    } while (0)

/* The current device's cuBLAS handle, created on first use on its compute stream (so
 * a GEMM is ordered after the kernels before it, as every kernel is). */
int pn_cuda_blas_handle(cublasHandle_t *out);

#endif
