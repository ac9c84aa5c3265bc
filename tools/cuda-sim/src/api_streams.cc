/* The stream, event and launch calls of the CUDA stand-in's runtime (sim.h), and the
 * entry points its cuBLAS and NCCL queue their work through. A launch is checked
 * before it is queued: its configuration against a GPU's limits and the kernel's
 * __launch_bounds__ (CUDA's error codes), its arguments against device memory (a host
 * pointer, freed memory or another GPU's stops the process with a message). */
#include "sim.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <unordered_set>

using namespace sim;

/* --- streams and events --- */

extern "C" cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned flags)
{
    api_scope scope;
    if (!have_devices()) return fail(cudaErrorNoDevice);
    *out = (cudaStream_t)stream_new(current_device_index(), !(flags & cudaStreamNonBlocking));
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamCreate(cudaStream_t *out)
{
    return cudaStreamCreateWithFlags(out, cudaStreamDefault);
}

extern "C" cudaError_t cudaStreamDestroy(cudaStream_t handle)
{
    api_scope scope;
    cudaError_t err;
    stream *s = stream_get(handle, &err);
    if (!s || s->is_default) return fail(s ? cudaErrorInvalidResourceHandle : err);
    stream_destroy(s);
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t handle)
{
    api_scope scope;
    cudaError_t err;
    stream *s = stream_get(handle, &err);
    if (!s) return fail(err);
    run_stream(s, s->enqueued, true);
    return sticky();
}

extern "C" cudaError_t cudaStreamQuery(cudaStream_t handle)
{
    api_scope scope;
    cudaError_t err;
    stream *s = stream_get(handle, &err);
    if (!s) return fail(err);
    if (s->completed == s->enqueued) return sticky();
    static std::unordered_set<uint64_t> said; /* (stream, count) asked once already */
    uint64_t key = ((uint64_t)s->id << 40) ^ s->enqueued;
    if (said.insert(key).second) return fail(cudaErrorNotReady);
    return run_stream(s, s->enqueued, false) ? sticky() : fail(cudaErrorNotReady);
}

struct host_call {
    cudaHostFn_t fn;
    void *data;
};

static void run_host_call(void *ctx)
{
    host_call *h = (host_call *)ctx;
    mem_close(); /* host code: device memory closed to it */
    h->fn(h->data);
}

static void delete_host_call(void *ctx) { delete (host_call *)ctx; }

extern "C" cudaError_t cudaLaunchHostFunc(cudaStream_t handle, cudaHostFn_t fn, void *data)
{
    api_scope scope;
    cudaError_t err;
    stream *s = stream_get(handle, &err);
    if (!s) return fail(err);
    op *o = work(run_host_call, delete_host_call, new host_call{fn, data}, "cudaLaunchHostFunc",
                 __builtin_return_address(0));
    enqueue(s, o);
    return cudaSuccess;
}

static std::unordered_set<event *> events;

static event *event_get(cudaEvent_t e)
{
    event *ev = (event *)e;
    return events.count(ev) ? ev : nullptr;
}

extern "C" cudaError_t cudaEventCreateWithFlags(cudaEvent_t *out, unsigned flags)
{
    api_scope scope;
    event *e = new event;
    e->timing = !(flags & cudaEventDisableTiming);
    events.insert(e);
    *out = (cudaEvent_t)e;
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventCreate(cudaEvent_t *out)
{
    return cudaEventCreateWithFlags(out, cudaEventDefault);
}

extern "C" cudaError_t cudaEventDestroy(cudaEvent_t handle)
{
    api_scope scope;
    event *e = event_get(handle);
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    events.erase(e);
    e->live = false; /* a queued RECORD may still write its stamp: the struct stays */
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventRecord(cudaEvent_t handle, cudaStream_t sh)
{
    api_scope scope;
    event *e = event_get(handle);
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    cudaError_t err;
    stream *s = stream_get(sh, &err);
    if (!s) return fail(err);
    op *o = new op;
    o->kind = op::RECORD;
    o->stamp = &e->stamp;
    o->what = "cudaEventRecord";
    o->caller = __builtin_return_address(0);
    enqueue(s, o);
    e->s = s;
    e->seq = o->seq;
    e->said_not_ready = false;
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventQuery(cudaEvent_t handle)
{
    api_scope scope;
    event *e = event_get(handle);
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    if (!e->s || e->s->completed >= e->seq) return sticky();
    /* not ready at least once, however little the work: code that polls must poll */
    if (!e->said_not_ready) {
        e->said_not_ready = true;
        return fail(cudaErrorNotReady);
    }
    return run_stream(e->s, e->seq, false) ? sticky() : fail(cudaErrorNotReady);
}

extern "C" cudaError_t cudaEventSynchronize(cudaEvent_t handle)
{
    api_scope scope;
    event *e = event_get(handle);
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    if (e->s) run_stream(e->s, e->seq, true);
    return sticky();
}

extern "C" cudaError_t cudaStreamWaitEvent(cudaStream_t sh, cudaEvent_t handle, unsigned flags)
{
    api_scope scope;
    event *e = event_get(handle);
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    cudaError_t err;
    stream *s = stream_get(sh, &err);
    if (!s) return fail(err);
    if (!e->s) return cudaSuccess; /* never recorded: nothing to wait for */
    op *o = new op;
    o->kind = op::WAIT;
    o->on = e->s;
    o->until = e->seq;
    o->what = "cudaStreamWaitEvent";
    o->caller = __builtin_return_address(0);
    enqueue(s, o);
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    api_scope scope;
    event *x = event_get(a), *y = event_get(b);
    if (!x || !y || !x->timing || !y->timing) return fail(cudaErrorInvalidResourceHandle);
    if (!x->s || !y->s || x->s->completed < x->seq || y->s->completed < y->seq)
        return fail(cudaErrorNotReady);
    *ms = (float)((y->stamp - x->stamp) * 1e3);
    return cudaSuccess;
}

/* --- launches --- */

static bool mapped(uintptr_t a)
{
    static size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return msync((void *)(a & ~(uintptr_t)(page - 1)), page, MS_ASYNC) == 0 || errno != ENOMEM;
}

/* Whether a word of a struct argument (padding zeroed by the prelude) may be an address:
 * a user-space address above 4 GiB whose low half is not a small integer. Two 4-byte
 * fields side by side (rows and cols, an index and a count) make words below 4 GiB or
 * with a small low half; an address in the first 64 KiB past a 4 GiB boundary is
 * missed, rarely. */
static bool plausible(uintptr_t w)
{
    return w >= ((uintptr_t)1 << 32) && w < ((uintptr_t)1 << 47) && (w & 0xffffffffu) >= 0x10000;
}

/* A word of a kernel argument that holds an address: device memory of this device, live;
 * anything else that points into mapped memory is the host's, which no kernel may touch. */
static void check_word(const launch *l, int index, size_t offset, uintptr_t w, bool pointer)
{
    if (!w) return;
    char where[256];
    if (pointer)
        snprintf(where, sizeof where, "argument %d", index + 1);
    else
        snprintf(where, sizeof where, "argument %d (at byte %zu)", index + 1, offset);
    const char *file = strrchr(l->site.file, '/');
    file = file ? file + 1 : l->site.file;
    if (!pointer && !plausible(w)) return;
    if (mem_in_region((void *)w)) {
        allocation *al = mem_find((void *)w);
        if (!al)
            cuda_sim_fatal("kernel %s (launched at %s:%d): %s points at %#lx, in no allocation",
                           l->site.kernel, file, l->site.line, where, (unsigned long)w);
        if (!al->live)
            cuda_sim_fatal("kernel %s (launched at %s:%d): %s points into freed device memory (an "
                           "allocation of %zu bytes from %s)",
                           l->site.kernel, file, l->site.line, where, al->bytes,
                           caller_name(al->caller).c_str());
        if (al->device != physical(l->device))
            cuda_sim_fatal(
                "kernel %s (launched at %s:%d on GPU %d): %s points into GPU %d's memory",
                l->site.kernel, file, l->site.line, l->device, where, al->device);
        return;
    }
    if (pointer || mapped(w))
        cuda_sim_fatal("kernel %s (launched at %s:%d): %s holds %#lx, which is %s, not device "
                       "memory: a kernel cannot read it on a GPU",
                       l->site.kernel, file, l->site.line, where, (unsigned long)w,
                       mapped(w) ? "host memory" : "no memory at all");
}

static void check_args(const launch *l, const cuda_sim_arg *args, int n)
{
    for (int i = 0; i < n; i++) {
        const cuda_sim_arg &a = args[i];
        if (a.kind == CUDA_SIM_ARG_POINTER) {
            uintptr_t w;
            memcpy(&w, a.addr, sizeof w);
            check_word(l, i, 0, w, true);
        } else if (a.kind == CUDA_SIM_ARG_RECORD) {
            for (size_t off = 0; off + 8 <= a.size; off += 8) {
                uintptr_t w;
                memcpy(&w, (const char *)a.addr + off, sizeof w);
                check_word(l, i, off, w, false);
            }
        }
    }
}

static void run_kernel(void *ctx) { run_launch((launch *)ctx); }

static void delete_kernel(void *ctx)
{
    launch *l = (launch *)ctx;
    l->destroy(l->pack);
    delete l;
}

extern "C" void cuda_sim_launch_kernel(dim3 grid, dim3 block, size_t shmem, cudaStream_t handle,
                                       const cuda_sim_site *site, const cuda_sim_arg *args,
                                       int n_args, void (*invoke)(void *), void (*destroy)(void *),
                                       void *pack)
{
    api_scope scope;
    const char *file = strrchr(site->file, '/');
    file = file ? file + 1 : site->file;
    cudaError_t err = cudaSuccess;
    stream *s = have_devices() ? stream_get(handle, &err) : nullptr;
    if (!have_devices()) err = cudaErrorNoDevice;
    unsigned long threads = (unsigned long)block.x * block.y * block.z;
    const char *why = nullptr;
    if (err == cudaSuccess && s->device != current_device_index()) {
        err = cudaErrorInvalidResourceHandle;
        why = "its stream belongs to another GPU";
    } else if (err == cudaSuccess && (grid.x < 1 || grid.y < 1 || grid.z < 1 ||
                                      grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535)) {
        err = cudaErrorInvalidConfiguration;
        why = "a grid dimension outside [1, 2^31-1] x [1, 65535] x [1, 65535]";
    } else if (err == cudaSuccess && (block.x < 1 || block.y < 1 || block.z < 1 || block.x > 1024 ||
                                      block.y > 1024 || block.z > 64 || threads > 1024)) {
        err = cudaErrorInvalidConfiguration;
        why = "a block outside 1..1024 threads (x, y <= 1024, z <= 64)";
    } else if (err == cudaSuccess && site->bound && threads > site->bound) {
        err = cudaErrorLaunchOutOfResources;
        why = "more threads in a block than the kernel's __launch_bounds__";
    } else if (err == cudaSuccess && shmem > 48 * 1024) {
        err = cudaErrorInvalidValue;
        why = "more than 48 KiB of dynamic shared memory";
    }
    if (err != cudaSuccess) {
        if (why)
            cuda_sim_warn(
                "kernel %s (launched at %s:%d) with grid (%u,%u,%u), block (%u,%u,%u)%s%u: "
                "%s (%s)",
                site->kernel, file, site->line, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                site->bound ? ", __launch_bounds__ " : "", site->bound, why,
                cudaGetErrorString(err));
        destroy(pack);
        fail(err);
        return;
    }
    launch *l = new launch;
    l->grid = grid;
    l->block = block;
    l->shmem = shmem;
    l->site = *site;
    l->device = current_device_index();
    l->invoke = invoke;
    l->destroy = destroy;
    l->pack = pack;
    if (config().check_args) check_args(l, args, n_args);
    op *o = work(run_kernel, delete_kernel, l, std::string("kernel ") + site->kernel,
                 __builtin_return_address(0));
    enqueue(s, o);
}

/* --- for the stand-in cuBLAS and NCCL --- */

extern "C" cudaError_t cuda_sim_enqueue_host(cudaStream_t handle, void (*run)(void *),
                                             void (*destroy)(void *), void *ctx, const char *what)
{
    api_scope scope;
    cudaError_t err;
    stream *s = stream_get(handle, &err);
    if (!s) {
        if (destroy) destroy(ctx);
        return fail(err);
    }
    op *o = work(run, destroy, ctx, what, __builtin_return_address(0));
    enqueue(s, o);
    return cudaSuccess;
}

extern "C" cudaError_t cuda_sim_enqueue_async(cudaStream_t handle, const cuda_sim_async_ops *ops,
                                              void *ctx, const void *caller)
{
    api_scope scope;
    cudaError_t err;
    stream *s = stream_get(handle, &err);
    if (!s) {
        if (ops->destroy) ops->destroy(ctx);
        return fail(err);
    }
    op *o = new op;
    o->kind = op::ASYNC;
    o->async = ops;
    o->ctx = ctx;
    o->destroy = ops->destroy;
    o->what = "a message";
    o->caller = caller;
    enqueue(s, o);
    run_stream(s, o->seq, false); /* it starts now if everything before it can run */
    return cudaSuccess;
}

extern "C" void cuda_sim_add_progress_hook(void (*fn)(void)) { add_progress_hook(fn); }

extern "C" void cuda_sim_progress(void)
{
    api_scope scope; /* progress() on entry, device memory closed on return */
}

extern "C" int cuda_sim_device_of(const void *p, size_t bytes, int *live)
{
    if (!mem_in_region(p)) return -1;
    allocation *al = mem_find(p);
    if (!al) return -1;
    if (live)
        *live =
            al->live && (uintptr_t)p >= al->base && (uintptr_t)p + bytes <= al->base + al->bytes;
    for (size_t i = 0; i < config().visible.size(); i++)
        if (physical((int)i) == al->device) return (int)i;
    return -1;
}

extern "C" int cuda_sim_stream_device(cudaStream_t handle)
{
    cudaError_t err;
    stream *s = stream_get(handle, &err);
    return s ? s->device : -1;
}
