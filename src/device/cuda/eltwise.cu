// Elementwise kernels, layout copies, fill and bias: the CUDA side of
// src/device/cpu/eltwise.c, cpu_device.c's fill and linear.c's bias loops.
// Grid-stride loops over int64 indices; 256 threads a block.
#include "device/cuda/cuda_host.h"
#include "device/cuda/cuda_kernels.h"

#include "device/cuda/launch.cuh"
#include "device/cuda/reduce.cuh"

#include <cuda_runtime.h>

#include <cstring>

namespace {

using dp_cuda::kThreads;

__global__ void fill_kernel(uint32_t *d, int64_t n, uint32_t bits)
{
    DP_CUDA_KERNEL_LOOP(i, n)
        d[i] = bits;
}

// The ops of dp__eltwise_op, in its order.
enum {
    RELU,
    RELU_BACKWARD,
    ADD,
    ACCUMULATE,
    SCALE,
    COPY,
    SIGMOID,
    SIGMOID_BACKWARD,
    TANH,
    TANH_BACKWARD,
    ADD_RELU
};

__global__ void eltwise_kernel(int op, const float *a, const float *b, float *out, int64_t n,
                               float alpha)
{
    DP_CUDA_KERNEL_LOOP(i, n) {
        switch (op) {
        case RELU:
            out[i] = a[i] > 0.0f ? a[i] : 0.0f;
            break;
        case RELU_BACKWARD:
            out[i] = b[i] > 0.0f ? a[i] : 0.0f;
            break;
        case ADD:
            out[i] = a[i] + b[i];
            break;
        case ACCUMULATE:
            out[i] += a[i];
            break;
        case SCALE:
            out[i] = alpha * a[i];
            break;
        case SIGMOID:
            out[i] = 1.0f / (1.0f + expf(-a[i]));
            break;
        case SIGMOID_BACKWARD: // from the saved output y = b
            out[i] = a[i] * b[i] * (1.0f - b[i]);
            break;
        case TANH:
            out[i] = tanhf(a[i]);
            break;
        case TANH_BACKWARD:
            out[i] = a[i] * (1.0f - b[i] * b[i]);
            break;
        case ADD_RELU: // a residual sum and the ReLU after it, in one pass
            out[i] = a[i] + b[i] > 0.0f ? a[i] + b[i] : 0.0f;
            break;
        default:
            out[i] = a[i];
            break;
        }
    }
}

__global__ void relu_mask_kernel(float *x, const float *mask, int64_t n)
{
    DP_CUDA_KERNEL_LOOP(i, n)
        x[i] = mask[i] > 0.0f ? x[i] : 0.0f;
}

// One thread per destination element; reads are strided, writes coalesced.
__global__ void relayout_kernel(const float *src, float *dst, int64_t N, int64_t C, int64_t HW,
                                int src_nhwc)
{
    int64_t n_all = N * C * HW;
    DP_CUDA_KERNEL_LOOP(i, n_all) {
        if (src_nhwc) { // dst NCHW: i = (n C + c) HW + p
            int64_t p = i % HW, c = (i / HW) % C, n = i / (HW * C);
            dst[i] = src[(n * HW + p) * C + c];
        } else { // dst NHWC: i = (n HW + p) C + c
            int64_t c = i % C, p = (i / C) % HW, n = i / (HW * C);
            dst[i] = src[(n * C + c) * HW + p];
        }
    }
}

__global__ void bias_add_kernel(float *y, const float *b, int64_t rows, int64_t cols)
{
    int64_t n = rows * cols;
    DP_CUDA_KERNEL_LOOP(i, n)
        y[i] += b[i % cols];
}

// One block per column (grid-stride over the columns): one thread per
// column, as before, chained up to ~173k additions for LeNet's first
// convolution on 20 threads, milliseconds a step. Thread t sums rows t,
// t + T, t + 2T, ... in order, then the block adds its T partial sums in a
// fixed tree. The order depends on rows and T alone, never on the grid or
// on timing, so every run gives the same bits, and dp__cuda_bias_grad_host
// (cuda_host.c) gives them on the host.
constexpr int kBiasThreads = DP__CUDA_BIAS_GRAD_THREADS;

__global__ void bias_grad_kernel(const float *dy, float *db, int64_t rows, int64_t cols,
                                 int accumulate)
{
    __shared__ float part[kBiasThreads];
    const int t = (int)threadIdx.x;
    for (int64_t j = blockIdx.x; j < cols; j += gridDim.x) {
        float s = 0.0f;
        for (int64_t i = t; i < rows; i += kBiasThreads)
            s += dy[i * cols + j];
        s = dp_cuda::block_sum<kBiasThreads>(part, s);
        if (t == 0)
            db[j] = accumulate ? db[j] + s : s;
    }
}

} // namespace

extern "C" cudaError_t dp__cuda_fill_launch(const dp__fill_args *a, cudaStream_t stream)
{
    uint32_t bits;
    static_assert(sizeof bits == sizeof a->value, "32-bit float");
    memcpy(&bits, &a->value, sizeof bits);
    return dp_cuda::launch_over(a->n, stream, fill_kernel, (uint32_t *)a->data, a->n, bits);
}

extern "C" cudaError_t dp__cuda_eltwise_launch(const dp__eltwise_args *a, cudaStream_t stream)
{
    // f32 only: CUDA devices hold no bf16 tensors (DP_DEVICE_BF16 unset)
    return dp_cuda::launch_over(a->n, stream, eltwise_kernel, (int)a->op, (const float *)a->a,
                                (const float *)a->b, (float *)a->out, a->n, a->alpha);
}

extern "C" cudaError_t dp__cuda_relu_mask(float *x, const float *mask, int64_t n,
                                          cudaStream_t stream)
{
    return dp_cuda::launch_over(n, stream, relu_mask_kernel, x, mask, n);
}

extern "C" cudaError_t dp__cuda_relayout_launch(const dp__relayout_args *a, cudaStream_t stream)
{
    const int64_t *s = a->src.shape; // logical (N, C, H, W)
    return dp_cuda::launch_over(s[0] * s[1] * s[2] * s[3], stream, relayout_kernel,
                                (const float *)a->src.data, (float *)a->dst.data, s[0], s[1],
                                s[2] * s[3], a->src.nhwc);
}

extern "C" cudaError_t dp__cuda_bias_add_launch(float *y, const float *b, int64_t rows,
                                                int64_t cols, cudaStream_t stream)
{
    return dp_cuda::launch_over(rows * cols, stream, bias_add_kernel, y, b, rows, cols);
}

extern "C" cudaError_t dp__cuda_bias_grad_launch(const float *dy, float *db, int64_t rows,
                                                 int64_t cols, int accumulate, cudaStream_t stream)
{
    // blocks_for(cols, 1): one block per column, the grid-stride loop
    // taking columns beyond its cap
    bias_grad_kernel<<<dp_cuda::blocks_for(cols, 1), kBiasThreads, 0, stream>>>(dy, db, rows, cols,
                                                                                accumulate);
    return cudaGetLastError();
}
