/* Adaptive average pooling on a GPU (kernels in adaptive_pool.cu), as
 * src/device/cpu/adaptive_pool.c. cuDNN's pooling has no overlapping,
 * uneven windows either. */
#include "device/cuda/cuda.h"

static int run_forward(void *p, void *ctx)
{
    dp__adaptive_pool_args *a = p;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    return dp__cuda_launched(dp__cuda_adaptive_avg_pool_forward_launch(a, cu->stream),
                             "adaptive_avg_pool forward");
}

int dp__cuda_adaptive_avg_pool_forward(dp_device_t *dev, const dp__adaptive_pool_args *a)
{
    if (dp__numel(4, a->y.shape) == 0)
        return 0;
    return dp__cuda_push(dev, run_forward, a, sizeof *a);
}

static int run_backward(void *p, void *ctx)
{
    dp__adaptive_pool_args *a = p;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    return dp__cuda_launched(dp__cuda_adaptive_avg_pool_backward_launch(a, cu->stream),
                             "adaptive_avg_pool backward");
}

int dp__cuda_adaptive_avg_pool_backward(dp_device_t *dev, const dp__adaptive_pool_args *a)
{
    if (dp__numel(4, a->x.shape) == 0)
        return 0;
    return dp__cuda_push(dev, run_backward, a, sizeof *a);
}
