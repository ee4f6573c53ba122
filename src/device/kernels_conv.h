/* Argument structs of the convolution and pooling kernels (part of
 * device/kernels.h, which includes this file; include that one). */
#ifndef DP_DEVICE_KERNELS_CONV_H
#define DP_DEVICE_KERNELS_CONV_H

#ifndef DP_DEVICE_KERNELS_H
#error "include device/kernels.h, which includes this file after dp__tdesc"
#endif

#include <stdint.h>

/* Convolution.
 * x (N, C, H, W), w (K, C / groups, R, S) in logical OIHW, b (K) or NULL,
 * y (N, K, P, Q) with P = dp__conv_out(H, pad_h, pad_bottom, R,
 * dilation_h, stride_h), Q likewise: padding pad_h (top) and pad_bottom
 * rows, pad_w (left) and pad_right columns; dilation and groups at least 1
 * (the op layer fills every field).
 * forward:          y = conv(x, w) + b, then relu if fuse_relu
 * backward_data:    dx = conv_transpose(dy, w)                 (written, =)
 * backward_weights: dw = corr(x, dy), db = sum dy              (written, =)
 * precision FP32: every tensor f32. BF16 and BF16_REFERENCE: x, y, dx, dy
 * bf16, w, b, dw, db f32 (w rounded to bf16 for the products); BF16 runs
 * native bf16 kernels, BF16_REFERENCE f32 kernels on the rounded operands.
 * algo: how the pass picks its implementation (device/conv_choice.h).
 *
 * The transposed convolution (conv_transpose2d's kernels) takes the same
 * struct for the convolution whose transpose it is, f32 only: x (N, C, H,
 * W) its input, w (C, K / groups, R, S) (PyTorch's ConvTranspose2d
 * weight), b (K), y (N, K, P, Q) with H = dp__conv_out(P, ...) (the output
 * padding is in y's size);
 * forward:          y = conv_transpose(x, w) + b
 * backward_data:    dx = conv(dy, w)                           (written, =)
 * backward_weights: dw = corr(dy, x), db = sum dy              (written, =) */
typedef struct dp__conv2d_args {
    dp__tdesc x, w, b, y;
    dp__tdesc dx, dw, db, dy;
    int stride_h, stride_w, pad_h, pad_w;
    bool fuse_relu;
    dp_precision precision;
    dp_conv_algo algo;
    int pad_bottom, pad_right;
    int dilation_h, dilation_w, groups;
} dp__conv2d_args;

/* conv2d_pool: a convolution (conv: x, w, b, geometry, fuse_relu,
 * precision) and a pool x pool average pooling of stride pool and no
 * padding after it, in one kernel. conv.y is the pooled output (N, K,
 * P / pool, Q / pool), stored NHWC, for the convolution's P x Q
 * (dp__conv_out); rows and columns of the convolution past the last whole
 * window are neither computed nor pooled (floor mode). The convolution's
 * groups are 1 and its C R S at most DP__CONV_POOL_MAX_TAPS.
 * mask: with fuse_relu, one bit per convolution output under a window,
 * set where the ReLU passed the value: 16-bit words (N, pool (P / pool),
 * pool (Q / pool), ceil(K / DP__CONV_POOL_LANES)), channel k in bit k % 16
 * of word k / 16 (the bits past K the kernel's own). The forward writes it
 * when it is not NULL, the backward reads it.
 * forward:  y = avg_pool(relu(conv(x, w) + b))
 * backward: dw, db from conv.dy (N, K, P / pool, Q / pool) through
 *           the pool and the mask (written, =); there is no dx
 *           pass (the op fuses only where x needs no gradient).
 * Precisions as conv2d's: under bf16 the convolution's output is rounded
 * to bf16 before the ReLU and the mean, as the unfused ops round it. */
enum { DP__CONV_POOL_MAX_TAPS = 32, DP__CONV_POOL_LANES = 16 };
typedef struct dp__conv2d_pool_args {
    dp__conv2d_args conv;
    int pool;
    uint16_t *mask;
} dp__conv2d_pool_args;

/* The output size of a convolution over `in` with padding pad_begin and
 * pad_end, a kernel of k taps spread by dilation, and stride. */
static inline int64_t dp__conv_out(int64_t in, int pad_begin, int pad_end, int64_t k, int dilation,
                                   int stride)
{
    return (in + pad_begin + pad_end - (int64_t)dilation * (k - 1) - 1) / stride + 1;
}

/* AVG_EXCLUDE: the divisor is the window's cells inside x (PyTorch's
 * count_include_pad=False, and any mean whose only padding is a ceil_mode
 * window's overhang). */
typedef enum dp__pool_kind {
    DP__POOL_AVG = 0,
    DP__POOL_MAX = 1,
    DP__POOL_AVG_EXCLUDE = 2
} dp__pool_kind;

/* Pooling: x (N, C, H, W) -> y (N, C, P, Q); max keeps its argmax in the
 * workspace for the backward pass. dx is written (=). Average pooling counts
 * padding in the divisor, as PyTorch's default count_include_pad=True.
 * Padding is pad_h above and pad_w left; below and right it is what y's
 * size asks for, which is more than pad_h, pad_w in ceil_mode. */
typedef struct dp__pool2d_args {
    dp__tdesc x, y, dx, dy;
    void *workspace;
    /* Backward only: when set, the output of a fused conv + ReLU that x is;
     * dx is then also multiplied by (relu_mask > 0), saving a pass. */
    const void *relu_mask; /* of dx's dtype */
    dp__pool_kind kind;
    int kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
    /* Cells of a window are dilation_h rows, dilation_w columns apart (1:
     * adjacent); only max pooling is dilated. */
    int dilation_h, dilation_w;
} dp__pool2d_args;

#endif
