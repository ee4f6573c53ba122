// The SGD update over a whole parameter buffer on a GPU, as
// src/device/cpu/sgd.c (same expression order; built with --fmad=false so
// the rounding is that of the C loop), and the check for non-finite
// gradients that may run before it: it writes the first index of a NaN or
// Inf (n when there is none) into a device word that the update reads, and
// the update then changes nothing.
#include "device/cuda/cuda_kernels.h"

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

unsigned blocks_for(int64_t n)
{
    int64_t b = (n + 255) / 256;
    if (b > 65535 * 8)
        b = 65535 * 8;
    return b < 1 ? 1u : (unsigned)b;
}

} // namespace

extern "C" cudaError_t dp__cuda_check_finite(const float *data, int64_t n, int64_t *first_nonfinite,
                                             cudaStream_t stream)
{
    static_assert(sizeof(int64_t) == sizeof(unsigned long long), "64-bit word");
    set_kernel<<<1, 1, 0, stream>>>(first_nonfinite, n);
    if (n > 0)
        check_finite_kernel<<<blocks_for(n), 256, 0, stream>>>(
            data, n, (unsigned long long *)first_nonfinite);
    return cudaGetLastError();
}

extern "C" cudaError_t dp__cuda_sgd(float *params, const float *grads, float *velocity, int64_t n,
                                    float lr, float grad_scale, float momentum,
                                    float weight_decay, const int64_t *first_nonfinite,
                                    cudaStream_t stream)
{
    int64_t blocks = (n + 255) / 256;
    if (blocks < 1)
        blocks = 1;
    if (blocks > 65535 * 8)
        blocks = 65535 * 8;
    float *v = velocity && momentum != 0.0f ? velocity : nullptr;
    sgd_kernel<<<(unsigned)blocks, 256, 0, stream>>>(params, grads, v, n, lr, grad_scale, momentum,
                                                    weight_decay, first_nonfinite);
    return cudaGetLastError();
}
