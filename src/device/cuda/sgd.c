/* The SGD update and the non-finite gradient check on a GPU (kernels in
 * sgd.cu), as src/device/cpu/sgd.c. */
#include "device/cuda/cuda.h"

static int run_sgd(void *p, void *ctx)
{
    dp__sgd_args *a = p;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    return dp__cuda_launched(dp__cuda_sgd_launch(a, cu->stream), "sgd");
}

int dp__cuda_sgd(dp_device_t *dev, const dp__sgd_args *a)
{
    if (a->n == 0)
        return 0;
    return dp__cuda_push(dev, run_sgd, a, sizeof *a);
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
