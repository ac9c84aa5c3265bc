/* Per-device block pool behind pn_buffer. Blocks are rounded up to size classes of
 * a quarter octave (at most 25% slack) and kept on free lists per class when
 * released, so that repeated acquire/release of the same sizes reuses blocks. */
#include "math/buffer.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "math/memory_backend.h"

enum { MIN_BLOCK = 256, N_CLASSES = 64 * 4, N_POOLS = 1 + PN_MAX_CUDA_DEVICES };

typedef struct block_node {
    void *ptr;
    size_t capacity;
    struct block_node *next;
} block_node;

typedef struct pool {
    block_node *free_blocks[N_CLASSES];
    pn_pool_stats stats;
} pool;

static pool pools[N_POOLS];
static block_node *spare_nodes; /* recycled list nodes, so release never mallocs twice */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

static pool *pool_of(pn_device dev)
{
    return dev.kind == PN_DEVICE_HOST ? &pools[0] : &pools[1 + dev.index];
}

/* Rounds bytes up to its class capacity and returns the class index. */
static int size_class(size_t bytes, size_t *capacity)
{
    if (bytes <= MIN_BLOCK) {
        *capacity = MIN_BLOCK;
        return 0;
    }
    int e = 63 - __builtin_clzll((unsigned long long)(bytes - 1)); /* 2^e < bytes <= 2^(e+1) */
    size_t base = (size_t)1 << e, step = base / 4;
    size_t q = (bytes - base + step - 1) / step; /* 1..4 */
    *capacity = base + q * step;
    return e * 4 + (int)q;
}

static int check_device(pn_device dev)
{
    if (dev.kind == PN_DEVICE_CUDA && (dev.index < 0 || dev.index >= PN_MAX_CUDA_DEVICES))
        return pn_error_set(PN_ERR_INVALID, "CUDA device %d out of range", dev.index);
    return PN_OK;
}

int pn_buffer_acquire(pn_buffer *buf, pn_device dev, size_t bytes)
{
    const pn_memory_backend *be;
    PN_TRY(check_device(dev));
    PN_TRY(pn_memory_backend_for(dev, &be));
    char where[32];
    pn_device_label(dev, where, sizeof where); /* "cpu", "cuda:0" */
    if (bytes > (size_t)1 << 62) /* past the size classes; no machine has it anyway */
        return pn_error_set(PN_ERR_NOMEM, "cannot allocate %zu bytes on %s", bytes, where);
    size_t capacity;
    int cls = size_class(bytes ? bytes : 1, &capacity);
    void *ptr = NULL;

    pthread_mutex_lock(&pool_lock);
    pool *p = pool_of(dev);
    block_node *node = p->free_blocks[cls];
    if (node) {
        p->free_blocks[cls] = node->next;
        ptr = node->ptr;
        node->next = spare_nodes;
        spare_nodes = node;
        p->stats.reuses++;
        p->stats.bytes_cached -= capacity;
    }
    pthread_mutex_unlock(&pool_lock);

    if (!ptr) {
        ptr = be->alloc(dev.index, capacity);
        if (!ptr)
            return pn_error_set(PN_ERR_NOMEM, "cannot allocate %zu bytes on %s", capacity,
                                where);
        pthread_mutex_lock(&pool_lock);
        pool_of(dev)->stats.system_allocs++;
        pthread_mutex_unlock(&pool_lock);
    }
    int rc = be->zero(ptr, capacity);
    pthread_mutex_lock(&pool_lock);
    pool_of(dev)->stats.bytes_in_use += capacity;
    pthread_mutex_unlock(&pool_lock);
    *buf = (pn_buffer){ptr, bytes, capacity, dev};
    if (rc < 0) pn_buffer_release(buf);
    return rc;
}

int pn_buffer_reserve(pn_buffer *buf, pn_device dev, size_t bytes)
{
    if (buf->data && pn_device_equal(buf->device, dev) && buf->capacity >= bytes) {
        buf->bytes = bytes;
        return PN_OK;
    }
    pn_buffer_release(buf);
    return pn_buffer_acquire(buf, dev, bytes);
}

void pn_buffer_release(pn_buffer *buf)
{
    if (!buf->data) return;
    size_t capacity;
    int cls = size_class(buf->capacity, &capacity);
    pthread_mutex_lock(&pool_lock);
    block_node *node = spare_nodes;
    if (node)
        spare_nodes = node->next;
    else
        node = malloc(sizeof *node);
    pool *p = pool_of(buf->device);
    p->stats.bytes_in_use -= buf->capacity;
    if (node) {
        *node = (block_node){buf->data, buf->capacity, p->free_blocks[cls]};
        p->free_blocks[cls] = node;
        p->stats.bytes_cached += buf->capacity;
        pthread_mutex_unlock(&pool_lock);
    } else { /* no memory even for a list node: hand the block back to the system */
        pthread_mutex_unlock(&pool_lock);
        const pn_memory_backend *be;
        if (pn_memory_backend_for(buf->device, &be) == PN_OK) be->free(buf->device.index, buf->data);
    }
    *buf = (pn_buffer){0};
}

int pn_buffer_write(pn_buffer *buf, size_t offset, const void *src, size_t bytes)
{
    const pn_memory_backend *be;
    if (offset + bytes > buf->bytes)
        return pn_error_set(PN_ERR_INTERNAL, "buffer write past the end (%zu + %zu > %zu)",
                            offset, bytes, buf->bytes);
    PN_TRY(pn_memory_backend_for(buf->device, &be));
    return be->copy_from_host((char *)buf->data + offset, src, bytes);
}

int pn_buffer_read(const pn_buffer *buf, size_t offset, void *dst, size_t bytes)
{
    const pn_memory_backend *be;
    if (offset + bytes > buf->bytes)
        return pn_error_set(PN_ERR_INTERNAL, "buffer read past the end (%zu + %zu > %zu)",
                            offset, bytes, buf->bytes);
    PN_TRY(pn_memory_backend_for(buf->device, &be));
    return be->copy_to_host(dst, (const char *)buf->data + offset, bytes);
}

void pn_pool_stats_get(pn_device dev, pn_pool_stats *out)
{
    pthread_mutex_lock(&pool_lock);
    *out = pool_of(dev)->stats;
    pthread_mutex_unlock(&pool_lock);
}

void pn_pool_trim(pn_device dev)
{
    const pn_memory_backend *be;
    if (check_device(dev) < 0 || pn_memory_backend_for(dev, &be) < 0) return;
    pthread_mutex_lock(&pool_lock);
    pool *p = pool_of(dev);
    for (int c = 0; c < N_CLASSES; c++) {
        while (p->free_blocks[c]) {
            block_node *node = p->free_blocks[c];
            p->free_blocks[c] = node->next;
            be->free(dev.index, node->ptr);
            p->stats.bytes_cached -= node->capacity;
            node->next = spare_nodes;
            spare_nodes = node;
        }
    }
    pthread_mutex_unlock(&pool_lock);
}
