/* Device names, the table of device requests, CUDA presence, and which device a rank
 * takes. */
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

static const pn_choice request_items[] = {
    [PN_DEVICE_REQUEST_CPU] = {"cpu", "the host (OpenBLAS)"},
    [PN_DEVICE_REQUEST_CUDA] = {"cuda", "a GPU (a build with CUDA)"},
    [PN_DEVICE_REQUEST_AUTO] = {"auto", "cuda if this build has CUDA and sees a GPU, else cpu"},
};
_Static_assert(sizeof request_items / sizeof *request_items == PN_DEVICE_REQUEST_AUTO + 1,
               "one line per pn_device_request");
const pn_choices pn_device_requests = {"a device", PN_DEVICE_REQUEST_AUTO + 1, request_items};

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
    return pn_choice_find(&pn_device_requests, name);
}

const char *pn_device_request_name(pn_device_request r)
{
    return pn_choice_name(&pn_device_requests, (int)r);
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
