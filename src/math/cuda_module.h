/* The CUDA module: the CUDA backend (math/cuda) and the NCCL transport (src/mpi)
 * are built into one shared object, pipenet-cuda.so, that pipenet opens (dlopen)
 * only when something asks for a GPU, so that a run on the cpu, --version and the
 * program's start load no CUDA library. The module exports one symbol, its
 * descriptor (pn_cuda_module, named PN_CUDA_MODULE_ENTRY); every pn_ function it
 * calls (errors, pools, copies, the comm seam's waits) is the program's own, which
 * exports them (src/math/cuda_module.exports) and links all of libpipenet.a.
 *
 * Where it is looked for: $PIPENET_CUDA_MODULE (a path) when set; else beside the
 * running program (the folder of /proc/self/exe: the build tree's pipenet finds
 * the build tree's module); else $(pkglibdir). A build without CUDA has no module
 * and looks nowhere. No MPI here: the NCCL transport's table is an opaque pointer
 * that src/mpi casts. */
#ifndef PN_CUDA_MODULE_H
#define PN_CUDA_MODULE_H

#include <stdbool.h>
#include <stddef.h>

#include "math/backend.h"

#define PN_CUDA_MODULE_FILE "pipenet-cuda.so"
/* The descriptor's name, as the module defines it and as dlsym looks it up (the
 * module's link keeps only it: src/math/cuda/module.map). */
#define PN_CUDA_MODULE_ENTRY pn_cuda_module_entry
#define PN_CUDA_MODULE_ENTRY_NAME PN_CUDA_MODULE_QUOTE_(PN_CUDA_MODULE_ENTRY)
#define PN_CUDA_MODULE_QUOTE_(x) PN_CUDA_MODULE_QUOTE2_(x)
#define PN_CUDA_MODULE_QUOTE2_(x) #x

/* Raised when the descriptor, or a convention of the calls between the program and
 * the module, changes in a way that the sizes checked below do not show. */
enum { PN_CUDA_MODULE_ABI = 1 };

typedef struct pn_cuda_module {
    /* What the loader checks before it uses anything else: the module was built
     * from this pipenet. */
    int abi;                 /* PN_CUDA_MODULE_ABI */
    const char *version;     /* PACKAGE_VERSION */
    size_t descriptor_size;  /* sizeof(pn_cuda_module) */
    size_t backend_size;     /* sizeof(pn_backend) */
    size_t matrix_size;      /* sizeof(pn_matrix) */

    const pn_backend *backend;          /* the CUDA table */
    int (*device_count)(void);          /* GPUs visible; 0 without a GPU or driver */
    int (*set_device)(int index);       /* cudaSetDevice */
    int (*pci_id)(int index);           /* see pn_device_identity; -1 unknown */
    int (*compute_stream)(void **out);  /* the current device's stream (a cudaStream_t) */
    const void *nccl_transport;         /* a pn_transport (mpi/comm_impl.h); NULL when
                                           the module was built without NCCL */
    size_t nccl_transport_size;         /* its sizeof, which src/mpi checks */
} pn_cuda_module;

/* Whether this build made a module (configure found CUDA), and one that carries the
 * NCCL transport (configure found NCCL too). Looks at no file. */
bool pn_cuda_module_built(void);
bool pn_cuda_module_built_with_nccl(void);

/* Whether there is a module to try: PIPENET_CUDA_MODULE is set, or a file is in one
 * of the places searched. Opens nothing (--device auto asks this first). */
bool pn_cuda_module_present(void);

/* The module, opened and checked on the first call; later calls give the first
 * call's outcome. PN_ERR_UNSUPPORTED with a message naming the path and the reason
 * (built without CUDA, no file, dlopen's error, another pipenet's module). */
int pn_cuda_module_get(const pn_cuda_module **out);

/* The path of the module opened (or tried), "" before any. */
const char *pn_cuda_module_path(void);

#endif
