// The activations on a GPU, as src/device/cpu/activation.c: every kind
// through device/activation_math.h's formulas, forward from the input and
// backward from the saved input, f32, over the tensor as a vector of n
// values. Kernels, launchers and the device table's entries in one file
// (launch.cuh: each entry enqueues one launcher). Grid-stride loops.
#include "device/activation_math.h"
#include "device/cuda/cuda_kernels.h"

#include "device/cuda/launch.cuh"

#include <cuda_runtime.h>

namespace
{

__global__ void forward_kernel(int kind, const float *x, float *y, int64_t n, float a, float b)
{
    DP_CUDA_KERNEL_LOOP(i, n)
        y[i] = dp__act_forward(kind, x[i], a, b);
}

__global__ void backward_kernel(int kind, const float *x, const float *dy, float *dx, int64_t n,
                                float a, float b)
{
    DP_CUDA_KERNEL_LOOP(i, n)
        dx[i] = dp__act_backward(kind, x[i], dy[i], a, b);
}

cudaError_t launch_forward(const dp__activation_args *a, cudaStream_t stream)
{
    return dp_cuda::launch_over(a->n, stream, forward_kernel, a->kind, a->x, a->out, a->n, a->alpha,
                                a->beta);
}

cudaError_t launch_backward(const dp__activation_args *a, cudaStream_t stream)
{
    return dp_cuda::launch_over(a->n, stream, backward_kernel, a->kind, a->x, a->dy, a->out, a->n,
                                a->alpha, a->beta);
}

} // namespace

DP_CUDA_ENTRY(activation_forward, dp__activation_args, launch_forward)
DP_CUDA_ENTRY(activation_backward, dp__activation_args, launch_backward)
