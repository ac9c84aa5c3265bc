/* Inside libcudart.so of pipenet's CUDA stand-in (tools/cuda-sim): what its files share.
 *
 *  memory.cc   device memory: fresh poisoned pages behind guard pages, never reused,
 *              inaccessible while host code runs; the fault handler that names a bad
 *              access
 *  fiber.cc    the context switch under GPU threads
 *  kernel.cc   a launch: the block scheduler, barriers and warp shuffles, the checks of
 *              a launch's configuration and arguments
 *  stream.cc   streams and events: lazy queues run when the host must see them
 *  runtime.cc  settings, errors, messages, devices
 *  api_memory.cc  the memory calls: allocations, copies, fills
 *  api_streams.cc the stream, event and launch calls; what cuBLAS and NCCL queue with
 *
 * One host thread drives everything (as pipenet's ranks do): no locks. */
#ifndef PN_CUDA_SIM_INTERNAL_H
#define PN_CUDA_SIM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <deque>
#include <string>
#include <vector>

#include "cuda_runtime.h"
#include "cuda_sim_api.h"

namespace sim {

/* --- settings (runtime.cc), from the environment ------------------------------------- */

enum class order { in_order, reverse, random };

struct settings {
    int devices = 4;                   /* PN_CUDA_SIM_DEVICES */
    size_t memory = (size_t)4 << 30;   /* PN_CUDA_SIM_MEMORY_MB, per device */
    order run_order = order::in_order; /* PN_CUDA_SIM_ORDER: blocks and threads */
    uint64_t seed = 0;                 /* random:SEED */
    bool check_args = true;            /* PN_CUDA_SIM_CHECK_ARGS=0 turns it off */
    double sync_warn_s = 60;           /* a wait on messages this long says what it waits for */
    std::vector<int> visible;          /* CUDA_VISIBLE_DEVICES: physical indices */
};
const settings &config();

/* The runtime's last error (cudaGetLastError) and the error every call returns after a
 * kernel fault (sticky, as on a GPU). */
cudaError_t fail(cudaError_t e);
cudaError_t sticky();

/* Devices: whether any is visible, the current one (an index among the visible), and
 * the physical index (which region of memory, which PCI bus) behind a visible one. */
bool have_devices();
int current_device_index();
int physical(int visible_index);

/* The host code that called into the runtime, for messages: "pn_cuda_sync at
 * libpipenet-cuda.so+0x1234" (from a return address). */
std::string caller_name(const void *return_address);

/* --- memory (memory.cc) --------------------------------------------------------------- */

struct allocation {
    uintptr_t base = 0; /* what cudaMalloc returned */
    size_t bytes = 0;
    uintptr_t map = 0; /* the mapping: guard page, pages, guard page */
    size_t map_bytes = 0;
    int device = 0;
    bool live = true;
    bool async = false;           /* cudaMallocAsync: freed in stream order */
    const void *caller = nullptr; /* who allocated it (a return address) */
};

cudaError_t mem_alloc(int device, size_t bytes, const void *caller, void **out);
cudaError_t mem_free(void *p, const void *caller);
/* The allocation p falls into, its guard pages included (live or freed), or NULL. */
allocation *mem_find(const void *p);
/* Whether [p, p + bytes) is inside one live allocation; its device. */
bool mem_inside(const void *p, size_t bytes, int *device);
/* Whether p is in the region the stand-in reserves for device memory. */
bool mem_in_region(const void *p);
size_t mem_used(int device);
/* Device memory becomes accessible for queued work and inaccessible again when the
 * runtime returns to host code (api_scope's end). */
void mem_open();
void mem_close();
void mem_install_fault_handler();

/* --- fibers (fiber.cc) ------------------------------------------------------------------ */

struct fiber_stack {
    char *base = nullptr; /* lowest address, a guard page below */
    size_t bytes = 0;
};
fiber_stack stack_get();
void stack_put(fiber_stack s);
/* A context that will run fn(arg) on s when switched to. */
void *fiber_make(fiber_stack s, void (*fn)(void *), void *arg);
/* Saves the current context into *save and runs to. */
void fiber_switch(void **save, void *to);
/* ThreadSanitizer's fibers where its runtime is loaded (the tsan toolkit); each call is
 * one test of a flag otherwise. */
extern const bool tsan_loaded;
inline bool tsan_on() { return tsan_loaded; }
void *tsan_fiber_create();
void tsan_fiber_destroy(void *f);
void *tsan_fiber_current();
void tsan_switch_to(void *f);
void tsan_acquire_at(void *addr);
void tsan_release_at(void *addr);
void tsan_new_memory_at(void *addr, size_t bytes);
inline void tsan_switch(void *f)
{
    if (tsan_loaded) tsan_switch_to(f);
}
inline void tsan_acquire(void *addr)
{
    if (tsan_loaded) tsan_acquire_at(addr);
}
inline void tsan_release(void *addr)
{
    if (tsan_loaded) tsan_release_at(addr);
}
inline void tsan_new_memory(void *addr, size_t bytes)
{
    if (tsan_loaded) tsan_new_memory_at(addr, bytes);
}

/* --- streams and their work (stream.cc) ------------------------------------------------- */

struct stream;

struct op {
    enum kind_t { WORK, WAIT, RECORD, ASYNC } kind = WORK;
    uint64_t seq = 0;
    std::string what;             /* for messages */
    const void *caller = nullptr; /* the host code that queued it */
    /* WORK: run() with device memory open */
    void (*run)(void *) = nullptr;
    void (*destroy)(void *) = nullptr;
    void *ctx = nullptr;
    /* WAIT: for stream `on` to reach `until` */
    stream *on = nullptr;
    uint64_t until = 0;
    /* RECORD: the time the stream got here (cudaEventElapsedTime) */
    double *stamp = nullptr;
    /* ASYNC */
    const cuda_sim_async_ops *async = nullptr;
    bool started = false;
};

struct stream {
    int device = 0;
    bool blocking = true;    /* not cudaStreamNonBlocking: ordered with the legacy stream */
    bool is_default = false; /* the legacy default stream of its device */
    bool destroyed = false;
    std::deque<op *> q;
    uint64_t enqueued = 0, completed = 0;
    int pending_async = 0;
    bool running = false;     /* its head is being run: not re-entered */
    double waiting_since = 0; /* a wait on it blocked by messages: since when */
    int id = 0;               /* for messages */
};

struct event {
    stream *s = nullptr;
    uint64_t seq = 0;
    bool timing = true;
    bool said_not_ready = false;
    double stamp = 0;
    bool live = true;
};

/* Work for a stream (op::WORK): run(ctx) with device memory open, destroy(ctx) after;
 * what and caller name it in messages. */
op *work(void (*run)(void *), void (*destroy)(void *), void *ctx, std::string what,
         const void *caller);

stream *stream_get(cudaStream_t s, cudaError_t *err);
stream *stream_new(int device, bool blocking);
void stream_destroy(stream *s);
void enqueue(stream *s, op *o);
/* Runs s until it has completed `until` (block: wait for messages, else return false
 * when it must wait). */
bool run_stream(stream *s, uint64_t until, bool block);
/* Every stream of device (-1: every device) to its end. */
void run_device(int device);
/* Moves messages: progress hooks, then streams that hold asynchronous work run as far
 * as their last such work (so that it starts as soon as it may, as on a GPU). */
void progress();
void add_progress_hook(void (*fn)(void));
std::vector<stream *> &all_streams();

/* Each runtime call: moves messages on entry; on return, device memory is closed to the
 * host again if the call opened it. */
struct api_scope {
    api_scope();
    ~api_scope();
};

/* --- kernels (kernel.cc) ------------------------------------------------------------------ */

struct launch {
    dim3 grid, block;
    size_t shmem = 0;
    cuda_sim_site site;
    int device = 0;
    void (*invoke)(void *) = nullptr;
    void (*destroy)(void *) = nullptr;
    void *pack = nullptr;
};
void run_launch(launch *l);
/* The running GPU thread's place, for fault messages ("" on the host). */
std::string current_gpu_thread();

double now();
uint64_t mix(uint64_t x);

} // namespace sim

#endif
