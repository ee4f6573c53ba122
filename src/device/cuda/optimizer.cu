// An optimizer's update over a whole parameter buffer on a GPU (SGD, Adam,
// AdamW, as src/device/cpu/optimizer.c: same expression order; built with
// --fmad=false so the rounding is that of the C loops), the clipping
// factor of the gradient's global norm, and the check for non-finite
// gradients that may run before the update: it writes the first index of a
// NaN or Inf (n when there is none) into a device word that the update
// reads, and the update then changes nothing.
#include "device/cuda/cuda_kernels.h"

#include "device/cuda/launch.cuh"
#include "device/cuda/reduce.cuh"

#include <cuda_runtime.h>

namespace {

__global__ void sgd_kernel(dp__optimizer_args a, float *v)
{
    if (a.first_nonfinite && *a.first_nonfinite < a.n)
        return;
    float scale = a.grad_scale * (a.clip ? a.clip[0] : 1.0f);
    DP_CUDA_KERNEL_LOOP(i, a.n) {
        float d = a.grads[i] * scale + a.weight_decay * a.params[i];
        if (v) {
            v[i] = a.momentum * v[i] + d;
            a.params[i] -= a.lr * (a.nesterov ? d + a.momentum * v[i] : v[i]);
        } else {
            a.params[i] -= a.lr * d;
        }
    }
}

__global__ void adam_kernel(dp__optimizer_args a)
{
    if (a.first_nonfinite && *a.first_nonfinite < a.n)
        return;
    float scale = a.grad_scale * (a.clip ? a.clip[0] : 1.0f);
    float step = a.lr / a.bias1;
    float wd = a.kind == DP__OPTIM_ADAM ? a.weight_decay : 0.0f;
    float decay = a.kind == DP__OPTIM_ADAMW ? 1.0f - a.lr * a.weight_decay : 1.0f;
    DP_CUDA_KERNEL_LOOP(i, a.n) {
        float p = a.params[i] * decay;
        float d = a.grads[i] * scale + wd * p;
        float m = a.state0[i] + (1.0f - a.beta1) * (d - a.state0[i]);
        float s = a.beta2 * a.state1[i] + (1.0f - a.beta2) * d * d;
        a.state0[i] = m;
        a.state1[i] = s;
        a.params[i] = p - step * (m / (sqrtf(s) / a.sqrt_bias2 + a.eps));
    }
}

// One block sums the squares in a fixed order (each thread a strided
// range, then a tree in shared memory): the same norm on every run.
__global__ void grad_clip_kernel(const float *g, int64_t n, float scale, float max_norm,
                                 float *out)
{
    __shared__ double partial[dp_cuda::kThreads];
    double acc = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float x = g[i] * scale;
        acc += (double)x * (double)x;
    }
    acc = dp_cuda::block_sum<dp_cuda::kThreads>(partial, acc);
    if (threadIdx.x == 0) {
        float norm = (float)sqrt(acc);
        float coef = max_norm / (norm + 1e-6f);
        out[0] = coef < 1.0f ? coef : 1.0f;
        out[1] = norm;
    }
}

__global__ void set_kernel(int64_t *word, int64_t value)
{
    *word = value;
}

__global__ void check_finite_kernel(const float *x, int64_t n, unsigned long long *first)
{
    DP_CUDA_KERNEL_LOOP(i, n)
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
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    return dp_cuda::launch_over(n, stream, check_finite_kernel, data, n,
                                (unsigned long long *)first_nonfinite);
}

extern "C" cudaError_t dp__cuda_optimizer_step_launch(const dp__optimizer_args *a,
                                                      cudaStream_t stream)
{
    if (a->kind == DP__OPTIM_SGD) {
        float *v = a->state0 && a->momentum != 0.0f ? a->state0 : nullptr;
        return dp_cuda::launch_over(a->n, stream, sgd_kernel, *a, v);
    }
    return dp_cuda::launch_over(a->n, stream, adam_kernel, *a);
}

extern "C" cudaError_t dp__cuda_grad_clip_launch(const dp__grad_clip_args *a, cudaStream_t stream)
{
    grad_clip_kernel<<<1, dp_cuda::kThreads, 0, stream>>>(a->grads, a->n, a->grad_scale,
                                                          a->max_norm, a->out);
    return cudaGetLastError();
}
