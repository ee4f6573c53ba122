/* dp/ops.h - the functional API. Each op enqueues its kernel on the device
 * of its inputs and returns at once with the output tensor, which belongs to
 * the active tape (dp/autograd.h). When the tape records and an input needs
 * a gradient, the op also records how to compute its backward.
 *
 * Shapes use fixed letters: N batch, C channels in, K channels out, H x W
 * input size, R x S kernel, P x Q output size, D features. */
#ifndef DP_OPS_H
#define DP_OPS_H

#include "dp/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dp_conv2d_params {
    int stride_h, stride_w; /* 0 means 1 */
    int pad_h, pad_w;
    bool relu; /* fuse a ReLU after the convolution */
} dp_conv2d_params;

/* y (N, K, P, Q) = conv(x (N, C, H, W), w (K, C, R, S)) + b (K) [then ReLU];
 * b may be NULL. */
int dp_conv2d(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *w, dp_tensor_t *b,
              const dp_conv2d_params *p);

typedef struct dp_pool2d_params {
    int kernel_h, kernel_w;
    int stride_h, stride_w; /* 0 means the kernel size, as PyTorch */
    int pad_h, pad_w;
} dp_pool2d_params;

/* y (N, C, P, Q): mean (padding counted, as PyTorch's default
 * count_include_pad=True: the divisor is kernel_h kernel_w) or max (padded
 * cells never win) over each window of x (N, C, H, W),
 * P = floor((H + 2 pad_h - kernel_h) / stride_h) + 1, Q likewise. Padding
 * above half the kernel is rejected (DP_EINVAL), as PyTorch does. */
int dp_avg_pool2d(dp_tensor_t **y, dp_tensor_t *x, const dp_pool2d_params *p);
int dp_max_pool2d(dp_tensor_t **y, dp_tensor_t *x, const dp_pool2d_params *p);

/* y = max(x, 0), any shape. */
int dp_relu(dp_tensor_t **y, dp_tensor_t *x);
/* y = 1 / (1 + exp(-x)) and y = tanh(x), any shape and layout; the backward
 * uses the output: dx = dy y (1 - y), dy (1 - y^2). */
int dp_sigmoid(dp_tensor_t **y, dp_tensor_t *x);
int dp_tanh(dp_tensor_t **y, dp_tensor_t *x);

typedef struct dp_dropout_params {
    float prob;    /* of zeroing an element, in [0, 1] */
    bool training; /* else the identity */
    /* The mask is a pure function of (seed, step, layer, global sample
     * index, element index within the sample); steps below 2^31. */
    uint64_t seed;
    uint64_t step;
    uint32_t layer;
    /* The global index in the whole batch of this tensor's sample 0: a
     * device holding rows [k, k + n) of the batch passes k, and draws the
     * mask that one device holding the whole batch draws for those rows. */
    int64_t sample_offset;
} dp_dropout_params;

/* PyTorch's (inverted) dropout of x (N, ...), any shape and layout: in
 * training each element is kept with probability 1 - prob and scaled by
 * 1 / (1 - prob), else zeroed; prob == 1 gives zeros. Not training, or
 * prob == 0: y = x. prob outside [0, 1]: DP_EINVAL. Backward: dx = dy
 * through the same mask (=). */
int dp_dropout(dp_tensor_t **y, dp_tensor_t *x, const dp_dropout_params *p);

/* z = a + b, same shapes. */
int dp_add(dp_tensor_t **z, dp_tensor_t *a, dp_tensor_t *b);

typedef enum dp_weight_layout {
    DP_WEIGHT_OUT_IN = 0, /* nn.Linear: w (D_out, D_in), y = x w^T + b */
    DP_WEIGHT_IN_OUT = 1, /* the seed's torch.mm(x, w) + b: w (D_in, D_out) */
} dp_weight_layout;

/* y (N, D_out) = x (N, D_in) times w, plus b (D_out) (b may be NULL). */
int dp_linear(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *w, dp_tensor_t *b,
              dp_weight_layout layout);

/* y (N, C*H*W...) = x (N, ...) in logical order. */
int dp_flatten(dp_tensor_t **y, dp_tensor_t *x);
/* y = x with another shape of the same element count, logical order. */
int dp_reshape(dp_tensor_t **y, dp_tensor_t *x, int ndim, const int64_t *shape);

typedef enum dp_reduction { DP_REDUCE_SUM = 0, DP_REDUCE_MEAN = 1 } dp_reduction;

/* loss (1) = sum or mean over rows of -log softmax(logits (N, K))[labels]
 * with int32 labels (N). */
int dp_cross_entropy(dp_tensor_t **loss, dp_tensor_t *logits, dp_tensor_t *labels,
                     dp_reduction reduction);

/* correct (1) += number of rows of logits (N, K) whose argmax is the label.
 * Not differentiable; `correct` is a float tensor the caller owns. */
int dp_accuracy_accumulate(dp_tensor_t *correct, dp_tensor_t *logits, dp_tensor_t *labels);

/* SyncBatchNorm: the replicas of one batch norm layer share a group, and in
 * training the batch statistics (and the sums the backward needs) are those
 * of all replicas' shards together, as PyTorch's SyncBatchNorm. The group's
 * replicas exchange them through host memory: devices of one process. */
typedef struct dp__exchange dp_bn_sync_t;
int dp_bn_sync_create(dp_bn_sync_t **out, int64_t channels, int max_ranks);
void dp_bn_sync_close(dp_bn_sync_t *s);

typedef struct dp_batch_norm_params {
    bool training;      /* batch statistics (and update the running ones), else running */
    float momentum;     /* running = (1 - momentum) running + momentum batch; 0 means 0.1 */
    float eps;          /* 0 means 1e-5 */
    bool relu;          /* fuse a ReLU after the normalisation */
    dp_bn_sync_t *sync; /* SyncBatchNorm group, or NULL: this replica's shard only */
    int rank, ranks;    /* this replica's place in the group, and how many take part */
} dp_batch_norm_params;

/* BatchNorm2d as PyTorch: per channel c of x (N, C, H, W),
 *   y = gamma[c] (x - mean[c]) / sqrt(var[c] + eps) + beta[c]  [then ReLU]
 * Training: mean and biased var over (N, H, W) of this batch; running_mean
 * and running_var (C) are updated in place with the unbiased var (as
 * PyTorch). Eval: the running statistics. Backward (training mode): dx
 * written (=), dgamma and dbeta accumulated into the parameters' gradients.
 * The output keeps x's layout. */
int dp_batch_norm2d(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *gamma, dp_tensor_t *beta,
                    dp_tensor_t *running_mean, dp_tensor_t *running_var,
                    const dp_batch_norm_params *p);

/* BatchNorm1d as PyTorch: dp_batch_norm2d's semantics and parameters for
 * x (N, C), statistics per channel over N, or x (N, C, L), over (N, L);
 * y has x's shape. */
int dp_batch_norm1d(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *gamma, dp_tensor_t *beta,
                    dp_tensor_t *running_mean, dp_tensor_t *running_var,
                    const dp_batch_norm_params *p);

/* AdaptiveAvgPool2d to (out_h, out_w): y (N, C, out_h, out_w) from x
 * (N, C, H, W), the mean over each of PyTorch's adaptive windows (rows
 * floor(i H / out_h) .. ceil((i + 1) H / out_h)). (1, 1) is global average
 * pooling. Backward writes dx (=). */
int dp_adaptive_avg_pool2d(dp_tensor_t **y, dp_tensor_t *x, int out_h, int out_w);

/* dst += src (same element count), enqueued; not recorded for autograd. */
int dp_accumulate(dp_tensor_t *dst, dp_tensor_t *src);

#ifdef __cplusplus
}
#endif
#endif
