/* PN_KERNEL_FN: how the per-element math headers (act_math.h, dropout_math.h,
 * row_math.h, update_math.h) declare their functions, so that one text serves the
 * CPU loops (gcc: static inline) and the CUDA kernels (nvcc: host and device). */
#ifndef PN_KERNEL_FN_H
#define PN_KERNEL_FN_H

#if defined(__CUDACC__)
#define PN_KERNEL_FN static __host__ __device__ __forceinline__
#else
#define PN_KERNEL_FN static inline
#endif

#endif
