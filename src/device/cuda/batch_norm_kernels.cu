// The parts of batch normalisation that cuDNN leaves to us (batch_norm.c):
// converting between cuDNN's saved 1 / sqrt(var + eps) and the variance our
// contract saves, and the eval-mode backward pass, where the statistics are
// constants (cuDNN's backward always differentiates through the batch
// statistics).
#include "device/cuda/cuda_kernels.h"

#include "device/cuda/launch.cuh"
#include "device/cuda/reduce.cuh"

#include <cuda_runtime.h>

namespace {

using dp_cuda::kThreads;

__global__ void invstd_to_var_kernel(float *v, int64_t C, float eps)
{
    int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (c < C) {
        double inv = v[c];
        double var = 1.0 / (inv * inv) - (double)eps;
        v[c] = (float)(var > 0.0 ? var : 0.0);
    }
}

__global__ void var_to_invstd_kernel(const float *var, float *inv, int64_t C, float eps)
{
    int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (c < C)
        inv[c] = (float)(1.0 / sqrt((double)var[c] + (double)eps));
}

// One block per channel c: dx over (N, HW), and the two sums reduced in
// shared memory (double).
__global__ void backward_eval_kernel(const float *x, const float *dy, const float *gamma,
                                     const float *mean, const float *var, float eps, float *dx,
                                     float *dgamma, float *dbeta, int64_t N, int64_t C,
                                     int64_t HW, int nhwc)
{
    __shared__ double s_dy[kThreads], s_dyx[kThreads];
    int64_t c = blockIdx.x;
    double inv = 1.0 / sqrt((double)var[c] + (double)eps);
    float scale = (float)((double)gamma[c] * inv);
    double sum_dy = 0.0, sum_dyx = 0.0;
    for (int64_t j = threadIdx.x; j < N * HW; j += blockDim.x) {
        int64_t n = j / HW, i = j % HW;
        int64_t k = nhwc ? (n * HW + i) * C + c : (n * C + c) * HW + i;
        double xhat = ((double)x[k] - (double)mean[c]) * inv;
        sum_dy += dy[k];
        sum_dyx += (double)dy[k] * xhat;
        dx[k] = dy[k] * scale;
    }
    sum_dy = dp_cuda::block_sum<kThreads>(s_dy, sum_dy);
    sum_dyx = dp_cuda::block_sum<kThreads>(s_dyx, sum_dyx);
    if (threadIdx.x == 0) {
        dbeta[c] = (float)sum_dy;
        dgamma[c] = (float)sum_dyx;
    }
}

} // namespace

extern "C" cudaError_t dp__cuda_bn_invstd_to_var(float *v, int64_t C, float eps,
                                                 cudaStream_t stream)
{
    return dp_cuda::launch_over(C, stream, invstd_to_var_kernel, v, C, eps);
}

extern "C" cudaError_t dp__cuda_bn_var_to_invstd(const float *var, float *inv_std, int64_t C,
                                                 float eps, cudaStream_t stream)
{
    return dp_cuda::launch_over(C, stream, var_to_invstd_kernel, var, inv_std, C, eps);
}

extern "C" cudaError_t dp__cuda_bn_backward_eval(const dp__batch_norm_args *a,
                                                 cudaStream_t stream)
{
    const int64_t *s = a->x.shape; // (N, C, H, W)
    backward_eval_kernel<<<(unsigned)s[1], kThreads, 0, stream>>>(
        (const float *)a->x.data, (const float *)a->dy.data, a->gamma, a->save_mean, a->save_var,
        a->eps, (float *)a->dx.data, a->dgamma, a->dbeta, s[0], s[1], s[2] * s[3], a->x.nhwc);
    return cudaGetLastError();
}
