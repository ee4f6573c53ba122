/* The CUDA backend's kernel entries, and the launchers of our own CUDA
 * kernels (the .cu files of this folder), callable from C. Valid C and C++:
 * the .cu files include it too.
 *
 * Entries: dp__cuda_<slot> for the slots of the op list (device/op_list.h),
 * declared for every slot, defined for those of the lines that give CUDA
 * the op: the device table's functions (they enqueue, see
 * device/device.h).
 *
 * Launchers: each enqueues its kernel on `stream` and returns the launch
 * status (cudaGetLastError). Each takes the typed argument struct of
 * src/device/kernels.h that the CPU kernel of the same op takes, with its
 * shapes and contract; the .cu file of each family says which CPU file it
 * mirrors. */
#ifndef DP_DEVICE_CUDA_KERNELS_H
#define DP_DEVICE_CUDA_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "device/kernels.h"
#include "device/op_list.h"

#ifdef __cplusplus
extern "C" {
#endif

/* clang-format off */
#define DP__CUDA_KERNEL(slot, args, given) int dp__cuda_##slot(dp_device_t *dev, const args *a);
#define DP__CUDA_LINE(name, args, kernels, backends, cost) \
    DP__OP_BACKEND_SLOTS(cuda, DP__CUDA_KERNEL, name, args, kernels, backends)
DP__OP_LIST(DP__CUDA_LINE)
#undef DP__CUDA_LINE
#undef DP__CUDA_KERNEL
/* clang-format on */

/* A launcher over one argument struct, for dp__cuda_push_launch. */
typedef cudaError_t (*dp__cuda_launcher)(const void *args, cudaStream_t stream);
/* Enqueues a command on dev's worker that runs launch(args, the device's
 * CUDA stream) and checks its status as dp__cuda_push's commands do: an
 * entry whose whole work is one launcher (the .cu file of an op holds its
 * kernels, launchers and entries alike). `name` names it for DP_PROFILE;
 * args is copied (at most 448 bytes). */
int dp__cuda_push_launch(dp_device_t *dev, dp__cuda_launcher launch, const char *name,
                         const void *args, size_t size);

/* eltwise.cu (src/device/cpu/eltwise.c, cpu_device.c's fill) */
cudaError_t dp__cuda_fill_launch(const dp__fill_args *a, cudaStream_t stream);
cudaError_t dp__cuda_eltwise_launch(const dp__eltwise_args *a, cudaStream_t stream);
/* x[i] = mask[i] > 0 ? x[i] : 0 (the backward of a fused ReLU, in place). */
cudaError_t dp__cuda_relu_mask(float *x, const float *mask, int64_t n, cudaStream_t stream);
cudaError_t dp__cuda_relayout_launch(const dp__relayout_args *a, cudaStream_t stream);
/* y (rows x cols) += b (cols). */
cudaError_t dp__cuda_bias_add_launch(float *y, const float *b, int64_t rows, int64_t cols,
                                     cudaStream_t stream);
/* db (cols) = sum over rows of dy (rows x cols), or db += that sum where
 * `accumulate` (the slices of a batch after the first), in the fixed order
 * of dp__cuda_bias_grad_host (cuda_host.h). */
cudaError_t dp__cuda_bias_grad_launch(const float *dy, float *db, int64_t rows, int64_t cols,
                                      int accumulate, cudaStream_t stream);

/* conv_pad.cu (cuDNN's one-sided padding, for conv2d.c): with to_padded,
 * padded (N, H2, W2, C) NHWC = t (N, C, H, W, stored as t.nhwc says)
 * placed at row `top` and column `left`, zeros around it; else t = that
 * inside of padded (each element of t written, =). */
typedef struct dp__cuda_conv_pad_args {
    dp__tdesc t;
    float *padded;
    int64_t h2, w2;
    int top, left;
    int to_padded;
} dp__cuda_conv_pad_args;
cudaError_t dp__cuda_conv_pad_launch(const dp__cuda_conv_pad_args *a, cudaStream_t stream);

/* dropout.cu (src/device/cpu/dropout.c) */
cudaError_t dp__cuda_dropout_launch(const dp__dropout_args *a, cudaStream_t stream);

/* loss.cu (src/device/cpu/loss.c) */
cudaError_t dp__cuda_xent_forward(const dp__xent_args *a, cudaStream_t stream);
cudaError_t dp__cuda_xent_backward(const dp__xent_args *a, cudaStream_t stream);
cudaError_t dp__cuda_accuracy_launch(const dp__accuracy_args *a, cudaStream_t stream);

/* optimizer.cu (src/device/cpu/optimizer.c) */
cudaError_t dp__cuda_optimizer_step_launch(const dp__optimizer_args *a, cudaStream_t stream);
cudaError_t dp__cuda_grad_clip_launch(const dp__grad_clip_args *a, cudaStream_t stream);
cudaError_t dp__cuda_check_finite_launch(const dp__check_finite_args *a, cudaStream_t stream);

/* adaptive_pool.cu (src/device/cpu/adaptive_pool.c) */
cudaError_t dp__cuda_adaptive_avg_pool_forward_launch(const dp__adaptive_pool_args *a,
                                                      cudaStream_t stream);
cudaError_t dp__cuda_adaptive_avg_pool_backward_launch(const dp__adaptive_pool_args *a,
                                                       cudaStream_t stream);

/* pool_dilated.cu (dilated max pooling, which cuDNN lacks; src/device/cpu/pool2d.c) */
cudaError_t dp__cuda_max_pool_dilated_forward_launch(const dp__pool2d_args *a, cudaStream_t stream);
cudaError_t dp__cuda_max_pool_dilated_backward_launch(const dp__pool2d_args *a,
                                                      cudaStream_t stream);

/* batch_norm_kernels.cu (the parts of src/device/cpu/batch_norm.c that
 * cuDNN does not do) */
/* var[c] = 1 / inv_std[c]^2 - eps, in place (cuDNN saves 1 / sqrt(var + eps)). */
cudaError_t dp__cuda_bn_invstd_to_var(float *v, int64_t C, float eps, cudaStream_t stream);
/* inv_std[c] = 1 / sqrt(var[c] + eps). */
cudaError_t dp__cuda_bn_var_to_invstd(const float *var, float *inv_std, int64_t C, float eps,
                                      cudaStream_t stream);
/* Eval backward (statistics constant, the saved mean and var of `a`):
 * dx = dy gamma inv_std, dgamma = sum dy xhat, dbeta = sum dy, per channel
 * over (N, H, W). */
cudaError_t dp__cuda_bn_backward_eval(const dp__batch_norm_args *a, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
