/* Argument structs of the device kernels. Every backend implements the same
 * kernels with these arguments; the op layer (src/ops/) fills them.
 *
 * A dp__tdesc describes a tensor for a kernel: its memory, dtype and
 * logical shape, and whether a 4-D tensor is stored N, H, W, C (nhwc) or
 * N, C, H, W. Activations and their gradients are f32, or bf16 under
 * mixed precision; parameters, their gradients and statistics always f32. */
#ifndef DP_DEVICE_KERNELS_H
#define DP_DEVICE_KERNELS_H

#include "dp/ops.h"
#include "dp/tensor.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct dp__tdesc {
    void *data;
    dp_dtype dtype;
    int ndim;
    int nhwc;
    int64_t shape[4];
} dp__tdesc;

/* A tensor (N, C, ...) of 2 to 4 dimensions along its channel axis 1, as
 * the kernels over channels (prelu, softmax) see it: N, C, HW the product
 * of the dimensions after C (1 for 2-D), and its layout (nhwc: C
 * innermost). */
typedef struct dp__channel_view {
    int64_t N, C, HW;
    int nhwc;
} dp__channel_view;

static inline dp__channel_view dp__channel_view_of(const dp__tdesc *x)
{
    dp__channel_view v = {x->shape[0], x->shape[1], 1, x->nhwc};
    for (int d = 2; d < x->ndim; d++)
        v.HW *= x->shape[d];
    return v;
}

/* t[0..n) = value, stored as dtype (f32, bf16 rounded, or for i32 the
 * bits of `value` as given: dp_tensor_fill puts an int32's bits there). */
typedef struct dp__fill_args {
    void *data;
    int64_t n;
    float value;
    dp_dtype dtype;
} dp__fill_args;

/* dst[0..n) = src[0..n) converted. cast: between f32 and bf16 (round to
 * nearest even; bf16 -> f32 is exact), a kernel of the devices that hold
 * bf16. cast_int32: between f32 and i32 (to i32 truncating toward zero,
 * NaN and values outside int32's range giving INT32_MIN, device/
 * int_convert.h; to f32 rounding to nearest), on every device. The same
 * dtype on both sides copies. */
typedef struct dp__cast_args {
    const void *src;
    void *dst;
    int64_t n;
    dp_dtype src_dtype, dst_dtype;
} dp__cast_args;

/* Convolution and pooling: device/kernels_conv.h. */
#include "device/kernels_conv.h"

typedef enum dp__eltwise_op {
    DP__ELT_RELU,             /* out = max(a, 0) */
    DP__ELT_RELU_BACKWARD,    /* out = b > 0 ? a : 0   (a = dy, b = y) */
    DP__ELT_ADD,              /* out = a + b */
    DP__ELT_ACCUMULATE,       /* out += a */
    DP__ELT_SCALE,            /* out = alpha * a */
    DP__ELT_COPY,             /* out = a */
    DP__ELT_SIGMOID,          /* out = 1 / (1 + exp(-a)) */
    DP__ELT_SIGMOID_BACKWARD, /* out = a b (1 - b)   (a = dy, b = y) */
    DP__ELT_TANH,             /* out = tanh(a) */
    DP__ELT_TANH_BACKWARD,    /* out = a (1 - b^2)   (a = dy, b = y) */
    DP__ELT_ADD_RELU,         /* out = max(a + b, 0) */
} dp__eltwise_op;

/* a, b and out all of `dtype` (f32, or bf16: computed in f32, rounded on
 * the store). */
typedef struct dp__eltwise_args {
    dp__eltwise_op op;
    const void *a, *b;
    void *out;
    int64_t n;
    float alpha;
    dp_dtype dtype;
} dp__eltwise_args;

/* The activations of ops.h's dp_activation_kind over n f32 values (any
 * shape and layout: elementwise), with their parameters alpha and beta.
 * Forward: out = f(x); backward: out = dy * f'(x), from the saved input. */
typedef struct dp__activation_args {
    int kind; /* dp_activation_kind */
    const float *x, *dy;
    float *out;
    int64_t n;
    float alpha, beta;
} dp__activation_args;

/* Inverted dropout of x (N, ...) into y, same shape and layout:
 *   y = keep ? x * scale : 0,  keep = bits(g, i) >= threshold
 * where g = sample_offset + n is the global index of sample n of the batch,
 * i the logical (N, C, H, W order) index of the element within its sample,
 * and bits the top 24 bits of dp__rng_bits(key, g * sample_size + i)
 * (src/core/rng_mix.h). The decision depends on nothing else, so a shard of
 * the batch draws exactly the mask that the whole batch draws there, and
 * the backward pass (dx = keep ? dy * scale : 0) is the same kernel over dy.
 * sample_size = numel / N; for a 4-D NHWC tensor, C and HW map the
 * physical order to the logical one. */
typedef struct dp__dropout_args {
    const float *x;
    float *y;
    int64_t samples, sample_size;
    int64_t sample_offset;
    uint64_t key;       /* dp__rng_key(seed, stream) */
    uint32_t threshold; /* ceil(prob 2^24) */
    float scale;        /* 1 / (1 - prob) */
    int nhwc;
    int64_t C, HW; /* used when nhwc */
} dp__dropout_args;

/* Row-major C (M x N) = alpha op(A) op(B) + beta C, op = transpose if set.
 * Each matrix is stored f32 or bf16 (a_dtype, b_dtype, c_dtype; zero means
 * f32). precision FP32: every matrix f32. BF16: the products of A and B
 * rounded to bf16 (an f32 operand is rounded first), summed in f32, on
 * native kernels; BF16_REFERENCE: the same on f32 kernels. */
typedef struct dp__gemm_args {
    bool trans_a, trans_b;
    int64_t m, n, k;
    float alpha, beta;
    const void *a, *b;
    void *c;
    int64_t lda, ldb, ldc;
    dp_dtype a_dtype, b_dtype, c_dtype;
    dp_precision precision;
} dp__gemm_args;

/* y (rows x cols) += b (cols), or db (cols) = sum over rows of dy. */
typedef struct dp__bias_args {
    float *y;
    const float *dy;
    float *b;
    int64_t rows, cols;
} dp__bias_args;

/* Copies a 4-D tensor between layouts: dst is src with nhwc flipped. */
typedef struct dp__relayout_args {
    dp__tdesc src, dst;
} dp__relayout_args;

/* Softmax cross-entropy over logits (N, K) and int32 labels (N).
 * forward:  loss[0] = sum_i or mean_i of -log softmax(logits_i)[label_i]
 *           (per_row: loss[i] = row i's term)
 * backward: dlogits = (softmax(logits) - onehot) * dloss[0] (/N for mean)
 *           (per_row: row i's times dloss[i]) (=) */
typedef struct dp__xent_args {
    const float *logits;
    const int32_t *labels;
    float *loss;
    const float *dloss;
    float *dlogits;
    int64_t n, k;
    bool mean;
    /* Label smoothing (CrossEntropyLoss's label_smoothing): the target puts
     * 1 - smoothing on the label and smoothing / k on every class; the
     * gradient is softmax - target. 0: none. */
    float smoothing;
    /* reduction "none": loss (n) holds each row's term and dloss (n) each
     * row's gradient (mean is then false). */
    bool per_row;
} dp__xent_args;

/* correct[0] += number of rows whose argmax (the first of equal maxima)
 * equals the label (as float); where given, top5[0] += rows whose label
 * has fewer than 5 logits above its own, and confusion[label * k + argmax]
 * += 1 for each row (k x k floats). */
typedef struct dp__accuracy_args {
    const float *logits;
    const int32_t *labels;
    float *correct;
    float *top5;      /* NULL: not counted */
    float *confusion; /* NULL: not counted */
    int64_t n, k;
} dp__accuracy_args;

/* An optimizer's update over one contiguous buffer of n parameters, as
 * torch.optim defines it (g: the gradient the update uses):
 *   g = grads * grad_scale * clip[0]           (clip NULL: no clipping)
 *   SGD    g += weight_decay * p
 *          v = momentum * v + g                (momentum != 0; v starts at
 *                                               0, so the first v is g)
 *          g = nesterov ? g + momentum * v : v
 *          p -= lr * g
 *   Adam   g += weight_decay * p
 *   AdamW  p *= 1 - lr * weight_decay
 *   both   m += (1 - beta1) * (g - m)          (torch's lerp)
 *          s = beta2 * s + (1 - beta2) * g * g
 *          p -= (lr / bias1) * m / (sqrt(s) / sqrt_bias2 + eps)
 * with bias1 = 1 - beta1^t and sqrt_bias2 = sqrt(1 - beta2^t) at step t
 * (from 1), computed on the host in double as torch does. */
typedef enum dp__optimizer_kind {
    DP__OPTIM_SGD = 0,
    DP__OPTIM_ADAM = 1,
    DP__OPTIM_ADAMW = 2,
} dp__optimizer_kind;

typedef struct dp__optimizer_args {
    float *params;
    const float *grads;
    /* SGD: the momentum buffer (n floats), or NULL when momentum == 0;
     * Adam and AdamW: exp_avg and exp_avg_sq (n floats each). */
    float *state0, *state1;
    int64_t n;
    dp__optimizer_kind kind;
    bool nesterov;
    float lr, grad_scale, momentum, weight_decay;
    float beta1, beta2, eps, bias1, sqrt_bias2;
    /* NULL, or one device float written by grad_clip earlier on this
     * stream: the factor every gradient element is multiplied by. */
    const float *clip;
    /* NULL, or a device word written by check_finite over `grads` earlier
     * on this stream: when it is < n (the gradient holds a NaN or an Inf)
     * the kernel changes nothing, params and state stay as they were. */
    const int64_t *first_nonfinite;
} dp__optimizer_args;

/* Gradient clipping by global norm, as torch.nn.utils.clip_grad_norm_:
 * norm = ||grads * grad_scale||_2 over the n elements, and
 * out[0] = min(1, max_norm / (norm + 1e-6)) (the factor the update applies),
 * out[1] = norm (both written, =). */
typedef struct dp__grad_clip_args {
    const float *grads;
    int64_t n;
    float grad_scale, max_norm;
    float *out; /* two device floats */
} dp__grad_clip_args;

/* first_nonfinite[0] = the least i < n with data[i] NaN or +-Inf, or n when
 * every element is finite (written, =). Run over the summed gradient buffer
 * before the optimizer's update, which reads the result
 * (dp__optimizer_args). A backend that provides check_finite must honour
 * optimizer_step's first_nonfinite. */
typedef struct dp__check_finite_args {
    const float *data;
    int64_t n;
    int64_t *first_nonfinite; /* one device word */
} dp__check_finite_args;

/* Batch normalisation per channel c over (N, H, W) of x (N, C, H, W), y and
 * dx in x's layout, gamma, beta and the statistics (C) each.
 * forward, training: save_mean, save_var = the batch mean and biased
 *   variance (written); y = gamma (x - mean) / sqrt(var + eps) + beta, then
 *   max(y, 0) if relu; running_mean = (1 - momentum) running_mean +
 *   momentum mean, running_var likewise with the unbiased var n / (n - 1)
 *   (n = N H W; the biased one when n == 1).
 * forward, eval: the same with the running statistics, which are copied
 *   into save_mean and save_var when those are not NULL.
 * backward: from x, dy (already through the ReLU), gamma, beta and the saved
 *   statistics: dx, dgamma = sum dy xhat, dbeta = sum dy (all written, =);
 *   in eval the statistics are constants, dx = dy gamma / sqrt(var + eps).
 *
 * SyncBatchNorm splits training's passes in two around an exchange that
 * src/comm/ issues between them (ops/batch_norm.c): the batch_norm_sums
 * kernels write this shard's sums, the exchange replaces them with the
 * group's, and batch_norm_forward / _backward go on from those (totals):
 * sums_forward: sums = [count n, sum x (C), sum x^2 (C)] (written);
 * sums_backward: sums = [count n, sum dy (C), sum dy xhat (C)] with xhat
 *   from the saved statistics, and this shard's dbeta, dgamma (written, =),
 *   which the gradients' allreduce adds up;
 * forward / backward, training, with totals: the statistics, or the
 *   backward pass's sums, are totals' (the group's [count, sum, sum]), and
 *   the backward pass leaves dgamma and dbeta to the sums kernel.
 * A backend that implements batch_norm_sums honours totals.
 * batch_norm_add (forward, training or eval, never with totals): y = that
 *   normalised x + residual, then max(y, 0) if relu; residual (N, C, H, W)
 *   in x's layout and dtype. ResNet's block tail in one sweep over x
 *   (ops/batch_norm.c); a backend without it runs batch norm, then add. */
typedef struct dp__batch_norm_args {
    dp__tdesc x, y, dx, dy;
    dp__tdesc residual; /* batch_norm_add's addend */
    const float *gamma, *beta;
    float *dgamma, *dbeta;
    float *running_mean, *running_var;
    float *save_mean, *save_var;
    float momentum, eps;
    bool training, relu;
    /* 1 + 2 C doubles each, in the device's memory: the sums kernels'
     * output; the group's sums the training passes take (NULL: this
     * shard's own, taken by the pass itself) */
    double *sums;
    const double *totals;
    /* dp_get_split_invariant() (training): the sums over the batch taken
     * over blocks of block_rows samples, added pairwise (0: the shard's
     * whole, in the kernel's own order) */
    int64_t block_rows;
} dp__batch_norm_args;

/* Adaptive average pooling, PyTorch's windows: output row p of P averages
 * input rows floor(p H / P) .. ceil((p + 1) H / P) - 1, columns likewise
 * (windows may overlap). x (N, C, H, W) -> y (N, C, P, Q) in x's layout.
 * backward: dx written (=); when relu_mask is set (the output of a fused
 * ReLU that x is), dx is also multiplied by (relu_mask > 0). */
typedef struct dp__adaptive_pool_args {
    dp__tdesc x, y, dx, dy; /* f32 */
    const float *relu_mask;
} dp__adaptive_pool_args;

/* PReLU over channel axis 1 of x (N, C, ...), 2- to 4-D in either layout,
 * f32: y = x > 0 ? x : w[c] x, w of nw = C slopes or one (nw = 1).
 * forward: y; backward: dx = x > 0 ? dy : w[c] dy and dw[c] = sum over the
 * elements of channel c (all of them when nw = 1) of (x > 0 ? 0 : x dy),
 * both written (=). */
typedef struct dp__prelu_args {
    dp__tdesc x;
    const float *w, *dy;
    float *y, *dx, *dw;
    int64_t nw;
} dp__prelu_args;

/* Softmax, or log-softmax when `log`, over axis 1 of x (N, C, ...) (the C
 * values of one sample and position), 2- or 4-D in either layout, f32.
 * forward: y from x; backward from y and dy: dx = y (dy - sum dy y), or
 * for log dx = dy - exp(y) sum dy (written, =). */
typedef struct dp__softmax_args {
    dp__tdesc x;
    const float *y_in, *dy;
    float *y, *dx;
    bool log;
} dp__softmax_args;

/* Binary ops, f32: y = a op b over the shape of x (N, C, H, W) (2-D: H = W
 * = 1), stored in x's layout, where each operand is `full` (that shape and
 * layout) or broadcast: one value per channel (C), per sample and channel
 * (N x C) or one value in all. At least one operand is full.
 * backward from a, b, y and dy: da and db (each NULL when not wanted) are
 * the gradients, written (=), each reduced over its broadcast axes. */
typedef enum dp__binary_op {
    DP__BINARY_ADD = 0,
    DP__BINARY_SUB = 1,
    DP__BINARY_MUL = 2,
    DP__BINARY_DIV = 3,
} dp__binary_op;

typedef enum dp__broadcast {
    DP__BCAST_FULL = 0,
    DP__BCAST_CHANNEL = 1,        /* (C): (1, C, 1, 1), (C, 1, 1), (1, C) */
    DP__BCAST_SAMPLE_CHANNEL = 2, /* (N, C): (N, C, 1, 1) */
    DP__BCAST_SCALAR = 3,         /* one element */
} dp__broadcast;

typedef struct dp__binary_args {
    dp__binary_op op;
    dp__broadcast a_bcast, b_bcast;
    const float *a, *b, *y_in, *dy;
    float *y, *da, *db;
    int64_t N, C, HW;
    int nhwc;
} dp__binary_args;

/* Channels [src_off, src_off + count) of src into channels [dst_off,
 * dst_off + count) of dst: tensors (N, C, H, W) in either layout each, or
 * (N, C), of one dtype (f32, or bf16 on devices with bf16), dst = the
 * slice, or dst += it when `accumulate`. Concat and split, forward and
 * backward. */
typedef struct dp__channel_copy_args {
    dp__tdesc src, dst;
    int64_t src_off, dst_off, count;
    bool accumulate;
} dp__channel_copy_args;

/* Reductions over the middle axis of x seen as (outer, len, inner), in
 * logical row-major order (torch.sum(x, dim) has outer the product of the
 * dimensions before dim, len dim's size, inner those after; a reduction
 * over everything is (1, numel, 1)); y (outer, inner).
 * reduce_forward: y = scale * the sum over len, x f32 (y f32) or i32 (y
 *   i32, summed in int64 and wrapped; scale 1). Sums run in double, each
 *   output's over its len elements in order, or, where len exceeds
 *   DP__REDUCE_CHUNK, over consecutive chunks of that many added in
 *   order: the same bits for any thread count.
 * reduce_backward: dx (outer, len, inner) = scale dy[o, i] (=), f32.
 * argmax: y (i32) = the index along len of the first maximum of x (f32,
 *   bf16 or i32); a NaN is a maximum (torch's rule). */
#define DP__REDUCE_CHUNK 4096
typedef struct dp__reduce_args {
    const void *x, *dy;
    void *y, *dx;
    dp_dtype dtype; /* x's */
    int64_t outer, len, inner;
    double scale;
} dp__reduce_args;

/* y[i] = a[i] == b[b_one ? 0 : i] ? 1 : 0 (y int32, n elements): a and b
 * of one dtype, compared as such, or one int32 and one f32, compared as
 * f32 (the int32 converted). */
typedef struct dp__eq_args {
    const void *a, *b;
    int32_t *y;
    dp_dtype a_dtype, b_dtype;
    int64_t n;
    bool b_one;
} dp__eq_args;

/* dst (cols x rows) = the transpose of src (rows x cols), row-major f32. */
typedef struct dp__transpose_args {
    const float *src;
    float *dst;
    int64_t rows, cols;
} dp__transpose_args;

#endif
