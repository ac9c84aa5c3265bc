/* The one symbol the CUDA module (pipenet-cuda.so) exports: its descriptor
 * (math/cuda_module.h), naming the CUDA backend (math/cuda) and, where the build has
 * NCCL, this folder's NCCL transport. Built into the module only, never into
 * libpipenet.a: here because it names a table of src/mpi, the highest floor it
 * touches. */
#include "config.h"

#include "math/cuda/cuda_exports.h"
#include "math/cuda_module.h"
#ifdef PN_HAVE_NCCL
#include "mpi/nccl_impl.h"
#endif

__attribute__((visibility("default"))) const pn_cuda_module PN_CUDA_MODULE_ENTRY = {
    .abi = PN_CUDA_MODULE_ABI,
    .version = PACKAGE_VERSION,
    .descriptor_size = sizeof(pn_cuda_module),
    .backend_size = sizeof(pn_backend),
    .matrix_size = sizeof(pn_matrix),
    .backend = &pn_cuda_backend,
    .device_count = pn_cuda_device_count,
    .set_device = pn_cuda_set_device,
    .pci_id = pn_cuda_pci_id,
    .compute_stream = pn_cuda_compute_stream,
#ifdef PN_HAVE_NCCL
    .nccl_transport = &pn_transport_nccl,
    .nccl_transport_size = sizeof(pn_transport),
#endif
};
