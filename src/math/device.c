/* Device names and CUDA presence. */
#include "config.h"

#include "math/device.h"

#include <stdio.h>

#ifdef PN_HAVE_CUDA
int pn_cuda_device_count(void); /* math/cuda/cuda_backend.cu */
#endif

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
