// Binary ops with broadcasting over channels on a GPU, as
// src/device/cpu/binary.c, through device/binary_math.h's formulas. Forward
// and the full operands' gradients: one thread per element. A broadcast
// operand's gradient: one block per value it holds, its threads striding
// over the elements that read that value and summing in a fixed tree.
#include "device/binary_math.h"
#include "device/cuda/cuda_kernels.h"

#include "device/cuda/launch.cuh"
#include "device/cuda/reduce.cuh"

#include <cuda_runtime.h>

namespace
{

using dp_cuda::kThreads;

__global__ void forward_kernel(dp__binary_args a)
{
    int64_t per = a.C * a.HW, total = a.N * per;
    DP_CUDA_KERNEL_LOOP(i, total) {
        int64_t n = i / per, c = dp__binary_channel(i % per, a.C, a.HW, a.nhwc);
        a.y[i] = dp__binary_apply(a.op, a.a[dp__binary_at(a.a_bcast, i, n, c, a.C)],
                                  a.b[dp__binary_at(a.b_bcast, i, n, c, a.C)]);
    }
}

__device__ float grad_at(const dp__binary_args &a, int which, int64_t i)
{
    int64_t per = a.C * a.HW, n = i / per, c = dp__binary_channel(i % per, a.C, a.HW, a.nhwc);
    return dp__binary_grad(a.op, which, a.dy[i], a.a[dp__binary_at(a.a_bcast, i, n, c, a.C)],
                           a.b[dp__binary_at(a.b_bcast, i, n, c, a.C)]);
}

__global__ void full_grad_kernel(dp__binary_args a, int which, float *out)
{
    int64_t total = a.N * a.C * a.HW;
    DP_CUDA_KERNEL_LOOP(i, total)
        out[i] = grad_at(a, which, i);
}

// Block r sums the gradient over the elements reading value r of an
// operand broadcast as bc: channel r over (N, HW), sample-channel r over
// HW, or everything for one element.
__global__ void reduce_kernel(dp__binary_args a, int which, int bc, float *out)
{
    __shared__ float part[kThreads];
    int64_t r = blockIdx.x, per = a.C * a.HW;
    int64_t count = bc == DP__BCAST_CHANNEL          ? a.N * a.HW
                    : bc == DP__BCAST_SAMPLE_CHANNEL ? a.HW
                                                     : a.N * per;
    float sum = 0.0f;
    for (int64_t t = threadIdx.x; t < count; t += blockDim.x) {
        int64_t i = t;
        if (bc != DP__BCAST_SCALAR) {
            int64_t n = bc == DP__BCAST_CHANNEL ? t / a.HW : r / a.C;
            int64_t c = bc == DP__BCAST_CHANNEL ? r : r % a.C, h = t % a.HW;
            i = n * per + (a.nhwc ? h * a.C + c : c * a.HW + h);
        }
        sum += grad_at(a, which, i);
    }
    sum = dp_cuda::block_sum<kThreads>(part, sum);
    if (threadIdx.x == 0)
        out[r] = sum;
}

cudaError_t launch_forward(const dp__binary_args *a, cudaStream_t stream)
{
    return dp_cuda::launch_over(a->N * a->C * a->HW, stream, forward_kernel, *a);
}

cudaError_t launch_backward(const dp__binary_args *a, cudaStream_t stream)
{
    float *outs[2] = {a->da, a->db};
    int bcs[2] = {a->a_bcast, a->b_bcast};
    for (int which = 0; which < 2; which++) {
        if (!outs[which])
            continue;
        int64_t values = bcs[which] == DP__BCAST_CHANNEL          ? a->C
                         : bcs[which] == DP__BCAST_SAMPLE_CHANNEL ? a->N * a->C
                                                                  : 1;
        cudaError_t e = cudaSuccess;
        if (bcs[which] == DP__BCAST_FULL)
            e = dp_cuda::launch_over(a->N * a->C * a->HW, stream, full_grad_kernel, *a, which,
                                     outs[which]);
        else if (values > 0)
            reduce_kernel<<<(unsigned)values, kThreads, 0, stream>>>(*a, which, bcs[which],
                                                                     outs[which]);
        if (e != cudaSuccess)
            return e;
    }
    return cudaGetLastError();
}

} // namespace

DP_CUDA_ENTRY(binary_forward, dp__binary_args, launch_forward)
DP_CUDA_ENTRY(binary_backward, dp__binary_args, launch_backward)
