// Dilated max pooling on a GPU, as oneDNN's on the CPU (src/device/cpu/pool2d.c):
// cuDNN's pooling has no dilation. Window (p, q) of x (N, C, H, W) takes the
// cells (p stride_h - pad_h + i dilation_h, q stride_w - pad_w + j
// dilation_w), i < kernel_h, j < kernel_w, inside x; padded cells never win.
// Forward: one thread per output, keeping the winner's h W + w in the op's
// workspace (4 bytes an output). Backward: one thread per input, gathering
// dy from every window whose winner it is, so no atomics are needed and the
// sum order is fixed. f32 only: CUDA devices hold no bf16 tensors.
#include "device/cuda/cuda_kernels.h"

#include "device/cuda/launch.cuh"

#include <cuda_runtime.h>

namespace
{

struct geometry {
    int64_t N, C, H, W, P, Q;
    int kh, kw, sh, sw, ph, pw, dh, dw, nhwc;
};

geometry geometry_of(const dp__pool2d_args *a)
{
    return {a->x.shape[0], a->x.shape[1], a->x.shape[2], a->x.shape[3], a->y.shape[2],
            a->y.shape[3], a->kernel_h,   a->kernel_w,   a->stride_h,   a->stride_w,
            a->pad_h,      a->pad_w,      a->dilation_h, a->dilation_w, a->x.nhwc};
}

// Offset of element (n, c, h, w) of an (N, C, H, W) tensor in either layout.
__device__ int64_t at(int64_t n, int64_t c, int64_t h, int64_t w, int64_t C, int64_t H, int64_t W,
                      int nhwc)
{
    return nhwc ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w;
}

// (n, c, h, w) of flat index i of an (N, C, H, W) tensor in either layout.
__device__ void coords(int64_t i, int64_t C, int64_t H, int64_t W, int nhwc, int64_t *n, int64_t *c,
                       int64_t *h, int64_t *w)
{
    if (nhwc) {
        *c = i % C;
        *w = (i / C) % W;
        *h = (i / (C * W)) % H;
        *n = i / (C * W * H);
    } else {
        *w = i % W;
        *h = (i / W) % H;
        *c = (i / (W * H)) % C;
        *n = i / (W * H * C);
    }
}

__global__ void forward_kernel(const float *x, float *y, int32_t *argmax, geometry g)
{
    int64_t total = g.N * g.C * g.P * g.Q;
    DP_CUDA_KERNEL_LOOP(i, total) {
        int64_t n, c, p, q;
        coords(i, g.C, g.P, g.Q, g.nhwc, &n, &c, &p, &q);
        float best = -INFINITY;
        int64_t where = -1;
        for (int r = 0; r < g.kh; r++) {
            int64_t h = p * g.sh - g.ph + (int64_t)r * g.dh;
            if (h < 0 || h >= g.H)
                continue;
            for (int s = 0; s < g.kw; s++) {
                int64_t w = q * g.sw - g.pw + (int64_t)s * g.dw;
                if (w < 0 || w >= g.W)
                    continue;
                float v = x[at(n, c, h, w, g.C, g.H, g.W, g.nhwc)];
                // the first maximum wins; a NaN wins and stays (PyTorch's rule)
                if (where < 0 || v > best || (isnan(v) && !isnan(best))) {
                    best = v;
                    where = h * g.W + w;
                }
            }
        }
        y[i] = best;
        argmax[i] = (int32_t)where;
    }
}

__global__ void backward_kernel(const float *dy, const int32_t *argmax, float *dx,
                                const float *mask, geometry g)
{
    int64_t total = g.N * g.C * g.H * g.W;
    DP_CUDA_KERNEL_LOOP(i, total) {
        int64_t n, c, h, w;
        coords(i, g.C, g.H, g.W, g.nhwc, &n, &c, &h, &w);
        float sum = 0.0f;
        // window rows p with p sh - ph + r dh = h for some r < kh
        for (int r = 0; r < g.kh; r++) {
            int64_t top = h + g.ph - (int64_t)r * g.dh;
            if (top < 0 || top % g.sh || top / g.sh >= g.P)
                continue;
            for (int s = 0; s < g.kw; s++) {
                int64_t left = w + g.pw - (int64_t)s * g.dw;
                if (left < 0 || left % g.sw || left / g.sw >= g.Q)
                    continue;
                int64_t o = at(n, c, top / g.sh, left / g.sw, g.C, g.P, g.Q, g.nhwc);
                if (argmax[o] == h * g.W + w)
                    sum += dy[o];
            }
        }
        dx[i] = mask && !(mask[i] > 0.0f) ? 0.0f : sum;
    }
}

} // namespace

extern "C" cudaError_t dp__cuda_max_pool_dilated_forward_launch(const dp__pool2d_args *a,
                                                                cudaStream_t stream)
{
    geometry g = geometry_of(a);
    return dp_cuda::launch_over(g.N * g.C * g.P * g.Q, stream, forward_kernel,
                                (const float *)a->x.data, (float *)a->y.data,
                                (int32_t *)a->workspace, g);
}

extern "C" cudaError_t dp__cuda_max_pool_dilated_backward_launch(const dp__pool2d_args *a,
                                                                 cudaStream_t stream)
{
    geometry g = geometry_of(a);
    return dp_cuda::launch_over(g.N * g.C * g.H * g.W, stream, backward_kernel,
                                (const float *)a->dy.data, (const int32_t *)a->workspace,
                                (float *)a->dx.data, (const float *)a->relu_mask, g);
}
