/* pn_buffer: untyped bytes on one device, taken from and returned to a per-device
 * pool, so that a training loop that keeps its sizes does no system allocation
 * after the first step (pn_pool_stats shows it). */
#ifndef PN_BUFFER_H
#define PN_BUFFER_H

#include <stddef.h>

#include "math/device.h"

typedef struct pn_buffer {
    void *data;       /* NULL when empty */
    size_t bytes;     /* bytes asked for */
    size_t capacity;  /* bytes of the pooled block (>= bytes) */
    pn_device device;
} pn_buffer;

typedef struct pn_pool_stats {
    size_t system_allocs; /* blocks obtained from the system, ever */
    size_t reuses;        /* acquisitions served from the pool */
    size_t bytes_in_use;  /* bytes of blocks handed out now */
    size_t bytes_cached;  /* bytes of free blocks kept for reuse */
} pn_pool_stats;

/* Gives buf a zero-filled block of at least bytes on dev (buf must be empty). */
int pn_buffer_acquire(pn_buffer *buf, pn_device dev, size_t bytes);

/* Makes buf hold at least bytes on dev, keeping its block when it is big enough;
 * contents are not preserved across a change of block. */
int pn_buffer_reserve(pn_buffer *buf, pn_device dev, size_t bytes);

/* Returns buf's block to its pool and empties buf (no-op on an empty buffer). */
void pn_buffer_release(pn_buffer *buf);

/* Copies between a buffer and host memory (offset in bytes into the buffer). */
int pn_buffer_write(pn_buffer *buf, size_t offset, const void *src, size_t bytes);
int pn_buffer_read(const pn_buffer *buf, size_t offset, void *dst, size_t bytes);

/* Counters of dev's pool. */
void pn_pool_stats_get(pn_device dev, pn_pool_stats *out);

/* Gives every cached free block of dev's pool back to the system. On a GPU this is
 * cudaFree, which waits for everything queued on the device (other streams and NCCL's
 * kernels too): call it only when no device work is in flight, never during a step. */
void pn_pool_trim(pn_device dev);

#endif
