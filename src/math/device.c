/* Device names, the table of device requests, and which device a rank takes. A GPU
 * is reached through the CUDA module (cuda_module.h), opened here the first time a
 * GPU is asked for. */
#include "math/device.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/log.h"
#include "math/cuda_module.h"

static const pn_choice request_items[] = {
    [PN_DEVICE_REQUEST_CPU] = {"cpu", "the host (OpenBLAS)"},
    [PN_DEVICE_REQUEST_CUDA] = {"cuda", "a GPU, through the CUDA module (pipenet-cuda.so)"},
    [PN_DEVICE_REQUEST_AUTO] = {"auto", "cuda if the CUDA module loads and sees a GPU, else cpu"},
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
    const pn_cuda_module *m;
    return pn_cuda_module_get(&m) == PN_OK && m->device_count() > 0;
}

int pn_device_request_from_name(const char *name)
{
    return pn_choice_find(&pn_device_requests, name);
}

const char *pn_device_request_name(pn_device_request r)
{
    return pn_choice_name(&pn_device_requests, (int)r);
}

int pn_device_parse(const char *name, pn_device_request *request, int *index)
{
    int r = pn_device_request_from_name(name);
    char end;
    *index = 0;
    if (r < 0 && sscanf(name, "cuda:%d%c", index, &end) == 1 && *index >= 0 &&
        *index < PN_MAX_CUDA_DEVICES)
        r = PN_DEVICE_REQUEST_CUDA;
    char list[128];
    if (r < 0)
        return pn_error_set(PN_ERR_INVALID, "device '%s': expected %s, or cuda:N (the N-th GPU)",
                            name, pn_choice_list(&pn_device_requests, list, sizeof list));
    *request = (pn_device_request)r;
    return PN_OK;
}

const char *pn_device_label(pn_device dev, char *buf, int cap)
{
    if (dev.kind != PN_DEVICE_HOST) return pn_device_name(dev, buf, cap);
    snprintf(buf, (size_t)cap, "%s", pn_device_request_name(PN_DEVICE_REQUEST_CPU));
    return buf;
}

/* auto without a module that loads: the host, said once (a node without the CUDA
 * libraries is a cpu node, not an error). */
static int auto_on_host(void)
{
    static bool said;
    if (!said) pn_log_info("device auto: on the cpu: %s", pn_error_message());
    said = true;
    pn_error_clear();
    return PN_OK;
}

int pn_device_resolve(pn_device_request r, int node_rank, pn_device *out)
{
    *out = pn_device_host();
    if (r == PN_DEVICE_REQUEST_CPU) return PN_OK;
    if (r == PN_DEVICE_REQUEST_AUTO && !pn_cuda_module_present()) return PN_OK;
    const pn_cuda_module *m;
    if (pn_cuda_module_get(&m) < 0) {
        if (r == PN_DEVICE_REQUEST_AUTO) return auto_on_host();
        char why[1024];
        snprintf(why, sizeof why, "%s", pn_error_message());
        return pn_error_set(PN_ERR_UNSUPPORTED, "device cuda: %s; use --device cpu or auto", why);
    }
    int n = m->device_count();
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
}

int pn_device_identity(pn_device dev)
{
    const pn_cuda_module *m;
    if (dev.kind == PN_DEVICE_HOST || pn_cuda_module_get(&m) < 0) return -1;
    return m->pci_id(dev.index);
}

int pn_device_select(pn_device dev)
{
    if (dev.kind == PN_DEVICE_HOST) return PN_OK;
    const pn_cuda_module *m;
    PN_TRY(pn_cuda_module_get(&m));
    return m->set_device(dev.index);
}
