// PReLU on a GPU, as src/device/cpu/prelu.c: x (N, C, rest) in either
// layout, one slope per channel or one for all. Forward and dx: one thread
// per element. The slopes' gradient: one block per slope, its threads
// striding over that channel's elements (all of them for one slope) and
// summing in a fixed tree, so the bits do not depend on the launch.
#include "device/cuda/cuda_kernels.h"

#include "device/cuda/launch.cuh"

#include <cuda_runtime.h>

namespace
{

constexpr int kThreads = 256;

struct shape {
    int64_t N, C, HW;
    int nhwc;
};

shape shape_of(const dp__prelu_args *a)
{
    shape s = {a->x.shape[0], a->x.shape[1], 1, a->x.nhwc};
    for (int d = 2; d < a->x.ndim; d++)
        s.HW *= a->x.shape[d];
    return s;
}

__device__ int64_t channel(int64_t i, shape s)
{
    return s.nhwc ? i % s.C : (i / s.HW) % s.C;
}

__global__ void forward_kernel(const float *x, const float *w, float *y, shape s, int64_t nw)
{
    int64_t n = s.N * s.C * s.HW;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float v = x[i];
        y[i] = v > 0.0f ? v : w[nw == 1 ? 0 : channel(i, s)] * v;
    }
}

__global__ void backward_data_kernel(const float *x, const float *w, const float *dy, float *dx,
                                     shape s, int64_t nw)
{
    int64_t n = s.N * s.C * s.HW;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        dx[i] = x[i] > 0.0f ? dy[i] : w[nw == 1 ? 0 : channel(i, s)] * dy[i];
}

// Block k sums x dy where x <= 0 over slope k's elements: element t of
// N x HW of channel k, or every element for one slope.
__global__ void backward_weight_kernel(const float *x, const float *dy, float *dw, shape s,
                                       int64_t nw)
{
    __shared__ float part[kThreads];
    int64_t k = blockIdx.x, count = nw == 1 ? s.N * s.C * s.HW : s.N * s.HW;
    float sum = 0.0f;
    for (int64_t t = threadIdx.x; t < count; t += blockDim.x) {
        int64_t i = t;
        if (nw != 1) {
            int64_t n = t / s.HW, h = t % s.HW;
            i = s.nhwc ? (n * s.HW + h) * s.C + k : (n * s.C + k) * s.HW + h;
        }
        sum += x[i] > 0.0f ? 0.0f : x[i] * dy[i];
    }
    part[threadIdx.x] = sum;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half)
            part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        dw[k] = part[0];
}

cudaError_t launch_forward(const void *args, cudaStream_t stream)
{
    const dp__prelu_args *a = static_cast<const dp__prelu_args *>(args);
    shape s = shape_of(a);
    forward_kernel<<<dp_cuda::blocks_for(s.N * s.C * s.HW), kThreads, 0, stream>>>(
        static_cast<const float *>(a->x.data), a->w, a->y, s, a->nw);
    return cudaGetLastError();
}

cudaError_t launch_backward(const void *args, cudaStream_t stream)
{
    const dp__prelu_args *a = static_cast<const dp__prelu_args *>(args);
    shape s = shape_of(a);
    const float *x = static_cast<const float *>(a->x.data);
    if (s.N * s.C * s.HW > 0)
        backward_data_kernel<<<dp_cuda::blocks_for(s.N * s.C * s.HW), kThreads, 0, stream>>>(
            x, a->w, a->dy, a->dx, s, a->nw);
    backward_weight_kernel<<<(unsigned)a->nw, kThreads, 0, stream>>>(x, a->dy, a->dw, s, a->nw);
    return cudaGetLastError();
}

} // namespace

extern "C" int dp__cuda_prelu_forward(dp_device_t *dev, const dp__prelu_args *a)
{
    return dp__cuda_push_launch(dev, launch_forward, "prelu.cu:forward", a, sizeof *a);
}

extern "C" int dp__cuda_prelu_backward(dp_device_t *dev, const dp__prelu_args *a)
{
    return dp__cuda_push_launch(dev, launch_backward, "prelu.cu:backward", a, sizeof *a);
}
