/* bfloat16 <-> float, one element at a time, for the CPU loops and the CUDA kernels
 * alike (math/kernel_fn.h). A bf16 is the top 16 bits of a float: the same exponent,
 * 8 bits of significand. Narrowing rounds to nearest, ties to even (what cuBLAS and
 * PyTorch do), overflows to infinity, and keeps a NaN a (quiet) NaN. */
#ifndef PN_BF16_MATH_H
#define PN_BF16_MATH_H

#include <stdint.h>
#include <string.h>

#include "math/kernel_fn.h"

typedef uint16_t pn_bf16;

PN_KERNEL_FN pn_bf16 pn_bf16_from_float(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (pn_bf16)((u >> 16) | 0x0040u); /* NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (pn_bf16)(u >> 16);
}

PN_KERNEL_FN float pn_bf16_to_float(pn_bf16 h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* f rounded to the nearest bf16, as a float. */
PN_KERNEL_FN float pn_bf16_round(float f) { return pn_bf16_to_float(pn_bf16_from_float(f)); }

#endif
