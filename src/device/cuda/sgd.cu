// The SGD update over a whole parameter buffer on a GPU, as
// src/device/cpu/sgd.c (same expression order; built with --fmad=false so
// the rounding is that of the C loop), and the check for non-finite
// gradients that may run before it: it writes the first index of a NaN or
// Inf (n when there is none) into a device word that the update reads, and
// the update then changes nothing.
#include "device/cuda/cuda_kernels.h"

#include "device/cuda/launch.cuh"

#include <cuda_runtime.h>

namespace {

__global__ void sgd_kernel(float *w, const float *g, float *v, int64_t n, float lr, float scale,
                           float mom, float wd, const int64_t *first_nonfinite)
{
    if (first_nonfinite && *first_nonfinite < n)
        return;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        if (v) {
            float d = g[i] * scale + wd * w[i];
            v[i] = mom * v[i] + d;
            w[i] -= lr * v[i];
        } else {
            w[i] -= lr * (g[i] * scale + wd * w[i]);
        }
    }
}

__global__ void set_kernel(int64_t *word, int64_t value)
{
    *word = value;
}

__global__ void check_finite_kernel(const float *x, int64_t n, unsigned long long *first)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        if (!isfinite(x[i]))
            atomicMin(first, (unsigned long long)i);
}

} // namespace

extern "C" cudaError_t dp__cuda_check_finite_launch(const dp__check_finite_args *a,
                                                    cudaStream_t stream)
{
    const float *data = a->data;
    int64_t n = a->n, *first_nonfinite = a->first_nonfinite;
    static_assert(sizeof(int64_t) == sizeof(unsigned long long), "64-bit word");
    set_kernel<<<1, 1, 0, stream>>>(first_nonfinite, n);
    if (n > 0)
        check_finite_kernel<<<dp_cuda::blocks_for(n), 256, 0, stream>>>(
            data, n, (unsigned long long *)first_nonfinite);
    return cudaGetLastError();
}

extern "C" cudaError_t dp__cuda_sgd_launch(const dp__sgd_args *a, cudaStream_t stream)
{
    float *v = a->velocity && a->momentum != 0.0f ? a->velocity : nullptr;
    sgd_kernel<<<dp_cuda::blocks_for(a->n), 256, 0, stream>>>(a->params, a->grads, v, a->n, a->lr,
                                                             a->grad_scale, a->momentum,
                                                             a->weight_decay, a->first_nonfinite);
    return cudaGetLastError();
}
