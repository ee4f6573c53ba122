// PReLU on a GPU, as src/device/cpu/prelu.c: x (N, C, rest) in either
// layout, one slope per channel or one for all. Forward and dx: one thread
// per element. The slopes' gradient: one block per slope, its threads
// striding over that channel's elements (all of them for one slope) and
// summing in a fixed tree, so the bits do not depend on the launch.
#include "device/cuda/cuda_kernels.h"

#include "device/cuda/launch.cuh"
#include "device/cuda/reduce.cuh"

#include <cuda_runtime.h>

namespace
{

using dp_cuda::kThreads;

using shape = dp__channel_view;

__device__ int64_t channel(int64_t i, shape s)
{
    return s.nhwc ? i % s.C : (i / s.HW) % s.C;
}

__global__ void forward_kernel(const float *x, const float *w, float *y, shape s, int64_t nw)
{
    int64_t n = s.N * s.C * s.HW;
    DP_CUDA_KERNEL_LOOP(i, n) {
        float v = x[i];
        y[i] = v > 0.0f ? v : w[nw == 1 ? 0 : channel(i, s)] * v;
    }
}

__global__ void backward_data_kernel(const float *x, const float *w, const float *dy, float *dx,
                                     shape s, int64_t nw)
{
    int64_t n = s.N * s.C * s.HW;
    DP_CUDA_KERNEL_LOOP(i, n)
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
    sum = dp_cuda::block_sum<kThreads>(part, sum);
    if (threadIdx.x == 0)
        dw[k] = sum;
}

cudaError_t launch_forward(const dp__prelu_args *a, cudaStream_t stream)
{
    shape s = dp__channel_view_of(&a->x);
    return dp_cuda::launch_over(s.N * s.C * s.HW, stream, forward_kernel,
                                static_cast<const float *>(a->x.data), a->w, a->y, s, a->nw);
}

cudaError_t launch_backward(const dp__prelu_args *a, cudaStream_t stream)
{
    shape s = dp__channel_view_of(&a->x);
    const float *x = static_cast<const float *>(a->x.data);
    cudaError_t e = dp_cuda::launch_over(s.N * s.C * s.HW, stream, backward_data_kernel, x, a->w,
                                         a->dy, a->dx, s, a->nw);
    if (e != cudaSuccess)
        return e;
    backward_weight_kernel<<<(unsigned)a->nw, kThreads, 0, stream>>>(x, a->dy, a->dw, s, a->nw);
    return cudaGetLastError();
}

} // namespace

DP_CUDA_ENTRY(prelu_forward, dp__prelu_args, launch_forward)
DP_CUDA_ENTRY(prelu_backward, dp__prelu_args, launch_backward)
