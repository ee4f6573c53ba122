// The cast_int32 kernel on a GPU, as src/device/cpu/convert.c's: float32
// to and from int32 (device/int_convert.h's rule, the CPU's), and a copy
// for one dtype. (A GPU holds no bf16 tensors: the cast kernel between
// float32 and bf16 is the CPU's alone.)
#include "device/cuda/cuda_kernels.h"
#include "device/int_convert.h"

#include "device/cuda/launch.cuh"

#include <cuda_runtime.h>

namespace
{

__global__ void i32_from_f32_kernel(const float *src, int32_t *dst, int64_t n)
{
    DP_CUDA_KERNEL_LOOP(i, n)
    dst[i] = dp__i32_from_f32(src[i]);
}

__global__ void f32_from_i32_kernel(const int32_t *src, float *dst, int64_t n)
{
    DP_CUDA_KERNEL_LOOP(i, n)
    dst[i] = (float)src[i];
}

cudaError_t launch(const dp__cast_args *a, cudaStream_t stream)
{
    if (a->src_dtype == a->dst_dtype) {
        if (a->n == 0)
            return cudaSuccess;
        return cudaMemcpyAsync(a->dst, a->src, (size_t)a->n * (a->src_dtype == DP_BF16 ? 2u : 4u),
                               cudaMemcpyDeviceToDevice, stream);
    }
    if (a->src_dtype == DP_F32 && a->dst_dtype == DP_I32)
        return dp_cuda::launch_over(a->n, stream, i32_from_f32_kernel,
                                    static_cast<const float *>(a->src),
                                    static_cast<int32_t *>(a->dst), a->n);
    if (a->src_dtype == DP_I32 && a->dst_dtype == DP_F32)
        return dp_cuda::launch_over(a->n, stream, f32_from_i32_kernel,
                                    static_cast<const int32_t *>(a->src),
                                    static_cast<float *>(a->dst), a->n);
    return cudaErrorNotSupported;
}

} // namespace

DP_CUDA_ENTRY(cast_int32, dp__cast_args, launch)
