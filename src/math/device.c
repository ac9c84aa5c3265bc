/* Device names, CUDA presence, and which device a rank takes. */
#include "config.h"

#include "math/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

#ifdef PN_HAVE_CUDA
int pn_cuda_device_count(void);   /* math/cuda/cuda_backend.cu */
int pn_cuda_set_device(int index); /* math/cuda/cuda_backend.cu */
int pn_cuda_pci_id(int index);     /* math/cuda/cuda_backend.cu */
#endif

static const char *const request_names[] = {"cpu", "cuda", "auto"};

const char *pn_device_name(pn_device dev, char *buf, int cap)
{
    if (dev.kind == PN_DEVICE_HOST)
        snprintf(buf, (size_t)cap, "host");
    else
        snprintf(buf, (size_t)cap, "cuda:%d", dev.index);
    return buf;
}

bool pn_cuda_available(void)
{
#ifdef PN_HAVE_CUDA
    return pn_cuda_device_count() > 0;
#else
    return false;
#endif
}

int pn_device_request_from_name(const char *name)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, request_names[i])) return i;
    return -1;
}

const char *pn_device_request_name(pn_device_request r)
{
    return r >= PN_DEVICE_REQUEST_CPU && r <= PN_DEVICE_REQUEST_AUTO ? request_names[r] : "?";
}

int pn_device_resolve(pn_device_request r, int node_rank, pn_device *out)
{
    *out = pn_device_host();
    if (r == PN_DEVICE_REQUEST_CPU) return PN_OK;
#ifdef PN_HAVE_CUDA
    int n = pn_cuda_device_count();
    if (n > 0) {
        *out = pn_device_cuda((node_rank > 0 ? node_rank : 0) % n);
        return PN_OK;
    }
    if (r == PN_DEVICE_REQUEST_AUTO) return PN_OK;
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    if (visible)
        return pn_error_set(PN_ERR_UNSUPPORTED, "device cuda: no CUDA device is visible to this "
                            "process (CUDA_VISIBLE_DEVICES=%s); use --device cpu or auto",
                            visible);
    return pn_error_set(PN_ERR_UNSUPPORTED, "device cuda: no CUDA device is visible to this "
                        "process (no GPU or no driver found); use --device cpu or auto");
#else
    if (r == PN_DEVICE_REQUEST_AUTO) return PN_OK;
    return pn_error_set(PN_ERR_UNSUPPORTED,
                        "device cuda: this pipenet was built without CUDA (./configure found no "
                        "CUDA toolkit, or was given --without-cuda); use --device cpu or auto");
#endif
}

int pn_device_identity(pn_device dev)
{
    if (dev.kind == PN_DEVICE_HOST) return -1;
#ifdef PN_HAVE_CUDA
    return pn_cuda_pci_id(dev.index);
#else
    return -1;
#endif
}

int pn_device_select(pn_device dev)
{
    if (dev.kind == PN_DEVICE_HOST) return PN_OK;
#ifdef PN_HAVE_CUDA
    return pn_cuda_set_device(dev.index);
#else
    return pn_error_set(PN_ERR_UNSUPPORTED, "this pipenet was built without CUDA");
#endif
}
