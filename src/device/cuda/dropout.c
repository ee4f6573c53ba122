/* Inverted dropout on a GPU (kernel in dropout.cu), as
 * src/device/cpu/dropout.c: the same mask, drawn from the same
 * counter-based RNG at each element's global index. */
#include "device/cuda/cuda.h"

static int run_dropout(void *p, void *ctx)
{
    dp__dropout_args *a = p;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    return dp__cuda_launched(dp__cuda_dropout_launch(a, cu->stream), "dropout");
}

int dp__cuda_dropout(dp_device_t *dev, const dp__dropout_args *a)
{
    if (a->samples * a->sample_size == 0)
        return 0;
    return dp__cuda_push(dev, run_dropout, a, sizeof *a);
}
