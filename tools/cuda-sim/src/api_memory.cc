/* The memory calls of the CUDA stand-in's runtime (sim.h): cudaMalloc and cudaFree
 * (a whole-device wait first, as CUDA's), the stream-ordered pair, pinned host memory,
 * and every copy and fill: checked (inside one live allocation, the way their kind
 * says, pitches that fit) before they are queued on their stream. A pageable host
 * source is read when the call is made, as CUDA stages it; a host destination is
 * written when the stream gets there. */
#include "sim.h"

#include <stdlib.h>
#include <string.h>

#include <unordered_set>

using namespace sim;

/* --- memory --- */

static std::unordered_set<void *> pinned;

extern "C" cudaError_t cudaMalloc(void **p, size_t bytes)
{
    api_scope scope;
    *p = nullptr;
    if (!have_devices()) return fail(cudaErrorNoDevice);
    mem_install_fault_handler();
    return fail(mem_alloc(physical(current_device_index()), bytes, __builtin_return_address(0), p));
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
    err = mem_alloc(physical(current_device_index()), bytes, __builtin_return_address(0), p);
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
