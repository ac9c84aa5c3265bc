/* The 64-bit mixing hash behind pn_rng and the dropout masks, as inline functions
 * that nvcc compiles for the device too (PN_HASH_FN): a CUDA kernel draws the same
 * mask bits as the CPU loop because both call this one text. */
#ifndef PN_HASH_H
#define PN_HASH_H

#include <stdint.h>

#if defined(__CUDACC__)
#define PN_HASH_FN static __host__ __device__ __forceinline__
#else
#define PN_HASH_FN static inline
#endif

/* splitmix64's finalizer. */
PN_HASH_FN uint64_t pn_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Mixes one more 64-bit word into a hash. */
PN_HASH_FN uint64_t pn_hash_mix(uint64_t h, uint64_t word)
{
    return pn_mix64(h + 0x9e3779b97f4a7c15ULL + pn_mix64(word));
}

/* Uniform in [0, 1) from a hash value (24 bits of resolution, exact in float). */
PN_HASH_FN float pn_hash_to_unit(uint64_t h) { return (float)(h >> 40) * (1.0f / 16777216.0f); }

#endif
