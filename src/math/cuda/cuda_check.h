/* CUDA_CHECK(call): a CUDA runtime call whose failure returns PN_ERR_DEVICE naming the
 * call, file and line. For C and CUDA files alike: the CUDA backend and the NCCL
 * transport (src/mpi) both check their calls with it. */
#ifndef PN_CUDA_CHECK_H
#define PN_CUDA_CHECK_H

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "base/error.h"
#ifdef __cplusplus
}
#endif

#define CUDA_CHECK(call)                                                                  \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess)                                                            \
            return pn_error_set(PN_ERR_DEVICE, "%s:%d: %s: %s", __FILE__, __LINE__, #call, \
                                cudaGetErrorString(e_));                                  \
    } while (0)

#endif
