/* A small pool of worker threads for the CPU kernels that are bound by memory
 * bandwidth (the optimizer update): one core alone cannot saturate it. Workers
 * sleep on a condition variable between jobs, so they never spin beside BLAS. */
#ifndef PN_CPU_THREADS_H
#define PN_CPU_THREADS_H

/* Sets how many threads (caller included) parallel jobs use; 1 runs them inline. */
void pn_cpu_threads_set(int threads);

/* Runs fn(ctx, part, parts) for every part in [0, parts) over the pool and the
 * calling thread, and returns when all parts are done. parts <= the thread count. */
void pn_cpu_parallel(int parts, void (*fn)(void *ctx, int part, int parts), void *ctx);

/* Threads a job of n floats should use: 1 below a size where waking is not worth it. */
int pn_cpu_parts_for(size_t n);

#endif
