/* avg_pool2d and max_pool2d: y (N, C, P, Q) from x (N, C, H, W),
 * P = (H + 2 pad_h - span_h) / stride_h + 1 where a window spans
 * span_h = dilation_h (kernel_h - 1) + 1 rows, Q likewise, rounded up in
 * ceil_mode (the kernels pad below and right as far as y asks). The output keeps
 * the input's physical layout. Backward writes dx (=); max pooling routes
 * each gradient to its window's argmax, kept in a workspace of 4 bytes per
 * output element. */
#include "ops/nodes.h"

#include <string.h>

static void fill_args(dp__pool2d_args *a, dp__pool_kind kind, const dp_pool2d_params *p)
{
    a->kind = kind;
    a->kernel_h = p->kernel_h;
    a->kernel_w = p->kernel_w;
    a->stride_h = p->stride_h;
    a->stride_w = p->stride_w;
    a->pad_h = p->pad_h;
    a->pad_w = p->pad_w;
    a->dilation_h = p->dilation_h;
    a->dilation_w = p->dilation_w;
}

static int pool2d_backward(dp__node *node)
{
    const dp__pool_node *pn = (const dp__pool_node *)node->params;
    dp_tensor_t *x = node->inputs[0], *y = node->output, *dx;
    DP_TRY(dp__grad_begin(x, &dx));
    if (!dx)
        return 0;
    dp__pool2d_args a;
    memset(&a, 0, sizeof a);
    fill_args(&a, pn->kind, &pn->p);
    a.x = dp__desc(x);
    a.y = dp__desc(y);
    a.dx = dp__desc(dx);
    a.dy = dp__desc(y->ag->grad);
    a.dy.nhwc = y->ag->grad->nhwc;
    a.workspace = node->saved ? node->saved->data : NULL;
    /* Fold the backward of a fused ReLU that made x into this pass; every
     * contribution being masked, the convolution can skip its own. */
    if (x->ag->relu_output && dx == x->ag->grad)
        a.relu_mask = x->data;
    DP_TRY(x->dev->ops->pool2d_backward(x->dev, &a));
    DP_TRY(dp__grad_end(x, dx));
    if (a.relu_mask)
        x->ag->grad_masked = 1;
    return 0;
}

/* Outputs along one side of `size`: floor, or in ceil_mode ceil, of
 * (size + 2 pad - span) / stride, plus one, for a window spanning `span`
 * cells (dilation (kernel - 1) + 1); a last ceil_mode window
 * starting in the right padding is dropped, as PyTorch drops it. */
static int64_t out_size(int64_t size, int64_t span, int stride, int pad, bool ceil_mode)
{
    int64_t room = size + 2 * pad - span; /* where windows may start past the first */
    int64_t n = (ceil_mode ? (room + stride - 1) / stride : room / stride) + 1;
    if (ceil_mode && (n - 1) * stride >= size + pad)
        n--;
    return n;
}

static int pool2d(dp_tensor_t **out, dp_tensor_t *x, const dp_pool2d_params *params,
                  dp__pool_kind kind)
{
    dp__op id = kind == DP__POOL_MAX ? DP__OP_max_pool2d : DP__OP_avg_pool2d;
    const char *op = dp__op_name(id);
    char xs[64];
    DP_TRY(dp__check_rank(op, "input", x, 4));
    if (!params || params->kernel_h <= 0 || params->kernel_w <= 0) {
        DP_ERROR("%s: kernel size must be positive", op);
        return DP_EINVAL;
    }
    dp_pool2d_params p = *params;
    if (p.stride_h == 0)
        p.stride_h = p.kernel_h;
    if (p.stride_w == 0)
        p.stride_w = p.kernel_w;
    if (p.dilation_h == 0)
        p.dilation_h = 1;
    if (p.dilation_w == 0)
        p.dilation_w = 1;
    if (p.stride_h < 0 || p.stride_w < 0 || p.pad_h < 0 || p.pad_w < 0 || p.dilation_h < 0 ||
        p.dilation_w < 0) {
        DP_ERROR("%s: stride %dx%d, padding %dx%d and dilation %dx%d must not be negative", op,
                 p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dilation_h, p.dilation_w);
        return DP_EINVAL;
    }
    if (kind != DP__POOL_MAX && (p.dilation_h != 1 || p.dilation_w != 1)) {
        DP_ERROR("%s: dilation %dx%d: only max pooling is dilated (PyTorch's AvgPool2d has "
                 "no dilation)",
                 op, p.dilation_h, p.dilation_w);
        return DP_EINVAL;
    }
    if (2 * p.pad_h > p.kernel_h || 2 * p.pad_w > p.kernel_w) {
        /* PyTorch's rule: a window made mostly of padding has no input */
        DP_ERROR("%s: pad should be at most half of kernel size, but got pad=%dx%d and "
                 "kernel_size=%dx%d",
                 op, p.pad_h, p.pad_w, p.kernel_h, p.kernel_w);
        return DP_EINVAL;
    }
    int64_t H = x->shape[2], W = x->shape[3];
    /* the rows and columns a window spans */
    int64_t span_h = (int64_t)p.dilation_h * (p.kernel_h - 1) + 1;
    int64_t span_w = (int64_t)p.dilation_w * (p.kernel_w - 1) + 1;
    if (H + 2 * p.pad_h < span_h || W + 2 * p.pad_w < span_w) {
        DP_ERROR("%s: input %s is smaller than the %lldx%lld window", op,
                 dp_tensor_shape_str(x, xs, sizeof xs), (long long)span_h, (long long)span_w);
        return DP_ESHAPE;
    }
    int64_t shape[4] = {x->shape[0], x->shape[1],
                        out_size(H, span_h, p.stride_h, p.pad_h, p.ceil_mode),
                        out_size(W, span_w, p.stride_w, p.pad_w, p.ceil_mode)};
    /* A window hanging past the padding (ceil_mode): its cells there never
     * count. With padding counted in the mean, that divisor is neither
     * oneDNN's nor cuDNN's; with none, it is the cells inside x. */
    bool overhang = (shape[2] - 1) * p.stride_h + span_h > H + 2 * p.pad_h ||
                    (shape[3] - 1) * p.stride_w + span_w > W + 2 * p.pad_w;
    if (kind == DP__POOL_AVG && p.exclude_pad)
        kind = DP__POOL_AVG_EXCLUDE;
    if (kind == DP__POOL_AVG && overhang) {
        if (p.pad_h || p.pad_w) {
            DP_ERROR("%s: ceil_mode with padding %dx%d counted in the mean: the last window of "
                     "input %s hangs past the padding (count_include_pad=False or no padding "
                     "runs)",
                     op, p.pad_h, p.pad_w, dp_tensor_shape_str(x, xs, sizeof xs));
            return DP_EINVAL;
        }
        kind = DP__POOL_AVG_EXCLUDE;
    }
    dp_tensor_t *y, *ws = NULL;
    DP_TRY(dp__tape_alloc(&y, x->dev, x->dtype, 4, shape, x->nhwc));
    if (kind == DP__POOL_MAX)
        DP_TRY(dp__tape_alloc(&ws, x->dev, DP_I32, 4, shape, x->nhwc));
    dp__pool2d_args a;
    memset(&a, 0, sizeof a);
    fill_args(&a, kind, &p);
    a.x = dp__desc(x);
    a.y = dp__desc(y);
    a.workspace = ws ? ws->data : NULL;
    if (shape[0] > 0)
        DP_TRY(x->dev->ops->pool2d_forward(x->dev, &a));
    dp__tensor_written(y);
    if (dp__tape_needs_grad(&x, 1)) {
        dp__pool_node pn = {kind, p};
        dp__saved saved = {.tensor = ws};
        DP_TRY(dp__tape_record_saved(id, pool2d_backward, &x, 1, y, &saved, &pn, sizeof pn));
    }
    *out = y;
    return 0;
}

int dp_avg_pool2d(dp_tensor_t **y, dp_tensor_t *x, const dp_pool2d_params *p)
{
    return pool2d(y, x, p, DP__POOL_AVG);
}

int dp_max_pool2d(dp_tensor_t **y, dp_tensor_t *x, const dp_pool2d_params *p)
{
    return pool2d(y, x, p, DP__POOL_MAX);
}
