/* The CUDA stand-in's runtime, its first part (sim.h): settings, errors and messages,
 * devices. The memory calls are api_memory.cc, streams, events and launches
 * api_streams.cc, over memory.cc, stream.cc and kernel.cc.
 *
 * Settings (environment):
 *   PN_CUDA_SIM_DEVICES=N      GPUs to pose as (default 4, 0..16); CUDA_VISIBLE_DEVICES
 *                              selects among them as on a real node
 *   PN_CUDA_SIM_MEMORY_MB=N    memory of each (default 4096)
 *   PN_CUDA_SIM_ORDER=O        the order blocks and threads run in: in-order (default),
 *                              reverse, random:SEED
 *   PN_CUDA_SIM_CHECK_ARGS=0   no check of kernel arguments
 *   PN_CUDA_SIM_SYNC_WARN_S=S  a synchronizing call that waits this long for a message
 *                              says what it waits for (default 60)
 *   PN_CUDA_SIM_PROFILE=1      at exit, the kernels that took the stand-in's time */
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

int physical(int visible_index) { return config().visible[(size_t)visible_index]; }

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

namespace sim {
bool have_devices() { return !config().visible.empty(); }
} // namespace sim

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

namespace sim {

op *work(void (*run)(void *), void (*destroy)(void *), void *ctx, std::string what,
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

} // namespace sim
