/* A convolution (with its ReLU) and the average pool after it as one op,
 * for the built-in LeNet's layers (src/nn/lenet.c). */
#ifndef DP_OPS_CONV_POOL_H
#define DP_OPS_CONV_POOL_H

#include "dp/ops.h"

/* y = dp_avg_pool2d(dp_conv2d(x, w, b, conv), pool): their semantics and
 * gradients, in one kernel where the device has conv2d_pool and the layer
 * fits it: the pool's window square, its stride the window, no padding,
 * no ceil_mode; the convolution ungrouped with at most
 * DP__CONV_POOL_MAX_TAPS (32) inputs an output (C R S: a first layer); x
 * needing no gradient (there is no dx pass). Elsewhere, and on a device
 * that traces (the meta device: a summary or an ONNX export reads the
 * layers apart), the two ops run one after the other. Against them, f32
 * and bf16 differ only in the order of the convolution's float sums. */
int dp__conv2d_avg_pool2d(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *w, dp_tensor_t *b,
                          const dp_conv2d_params *conv, const dp_pool2d_params *pool);

#endif
