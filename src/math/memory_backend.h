/* The memory half of a device's backend (backend.h): raw blocks for the pool and
 * the copies between them and host memory. It is all that pn_buffer and
 * pn_matrix_read/write need of a device, so they do not depend on the op table. */
#ifndef PN_MEMORY_BACKEND_H
#define PN_MEMORY_BACKEND_H

#include <stddef.h>

#include "math/device.h"

typedef struct pn_memory_backend {
    void *(*alloc)(int device_index, size_t bytes);
    void (*free)(int device_index, void *ptr);
    int (*zero)(void *ptr, size_t bytes);
    int (*copy_from_host)(void *dst, const void *src, size_t bytes);
    int (*copy_to_host)(void *dst, const void *src, size_t bytes);
} pn_memory_backend;

/* dev's memory slots: the CPU's, or the CUDA module's (opened on first need, as
 * pn_backend_for does); an error when that module cannot be had. */
int pn_memory_backend_for(pn_device dev, const pn_memory_backend **out);

#endif
