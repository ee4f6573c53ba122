/* conv_transpose2d: y (N, K, P, Q) = conv_transpose(x (N, C, H, W),
 * w (C, K / groups, R, S)) + b (K), as torch.nn.functional.conv_transpose2d:
 * the adjoint of the convolution of y by w with the same stride, padding,
 * dilation and groups, so that
 *   P = (H - 1) stride_h - pad_top - pad_bottom + dilation_h (R - 1)
 *       + output_padding_h + 1,
 * Q likewise; the output padding (below the stride) only sizes y.
 * Backward: dx = conv(dy, w) written (=) when x needs it; dw = corr(dy, x)
 * and db = sum dy accumulated into the parameters' gradients. float32 only
 * (a bf16 input is cast first, as autocast's float32 list); y is stored
 * NHWC, as a convolution's output. */
#include "ops/nodes.h"

#include <string.h>

static int conv_transpose2d_backward(dp__node *node)
{
    const dp__conv_transpose_node *cn = (const dp__conv_transpose_node *)node->params;
    dp_tensor_t *x = node->inputs[0], *w = node->inputs[1], *b = node->inputs[2];
    dp_tensor_t *y = node->output;
    dp_device_t *dev = x->dev;
    dp__conv2d_args a;
    dp__conv_args_init(&a, &cn->geom, x, w, y);
    a.dy = dp__desc(y->ag->grad);
    a.precision = DP_PRECISION_FP32;
    return dp__conv_backward_passes(x, w, b, &a, dev->ops->conv_transpose2d_backward_weights,
                                    dev->ops->conv_transpose2d_backward_data);
}

int dp_conv_transpose2d(dp_tensor_t **out, dp_tensor_t *x, dp_tensor_t *w, dp_tensor_t *b,
                        const dp_conv_transpose2d_params *params)
{
    const char *op = dp__op_name(DP__OP_conv_transpose2d);
    char xs[64], ws[64];
    dp_conv_transpose2d_params p = params ? *params : (dp_conv_transpose2d_params){0};
    dp_conv2d_params cp = {.stride_h = p.stride_h,
                           .stride_w = p.stride_w,
                           .pad_h = p.pad_h,
                           .pad_w = p.pad_w,
                           .groups = p.groups,
                           .dilation_h = p.dilation_h,
                           .dilation_w = p.dilation_w,
                           .pad_top = p.pad_top,
                           .pad_left = p.pad_left,
                           .pad_bottom = p.pad_bottom,
                           .pad_right = p.pad_right};
    dp__conv_geom g;
    DP_TRY(dp__conv_geometry(op, &cp, &g));
    /* PyTorch takes output padding below the stride or the dilation; below
     * the stride, the convolution of y gives back x's size exactly. */
    if (p.output_padding_h < 0 || p.output_padding_w < 0 || p.output_padding_h >= g.stride_h ||
        p.output_padding_w >= g.stride_w) {
        DP_ERROR("%s: output padding (%d, %d) must be at least 0 and below the stride (%d, %d)", op,
                 p.output_padding_h, p.output_padding_w, g.stride_h, g.stride_w);
        return DP_EINVAL;
    }
    DP_TRY(dp__check_weight_args(op, x, w, b, 4));
    dp_tensor_t *ts[] = {x, w, b};
    DP_TRY(dp__as_f32(&x));
    ts[0] = x;
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
    int64_t G = g.groups, K = w->shape[1] * G, R = w->shape[2], S = w->shape[3];
    int64_t P = (H - 1) * g.stride_h - g.pad_h - g.pad_bottom + (int64_t)g.dilation_h * (R - 1) +
                p.output_padding_h + 1;
    int64_t Q = (W - 1) * g.stride_w - g.pad_w - g.pad_right + (int64_t)g.dilation_w * (S - 1) +
                p.output_padding_w + 1;
    if (C % G != 0 || w->shape[0] != C || (b && b->shape[0] != K) || H < 1 || W < 1 || P < 1 ||
        Q < 1) {
        DP_ERROR("%s: input %s does not fit weight %s (groups %lld, output %lld x %lld)", op,
                 dp_tensor_shape_str(x, xs, sizeof xs), dp_tensor_shape_str(w, ws, sizeof ws),
                 (long long)G, (long long)P, (long long)Q);
        return DP_ESHAPE;
    }
    int64_t shape[4] = {N, K, P, Q};
    dp_tensor_t *y;
    DP_TRY(dp__tape_alloc(&y, x->dev, DP_F32, 4, shape, 1));
    dp__conv2d_args a;
    dp__conv_args_init(&a, &g, x, w, y);
    a.b = dp__desc(b);
    a.precision = DP_PRECISION_FP32;
    if (N > 0)
        DP_TRY(dp__conv_rows(x->dev, x->dev->ops->conv_transpose2d_forward, &a, N));
    dp__tensor_written(y);
    if (dp__tape_needs_grad(ts, 3)) {
        dp__conv_transpose_node cn = {g};
        DP_TRY(dp__tape_record(DP__OP_conv_transpose2d, conv_transpose2d_backward, ts, 3, y, &cn,
                               sizeof cn));
    }
    *out = y;
    return 0;
}
