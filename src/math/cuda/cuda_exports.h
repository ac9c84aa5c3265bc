/* What the CUDA backend (cuda_backend.cu) gives the rest of the CUDA module, in C
 * linkage for C and CUDA files alike: the table, the device queries, and the
 * compute stream, which src/mpi/cuda_module_entry.c puts in the module's descriptor
 * (math/cuda_module.h) and the NCCL transport orders its streams after. Only files
 * built into the module include this. */
#ifndef PN_CUDA_EXPORTS_H
#define PN_CUDA_EXPORTS_H

#ifdef __cplusplus
extern "C" {
#endif

#include "math/backend.h"

extern const pn_backend pn_cuda_backend;

/* GPUs visible to this process; 0 without a GPU or a driver. */
int pn_cuda_device_count(void);
/* cudaSetDevice(index), checked. */
int pn_cuda_set_device(int index);
/* GPU index's PCI domain, bus and device packed (math/device.h: pn_device_identity). */
int pn_cuda_pci_id(int index);
/* The current device's compute stream (a cudaStream_t) into *out. */
int pn_cuda_compute_stream(void **out);

#ifdef __cplusplus
}
#endif

#endif
