// Reductions on a GPU, as src/device/cpu/reduce.c: sum and mean over the
// middle axis of x seen as (outer, len, inner), their backward, argmax, and
// eq (the comparison of src/ops/eq.c). A block sums one output at a time:
// each of its threads takes the elements t, t + T, ... in order (in
// double, or int64 for int32), then the block adds the T partials in
// reduce.cuh's fixed tree, so the bits never depend on the grid. The order
// is not the CPU's (its chunks), so the two agree to rounding, not bit for
// bit.
#include "device/cuda/cuda_kernels.h"

#include "device/cuda/launch.cuh"
#include "device/cuda/reduce.cuh"

#include <cuda_runtime.h>

namespace
{

using dp_cuda::kThreads;

template <typename In, typename Acc, typename Out>
__global__ void sum_kernel(const In *x, Out *y, int64_t outs, int64_t len, int64_t inner,
                           double scale)
{
    __shared__ Acc part[kThreads];
    for (int64_t k = blockIdx.x; k < outs; k += gridDim.x) {
        const In *base = x + (k / inner) * len * inner + k % inner;
        Acc s = 0;
        for (int64_t l = threadIdx.x; l < len; l += kThreads)
            s += (Acc)base[l * inner];
        s = dp_cuda::block_sum<kThreads>(part, s);
        if (threadIdx.x == 0)
            y[k] = (Out)(s * scale);
    }
}

// int32: summed in int64, wrapped to int32 through uint32 (scale is 1).
__global__ void sum_i32_kernel(const int32_t *x, int32_t *y, int64_t outs, int64_t len,
                               int64_t inner)
{
    __shared__ long long part[kThreads];
    for (int64_t k = blockIdx.x; k < outs; k += gridDim.x) {
        const int32_t *base = x + (k / inner) * len * inner + k % inner;
        long long s = 0;
        for (int64_t l = threadIdx.x; l < len; l += kThreads)
            s += base[l * inner];
        s = dp_cuda::block_sum<kThreads>(part, s);
        if (threadIdx.x == 0)
            y[k] = (int32_t)(uint32_t)(unsigned long long)s;
    }
}

unsigned grid_for(int64_t outs)
{
    return (unsigned)(outs < 65535 * 8 ? (outs < 1 ? 1 : outs) : 65535 * 8);
}

cudaError_t forward(const dp__reduce_args *a, cudaStream_t stream)
{
    int64_t outs = a->outer * a->inner;
    if (outs == 0)
        return cudaSuccess;
    if (a->dtype == DP_I32)
        sum_i32_kernel<<<grid_for(outs), kThreads, 0, stream>>>(static_cast<const int32_t *>(a->x),
                                                                static_cast<int32_t *>(a->y), outs,
                                                                a->len, a->inner);
    else if (a->dtype == DP_F32)
        sum_kernel<float, double, float><<<grid_for(outs), kThreads, 0, stream>>>(
            static_cast<const float *>(a->x), static_cast<float *>(a->y), outs, a->len, a->inner,
            a->scale);
    else
        return cudaErrorNotSupported; // bf16: src/ops/reduce.c casts it first
    return cudaGetLastError();
}

__global__ void backward_kernel(const float *dy, float *dx, int64_t n, int64_t len, int64_t inner,
                                float scale)
{
    DP_CUDA_KERNEL_LOOP(j, n)
    dx[j] = dy[(j / (len * inner)) * inner + j % inner] * scale;
}

cudaError_t backward(const dp__reduce_args *a, cudaStream_t stream)
{
    return dp_cuda::launch_over(a->outer * a->len * a->inner, stream, backward_kernel,
                                static_cast<const float *>(a->dy), static_cast<float *>(a->dx),
                                a->outer * a->len * a->inner, a->len, a->inner, (float)a->scale);
}

// One thread an output: the first maximum in order, a NaN winning.
template <typename T>
__global__ void argmax_kernel(const T *x, int32_t *y, int64_t outs, int64_t len, int64_t inner)
{
    DP_CUDA_KERNEL_LOOP(k, outs)
    {
        const T *base = x + (k / inner) * len * inner + k % inner;
        int64_t best = 0;
        double best_v = (double)base[0];
        for (int64_t l = 1; l < len && !isnan(best_v); l++) {
            double v = (double)base[l * inner];
            if (v > best_v || isnan(v)) {
                best = l;
                best_v = v;
            }
        }
        y[k] = (int32_t)best;
    }
}

cudaError_t argmax(const dp__reduce_args *a, cudaStream_t stream)
{
    int64_t outs = a->outer * a->inner;
    int32_t *y = static_cast<int32_t *>(a->y);
    if (a->dtype == DP_I32)
        return dp_cuda::launch_over(outs, stream, argmax_kernel<int32_t>,
                                    static_cast<const int32_t *>(a->x), y, outs, a->len, a->inner);
    if (a->dtype == DP_F32)
        return dp_cuda::launch_over(outs, stream, argmax_kernel<float>,
                                    static_cast<const float *>(a->x), y, outs, a->len, a->inner);
    return cudaErrorNotSupported; // bf16 lives on CPU devices only
}

template <typename A, typename B, typename C>
__global__ void eq_kernel(const A *a, const B *b, int32_t *y, int64_t n, int b_one)
{
    DP_CUDA_KERNEL_LOOP(i, n)
    y[i] = (C)a[i] == (C)b[b_one ? 0 : i];
}

cudaError_t eq(const dp__eq_args *a, cudaStream_t stream)
{
    const float *af = static_cast<const float *>(a->a), *bf = static_cast<const float *>(a->b);
    const int32_t *ai = static_cast<const int32_t *>(a->a),
                  *bi = static_cast<const int32_t *>(a->b);
    int b_one = a->b_one;
    if (a->a_dtype == DP_I32 && a->b_dtype == DP_I32)
        return dp_cuda::launch_over(a->n, stream, eq_kernel<int32_t, int32_t, int32_t>, ai, bi,
                                    a->y, a->n, b_one);
    if (a->a_dtype == DP_F32 && a->b_dtype == DP_F32)
        return dp_cuda::launch_over(a->n, stream, eq_kernel<float, float, float>, af, bf, a->y,
                                    a->n, b_one);
    if (a->a_dtype == DP_I32 && a->b_dtype == DP_F32)
        return dp_cuda::launch_over(a->n, stream, eq_kernel<int32_t, float, float>, ai, bf, a->y,
                                    a->n, b_one);
    if (a->a_dtype == DP_F32 && a->b_dtype == DP_I32)
        return dp_cuda::launch_over(a->n, stream, eq_kernel<float, int32_t, float>, af, bi, a->y,
                                    a->n, b_one);
    return cudaErrorNotSupported; // bf16 lives on CPU devices only
}

} // namespace

DP_CUDA_ENTRY(reduce_forward, dp__reduce_args, forward)
DP_CUDA_ENTRY(reduce_backward, dp__reduce_args, backward)
DP_CUDA_ENTRY(argmax, dp__reduce_args, argmax)
DP_CUDA_ENTRY(eq, dp__eq_args, eq)
