/* Where memory lives and kernels run: the host, or one CUDA device. */
#ifndef PN_DEVICE_H
#define PN_DEVICE_H

#include <stdbool.h>

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

/* True when this build has CUDA and at least one device is visible. */
bool pn_cuda_available(void);

#endif
