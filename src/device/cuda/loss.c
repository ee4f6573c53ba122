/* Softmax cross-entropy and accuracy on a GPU (kernels in loss.cu), as
 * src/device/cpu/loss.c. */
#include "device/cuda/cuda.h"

static int run_xent_forward(void *p, void *ctx)
{
    dp__xent_args *a = p;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    return dp__cuda_launched(dp__cuda_xent_forward(a, cu->stream), "cross_entropy forward");
}

int dp__cuda_cross_entropy_forward(dp_device_t *dev, const dp__xent_args *a)
{
    return dp__cuda_push(dev, run_xent_forward, a, sizeof *a);
}

static int run_xent_backward(void *p, void *ctx)
{
    dp__xent_args *a = p;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    return dp__cuda_launched(dp__cuda_xent_backward(a, cu->stream), "cross_entropy backward");
}

int dp__cuda_cross_entropy_backward(dp_device_t *dev, const dp__xent_args *a)
{
    if (a->n == 0)
        return 0;
    return dp__cuda_push(dev, run_xent_backward, a, sizeof *a);
}

static int run_accuracy(void *p, void *ctx)
{
    dp__accuracy_args *a = p;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    return dp__cuda_launched(dp__cuda_accuracy_launch(a, cu->stream), "accuracy");
}

int dp__cuda_accuracy(dp_device_t *dev, const dp__accuracy_args *a)
{
    if (a->n == 0)
        return 0;
    return dp__cuda_push(dev, run_accuracy, a, sizeof *a);
}
