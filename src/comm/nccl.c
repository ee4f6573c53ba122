/* The NCCL backend: the GPUs' allreduce of DP_ALLREDUCE_NCCL
 * (allreduce_nccl.c orders the devices' streams around it). NCCL is called
 * in nccl_launch.c only, on the CUDA streams the CUDA device's table offers
 * (cuda_stream). Several logical devices on one GPU cannot be NCCL ranks of
 * one clique.
 *
 * The launch is part of the CUDA backend's module (device/cuda/
 * cuda_module.h), with NCCL itself: the library reaches it through the
 * module, which a GPU device's opening has loaded. Without the module
 * there is no GPU device, and NCCL is never available. */
#include "comm/allreduce.h"
#include "core/internal.h"
#include "device/device.h"
#include "engine/stream.h"

#include <string.h>

/* GPUs NCCL can sum on: devices of one backend that offers their CUDA
 * streams (only the CUDA backend, which a build has only with NCCL). */
bool dp__nccl_available(dp_device_t *const *devs, int n)
{
    if (n < 2)
        return false;
    for (int k = 0; k < n; k++)
        if (devs[k]->ops != devs[0]->ops || !devs[k]->ops->cuda_stream)
            return false;
    return true;
}

/* A CUDA device's index is its GPU's ordinal (cuda:<ordinal>). */
bool dp__nccl_usable(dp_device_t *const *devs, int n)
{
    if (!dp__nccl_available(devs, n))
        return false;
    for (int k = 0; k < n; k++)
        for (int j = 0; j < k; j++)
            if (devs[j]->index == devs[k]->index)
                return false;
    return true;
}

/* The module's launch (nccl_launch.c). */
typedef int (*nccl_sum_fn)(dp_device_t *const *devs, float *const *data, int n, int64_t len);

int dp__nccl_enqueue_sum(dp_device_t *const *devs, float *const *data, int n, int64_t len)
{
    nccl_sum_fn sum;
    void *p = dp__backend_symbol(DP__BACKEND_cuda, "dp__nccl_launch_sum");
    if (!p) {
        DP_ERROR("allreduce nccl: this build's CUDA module is not loaded");
        return DP_ENOTSUP;
    }
    memcpy(&sum, &p, sizeof sum);
    return sum(devs, data, n, len);
}
