/* The device side of a .cu file under pipenet's CUDA stand-in (tools/cuda-sim): this
 * toolkit's nvcc includes it before the file and compiles the whole as host C++. A
 * kernel is an ordinary function run once per GPU thread, each thread a fiber of the
 * block's scheduler in libcudart.so; what CUDA's compiler provides is defined here:
 * the qualifiers, threadIdx and friends, barriers and warp shuffles (which make the
 * thread wait for its block or warp), atomics, and a few intrinsics. nvcc's rewriter
 * turns each `k<<<cfg>>>(args)` into cuda_sim::launch, each __shared__ declaration
 * into a reference to the running block's slot (cuda_sim::shared_slot) and removes
 * __launch_bounds__ (remembering it for the launch). */
#ifndef PN_CUDA_SIM_DEVICE_H
#define PN_CUDA_SIM_DEVICE_H

#ifndef __cplusplus
#error "cuda_sim_device.h is for .cu files compiled as C++ by the stand-in's nvcc"
#endif

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <cmath>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cuda_runtime.h"
#include "cuda_sim_api.h"

#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))

#define threadIdx (cuda_sim_cur->thread_idx)
#define blockIdx (cuda_sim_cur->block_idx)
#define blockDim (cuda_sim_cur->block_dim)
#define gridDim (cuda_sim_cur->grid_dim)
static const int warpSize = 32;

#define __syncthreads() cuda_sim_syncthreads(__FILE__, __LINE__)
#define __syncwarp(...) cuda_sim_syncwarp(__FILE__, __LINE__, cuda_sim::mask_or_all(__VA_ARGS__))
#define __threadfence() cuda_sim_fence()
#define __threadfence_block() cuda_sim_fence()
#define __activemask() cuda_sim_activemask()

namespace cuda_sim {

inline unsigned mask_or_all() { return 0xffffffffu; }
inline unsigned mask_or_all(unsigned m) { return m; }

/* The running block's copy of the __shared__ variable declared with key (a static of
 * the variable's type, never itself used). */
template <class T> inline T *shared_slot(T *key)
{
    return static_cast<T *>(cuda_sim_shared_slot((const void *)key, sizeof(T), alignof(T)));
}

template <class T> inline uint64_t to_bits(T v)
{
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                  "a shuffled value must be trivially copyable and at most 8 bytes");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof v);
    return b;
}

template <class T> inline T from_bits(uint64_t b)
{
    T v;
    memcpy(&v, &b, sizeof v);
    return v;
}

template <class T> inline T shfl(const char *file, int line, cuda_sim_shfl_kind kind, unsigned mask,
                                 T v, int arg, int width)
{
    return from_bits<T>(cuda_sim_shfl(file, line, kind, mask, to_bits(v), arg, width));
}

} // namespace cuda_sim

#define __shfl_sync(mask, v, lane, ...)                                                            \
    cuda_sim::shfl(__FILE__, __LINE__, CUDA_SIM_SHFL_IDX, (mask), (v), (lane),                     \
                   cuda_sim_width(__VA_ARGS__))
#define __shfl_up_sync(mask, v, delta, ...)                                                        \
    cuda_sim::shfl(__FILE__, __LINE__, CUDA_SIM_SHFL_UP, (mask), (v), (int)(delta),                \
                   cuda_sim_width(__VA_ARGS__))
#define __shfl_down_sync(mask, v, delta, ...)                                                      \
    cuda_sim::shfl(__FILE__, __LINE__, CUDA_SIM_SHFL_DOWN, (mask), (v), (int)(delta),              \
                   cuda_sim_width(__VA_ARGS__))
#define __shfl_xor_sync(mask, v, lanes, ...)                                                       \
    cuda_sim::shfl(__FILE__, __LINE__, CUDA_SIM_SHFL_XOR, (mask), (v), (int)(lanes),               \
                   cuda_sim_width(__VA_ARGS__))
#define __ballot_sync(mask, pred)                                                                  \
    ((unsigned)cuda_sim_shfl(__FILE__, __LINE__, CUDA_SIM_VOTE_BALLOT, (mask), (pred) ? 1u : 0u,   \
                             0, 32))
#define __any_sync(mask, pred) (__ballot_sync((mask), (pred)) != 0u)
#define __all_sync(mask, pred) (__ballot_sync((mask), (pred)) == (unsigned)(mask))

static inline int cuda_sim_width() { return 32; }
static inline int cuda_sim_width(int w) { return w; }

/* --- atomics: GPU threads of one process are fibers of one host thread, so a plain
 * read-modify-write could do; __atomic builtins keep the ThreadSanitizer build exact. */
#define CUDA_SIM_ATOMIC_INT(T)                                                                     \
    static inline T atomicAdd(T *p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }    \
    static inline T atomicSub(T *p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); }    \
    static inline T atomicAnd(T *p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_RELAXED); }    \
    static inline T atomicOr(T *p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }      \
    static inline T atomicXor(T *p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED); }    \
    static inline T atomicExch(T *p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }  \
    static inline T atomicCAS(T *p, T expected, T v)                                               \
    {                                                                                              \
        __atomic_compare_exchange_n(p, &expected, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);   \
        return expected;                                                                           \
    }                                                                                              \
    static inline T atomicMin(T *p, T v)                                                           \
    {                                                                                              \
        T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                              \
        while (v < old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED,         \
                                                       __ATOMIC_RELAXED)) {}                       \
        return old;                                                                                \
    }                                                                                              \
    static inline T atomicMax(T *p, T v)                                                           \
    {                                                                                              \
        T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                              \
        while (v > old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED,         \
                                                       __ATOMIC_RELAXED)) {}                       \
        return old;                                                                                \
    }
CUDA_SIM_ATOMIC_INT(int)
CUDA_SIM_ATOMIC_INT(unsigned int)
CUDA_SIM_ATOMIC_INT(unsigned long long)
CUDA_SIM_ATOMIC_INT(long long)
#undef CUDA_SIM_ATOMIC_INT

#define CUDA_SIM_ATOMIC_FLOAT(T, U)                                                                \
    static inline T atomicAdd(T *p, T v)                                                           \
    {                                                                                              \
        U *q = (U *)p, old = __atomic_load_n(q, __ATOMIC_RELAXED), next;                           \
        T was;                                                                                     \
        do {                                                                                       \
            memcpy(&was, &old, sizeof was);                                                        \
            T sum = was + v;                                                                       \
            memcpy(&next, &sum, sizeof next);                                                      \
        } while (!__atomic_compare_exchange_n(q, &old, next, true, __ATOMIC_RELAXED,               \
                                              __ATOMIC_RELAXED));                                  \
        return was;                                                                                \
    }                                                                                              \
    static inline T atomicExch(T *p, T v)                                                          \
    {                                                                                              \
        U n, o;                                                                                    \
        memcpy(&n, &v, sizeof n);                                                                  \
        o = __atomic_exchange_n((U *)p, n, __ATOMIC_RELAXED);                                      \
        T was;                                                                                     \
        memcpy(&was, &o, sizeof was);                                                              \
        return was;                                                                                \
    }
CUDA_SIM_ATOMIC_FLOAT(float, uint32_t)
CUDA_SIM_ATOMIC_FLOAT(double, uint64_t)
#undef CUDA_SIM_ATOMIC_FLOAT

/* --- intrinsics: the host's IEEE arithmetic (a GPU's fast-math versions round
 * differently: the stand-in cannot show that). */
static inline int __float_as_int(float f)
{
    int i;
    memcpy(&i, &f, sizeof i);
    return i;
}
static inline float __int_as_float(int i)
{
    float f;
    memcpy(&f, &i, sizeof f);
    return f;
}
static inline unsigned __float_as_uint(float f)
{
    unsigned i;
    memcpy(&i, &f, sizeof i);
    return i;
}
static inline float __uint_as_float(unsigned i)
{
    float f;
    memcpy(&f, &i, sizeof f);
    return f;
}
static inline long long __double_as_longlong(double d)
{
    long long i;
    memcpy(&i, &d, sizeof i);
    return i;
}
static inline double __longlong_as_double(long long i)
{
    double d;
    memcpy(&d, &i, sizeof d);
    return d;
}
static inline float __fdividef(float a, float b) { return a / b; }
/* glibc declares these names itself: macros, defined after its headers */
#define __expf(x) expf(x)
#define __logf(x) logf(x)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __powf(a, b) powf((a), (b))
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __frcp_rn(float a) { return 1.0f / a; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline float rsqrtf(float a) { return 1.0f / sqrtf(a); }
static inline double rsqrt(double a) { return 1.0 / sqrt(a); }
static inline int __float2int_rn(float a) { return (int)nearbyintf(a); }
static inline int __float2int_rz(float a) { return (int)a; }
static inline float __int2float_rn(int a) { return (float)a; }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
template <class T> static inline T __ldg(const T *p) { return *p; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }

/* --- launches ---------------------------------------------------------------------- */
namespace cuda_sim {

struct launch_cfg {
    dim3 grid, block;
    size_t shmem;
    cudaStream_t stream;
};

inline launch_cfg cfg(dim3 grid, dim3 block, size_t shmem = 0, cudaStream_t stream = 0)
{
    return launch_cfg{grid, block, shmem, stream};
}

/* The arguments' copies, made when the kernel is launched (as CUDA copies them), and the
 * call of the kernel that gives each GPU thread its own copy of each parameter. */
template <class B, class... A> struct pack {
    B body;
    std::tuple<A...> args;
};

template <class P> void invoke(void *p)
{
    P *k = static_cast<P *>(p);
    std::apply(k->body, k->args);
}

template <class P> void destroy(void *p) { delete static_cast<P *>(p); }

/* Padding bytes copied from the caller hold whatever was there: zeroed, so that the
 * launch's check of the arguments reads only their fields. */
template <class T> cuda_sim_arg describe(T &v)
{
#if defined(__has_builtin)
#if __has_builtin(__builtin_clear_padding)
    __builtin_clear_padding(&v);
#endif
#endif
    cuda_sim_arg a;
    a.addr = &v;
    a.size = sizeof v;
    a.kind = std::is_pointer<T>::value                            ? CUDA_SIM_ARG_POINTER
             : std::is_class<T>::value || std::is_union<T>::value ? CUDA_SIM_ARG_RECORD
                                                                  : CUDA_SIM_ARG_SCALAR;
    return a;
}

template <class Tuple, size_t... I>
void describe_all(Tuple &t, cuda_sim_arg *out, std::index_sequence<I...>)
{
    ((out[I] = describe(std::get<I>(t))), ...);
}

template <class B, class... A> void launch(const launch_cfg &c, const char *kernel,
                                           const char *file, int line, unsigned bound, B body,
                                           A &&...args)
{
    using P = pack<B, std::decay_t<A>...>;
    P *p = new P{body, std::tuple<std::decay_t<A>...>(std::forward<A>(args)...)};
    cuda_sim_arg info[sizeof...(A) + 1];
    describe_all(p->args, info, std::index_sequence_for<A...>{});
    cuda_sim_site site = {kernel, file, line, bound};
    cuda_sim_launch_kernel(c.grid, c.block, c.shmem, c.stream, &site, info, (int)sizeof...(A),
                           &invoke<P>, &destroy<P>, p);
}

} // namespace cuda_sim

#endif
