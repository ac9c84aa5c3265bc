/* What the stand-in's parts share beyond CUDA's own API (tools/cuda-sim): the entry
 * points the device prelude (cuda_sim_device.h: launches, barriers, shuffles, shared
 * memory) and the stand-in cuBLAS and NCCL (which queue their work on streams) call
 * in libcudart.so. Not part of any CUDA interface: pipenet's sources never name it. */
#ifndef PN_CUDA_SIM_API_H
#define PN_CUDA_SIM_API_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The ids a GPU thread reads (threadIdx, blockIdx, blockDim, gridDim): cuda_sim_cur points
 * at the running thread's while a kernel runs. */
typedef struct cuda_sim_thread_ids {
    uint3 thread_idx, block_idx;
    dim3 block_dim, grid_dim;
} cuda_sim_thread_ids;
extern cuda_sim_thread_ids *cuda_sim_cur;

/* One kernel argument as launched: where its copy is, its size, and what it is. */
typedef enum cuda_sim_arg_kind {
    CUDA_SIM_ARG_SCALAR,
    CUDA_SIM_ARG_POINTER,
    CUDA_SIM_ARG_RECORD
} cuda_sim_arg_kind;
typedef struct cuda_sim_arg {
    const void *addr;
    size_t size;
    cuda_sim_arg_kind kind;
} cuda_sim_arg;

/* Where a launch was written, and the kernel's __launch_bounds__ (0: none). */
typedef struct cuda_sim_site {
    const char *kernel, *file;
    int line;
    unsigned bound;
} cuda_sim_site;

/* Queues a kernel: invoke(pack) runs one GPU thread (cuda_sim_cur set), destroy(pack)
 * frees the arguments' copies once the kernel has run. Errors as a GPU reports them:
 * through cudaGetLastError (a bad configuration), or a stop with a message (a fault). */
void cuda_sim_launch_kernel(dim3 grid, dim3 block, size_t shmem, cudaStream_t stream,
                            const cuda_sim_site *site, const cuda_sim_arg *args, int n_args,
                            void (*invoke)(void *), void (*destroy)(void *), void *pack);

/* Device-side primitives of a running GPU thread (file and line name the call site). */
void cuda_sim_syncthreads(const char *file, int line);
void cuda_sim_syncwarp(const char *file, int line, unsigned mask);
typedef enum cuda_sim_shfl_kind {
    CUDA_SIM_SHFL_IDX,
    CUDA_SIM_SHFL_UP,
    CUDA_SIM_SHFL_DOWN,
    CUDA_SIM_SHFL_XOR,
    CUDA_SIM_VOTE_BALLOT /* the result is the ballot of the lanes' values */
} cuda_sim_shfl_kind;
uint64_t cuda_sim_shfl(const char *file, int line, cuda_sim_shfl_kind kind, unsigned mask,
                       uint64_t value, int lane_arg, int width);
unsigned cuda_sim_activemask(void);
/* Where the running block keeps the __shared__ variable whose declaration key names
 * (the rewriter makes each declaration a reference to this): a slot of the block's
 * shared memory, poisoned at every block's start, as a GPU gives no block the values
 * another left. */
void *cuda_sim_shared_slot(const void *key, size_t bytes, size_t align);
/* Memory-model hooks for the ThreadSanitizer build (no-ops otherwise). */
void cuda_sim_fence(void);

/* --- for the stand-in cuBLAS and NCCL ---------------------------------------------- */

/* Work run by a stream when it gets there, on the host, with device memory accessible. */
cudaError_t cuda_sim_enqueue_host(cudaStream_t stream, void (*run)(void *), void (*destroy)(void *),
                                  void *ctx, const char *what);

/* Asynchronous work (a message): start() begins it once the stream gets there (returns
 * 0 while it cannot start yet, e.g. a connection not made), test() says when it is
 * done, finish() ends it (device memory accessible in start and finish). The stream
 * goes on after finish. describe() names it in the stand-in's messages, with caller (a
 * return address in the code that made the call). */
typedef struct cuda_sim_async_ops {
    int (*start)(void *ctx);
    int (*test)(void *ctx);
    void (*finish)(void *ctx);
    void (*describe)(void *ctx, char *out, size_t cap);
    void (*destroy)(void *ctx);
} cuda_sim_async_ops;
cudaError_t cuda_sim_enqueue_async(cudaStream_t stream, const cuda_sim_async_ops *ops, void *ctx,
                                   const void *caller);

/* fn() is called whenever the stand-in can make progress: at every runtime call and in
 * every wait (the NCCL stand-in moves its messages there). */
void cuda_sim_add_progress_hook(void (*fn)(void));
/* One round of that progress (the hooks, and asynchronous work that may start), from
 * outside the runtime: what ncclCommGetAsyncError does. */
void cuda_sim_progress(void);
/* The device whose memory p is in (-1: not device memory); *live: not freed. */
int cuda_sim_device_of(const void *p, size_t bytes, int *live);
/* The current device, and its PCI bus number as the stand-in reports it. */
int cuda_sim_current_device(void);
int cuda_sim_pci_bus(int device);
/* The device a stream belongs to (-1: not a stream). */
int cuda_sim_stream_device(cudaStream_t stream);
/* Prints "cuda-sim: <message>" on stderr and aborts: a fault a GPU would not survive. */
void cuda_sim_fatal(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
/* Prints "cuda-sim: <message>" on stderr. */
void cuda_sim_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#ifdef __cplusplus
}
#endif

#endif
