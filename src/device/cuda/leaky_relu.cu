// LeakyReLU on a GPU, as src/device/cpu/leaky_relu.c: y = x > 0 ? x : slope
// x, and dx = x > 0 ? dy : slope dy from the saved input, f32, over the
// tensor as a vector of n values. Kernels, launchers and the device table's
// entries in one file (launch.cuh: each entry enqueues one launcher).
// Grid-stride loops.
#include "device/cuda/cuda_kernels.h"

#include "device/cuda/launch.cuh"

#include <cuda_runtime.h>

namespace
{

__global__ void forward_kernel(const float *x, float *y, int64_t n, float slope)
{
    DP_CUDA_KERNEL_LOOP(i, n)
        y[i] = x[i] > 0.0f ? x[i] : slope * x[i];
}

__global__ void backward_kernel(const float *dy, const float *x, float *dx, int64_t n,
                                float slope)
{
    DP_CUDA_KERNEL_LOOP(i, n)
        dx[i] = x[i] > 0.0f ? dy[i] : slope * dy[i];
}

cudaError_t launch_forward(const dp__eltwise_args *a, cudaStream_t stream)
{
    return dp_cuda::launch_over(a->n, stream, forward_kernel, static_cast<const float *>(a->a),
                                static_cast<float *>(a->out), a->n, a->alpha);
}

cudaError_t launch_backward(const dp__eltwise_args *a, cudaStream_t stream)
{
    return dp_cuda::launch_over(a->n, stream, backward_kernel, static_cast<const float *>(a->a),
                                static_cast<const float *>(a->b), static_cast<float *>(a->out),
                                a->n, a->alpha);
}

} // namespace

DP_CUDA_ENTRY(leaky_relu_forward, dp__eltwise_args, launch_forward)
DP_CUDA_ENTRY(leaky_relu_backward, dp__eltwise_args, launch_backward)
