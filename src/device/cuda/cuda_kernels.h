/* Launchers of our own CUDA kernels (the .cu files of this folder), callable
 * from C. Each enqueues its kernel on `stream` and returns the launch status
 * (cudaGetLastError). Shapes and contracts are those of the argument structs
 * in src/device/kernels.h; the .cu file of each family says which CPU file it
 * mirrors. Valid C and C++: the .cu files include it too. */
#ifndef DP_DEVICE_CUDA_KERNELS_H
#define DP_DEVICE_CUDA_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* eltwise.cu (src/device/cpu/eltwise.c, cpu_device.c's fill) */
/* d[0..n) = the 32 bits of `value` (f32, or i32 bits as given). */
cudaError_t dp__cuda_fill(void *d, int64_t n, float value, cudaStream_t stream);
/* op is a dp__eltwise_op. */
cudaError_t dp__cuda_eltwise(int op, const float *a, const float *b, float *out, int64_t n,
                             float alpha, cudaStream_t stream);
/* x[i] = mask[i] > 0 ? x[i] : 0 (the backward of a fused ReLU, in place). */
cudaError_t dp__cuda_relu_mask(float *x, const float *mask, int64_t n, cudaStream_t stream);
/* dst = src (N, C, H, W) in the other layout: src_nhwc says src's. */
cudaError_t dp__cuda_relayout(const float *src, float *dst, int64_t N, int64_t C, int64_t H,
                              int64_t W, int src_nhwc, cudaStream_t stream);
/* y (rows x cols) += b (cols). */
cudaError_t dp__cuda_bias_add(float *y, const float *b, int64_t rows, int64_t cols,
                              cudaStream_t stream);
/* db (cols) = sum over rows of dy (rows x cols), rows summed in order. */
cudaError_t dp__cuda_bias_grad(const float *dy, float *db, int64_t rows, int64_t cols,
                               cudaStream_t stream);

/* loss.cu (src/device/cpu/loss.c) */
cudaError_t dp__cuda_xent_forward(const float *logits, const int32_t *labels, float *loss,
                                  int64_t n, int64_t k, int mean, cudaStream_t stream);
cudaError_t dp__cuda_xent_backward(const float *logits, const int32_t *labels, const float *dloss,
                                   float *dlogits, int64_t n, int64_t k, int mean,
                                   cudaStream_t stream);
cudaError_t dp__cuda_accuracy(const float *logits, const int32_t *labels, float *correct, int64_t n,
                              int64_t k, cudaStream_t stream);

/* sgd.cu (src/device/cpu/sgd.c); first_nonfinite may be NULL. */
cudaError_t dp__cuda_sgd(float *params, const float *grads, float *velocity, int64_t n, float lr,
                         float grad_scale, float momentum, float weight_decay,
                         const int64_t *first_nonfinite, cudaStream_t stream);
/* *first_nonfinite = the first i with data[i] NaN or Inf, else n. */
cudaError_t dp__cuda_check_finite(const float *data, int64_t n, int64_t *first_nonfinite,
                                  cudaStream_t stream);

/* adaptive_pool.cu (src/device/cpu/adaptive_pool.c); relu_mask may be NULL. */
cudaError_t dp__cuda_adaptive_avg_pool_forward(const float *x, float *y, int64_t N, int64_t C,
                                               int64_t H, int64_t W, int64_t P, int64_t Q, int nhwc,
                                               cudaStream_t stream);
cudaError_t dp__cuda_adaptive_avg_pool_backward(const float *dy, float *dx, const float *relu_mask,
                                                int64_t N, int64_t C, int64_t H, int64_t W,
                                                int64_t P, int64_t Q, int nhwc,
                                                cudaStream_t stream);

/* batch_norm_kernels.cu (the parts of src/device/cpu/batch_norm.c that
 * cuDNN does not do) */
/* var[c] = 1 / inv_std[c]^2 - eps, in place (cuDNN saves 1 / sqrt(var + eps)). */
cudaError_t dp__cuda_bn_invstd_to_var(float *v, int64_t C, float eps, cudaStream_t stream);
/* inv_std[c] = 1 / sqrt(var[c] + eps). */
cudaError_t dp__cuda_bn_var_to_invstd(const float *var, float *inv_std, int64_t C, float eps,
                                      cudaStream_t stream);
/* Eval backward (statistics constant): dx = dy gamma inv_std,
 * dgamma = sum dy xhat, dbeta = sum dy, per channel over (N, H, W). */
cudaError_t dp__cuda_bn_backward_eval(const float *x, const float *dy, const float *gamma,
                                      const float *mean, const float *var, float eps, float *dx,
                                      float *dgamma, float *dbeta, int64_t N, int64_t C, int64_t HW,
                                      int nhwc, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
