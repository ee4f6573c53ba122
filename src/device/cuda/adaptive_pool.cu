// Adaptive average pooling on a GPU, as src/device/cpu/adaptive_pool.c, with
// PyTorch's windows: output p of P covers inputs [floor(p H / P),
// ceil((p + 1) H / P)). Forward: one thread per output. Backward: one
// thread per input, gathering from every window that holds it (windows may
// overlap), so no atomics are needed and the sum order is fixed.
#include "device/cuda/cuda_kernels.h"

#include "device/cuda/launch.cuh"

#include <cuda_runtime.h>

namespace {

__device__ int64_t window_start(int64_t i, int64_t in, int64_t out)
{
    return i * in / out;
}

__device__ int64_t window_end(int64_t i, int64_t in, int64_t out)
{
    return ((i + 1) * in + out - 1) / out;
}

// Offset of element (n, c, h, w) in either layout.
__device__ int64_t at(int64_t n, int64_t c, int64_t h, int64_t w, int64_t C, int64_t H, int64_t W,
                      int nhwc)
{
    return nhwc ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w;
}

__global__ void forward_kernel(const float *x, float *y, int64_t N, int64_t C, int64_t H,
                               int64_t W, int64_t P, int64_t Q, int nhwc)
{
    int64_t total = N * C * P * Q;
    DP_CUDA_KERNEL_LOOP(i, total) {
        int64_t n, c, ph, qw;
        if (nhwc) {
            c = i % C;
            qw = (i / C) % Q;
            ph = (i / (C * Q)) % P;
            n = i / (C * Q * P);
        } else {
            qw = i % Q;
            ph = (i / Q) % P;
            c = (i / (Q * P)) % C;
            n = i / (Q * P * C);
        }
        int64_t h0 = window_start(ph, H, P), h1 = window_end(ph, H, P);
        int64_t w0 = window_start(qw, W, Q), w1 = window_end(qw, W, Q);
        float sum = 0.0f;
        for (int64_t h = h0; h < h1; h++)
            for (int64_t w = w0; w < w1; w++)
                sum += x[at(n, c, h, w, C, H, W, nhwc)];
        y[i] = sum / (float)((h1 - h0) * (w1 - w0));
    }
}

__global__ void backward_kernel(const float *dy, float *dx, const float *mask, int64_t N,
                                int64_t C, int64_t H, int64_t W, int64_t P, int64_t Q, int nhwc)
{
    int64_t total = N * C * H * W;
    DP_CUDA_KERNEL_LOOP(i, total) {
        int64_t n, c, h, w;
        if (nhwc) {
            c = i % C;
            w = (i / C) % W;
            h = (i / (C * W)) % H;
            n = i / (C * W * H);
        } else {
            w = i % W;
            h = (i / W) % H;
            c = (i / (W * H)) % C;
            n = i / (W * H * C);
        }
        float sum = 0.0f;
        for (int64_t ph = 0; ph < P; ph++) {
            int64_t h0 = window_start(ph, H, P), h1 = window_end(ph, H, P);
            if (h < h0 || h >= h1)
                continue;
            for (int64_t qw = 0; qw < Q; qw++) {
                int64_t w0 = window_start(qw, W, Q), w1 = window_end(qw, W, Q);
                if (w < w0 || w >= w1)
                    continue;
                sum += dy[at(n, c, ph, qw, C, P, Q, nhwc)] / (float)((h1 - h0) * (w1 - w0));
            }
        }
        dx[i] = mask && !(mask[i] > 0.0f) ? 0.0f : sum;
    }
}

} // namespace

extern "C" cudaError_t dp__cuda_adaptive_avg_pool_forward_launch(const dp__adaptive_pool_args *a,
                                                                 cudaStream_t stream)
{
    const int64_t *x = a->x.shape, *y = a->y.shape; // (N, C, H, W), (N, C, P, Q)
    return dp_cuda::launch_over(y[0] * y[1] * y[2] * y[3], stream, forward_kernel,
                                (const float *)a->x.data, (float *)a->y.data, x[0], x[1], x[2],
                                x[3], y[2], y[3], a->x.nhwc);
}

extern "C" cudaError_t
dp__cuda_adaptive_avg_pool_backward_launch(const dp__adaptive_pool_args *a, cudaStream_t stream)
{
    const int64_t *x = a->x.shape, *y = a->y.shape; // (N, C, H, W), (N, C, P, Q)
    return dp_cuda::launch_over(x[0] * x[1] * x[2] * x[3], stream, backward_kernel,
                                (const float *)a->dy.data, (float *)a->dx.data, a->relu_mask, x[0],
                                x[1], x[2], x[3], y[2], y[3], a->x.nhwc);
}
