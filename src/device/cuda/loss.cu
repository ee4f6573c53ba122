// Softmax cross-entropy and argmax accuracy on a GPU, as
// src/device/cpu/loss.c: each row's log-sum-exp in double, the loss summed
// in double. The batch is small (rows of K logits), so the sums run in one
// block whose threads take rows in turn and then reduce in shared memory.
// A label outside 0..K-1 makes the loss NaN (the CPU device returns
// DP_EINVAL; a kernel cannot, without a host round trip per step).
#include "device/cuda/cuda_kernels.h"
#include "device/logsumexp.h"

#include "device/cuda/launch.cuh"
#include "device/cuda/reduce.cuh"

#include <cuda_runtime.h>

namespace
{

using dp_cuda::kThreads;

__global__ void xent_forward_kernel(const float *logits, const int32_t *labels, float *loss,
                                    int64_t n, int64_t k, int mean, float smoothing, int per_row)
{
    __shared__ double part[kThreads];
    double total = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float *z = logits + i * k;
        int32_t y = labels[i];
        double term = y < 0 || y >= k ? nan("") : dp__row_xent(z, k, y, smoothing);
        if (per_row)
            loss[i] = (float)term;
        total += term;
    }
    if (per_row)
        return; // uniform across the block: no thread reaches block_sum
    total = dp_cuda::block_sum<kThreads>(part, total);
    if (threadIdx.x == 0) {
        double t = total;
        if (mean && n > 0)
            t /= (double)n;
        loss[0] = (float)t;
    }
}

// One thread per row.
__global__ void xent_backward_kernel(const float *logits, const int32_t *labels, const float *dloss,
                                     float *dlogits, int64_t n, int64_t k, int mean,
                                     float smoothing, int per_row)
{
    float g = per_row ? 0.0f : dloss[0];
    if (mean && n > 0)
        g /= (float)n;
    DP_CUDA_KERNEL_LOOP(i, n)
    {
        if (per_row)
            g = dloss[i];
        const float *z = logits + i * k;
        float *dz = dlogits + i * k;
        double lse = dp__row_logsumexp(z, k);
        float spread = smoothing / (float)k;
        for (int64_t j = 0; j < k; j++)
            dz[j] = g * ((float)exp((double)z[j] - lse) - spread);
        int32_t y = labels[i];
        if (y >= 0 && y < k)
            dz[y] -= g * (1.0f - smoothing);
    }
}

__global__ void accuracy_kernel(const float *logits, const int32_t *labels, float *correct,
                                float *top5, float *confusion, int64_t n, int64_t k)
{
    __shared__ long long part[kThreads], part5[kThreads];
    long long count = 0, count5 = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float *z = logits + i * k;
        int64_t best = 0;
        for (int64_t j = 1; j < k; j++)
            if (z[j] > z[best])
                best = j;
        int32_t y = labels[i];
        if (y < 0 || y >= k)
            continue; // counted as wrong; no read or write outside the row
        count += best == y;
        if (top5) {
            int64_t above = 0;
            for (int64_t j = 0; j < k; j++)
                above += z[j] > z[y];
            count5 += above < 5;
        }
        if (confusion)
            atomicAdd(&confusion[(int64_t)y * k + best], 1.0f); // exact: counts < 2^24
    }
    count = dp_cuda::block_sum<kThreads>(part, count);
    count5 = dp_cuda::block_sum<kThreads>(part5, count5);
    if (threadIdx.x == 0) {
        correct[0] += (float)count;
        if (top5)
            top5[0] += (float)count5;
    }
}

} // namespace

extern "C" cudaError_t dp__cuda_xent_forward(const dp__xent_args *a, cudaStream_t stream)
{
    xent_forward_kernel<<<1, kThreads, 0, stream>>>(a->logits, a->labels, a->loss, a->n, a->k,
                                                    a->mean, a->smoothing, a->per_row);
    return cudaGetLastError();
}

extern "C" cudaError_t dp__cuda_xent_backward(const dp__xent_args *a, cudaStream_t stream)
{
    int64_t blocks = (a->n + 127) / 128;
    if (blocks < 1)
        blocks = 1;
    if (blocks > 65535)
        blocks = 65535;
    xent_backward_kernel<<<(unsigned)blocks, 128, 0, stream>>>(
        a->logits, a->labels, a->dloss, a->dlogits, a->n, a->k, a->mean, a->smoothing, a->per_row);
    return cudaGetLastError();
}

extern "C" cudaError_t dp__cuda_accuracy_launch(const dp__accuracy_args *a, cudaStream_t stream)
{
    accuracy_kernel<<<1, kThreads, 0, stream>>>(a->logits, a->labels, a->correct, a->top5,
                                                a->confusion, a->n, a->k);
    return cudaGetLastError();
}
