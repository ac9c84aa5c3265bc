/* CUDA_CHECK(call): a CUDA runtime call whose failure returns PN_ERR_DEVICE naming the
 * call, file and line; pn_cuda_forget for a failure that is tolerated. For C and CUDA
 * files alike: the CUDA backend and the NCCL transport (src/mpi) both use them. */
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

/* For a failure the caller tolerates (an allocation the pool reports its own way, an
 * event query that says "not ready", a best-effort teardown): the runtime keeps a
 * failed call's error as its last error until cudaGetLastError reads it, so the next
 * CUDA_LAUNCHED would report it as that launch's. Takes it off; returns e. A sticky
 * error (the context is lost) stays, as it should. */
static inline cudaError_t pn_cuda_forget(cudaError_t e)
{
    if (e != cudaSuccess) (void)cudaGetLastError();
    return e;
}

#endif
