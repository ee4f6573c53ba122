// The activations on a GPU, as src/device/cpu/activation.c: every kind
// through device/activation_math.h's formulas, forward from the input and
// backward from the saved input, f32, over the tensor as a vector of n
// values. Kernels, launchers and the device table's entries in one file:
// each entry enqueues one launcher (dp__cuda_push_launch). Grid-stride
// loops; 256 threads a block.
#include "device/activation_math.h"
#include "device/cuda/cuda_kernels.h"

#include "device/cuda/launch.cuh"

#include <cuda_runtime.h>

namespace {

constexpr int kThreads = 256;

__global__ void forward_kernel(int kind, const float *x, float *y, int64_t n, float a, float b)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = dp__act_forward(kind, x[i], a, b);
}

__global__ void backward_kernel(int kind, const float *x, const float *dy, float *dx, int64_t n,
                                float a, float b)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        dx[i] = dp__act_backward(kind, x[i], dy[i], a, b);
}

cudaError_t launch_forward(const void *args, cudaStream_t stream)
{
    const dp__activation_args *a = static_cast<const dp__activation_args *>(args);
    forward_kernel<<<dp_cuda::blocks_for(a->n), kThreads, 0, stream>>>(a->kind, a->x, a->out,
                                                                      a->n, a->alpha, a->beta);
    return cudaGetLastError();
}

cudaError_t launch_backward(const void *args, cudaStream_t stream)
{
    const dp__activation_args *a = static_cast<const dp__activation_args *>(args);
    backward_kernel<<<dp_cuda::blocks_for(a->n), kThreads, 0, stream>>>(
        a->kind, a->x, a->dy, a->out, a->n, a->alpha, a->beta);
    return cudaGetLastError();
}

} // namespace

extern "C" int dp__cuda_activation_forward(dp_device_t *dev, const dp__activation_args *a)
{
    if (a->n == 0)
        return 0;
    return dp__cuda_push_launch(dev, launch_forward, "activation.cu:forward", a, sizeof *a);
}

extern "C" int dp__cuda_activation_backward(dp_device_t *dev, const dp__activation_args *a)
{
    if (a->n == 0)
        return 0;
    return dp__cuda_push_launch(dev, launch_backward, "activation.cu:backward", a, sizeof *a);
}
