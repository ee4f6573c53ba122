// The padding cuDNN's convolution descriptor cannot express: its padding is
// the same on both sides, so conv2d.c runs a convolution with more padding
// on one side (ONNX's asymmetric pads, PyTorch's padding='same' for an even
// kernel) on a copy of the input with the difference added as zeros, and
// its backward-data pass writes that copy's gradient, of which the inside
// is dx. Mirrors nothing on the CPU, where oneDNN takes both sides.
#include "device/cuda/cuda_kernels.h"

#include "device/cuda/launch.cuh"

#include <cuda_runtime.h>

namespace
{

using dp_cuda::kThreads;

// The element of t (N, C, H, W), stored NHWC or NCHW, at (n, c, h, w).
__device__ int64_t at(int64_t n, int64_t c, int64_t h, int64_t w, int64_t C, int64_t H, int64_t W,
                      int nhwc)
{
    return nhwc ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w;
}

// padded (N, H2, W2, C) = t moved down by top and right by left, zeros
// around it.
__global__ void pad_kernel(const float *t, float *padded, int64_t N, int64_t C, int64_t H,
                           int64_t W, int64_t H2, int64_t W2, int top, int left, int nhwc)
{
    int64_t n_all = N * H2 * W2 * C;
    DP_CUDA_KERNEL_LOOP(i, n_all) {
        int64_t c = i % C, w = (i / C) % W2 - left, h = (i / (C * W2)) % H2 - top;
        int64_t n = i / (C * W2 * H2);
        bool inside = h >= 0 && h < H && w >= 0 && w < W;
        padded[i] = inside ? t[at(n, c, h, w, C, H, W, nhwc)] : 0.0f;
    }
}

// t = the inside of padded, each element of t written once.
__global__ void crop_kernel(const float *padded, float *t, int64_t N, int64_t C, int64_t H,
                            int64_t W, int64_t H2, int64_t W2, int top, int left, int nhwc)
{
    int64_t n_all = N * C * H * W;
    DP_CUDA_KERNEL_LOOP(i, n_all) {
        int64_t n, c, h, w;
        if (nhwc) {
            c = i % C, w = (i / C) % W, h = (i / (C * W)) % H, n = i / (C * W * H);
        } else {
            w = i % W, h = (i / W) % H, c = (i / (W * H)) % C, n = i / (W * H * C);
        }
        t[i] = padded[((n * H2 + h + top) * W2 + w + left) * C + c];
    }
}

} // namespace

extern "C" cudaError_t dp__cuda_conv_pad_launch(const dp__cuda_conv_pad_args *a,
                                                cudaStream_t stream)
{
    const int64_t *s = a->t.shape; // logical (N, C, H, W)
    if (a->to_padded)
        return dp_cuda::launch_over(s[0] * a->h2 * a->w2 * s[1], stream, pad_kernel,
                                    (const float *)a->t.data, a->padded, s[0], s[1], s[2], s[3],
                                    a->h2, a->w2, a->top, a->left, a->t.nhwc);
    return dp_cuda::launch_over(s[0] * s[1] * s[2] * s[3], stream, crop_kernel, a->padded,
                                (float *)a->t.data, s[0], s[1], s[2], s[3], a->h2, a->w2, a->top,
                                a->left, a->t.nhwc);
}
