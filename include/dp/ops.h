/* dp/ops.h - the functional API. Each op enqueues its kernel on the device
 * of its inputs and returns at once with the output tensor, which belongs to
 * the active tape (dp/autograd.h). When the tape records and an input needs
 * a gradient, the op also records how to compute its backward.
 *
 * Shapes use fixed letters: N batch, C channels in, K channels out, H x W
 * input size, R x S kernel, P x Q output size, D features. */
#ifndef DP_OPS_H
#define DP_OPS_H

#include "dp/option.h"
#include "dp/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- mixed precision ------------------------------------------------------
 *
 * What convolutions and matrix products compute in, for the ops the calling
 * thread issues from then on, as torch.autocast("cpu", dtype=torch.bfloat16)
 * (autocast is per thread there too):
 *   DP_PRECISION_FP32   float32 everywhere (the default).
 *   DP_PRECISION_BF16   dp_conv2d and dp_linear take bf16 operands (their
 *     float32 inputs and weights rounded to nearest even) and accumulate in
 *     float32, on the device's native kernels (DP_DEVICE_BF16_NATIVE:
 *     AVX512-BF16 or AMX). A convolution's output is bf16, and the ops that
 *     follow it (batch norm, ReLU, pooling, sums, reshapes) keep bf16
 *     activations and bf16 gradients; dp_linear's output is float32. Ops
 *     with no bf16 kernel (dropout, cross-entropy, adaptive pooling that
 *     does not tile) take their input as float32, through a recorded cast.
 *     Parameters, their gradients, the optimizer's state, batch norm's
 *     statistics and the loss stay float32; no loss scaling is needed (bf16
 *     has float32's exponent range).
 *   DP_PRECISION_BF16_REFERENCE  the same values from float32 kernels whose
 *     operands are rounded to bf16 first: a product of two bf16 numbers is
 *     exact in float32, so this is the native arithmetic up to the order of
 *     the float32 sums. Slower than float32; it checks bf16 accuracy on any
 *     device with DP_DEVICE_BF16.
 * Ops read the setting when they are called; a backward pass uses the
 * precision its forward was issued with. Returns the previous setting. */
typedef enum dp_precision {
    DP_PRECISION_FP32 = 0,
    DP_PRECISION_BF16 = 1,
    DP_PRECISION_BF16_REFERENCE = 2,
} dp_precision;
dp_precision dp_set_precision(dp_precision p);
dp_precision dp_get_precision(void);
/* "fp32", "bf16", "bf16-reference" (dp_name_parse reads them). */
extern const dp_name_table dp_precision_names;
const char *dp_precision_name(dp_precision p);

/* y = x converted to dtype, same shape and layout; y is x itself when x
 * has that dtype. Between DP_F32 and DP_BF16 (to bf16 rounds to nearest
 * even; backward converts the gradient back), and between DP_I32 and
 * DP_F32 (float to int truncates toward zero, as torch's
 * .type(torch.int); NaN and values outside int32's range give INT32_MIN,
 * as x86's conversion, on every device), not differentiable through int32:
 * a cast to int32 is never recorded. Other pairs: DP_EINVAL. */
int dp_cast(dp_tensor_t **y, dp_tensor_t *x, dp_dtype dtype);

/* How convolutions pick their kernels, process-wide (torch.backends.cudnn's
 * benchmark mode, for the CPU):
 *   DP_CONV_ALGO_DIRECT    the direct kernels in NHWC (the default).
 *   DP_CONV_ALGO_AUTO      the first time a shape is seen (batch size aside),
 *     every candidate the device offers is timed for each pass (forward,
 *     backward-data, backward-weights) and the fastest is kept for the
 *     process: direct in NHWC, direct in oneDNN's blocked layout, Winograd
 *     (float32, AVX-512), im2col and a matrix product, in the precision of
 *     the op. Every device of the process uses the one choice.
 *   DP_CONV_ALGO_WINOGRAD  Winograd where the device has it for the shape
 *     (float32, 3x3, stride 1), else direct.
 * The reference bf16 path always runs direct kernels. */
typedef enum dp_conv_algo {
    DP_CONV_ALGO_DIRECT = 0,
    DP_CONV_ALGO_AUTO = 1,
    DP_CONV_ALGO_WINOGRAD = 2,
} dp_conv_algo;
void dp_set_conv_algo(dp_conv_algo a);
dp_conv_algo dp_get_conv_algo(void);
/* "auto", "direct", "winograd" (dp_name_parse reads them). */
extern const dp_name_table dp_conv_algo_names;
const char *dp_conv_algo_name(dp_conv_algo a);
/* The choices DP_CONV_ALGO_AUTO has made (or loaded) so far, one line per
 * shape and precision, e.g.
 *   bf16 64x28x28 k64 3x3 s1x1 p1x1: forward=direct backward_data=direct backward_weights=gemm
 * as a string the caller frees with free(), or NULL when out of memory.
 * dp_conv_choices_load installs such lines (those for shapes already
 * chosen replace them), so that a resumed run or another MPI rank uses the
 * same kernels; a malformed line is DP_EINVAL naming it, and nothing is
 * installed. dp_conv_choices_clear forgets every choice. */
char *dp_conv_choices_save(void);
int dp_conv_choices_load(const char *text);
void dp_conv_choices_clear(void);
/* The lines of the passes this process measured itself (not loaded), in
 * dp_conv_choices_save's format, malloc'd ("" when none; NULL without
 * memory): what the kernels' cache file takes (dp/conv_cache.h). */
char *dp_conv_choices_save_measured(void);
/* 0 if `line` (up to its newline) is one dp_conv_choices_load reads, else
 * DP_EINVAL; logs nothing. */
int dp_conv_choices_check(const char *line);
/* What a measured choice holds for, as "name=value; ..." (the processor
 * and the instruction-set flags the kernels dispatch on, the kernel
 * library's version, DNNL_MAX_CPU_ISA) into buf[0..size); returns
 * snprintf's count. Choices measured under one key are not reused under
 * another. */
int dp_conv_choices_key(char *buf, size_t size);

/* Split-invariant sums, process-wide: with rows > 0, every sum over the
 * batch that training takes (the weight, bias, gamma and slope gradients
 * of conv2d, conv_transpose2d, linear, batch norm and prelu; batch norm's
 * statistics and backward sums) is taken over blocks of `rows` samples,
 * added pairwise in a fixed binary tree, and the per-sample passes
 * (convolutions' forward and backward-data, linear layers' products) run
 * block by block, so that every kernel sees the same shapes on every
 * split. Splitting a batch of rows 2^j samples over 2^i devices or MPI
 * ranks (i <= j) then gives each a whole subtree, and the allreduce's sum
 * of the halves is the tree's own addition: the same bits as one device,
 * with SyncBatchNorm where the model has batch norm (its statistics are
 * the whole batch's). 0, the default, lets each kernel take its whole
 * shard. Read when an op runs. The CPU backend honours it; the CUDA one
 * sums batch norm's statistics over its whole shard. */
void dp_set_split_invariant(int64_t rows);
int64_t dp_get_split_invariant(void);

/* A convolution's geometry, as PyTorch's nn.Conv2d and ONNX's Conv have it.
 * Padding is either symmetric, pad_h rows above and below and pad_w
 * columns left and right, or, when any of pad_top, pad_left, pad_bottom,
 * pad_right is nonzero, those four (ONNX's pads [top, left, bottom, right],
 * auto_pad SAME_UPPER/SAME_LOWER resolved), and pad_h and pad_w must then
 * be 0. Zero-initialised fields give PyTorch's defaults. */
typedef struct dp_conv2d_params {
    int stride_h, stride_w; /* 0 means 1 */
    int pad_h, pad_w;
    bool relu;                  /* fuse a ReLU after the convolution */
    int groups;                 /* 0 means 1; groups == C is depthwise */
    int dilation_h, dilation_w; /* 0 means 1 (PyTorch's count, not oneDNN's) */
    int pad_top, pad_left, pad_bottom, pad_right;
} dp_conv2d_params;

/* y (N, K, P, Q) = conv(x (N, C, H, W), w (K, C / groups, R, S)) + b (K)
 * [then ReLU]; b may be NULL. C and K must be divisible by groups; output
 * channel k sees input channels [g C / groups, (g + 1) C / groups) for its
 * group g = k / (K / groups). With padding t, b (rows) and dilation d,
 * P = (H + t + b - d (R - 1) - 1) / stride_h + 1, Q likewise. */
int dp_conv2d(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *w, dp_tensor_t *b,
              const dp_conv2d_params *p);
/* What dp_conv2d(x, w, b, p) would check, and the shape (N, K, P, Q) and
 * dtype its output would have under the precision in force, without
 * computing it: a front end that defers the convolution (to run it with
 * the ReLU and pool that follow as one op) reports a wrong call at the
 * call, with dp_conv2d's message. */
int dp_conv2d_output(int64_t shape[4], dp_dtype *dtype, const dp_tensor_t *x, const dp_tensor_t *w,
                     const dp_tensor_t *b, const dp_conv2d_params *p);

/* ConvTranspose2d's geometry: the convolution whose transpose it is (stride,
 * padding in either of dp_conv2d_params's two forms, dilation, groups),
 * and output_padding rows and columns added at the bottom and right of the
 * output, each below the stride (PyTorch's output_padding; ONNX's, or the
 * difference its output_shape implies). */
typedef struct dp_conv_transpose2d_params {
    int stride_h, stride_w; /* 0 means 1 */
    int pad_h, pad_w;
    int output_padding_h, output_padding_w;
    int groups;                 /* 0 means 1 */
    int dilation_h, dilation_w; /* 0 means 1 */
    int pad_top, pad_left, pad_bottom, pad_right;
} dp_conv_transpose2d_params;

/* y (N, K, P, Q) = conv_transpose(x (N, C, H, W), w (C, K / groups, R, S))
 * + b (K), as torch.nn.functional.conv_transpose2d: the gradient of
 * dp_conv2d with respect to its input, for the convolution of y by w.
 * P = (H - 1) stride_h - t - b + d (R - 1) + output_padding_h + 1, Q
 * likewise. Backward: dx = conv(dy, w) written (=); dw, db accumulated as
 * dp_conv2d's. float32 (a bf16 input is cast first); y is stored NHWC. */
int dp_conv_transpose2d(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *w, dp_tensor_t *b,
                        const dp_conv_transpose2d_params *p);

typedef struct dp_pool2d_params {
    int kernel_h, kernel_w;
    int stride_h, stride_w; /* 0 means the kernel size, as PyTorch */
    int pad_h, pad_w;
    /* PyTorch's ceil_mode=True: P rounds up instead (a last window may hang
     * past the padding, as long as it starts inside the input or the left
     * padding); the part past the padding is never counted in a mean. */
    bool ceil_mode;
    /* PyTorch's count_include_pad=False: a mean divides by the window's
     * cells inside the input only. */
    bool exclude_pad;
    /* PyTorch's MaxPool2d dilation: the window's cells are dilation_h rows
     * and dilation_w columns apart, spanning dilation (kernel - 1) + 1; 0
     * means 1 (none). Max pooling only: PyTorch's AvgPool2d has none. */
    int dilation_h, dilation_w;
} dp_pool2d_params;

/* y (N, C, P, Q): mean (padding counted, as PyTorch's default
 * count_include_pad=True: the divisor is kernel_h kernel_w) or max (padded
 * cells never win) over each window of x (N, C, H, W),
 * P = floor((H + 2 pad_h - dilation_h (kernel_h - 1) - 1) / stride_h) + 1,
 * Q likewise (ceil with ceil_mode). Padding above half the kernel is rejected (DP_EINVAL), as
 * PyTorch does; so is a mean counting padding (exclude_pad false, pad_h or
 * pad_w not 0) whose last ceil_mode window hangs past the padding, whose
 * divisor neither oneDNN nor cuDNN computes. */
int dp_avg_pool2d(dp_tensor_t **y, dp_tensor_t *x, const dp_pool2d_params *p);
int dp_max_pool2d(dp_tensor_t **y, dp_tensor_t *x, const dp_pool2d_params *p);

/* y = dp_avg_pool2d(dp_conv2d(x, w, b, conv), pool): their semantics and
 * gradients, in one kernel where the device has one and the layer fits it:
 * the pool's window square, its stride the window, no padding, no
 * ceil_mode; the convolution ungrouped with at most 32 inputs an output
 * (C R S: a first layer); x needing no gradient (there is no dx pass).
 * Elsewhere, and on a device that traces (the meta device: a summary or an
 * ONNX export reads the layers apart), the two ops run one after the
 * other. Against them, f32 and bf16 differ only in the order of the
 * convolution's float sums. The built-in LeNet's layers run here, and the
 * Python front end's conv2d -> relu -> avg_pool2d calls. */
int dp_conv2d_avg_pool2d(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *w, dp_tensor_t *b,
                         const dp_conv2d_params *conv, const dp_pool2d_params *pool);

/* y = max(x, 0), any shape. */
int dp_relu(dp_tensor_t **y, dp_tensor_t *x);
/* y = 1 / (1 + exp(-x)) and y = tanh(x), any shape and layout; the backward
 * uses the output: dx = dy y (1 - y), dy (1 - y^2). */
int dp_sigmoid(dp_tensor_t **y, dp_tensor_t *x);
int dp_tanh(dp_tensor_t **y, dp_tensor_t *x);
/* y = x > 0 ? x : negative_slope x, any shape and layout (F.leaky_relu;
 * nn.LeakyReLU's default slope is 0.01, and any finite slope is taken).
 * Backward: dx = dy where x > 0, else negative_slope dy. float32: a bf16
 * input is cast first. */
int dp_leaky_relu(dp_tensor_t **y, dp_tensor_t *x, float negative_slope);

/* The activations modern CNNs use, elementwise, as torch.nn.functional
 * computes them (f32; a bf16 input is cast first): */
typedef enum dp_activation_kind {
    DP_ACT_HARDTANH = 0,    /* clamp(x, alpha, beta): hardtanh; ReLU6 is (0, 6) */
    DP_ACT_HARDSWISH = 1,   /* x relu6(x + 3) / 6 */
    DP_ACT_HARDSIGMOID = 2, /* clamp(alpha x + beta, 0, 1): PyTorch's 1/6, 1/2 */
    DP_ACT_ELU = 3,         /* x > 0 ? x : alpha (exp(x) - 1) */
    DP_ACT_SELU = 4,        /* beta elu(x, alpha): alpha 1.6732632, beta 1.0507010 */
    DP_ACT_GELU = 5,        /* x Phi(x), Phi the normal CDF (erf) */
    DP_ACT_GELU_TANH = 6,   /* GELU's tanh approximation (approximate='tanh') */
    DP_ACT_SILU = 7,        /* x sigmoid(x) (swish) */
    DP_ACT_LINEAR = 8,      /* alpha x + beta: ONNX's Add, Sub, Mul, Div by a constant */
} dp_activation_kind;
enum { DP_ACT_COUNT = 9 };

/* y = f(x) for f of `kind` with its parameters (unused ones ignored);
 * the backward writes dx = dy f'(x) from the saved input (=). At a kink
 * (hardtanh's bounds, hardswish's and hardsigmoid's ends) the derivative
 * is PyTorch's. */
int dp_activation(dp_tensor_t **y, dp_tensor_t *x, dp_activation_kind kind, float alpha,
                  float beta);
/* Shorthands with PyTorch's defaults, for nn.Sequential files. */
int dp_relu6(dp_tensor_t **y, dp_tensor_t *x);
int dp_hardswish(dp_tensor_t **y, dp_tensor_t *x);
int dp_hardsigmoid(dp_tensor_t **y, dp_tensor_t *x);
int dp_elu(dp_tensor_t **y, dp_tensor_t *x, float alpha);
int dp_selu(dp_tensor_t **y, dp_tensor_t *x);
int dp_gelu(dp_tensor_t **y, dp_tensor_t *x);
int dp_silu(dp_tensor_t **y, dp_tensor_t *x);

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
/* y = max(a + b, 0): a residual sum and the ReLU after it in one sweep,
 * recorded as dp_add then dp_relu (the same rows in dp_model_summary). */
int dp_add_relu(dp_tensor_t **y, dp_tensor_t *a, dp_tensor_t *b);

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

/* DP_REDUCE_NONE: CrossEntropyLoss(reduction="none"), a loss per row. */
typedef enum dp_reduction {
    DP_REDUCE_SUM = 0,
    DP_REDUCE_MEAN = 1,
    DP_REDUCE_NONE = 2,
} dp_reduction;

/* loss (1) = sum or mean over rows of -log softmax(logits (N, K))[labels]
 * with int32 labels (N); with DP_REDUCE_NONE loss (N) holds each row's
 * term, and the backward takes a gradient per row. */
int dp_cross_entropy(dp_tensor_t **loss, dp_tensor_t *logits, dp_tensor_t *labels,
                     dp_reduction reduction);
/* The same with label smoothing (0 <= smoothing <= 1), as
 * torch.nn.CrossEntropyLoss(label_smoothing=smoothing): the target is
 * 1 - smoothing on the label plus smoothing / K on every class. */
int dp_cross_entropy_smoothed(dp_tensor_t **loss, dp_tensor_t *logits, dp_tensor_t *labels,
                              dp_reduction reduction, float smoothing);

/* correct (1) += number of rows of logits (N, K) whose argmax is the label.
 * Not differentiable; `correct` is a float tensor the caller owns. */
int dp_accuracy_accumulate(dp_tensor_t *correct, dp_tensor_t *logits, dp_tensor_t *labels);
/* What evaluation counts, into one float tensor of 2 + K * K entries on the
 * logits' device (K classes): [0] += rows whose argmax is the label, [1] +=
 * rows whose label is among the 5 largest logits (torch.topk's top-5
 * accuracy: fewer than 5 logits above the label's), [2 + y K + p] += 1 for
 * each row of label y predicted p (the confusion matrix). Not
 * differentiable. */
int dp_eval_counts_accumulate(dp_tensor_t *counts, dp_tensor_t *logits, dp_tensor_t *labels);

/* SyncBatchNorm: the replicas of one batch norm layer share a group, and in
 * training the batch statistics (and the sums the backward needs) are those
 * of all replicas' shards together, as PyTorch's SyncBatchNorm. The group's
 * replicas exchange them through host memory, and under mpirun the groups
 * of every rank through MPI (PyTorch's default process group, the world):
 * every rank must run the same layers in the same order. The sums are
 * added pairwise in replica, then rank order: the same bits everywhere. */
typedef struct dp__exchange dp_bn_sync_t;
int dp_bn_sync_init(dp_bn_sync_t **out, int64_t channels, int max_ranks);
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

/* ---- ops of graphs (ONNX's, as torch.onnx.export writes them) ----------- */

/* y = x > 0 ? x : w[c] x over channel axis 1 of x (N, C, ...), 2 to 4
 * dimensions, either layout, as torch.nn.PReLU: w (C) one slope per
 * channel, or (1) one for all. Backward: dx written (=); dw accumulated
 * into w's gradient (the sum of x dy over the channel where x <= 0).
 * float32: a bf16 input is cast first. */
int dp_prelu(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *w);

/* Softmax and log-softmax over axis 1 of x (N, C) or (N, C, H, W) (either
 * layout) or (N, C, L), as F.softmax(x, dim=1) and F.log_softmax; the
 * backward uses the output (=). float32: a bf16 input is cast first. */
int dp_softmax(dp_tensor_t **y, dp_tensor_t *x);
int dp_log_softmax(dp_tensor_t **y, dp_tensor_t *x);

typedef enum dp_binary_op {
    DP_BINARY_ADD = 0,
    DP_BINARY_SUB = 1,
    DP_BINARY_MUL = 2,
    DP_BINARY_DIV = 3,
} dp_binary_op;

/* z = a op b, both of one shape, or either broadcast over the other as
 * numpy aligns shapes from the right, where that takes one value per
 * channel (axis 1: (1, C, 1, 1), (C, 1, 1), (1, C) or, for (N, C), (C)),
 * one per sample and channel ((N, C, 1, 1)), or one element: ONNX's Add,
 * Sub, Mul and Div as PyTorch exports them. z has the full operand's shape
 * and layout. Backward: each operand's gradient (=), summed over the axes
 * it was broadcast along. Other shapes: DP_ESHAPE. Add of one shape is
 * dp_add; the others compute in float32 (bf16 operands are cast first). */
int dp_binary(dp_tensor_t **z, dp_binary_op op, dp_tensor_t *a, dp_tensor_t *b);

/* y = torch.cat(xs, 1): n >= 1 tensors (N, C_i, H, W), either layout each,
 * or (N, C_i), alike but for axis 1. y is stored NHWC when any input is.
 * Backward: each input gets its channels of y's gradient (=). Inputs of
 * f32 and bf16 together are cast to f32. */
int dp_concat(dp_tensor_t **y, dp_tensor_t *const *xs, int n);
/* ys[0..n) = torch.split(x, sizes, 1): sizes[i] channels each (summing to
 * x's), in x's layout and dtype. Backward: x's gradient is the pieces'
 * gradients in their channels (zero where a piece got none). */
int dp_split(dp_tensor_t **ys, dp_tensor_t *x, int n, const int64_t *sizes);

/* y (N, C, 1, 1) = the max over (H, W) of x (N, C, H, W), as ONNX's
 * GlobalMaxPool and nn.AdaptiveMaxPool2d(1); the gradient goes to each
 * channel's argmax (the first of equal maxima). Global average pooling is
 * dp_adaptive_avg_pool2d(y, x, 1, 1). */
int dp_global_max_pool2d(dp_tensor_t **y, dp_tensor_t *x);

/* y (N, M) = a (N, K) b (K, M), b float32 (a parameter or a constant), as
 * ONNX's MatMul of 2-D operands: dp_linear(y, a, b, NULL,
 * DP_WEIGHT_IN_OUT). */
int dp_matmul(dp_tensor_t **y, dp_tensor_t *a, dp_tensor_t *b);
/* y (M, N) = x (N, M) transposed (float32; a bf16 input is cast first);
 * backward dx = dy transposed (=). */
int dp_transpose(dp_tensor_t **y, dp_tensor_t *x);

/* dst += src (same element count), enqueued; not recorded for autograd. */
int dp_accumulate(dp_tensor_t *dst, dp_tensor_t *src);

/* ---- ops of the Python front end (torch's tensor methods) --------------- */

/* y = a copy of x on dev, same dtype and shape, in logical order (x's own
 * device gives a copy too; torch's .to is the identity there, which the
 * caller decides). Backward copies y's gradient to x's device and adds it
 * into x's gradient. */
int dp_to_device(dp_tensor_t **y, dp_tensor_t *x, dp_device_t *dev);
/* y = x[start : start + length] along dimension 0, as torch.narrow(x, 0,
 * start, length) (start < 0 counts from the end), a copy in x's layout
 * and dtype. Backward: x's gradient gets y's in those rows, zero elsewhere.
 * Rows outside x: DP_EINVAL. */
int dp_narrow(dp_tensor_t **y, dp_tensor_t *x, int64_t start, int64_t length);
/* torch.sum and torch.mean: dim = -1 reduces every element into a scalar
 * (a tensor of 0 dimensions, PyTorch's shape ()); dim >= 0 that dimension,
 * kept as size 1 with keepdim, else removed. float32 (a bf16 input is
 * cast first, so its output is float32, as autocast) is differentiable:
 * dx = dy (/ the count for mean) over the reduced elements (=). int32
 * input (sum only; mean of int32 is DP_EINVAL, as torch refuses it) gives
 * int32 (torch gives int64), wrapping on overflow, not differentiable. The
 * sums run in double in a fixed order: the same bits run after run and for
 * any thread count. A dim outside -1 .. ndim - 1 is DP_EINVAL. */
int dp_sum(dp_tensor_t **y, dp_tensor_t *x, int dim, bool keepdim);
int dp_mean(dp_tensor_t **y, dp_tensor_t *x, int dim, bool keepdim);
/* int32 indices of the first maximum along dim, as torch.argmax (a NaN is
 * the maximum); dim = -1: over the flattened tensor (a scalar of 0
 * dimensions). float32, bf16 or int32 input; not differentiable. */
int dp_argmax(dp_tensor_t **y, dp_tensor_t *x, int dim, bool keepdim);
/* y = int32 1 where a == b else 0, y of a's shape; b of a's shape (as many
 * elements; DP_ESHAPE otherwise) or of one element. a and b of one dtype,
 * or int32 against float32 compared as float32 (torch's promotion); on one
 * device. Not differentiable. */
int dp_eq(dp_tensor_t **y, dp_tensor_t *a, dp_tensor_t *b);

#ifdef __cplusplus
}
#endif
#endif
