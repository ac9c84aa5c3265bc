/* The CUDA runtime API of pipenet's CUDA stand-in (sim.h): settings, errors, devices,
 * memory, copies, streams, events and launches, over memory.cc, stream.cc and
 * kernel.cc. What CUDA leaves to the caller to get right is checked: copies stay inside
 * their allocations and go the way their kind says, a launch stays within a GPU's
 * limits and its __launch_bounds__, and a kernel gets no host memory.
 *
 * Settings (environment):
 *   PN_CUDA_SIM_DEVICES=N      GPUs to pose as (default 4, 0..16); CUDA_VISIBLE_DEVICES
 *                              selects among them as on a real node
 *   PN_CUDA_SIM_MEMORY_MB=N    memory of each (default 4096)
 *   PN_CUDA_SIM_ORDER=O        the order blocks and threads run in: in-order (default),
 *                              reverse, random:SEED
 *   PN_CUDA_SIM_CHECK_ARGS=0   no check of kernel arguments
 *   PN_CUDA_SIM_SYNC_WARN_S=S  a synchronizing call that waits this long for a message
 *                              says what it waits for (default 60) */
#include "sim.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <unordered_set>

namespace sim {

static settings parse_settings()
{
    settings s;
    const char *v;
    char *end;
    if ((v = getenv("PN_CUDA_SIM_DEVICES")) && *v) {
        long n = strtol(v, &end, 10);
        if (*end || n < 0 || n > 16)
            cuda_sim_fatal("PN_CUDA_SIM_DEVICES=%s: expected a number of GPUs from 0 to 16", v);
        s.devices = (int)n;
    }
    if ((v = getenv("PN_CUDA_SIM_MEMORY_MB")) && *v) {
        long n = strtol(v, &end, 10);
        if (*end || n < 1 || n > (1L << 20))
            cuda_sim_fatal("PN_CUDA_SIM_MEMORY_MB=%s: expected megabytes from 1 to 1048576", v);
        s.memory = (size_t)n << 20;
    }
    if ((v = getenv("PN_CUDA_SIM_ORDER")) && *v) {
        if (!strcmp(v, "in-order")) {
            s.run_order = order::in_order;
        } else if (!strcmp(v, "reverse")) {
            s.run_order = order::reverse;
        } else if (!strncmp(v, "random", 6) && (v[6] == 0 || v[6] == ':')) {
            s.run_order = order::random;
            s.seed = 1;
            if (v[6] == ':') {
                s.seed = strtoull(v + 7, &end, 10);
                if (*end || !v[7])
                    cuda_sim_fatal("PN_CUDA_SIM_ORDER=%s: expected random:SEED with a number", v);
            }
        } else {
            cuda_sim_fatal("PN_CUDA_SIM_ORDER=%s: expected in-order, reverse or random:SEED", v);
        }
    }
    if ((v = getenv("PN_CUDA_SIM_CHECK_ARGS")) && !strcmp(v, "0")) s.check_args = false;
    if ((v = getenv("PN_CUDA_SIM_SYNC_WARN_S")) && *v) {
        s.sync_warn_s = strtod(v, &end);
        if (*end || s.sync_warn_s <= 0)
            cuda_sim_fatal("PN_CUDA_SIM_SYNC_WARN_S=%s: expected seconds", v);
    }
    /* CUDA_VISIBLE_DEVICES: the listed indices until the first that does not exist */
    v = getenv("CUDA_VISIBLE_DEVICES");
    for (int i = 0; !v && i < s.devices; i++) s.visible.push_back(i);
    while (v && *v) {
        long n = strtol(v, &end, 10);
        if (end == v || n < 0 || n >= s.devices) break;
        bool again = false;
        for (int d : s.visible) again |= d == n;
        if (again) break;
        s.visible.push_back((int)n);
        v = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') break;
    }
    return s;
}

const settings &config()
{
    static settings s = parse_settings();
    return s;
}

static thread_local cudaError_t last_error = cudaSuccess;
static cudaError_t sticky_error = cudaSuccess;
static thread_local int current = 0;

cudaError_t fail(cudaError_t e)
{
    if (e != cudaSuccess) last_error = e;
    return e;
}

cudaError_t sticky() { return sticky_error; }

int current_device_index() { return current; }

static int physical(int visible_index) { return config().visible[(size_t)visible_index]; }

} // namespace sim

using namespace sim;

/* --- messages --- */

static void say(const char *fmt, va_list ap)
{
    char buf[4096];
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    int n = rank ? snprintf(buf, sizeof buf, "cuda-sim (rank %s): ", rank)
                 : snprintf(buf, sizeof buf, "cuda-sim: ");
    vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    strcat(buf, "\n");
    fputs(buf, stderr);
    fflush(stderr);
}

extern "C" void cuda_sim_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say(fmt, ap);
    va_end(ap);
}

extern "C" void cuda_sim_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say(fmt, ap);
    va_end(ap);
    abort();
}

/* --- errors and devices --- */

struct error_text {
    cudaError_t e;
    const char *name, *text;
};
static const error_text errors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration",
     "invalid configuration argument"},
    {cudaErrorInvalidPitchValue, "cudaErrorInvalidPitchValue", "invalid pitch argument"},
    {cudaErrorInvalidSymbol, "cudaErrorInvalidSymbol", "invalid device symbol"},
    {cudaErrorInvalidHostPointer, "cudaErrorInvalidHostPointer", "invalid host pointer"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection",
     "invalid copy direction for memcpy"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress",
     "an illegal memory access was encountered"},
    {cudaErrorLaunchOutOfResources, "cudaErrorLaunchOutOfResources",
     "too many resources requested for launch"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

extern "C" const char *cudaGetErrorString(cudaError_t e)
{
    for (const error_text &t : errors)
        if (t.e == e) return t.text;
    return "unrecognized error code";
}

extern "C" const char *cudaGetErrorName(cudaError_t e)
{
    for (const error_text &t : errors)
        if (t.e == e) return t.name;
    return "cudaErrorUnknown";
}

extern "C" cudaError_t cudaGetLastError(void)
{
    api_scope scope;
    cudaError_t e = last_error;
    last_error = sticky_error;
    return e;
}

extern "C" cudaError_t cudaPeekAtLastError(void) { return last_error; }

static bool have_devices() { return !config().visible.empty(); }

extern "C" cudaError_t cudaGetDeviceCount(int *count)
{
    api_scope scope;
    *count = (int)config().visible.size();
    return *count ? cudaSuccess : fail(cudaErrorNoDevice);
}

extern "C" cudaError_t cudaSetDevice(int device)
{
    api_scope scope;
    if (!have_devices()) return fail(cudaErrorNoDevice);
    if (device < 0 || device >= (int)config().visible.size()) return fail(cudaErrorInvalidDevice);
    current = device;
    mem_install_fault_handler();
    return cudaSuccess;
}

extern "C" cudaError_t cudaGetDevice(int *device)
{
    if (!have_devices()) return fail(cudaErrorNoDevice);
    *device = current;
    return cudaSuccess;
}

extern "C" cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device)
{
    if (!have_devices()) return fail(cudaErrorNoDevice);
    if (device < 0 || device >= (int)config().visible.size()) return fail(cudaErrorInvalidDevice);
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
    case cudaDevAttrMaxBlockDimX:
    case cudaDevAttrMaxBlockDimY: *value = 1024; break;
    case cudaDevAttrMaxBlockDimZ: *value = 64; break;
    case cudaDevAttrMaxGridDimX: *value = 2147483647; break;
    case cudaDevAttrMaxGridDimY:
    case cudaDevAttrMaxGridDimZ: *value = 65535; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = 48 * 1024; break;
    case cudaDevAttrWarpSize: *value = 32; break;
    case cudaDevAttrMultiProcessorCount: *value = 4; break;
    case cudaDevAttrPciBusId: *value = cuda_sim_pci_bus(device); break;
    case cudaDevAttrPciDeviceId: *value = 0; break;
    case cudaDevAttrPciDomainId: *value = 0; break;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
    default: return fail(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

extern "C" cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int device)
{
    if (!have_devices()) return fail(cudaErrorNoDevice);
    if (device < 0 || device >= (int)config().visible.size()) return fail(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "pipenet cuda-sim GPU %d (the CPU)", physical(device));
    p->totalGlobalMem = config().memory;
    p->sharedMemPerBlock = 48 * 1024;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->multiProcessorCount = 4;
    p->major = 9;
    p->pciBusID = cuda_sim_pci_bus(device);
    return cudaSuccess;
}

extern "C" cudaError_t cudaDeviceGetPCIBusId(char *id, int len, int device)
{
    if (!have_devices()) return fail(cudaErrorNoDevice);
    if (device < 0 || device >= (int)config().visible.size()) return fail(cudaErrorInvalidDevice);
    snprintf(id, (size_t)len, "0000:%02x:00.0", cuda_sim_pci_bus(device));
    return cudaSuccess;
}

extern "C" cudaError_t cudaDeviceSynchronize(void)
{
    api_scope scope;
    if (!have_devices()) return fail(cudaErrorNoDevice);
    run_device(current);
    return sticky();
}

extern "C" cudaError_t cudaDeviceReset(void) { return cudaDeviceSynchronize(); }

extern "C" cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    if (!have_devices()) return fail(cudaErrorNoDevice);
    *total = config().memory;
    *free_bytes = config().memory - mem_used(physical(current));
    return cudaSuccess;
}

extern "C" cudaError_t cudaDriverGetVersion(int *v)
{
    *v = CUDART_VERSION;
    return cudaSuccess;
}

extern "C" cudaError_t cudaRuntimeGetVersion(int *v)
{
    *v = CUDART_VERSION;
    return cudaSuccess;
}

extern "C" int cuda_sim_current_device(void) { return current; }
/* Bus 0x10 + the GPU's physical index: two processes that see one GPU under different
 * CUDA_VISIBLE_DEVICES get the same number, as with real PCI addresses. */
extern "C" int cuda_sim_pci_bus(int device)
{
    return device >= 0 && device < (int)config().visible.size() ? 0x10 + physical(device) : -1;
}

/* Work for a stream (op::WORK): run(ctx) with device memory open, destroy(ctx) after. */
static op *work(void (*run)(void *), void (*destroy)(void *), void *ctx, std::string what,
                const void *caller)
{
    op *o = new op;
    o->run = run;
    o->destroy = destroy;
    o->ctx = ctx;
    o->what = std::move(what);
    o->caller = caller;
    return o;
}

/* --- memory --- */

static std::unordered_set<void *> pinned;

extern "C" cudaError_t cudaMalloc(void **p, size_t bytes)
{
    api_scope scope;
    *p = nullptr;
    if (!have_devices()) return fail(cudaErrorNoDevice);
    mem_install_fault_handler();
    return fail(mem_alloc(physical(current), bytes, __builtin_return_address(0), p));
}

extern "C" cudaError_t cudaFree(void *p)
{
    api_scope scope;
    if (!p) return cudaSuccess;
    allocation *al = mem_find(p);
    /* as CUDA's: the whole device first, messages in flight included */
    for (size_t i = 0; al && i < config().visible.size(); i++)
        if (physical((int)i) == al->device) run_device((int)i);
    return fail(mem_free(p, __builtin_return_address(0)));
}

extern "C" cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t handle)
{
    api_scope scope;
    cudaError_t err;
    *p = nullptr;
    if (!stream_get(handle, &err)) return fail(err);
    mem_install_fault_handler();
    err = mem_alloc(physical(current), bytes, __builtin_return_address(0), p);
    if (err == cudaSuccess && *p) mem_find(*p)->async = true;
    return fail(err);
}

struct free_later {
    void *p;
    const void *caller;
};

static void run_free(void *ctx)
{
    free_later *f = (free_later *)ctx;
    mem_free(f->p, f->caller);
}

static void delete_free(void *ctx) { delete (free_later *)ctx; }

extern "C" cudaError_t cudaFreeAsync(void *p, cudaStream_t handle)
{
    api_scope scope;
    cudaError_t err;
    stream *s = stream_get(handle, &err);
    if (!s) return fail(err);
    if (!p) return cudaSuccess;
    allocation *al = mem_find(p);
    if (!al || !al->live || (uintptr_t)p != al->base) {
        cuda_sim_warn("cudaFreeAsync(%p) from %s: not a live allocation", p,
                      caller_name(__builtin_return_address(0)).c_str());
        return fail(cudaErrorInvalidValue);
    }
    const void *caller = __builtin_return_address(0);
    op *o = work(run_free, delete_free, new free_later{p, caller}, "cudaFreeAsync", caller);
    enqueue(s, o);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMallocHost(void **p, size_t bytes)
{
    *p = nullptr;
    if (posix_memalign(p, 4096, bytes ? bytes : 1)) return fail(cudaErrorMemoryAllocation);
    pinned.insert(*p);
    return cudaSuccess;
}

extern "C" cudaError_t cudaFreeHost(void *p)
{
    if (!p) return cudaSuccess;
    if (!pinned.erase(p)) return fail(cudaErrorInvalidValue);
    free(p);
    return cudaSuccess;
}

/* --- copies and fills --- */

/* Where [p, p + span) lies: 1 inside one live device allocation, 0 host memory, -1 neither
 * (device memory past an allocation, freed, or not from cudaMalloc). */
static int place(const void *p, size_t span, int *device)
{
    if (!mem_in_region(p)) return 0;
    return mem_inside(p, span, device) ? 1 : -1;
}

static const char *kind_name(cudaMemcpyKind k)
{
    static const char *const names[] = {"HostToHost", "HostToDevice", "DeviceToHost",
                                        "DeviceToDevice", "Default"};
    return k >= 0 && k <= 4 ? names[k] : "?";
}

static void describe_place(const void *p, size_t span, char *out, size_t cap)
{
    allocation *al = mem_find(p);
    if (!al)
        snprintf(out, cap, "%p is in no allocation", p);
    else if (!al->live)
        snprintf(out, cap, "%p is in a freed allocation of %zu bytes (from %s)", p, al->bytes,
                 caller_name(al->caller).c_str());
    else
        snprintf(out, cap, "%p + %zu ends %ld bytes past an allocation of %zu bytes (from %s)", p,
                 span, (long)((uintptr_t)p + span - (al->base + al->bytes)), al->bytes,
                 caller_name(al->caller).c_str());
}

struct copy2d {
    char *dst;
    const char *src;
    size_t dpitch, spitch, width, height;
    char *snapshot; /* the host source, read when the copy was queued */
};

static void run_copy(void *ctx)
{
    copy2d *c = (copy2d *)ctx;
    for (size_t r = 0; r < c->height; r++)
        memmove(c->dst + r * c->dpitch, (c->snapshot ? c->snapshot : c->src) + r * c->spitch,
                c->width);
}

static void delete_copy(void *ctx)
{
    copy2d *c = (copy2d *)ctx;
    free(c->snapshot);
    delete c;
}

/* Every copy: checked, then queued; a pageable host source is read now (CUDA stages it
 * before the call returns), a host destination written when the stream gets there. */
static cudaError_t copy(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                        size_t height, cudaMemcpyKind kind, cudaStream_t handle, bool sync,
                        const void *caller, const char *call)
{
    if (width == 0 || height == 0) return cudaSuccess;
    if (width > dpitch || width > spitch) return fail(cudaErrorInvalidPitchValue);
    size_t dspan = (height - 1) * dpitch + width, sspan = (height - 1) * spitch + width;
    int ddev = -1, sdev = -1;
    int dp = place(dst, dspan, &ddev), sp = place(src, sspan, &sdev);
    char why[512];
    if (dp < 0 || sp < 0) {
        describe_place(dp < 0 ? dst : src, dp < 0 ? dspan : sspan, why, sizeof why);
        cuda_sim_warn("%s from %s: the %s %s", call, caller_name(caller).c_str(),
                      dp < 0 ? "destination" : "source", why);
        return fail(cudaErrorInvalidValue);
    }
    bool ok = kind == cudaMemcpyDefault || (kind == cudaMemcpyHostToHost && !dp && !sp) ||
              (kind == cudaMemcpyHostToDevice && dp && !sp) ||
              (kind == cudaMemcpyDeviceToHost && !dp && sp) ||
              (kind == cudaMemcpyDeviceToDevice && dp && sp);
    if (!ok) {
        cuda_sim_warn("%s from %s: cudaMemcpy%s, but the destination is %s memory and the source "
                      "%s memory",
                      call, caller_name(caller).c_str(), kind_name(kind), dp ? "device" : "host",
                      sp ? "device" : "host");
        return fail(kind < 0 || kind > 4 ? cudaErrorInvalidMemcpyDirection : cudaErrorInvalidValue);
    }
    cudaError_t err;
    stream *s = stream_get(handle, &err);
    if (!s) return fail(err);
    copy2d *c = new copy2d{(char *)dst, (const char *)src, dpitch, spitch, width, height, nullptr};
    if (!sp && !pinned.count((void *)src)) {
        c->snapshot = (char *)malloc(sspan);
        if (!c->snapshot) {
            delete c;
            return fail(cudaErrorMemoryAllocation);
        }
        memcpy(c->snapshot, src, sspan);
    }
    op *o = work(run_copy, delete_copy, c, call, caller);
    enqueue(s, o);
    if (sync) run_stream(s, o->seq, true);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind)
{
    api_scope scope;
    return copy(dst, n, src, n, n, 1, kind, 0, true, __builtin_return_address(0), "cudaMemcpy");
}

extern "C" cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind,
                                       cudaStream_t s)
{
    api_scope scope;
    return copy(dst, n, src, n, n, 1, kind, s, false, __builtin_return_address(0),
                "cudaMemcpyAsync");
}

extern "C" cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
                                    size_t width, size_t height, cudaMemcpyKind kind)
{
    api_scope scope;
    return copy(dst, dpitch, src, spitch, width, height, kind, 0, true, __builtin_return_address(0),
                "cudaMemcpy2D");
}

extern "C" cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                                         size_t width, size_t height, cudaMemcpyKind kind,
                                         cudaStream_t s)
{
    api_scope scope;
    return copy(dst, dpitch, src, spitch, width, height, kind, s, false,
                __builtin_return_address(0), "cudaMemcpy2DAsync");
}

struct fill {
    void *p;
    int value;
    size_t n;
};

static void run_fill(void *ctx)
{
    fill *f = (fill *)ctx;
    memset(f->p, f->value, f->n);
}

static void delete_fill(void *ctx) { delete (fill *)ctx; }

static cudaError_t memset_on(void *p, int value, size_t n, cudaStream_t handle, bool sync,
                             const void *caller, const char *call)
{
    if (n == 0) return cudaSuccess;
    int dev;
    if (place(p, n, &dev) != 1) {
        char why[512];
        if (mem_in_region(p))
            describe_place(p, n, why, sizeof why);
        else
            snprintf(why, sizeof why, "%p is host memory", p);
        cuda_sim_warn("%s from %s: %s", call, caller_name(caller).c_str(), why);
        return fail(cudaErrorInvalidValue);
    }
    cudaError_t err;
    stream *s = stream_get(handle, &err);
    if (!s) return fail(err);
    op *o = work(run_fill, delete_fill, new fill{p, value, n}, call, caller);
    enqueue(s, o);
    if (sync) run_stream(s, o->seq, true);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemset(void *p, int value, size_t n)
{
    api_scope scope;
    return memset_on(p, value, n, 0, true, __builtin_return_address(0), "cudaMemset");
}

extern "C" cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t s)
{
    api_scope scope;
    return memset_on(p, value, n, s, false, __builtin_return_address(0), "cudaMemsetAsync");
}

/* --- streams and events --- */

extern "C" cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned flags)
{
    api_scope scope;
    if (!have_devices()) return fail(cudaErrorNoDevice);
    *out = (cudaStream_t)stream_new(current, !(flags & cudaStreamNonBlocking));
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
    if (err == cudaSuccess && s->device != current) {
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
    l->device = current;
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
