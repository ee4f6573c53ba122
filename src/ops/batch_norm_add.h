/* Batch norm with a residual sum (and the ReLU after it) as one op, for the
 * built-in ResNet's block tail (src/nn/resnet.c). */
#ifndef DP_OPS_BATCH_NORM_ADD_H
#define DP_OPS_BATCH_NORM_ADD_H

#include "dp/ops.h"

/* y = batch_norm2d(x) + residual, then max(y, 0) when p->relu: what
 * dp_batch_norm2d (with relu off), dp_add and dp_relu give, with their
 * semantics, gradients and tape rows, in one sweep over x where the device
 * has the batch_norm_add kernel and x and residual (N, C, H, W) agree in
 * dtype and layout (else those ops run one after another). Backward: dx
 * and the residual's gradient written (=), dgamma and dbeta accumulated,
 * in batch norm's two passes after the ReLU's mask, with no copy of the
 * gradient for the residual. Against the unfused ops, f32 differs only in
 * the order of the normalisation's float operations (oneDNN's there);
 * bf16 keeps the sum in float until y, where dp_add rounds the normalised
 * value to bf16 first. Without the ReLU and followed by dp_relu it gives
 * the fused op's bits (a pipeline cut at the block's ReLU). */
int dp__batch_norm2d_add(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *gamma, dp_tensor_t *beta,
                         dp_tensor_t *running_mean, dp_tensor_t *running_var, dp_tensor_t *residual,
                         const dp_batch_norm_params *p);

#endif
