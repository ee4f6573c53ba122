// Channel ranges between tensors on a GPU, as src/device/cpu/channel_copy.c:
// one thread per copied element, reading src and writing (or adding into)
// dst each in its own layout. f32: CUDA devices hold no bf16 tensors.
#include "device/cuda/cuda_kernels.h"

#include "device/cuda/launch.cuh"

#include <cuda_runtime.h>

namespace
{

// Offset of (n, c, h) in a tensor of C channels and HW positions.
__device__ int64_t at(int64_t n, int64_t c, int64_t h, int64_t C, int64_t HW, int nhwc)
{
    return nhwc ? (n * HW + h) * C + c : (n * C + c) * HW + h;
}

__global__ void copy_kernel(const float *src, float *dst, int64_t N, int64_t HW, int64_t count,
                            int64_t src_C, int64_t src_off, int src_nhwc, int64_t dst_C,
                            int64_t dst_off, int dst_nhwc, bool accumulate)
{
    int64_t total = N * count * HW;
    DP_CUDA_KERNEL_LOOP(t, total) {
        // Walk dst's order, so that its writes coalesce.
        int64_t n, c, h;
        if (dst_nhwc) {
            c = t % count;
            h = (t / count) % HW;
            n = t / (count * HW);
        } else {
            h = t % HW;
            c = (t / HW) % count;
            n = t / (HW * count);
        }
        float v = src[at(n, src_off + c, h, src_C, HW, src_nhwc)];
        int64_t d = at(n, dst_off + c, h, dst_C, HW, dst_nhwc);
        dst[d] = accumulate ? dst[d] + v : v;
    }
}

cudaError_t launch(const dp__channel_copy_args *a, cudaStream_t stream)
{
    int64_t N = a->src.shape[0], HW = a->src.shape[2] * a->src.shape[3];
    return dp_cuda::launch_over(
        N * a->count * HW, stream, copy_kernel, static_cast<const float *>(a->src.data),
        static_cast<float *>(a->dst.data), N, HW, a->count, a->src.shape[1], a->src_off,
        a->src.nhwc, a->dst.shape[1], a->dst_off, a->dst.nhwc, a->accumulate);
}

} // namespace

DP_CUDA_ENTRY(channel_copy, dp__channel_copy_args, launch)
