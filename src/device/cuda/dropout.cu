// Inverted dropout on a GPU, as src/device/cpu/dropout.c: one thread per
// element (grid-stride), the keep decision drawn from the counter-based RNG
// (src/core/rng_mix.h) at the element's global index, so the mask equals
// the CPU's and the backward pass regenerates it instead of storing it.
#include "device/cuda/cuda_kernels.h"

#include "core/rng_mix.h"
#include "device/cuda/launch.cuh"

#include <cuda_runtime.h>

namespace {

using dp_cuda::kThreads;

__global__ void dropout_kernel(const float *x, float *y, int64_t total, int64_t S,
                               int64_t sample_offset, uint64_t key, uint32_t threshold,
                               float scale, int nhwc, int64_t C, int64_t HW)
{
    DP_CUDA_KERNEL_LOOP(k, total) {
        int64_t n = k / S, j = k % S;
        // j is the physical offset within the sample; i the logical index
        int64_t i = nhwc ? (j % C) * HW + j / C : j;
        uint64_t counter = (uint64_t)(sample_offset + n) * (uint64_t)S + (uint64_t)i;
        uint32_t bits = (uint32_t)(dp__rng_bits(key, counter) >> 40);
        y[k] = bits >= threshold ? x[k] * scale : 0.0f;
    }
}

} // namespace

extern "C" cudaError_t dp__cuda_dropout_launch(const dp__dropout_args *a, cudaStream_t stream)
{
    int64_t total = a->samples * a->sample_size;
    return dp_cuda::launch_over(total, stream, dropout_kernel, a->x, a->y, total, a->sample_size,
                                a->sample_offset, a->key, a->threshold, a->scale, a->nhwc, a->C,
                                a->HW);
}
