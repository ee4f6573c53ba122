// Softmax and log-softmax over axis 1 on a GPU, as src/device/cpu/softmax.c:
// one thread per row, a row being the C values of one sample and position
// (stride HW in NCHW, contiguous in NHWC), through device/softmax_math.h's
// formulas (the sum of exponentials in double). Backward from the output.
#include "device/cuda/cuda_kernels.h"
#include "device/softmax_math.h"

#include "device/cuda/launch.cuh"

#include <cuda_runtime.h>

namespace
{

using rows = dp__channel_view;

// Row t's first element and the stride between its C values.
__device__ void row_at(int64_t t, rows r, int64_t *base, int64_t *stride)
{
    int64_t n = t / r.HW, h = t % r.HW;
    *base = r.nhwc ? (n * r.HW + h) * r.C : n * r.C * r.HW + h;
    *stride = r.nhwc ? 1 : r.HW;
}

__global__ void forward_kernel(const float *x, float *y, rows r, bool log)
{
    DP_CUDA_KERNEL_LOOP(t, r.N * r.HW) {
        int64_t base, st;
        row_at(t, r, &base, &st);
        dp__softmax_row(x + base, y + base, r.C, st, log);
    }
}

__global__ void backward_kernel(const float *y, const float *dy, float *dx, rows r, bool log)
{
    DP_CUDA_KERNEL_LOOP(t, r.N * r.HW) {
        int64_t base, st;
        row_at(t, r, &base, &st);
        dp__softmax_row_backward(y + base, dy + base, dx + base, r.C, st, log);
    }
}

cudaError_t launch_forward(const dp__softmax_args *a, cudaStream_t stream)
{
    rows r = dp__channel_view_of(&a->x);
    return dp_cuda::launch_over(r.N * r.HW, stream, forward_kernel,
                                static_cast<const float *>(a->x.data), a->y, r, a->log);
}

cudaError_t launch_backward(const dp__softmax_args *a, cudaStream_t stream)
{
    rows r = dp__channel_view_of(&a->x);
    return dp_cuda::launch_over(r.N * r.HW, stream, backward_kernel, a->y_in, a->dy, a->dx, r,
                                a->log);
}

} // namespace

DP_CUDA_ENTRY(softmax_forward, dp__softmax_args, launch_forward)
DP_CUDA_ENTRY(softmax_backward, dp__softmax_args, launch_backward)
