/* Where memory lives and kernels run: the host, or one CUDA device. */
#ifndef PN_DEVICE_H
#define PN_DEVICE_H

#include <stdbool.h>

#include "base/choices.h"

enum { PN_MAX_CUDA_DEVICES = 16 };

typedef enum pn_device_kind { PN_DEVICE_HOST = 0, PN_DEVICE_CUDA = 1 } pn_device_kind;

typedef struct pn_device {
    pn_device_kind kind;
    int index; /* CUDA ordinal; 0 on the host */
} pn_device;

static inline pn_device pn_device_host(void) { return (pn_device){PN_DEVICE_HOST, 0}; }
static inline pn_device pn_device_cuda(int index) { return (pn_device){PN_DEVICE_CUDA, index}; }
static inline bool pn_device_equal(pn_device a, pn_device b) { return a.kind == b.kind && a.index == b.index; }

/* Writes "host" or "cuda:N" into buf. */
const char *pn_device_name(pn_device dev, char *buf, int cap);

/* True when the CUDA module loads (cuda_module.h; it is opened for the question) and
 * sees at least one device. */
bool pn_cuda_available(void);

/* What a run asks for (--device, "device" in the model's train section), in the
 * order of pn_device_requests, the one table of their names and meanings. */
typedef enum pn_device_request {
    PN_DEVICE_REQUEST_CPU = 0,
    PN_DEVICE_REQUEST_CUDA,
    PN_DEVICE_REQUEST_AUTO /* CUDA where the module loads and a GPU is visible */
} pn_device_request;

extern const pn_choices pn_device_requests;

/* A name of pn_device_requests -> the request; -1 for another name. */
int pn_device_request_from_name(const char *name);
const char *pn_device_request_name(pn_device_request r);

/* A device as a program names one (pn_model_load_on): a name of pn_device_requests
 * (*index 0) or a GPU's label "cuda:N" (N below PN_MAX_CUDA_DEVICES: the request cuda,
 * *index N). Any other name is refused (PN_ERR_INVALID), listing the accepted ones. */
int pn_device_parse(const char *name, pn_device_request *request, int *index);

/* What a run's messages and pn_model_device call dev: the host by the name of the cpu
 * request (pn_device_requests), a GPU "cuda:N"; into buf. */
const char *pn_device_label(pn_device dev, char *buf, int cap);

/* The device of a rank that is node_rank-th on its node: the host for cpu (and for
 * auto without a CUDA module that loads, or without a GPU), else GPU node_rank mod
 * the GPUs visible. cuda where the module cannot be loaded (this build has none, the
 * file is missing, dlopen fails, another pipenet's) or no GPU is visible is an error
 * (PN_ERR_UNSUPPORTED) that says which. cpu, and auto where there is no module file,
 * open nothing. */
int pn_device_resolve(pn_device_request r, int node_rank, pn_device *out);

/* Which GPU dev is, the same number in every process of a node that uses it whatever
 * each process's CUDA_VISIBLE_DEVICES (its PCI domain, bus and device, packed); -1 for
 * the host or when CUDA (or its module) cannot say. */
int pn_device_identity(pn_device dev);

/* Makes dev the current device of this process (cudaSetDevice, through the CUDA
 * module), before any memory or stream is made on it; nothing for the host. */
int pn_device_select(pn_device dev);

#endif
