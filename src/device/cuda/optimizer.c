/* The optimizer's update, the clipping factor and the non-finite gradient
 * check on a GPU (kernels in optimizer.cu), as src/device/cpu/optimizer.c. */
#include "device/cuda/cuda.h"

static int run_optimizer_step(void *p, void *ctx)
{
    dp__optimizer_args *a = p;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    return dp__cuda_launched(dp__cuda_optimizer_step_launch(a, cu->stream), "optimizer_step");
}

int dp__cuda_optimizer_step(dp_device_t *dev, const dp__optimizer_args *a)
{
    if (a->n == 0)
        return 0;
    return dp__cuda_push(dev, run_optimizer_step, a, sizeof *a);
}

static int run_grad_clip(void *p, void *ctx)
{
    dp__grad_clip_args *a = p;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    return dp__cuda_launched(dp__cuda_grad_clip_launch(a, cu->stream), "grad_clip");
}

int dp__cuda_grad_clip(dp_device_t *dev, const dp__grad_clip_args *a)
{
    return dp__cuda_push(dev, run_grad_clip, a, sizeof *a);
}

static int run_check_finite(void *p, void *ctx)
{
    dp__check_finite_args *a = p;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    return dp__cuda_launched(dp__cuda_check_finite_launch(a, cu->stream), "check_finite");
}

int dp__cuda_check_finite(dp_device_t *dev, const dp__check_finite_args *a)
{
    return dp__cuda_push(dev, run_check_finite, a, sizeof *a);
}
