/* A shared object that looks like a CUDA module built for another pipenet (another
 * module ABI and version, and no tables): tests/test_cuda_module.sh checks that the
 * loader (math/cuda_module.h) refuses it before using anything in it, naming it. */
#include "math/cuda_module.h"

__attribute__((visibility("default"))) const pn_cuda_module PN_CUDA_MODULE_ENTRY = {
    .abi = PN_CUDA_MODULE_ABI + 1000,
    .version = "0.0.0-another",
    .descriptor_size = sizeof(pn_cuda_module),
    .backend_size = sizeof(pn_backend),
    .matrix_size = sizeof(pn_matrix),
};
