// LeakyReLU on a GPU, as src/device/cpu/leaky_relu.c: y = x > 0 ? x : slope
// x, and dx = x > 0 ? dy : slope dy from the saved input, f32, over the
// tensor as a vector of n values. Kernels, launchers and the device table's
// entries in one file: each entry enqueues one launcher
// (dp__cuda_push_launch). Grid-stride loops; 256 threads a block.
#include "device/cuda/cuda_kernels.h"

#include "device/cuda/launch.cuh"

#include <cuda_runtime.h>

namespace {

constexpr int kThreads = 256;

__global__ void forward_kernel(const float *x, float *y, int64_t n, float slope)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = x[i] > 0.0f ? x[i] : slope * x[i];
}

__global__ void backward_kernel(const float *dy, const float *x, float *dx, int64_t n,
                                float slope)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        dx[i] = x[i] > 0.0f ? dy[i] : slope * dy[i];
}

cudaError_t launch_forward(const void *args, cudaStream_t stream)
{
    const dp__eltwise_args *a = static_cast<const dp__eltwise_args *>(args);
    forward_kernel<<<dp_cuda::blocks_for(a->n), kThreads, 0, stream>>>(
        static_cast<const float *>(a->a), static_cast<float *>(a->out), a->n, a->alpha);
    return cudaGetLastError();
}

cudaError_t launch_backward(const void *args, cudaStream_t stream)
{
    const dp__eltwise_args *a = static_cast<const dp__eltwise_args *>(args);
    backward_kernel<<<dp_cuda::blocks_for(a->n), kThreads, 0, stream>>>(
        static_cast<const float *>(a->a), static_cast<const float *>(a->b),
        static_cast<float *>(a->out), a->n, a->alpha);
    return cudaGetLastError();
}

} // namespace

extern "C" int dp__cuda_leaky_relu_forward(dp_device_t *dev, const dp__eltwise_args *a)
{
    if (a->n == 0)
        return 0;
    return dp__cuda_push_launch(dev, launch_forward, "leaky_relu.cu:forward", a, sizeof *a);
}

extern "C" int dp__cuda_leaky_relu_backward(dp_device_t *dev, const dp__eltwise_args *a)
{
    if (a->n == 0)
        return 0;
    return dp__cuda_push_launch(dev, launch_backward, "leaky_relu.cu:backward", a, sizeof *a);
}
