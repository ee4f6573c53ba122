/* Elementwise kernels and layout copies on a GPU (kernels in eltwise.cu),
 * as src/device/cpu/eltwise.c. */
#include "device/cuda/cuda.h"

_Static_assert(DP__ELT_RELU == 0 && DP__ELT_RELU_BACKWARD == 1 && DP__ELT_ADD == 2 &&
                   DP__ELT_ACCUMULATE == 3 && DP__ELT_SCALE == 4 && DP__ELT_COPY == 5 &&
                   DP__ELT_SIGMOID == 6 && DP__ELT_SIGMOID_BACKWARD == 7 && DP__ELT_TANH == 8 &&
                   DP__ELT_TANH_BACKWARD == 9 && DP__ELT_ADD_RELU == 10,
               "eltwise.cu numbers the ops in dp__eltwise_op's order");

static int run_eltwise(void *p, void *ctx)
{
    dp__eltwise_args *a = p;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    if (a->op == DP__ELT_COPY) {
        if (a->out != a->a)
            DP_CUDA_CHECK(cudaMemcpyAsync(a->out, a->a, (size_t)a->n * sizeof(float),
                                          cudaMemcpyDefault, cu->stream));
        return 0;
    }
    return dp__cuda_launched(dp__cuda_eltwise_launch(a, cu->stream), "eltwise");
}

int dp__cuda_eltwise(dp_device_t *dev, const dp__eltwise_args *a)
{
    if (a->n == 0)
        return 0;
    return dp__cuda_push(dev, run_eltwise, a, sizeof *a);
}

static int run_relayout(void *p, void *ctx)
{
    dp__relayout_args *a = p;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    return dp__cuda_launched(dp__cuda_relayout_launch(a, cu->stream), "relayout");
}

int dp__cuda_relayout(dp_device_t *dev, const dp__relayout_args *a)
{
    DP_ASSERT(a->src.ndim == 4 && a->src.nhwc != a->dst.nhwc);
    if (dp__numel(4, a->src.shape) == 0)
        return 0;
    return dp__cuda_push(dev, run_relayout, a, sizeof *a);
}
