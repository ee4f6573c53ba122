/* conv2d [ReLU] -> avg_pool2d in one kernel (dp_conv2d_avg_pool2d, dp/ops.h).
 *
 * Forward: y (N, K, P', Q') NHWC, the pool over the convolution's P x Q
 * (P' = P / k, Q' = Q / k for a k x k window); with the ReLU, a bit per
 * convolution output under a window records whether the ReLU passed it
 * (the tape keeps it for the backward, as max pooling keeps its argmax).
 * Backward: dw and db accumulated into the parameters' gradients from y's
 * gradient, the mask and x, by blocks of rows as dp_conv2d's weight pass
 * (split-invariant sums alike). The node is the op's own, conv2d_pool:
 * only training runs record it; traces keep conv2d and avg_pool2d. */
#include "ops/nodes.h"

#include <string.h>

/* The square window k of a pool the kernel runs (stride k, no padding, no
 * ceil_mode), or 0. */
static int pool_window(const dp_pool2d_params *p)
{
    int k = p->kernel_h;
    int sh = p->stride_h ? p->stride_h : k, sw = p->stride_w ? p->stride_w : k;
    bool plain = k >= 1 && p->kernel_w == k && sh == k && sw == k && !p->pad_h && !p->pad_w &&
                 !p->ceil_mode && p->dilation_h <= 1 && p->dilation_w <= 1;
    return plain ? k : 0;
}

/* Whether the conv2d_pool kernel runs this layer: the device has it and
 * does not trace, the layer fits (dp_conv2d_avg_pool2d, dp/ops.h), and its x of 4-D f32
 * or bf16 needs no gradient. Anything doubtful runs unfused, where the two
 * ops check and name what is wrong. */
static bool fusable(const dp_tensor_t *x, const dp_tensor_t *w, const dp_tensor_t *b,
                    const dp__conv_geom *g, int k)
{
    dp_device_t *dev = x->dev;
    if (!dev->ops->conv2d_pool_forward || dev->ops->traces || k == 0 || g->groups != 1)
        return false;
    if (x->ndim != 4 || w->ndim != 4 || w->dev != dev || w->dtype != DP_F32 ||
        (b && (b->dev != dev || b->dtype != DP_F32 || b->ndim != 1 || b->shape[0] != w->shape[0])))
        return false;
    if (x->dtype != DP_F32 && x->dtype != DP_BF16)
        return false;
    dp_tensor_t *in = (dp_tensor_t *)x;
    if (dp__tape_needs_grad(&in, 1) || w->shape[1] != x->shape[1] ||
        w->shape[1] * w->shape[2] * w->shape[3] > DP__CONV_POOL_MAX_TAPS)
        return false;
    int64_t P =
        dp__conv_out(x->shape[2], g->pad_h, g->pad_bottom, w->shape[2], g->dilation_h, g->stride_h);
    int64_t Q =
        dp__conv_out(x->shape[3], g->pad_w, g->pad_right, w->shape[3], g->dilation_w, g->stride_w);
    /* a padded image of at most 4 MB a thread */
    int64_t plane =
        (x->shape[2] + g->pad_h + g->pad_bottom) * (x->shape[3] + g->pad_w + g->pad_right);
    return P >= k && Q >= k && x->shape[1] * plane <= (1 << 20);
}

/* The mask's 16-bit words a position: a bit a channel, in the kernel's
 * blocks of DP__CONV_POOL_LANES. */
static int64_t mask_words(int64_t K)
{
    return (K + DP__CONV_POOL_LANES - 1) / DP__CONV_POOL_LANES;
}

/* dw and db of rows [row0, row0 + count). */
typedef struct weights_block {
    dp_device_t *dev;
    const dp__conv2d_pool_args *a;
    int64_t mask_row; /* the mask's 16-bit words per sample */
    bool bias;
} weights_block;

static int weights_of_rows(void *ctx, int64_t row0, int64_t count, dp_tensor_t *const *out)
{
    const weights_block *wb = ctx;
    dp__conv2d_pool_args a = *wb->a;
    a.conv.x = dp__rows_of(a.conv.x, row0, count);
    a.conv.y = dp__rows_of(a.conv.y, row0, count);
    a.conv.dy = dp__rows_of(a.conv.dy, row0, count);
    a.conv.dw = dp__desc(out[0]);
    a.conv.db = dp__desc(wb->bias ? out[1] : NULL);
    if (a.mask)
        a.mask += row0 * wb->mask_row;
    return wb->dev->ops->conv2d_pool_backward(wb->dev, &a);
}

static int conv_pool_backward(dp__node *node)
{
    const dp__conv_pool_node *cp = (const dp__conv_pool_node *)node->params;
    dp_tensor_t *x = node->inputs[0], *w = node->inputs[1], *b = node->inputs[2];
    dp_tensor_t *y = node->output;
    dp__conv2d_pool_args a = {.pool = cp->pool, .mask = node->saved ? node->saved->data : NULL};
    dp__conv_args_init(&a.conv, &cp->conv.geom, x, w, y);
    a.conv.dy = dp__desc(y->ag->grad);
    a.conv.fuse_relu = cp->conv.relu;
    a.conv.precision = cp->conv.precision;
    /* the kernel writes dw and db together */
    weights_block wb = {x->dev, &a,
                        y->shape[2] * cp->pool * y->shape[3] * cp->pool * mask_words(w->shape[0]),
                        b != NULL};
    return dp__weight_grad_sums(x->dev, x->shape[0], w, b, weights_of_rows, &wb);
}

int dp_conv2d_avg_pool2d(dp_tensor_t **out, dp_tensor_t *x, dp_tensor_t *w, dp_tensor_t *b,
                         const dp_conv2d_params *conv, const dp_pool2d_params *pool)
{
    const char *op = dp__op_name(DP__OP_conv2d);
    dp_conv2d_params p = conv ? *conv : (dp_conv2d_params){0};
    dp__conv_geom g;
    DP_TRY(dp__conv_geometry(op, &p, &g));
    DP_TRY(dp__check_weight_args(op, x, w, b, 4));
    int k = pool ? pool_window(pool) : 0;
    dp_precision prec = dp_get_precision();
    if (!fusable(x, w, b, &g, k) || dp__precision_check(op, x->dev, prec) != 0) {
        /* Unfused: the ops the fused one stands for. */
        dp_tensor_t *h;
        DP_TRY(dp_conv2d(&h, x, w, b, &p));
        int rc = dp_avg_pool2d(out, h, pool);
        dp__op_temp_free(h, x);
        return rc;
    }
    /* the activations in the precision's type, as dp_conv2d casts them */
    dp_tensor_t *xin = x;
    DP_TRY(prec == DP_PRECISION_FP32 ? dp__as_f32(&xin) : dp_cast(&xin, x, DP_BF16));
    int64_t N = xin->shape[0], K = w->shape[0];
    int64_t P =
        dp__conv_out(xin->shape[2], g.pad_h, g.pad_bottom, w->shape[2], g.dilation_h, g.stride_h);
    int64_t Q =
        dp__conv_out(xin->shape[3], g.pad_w, g.pad_right, w->shape[3], g.dilation_w, g.stride_w);
    int64_t shape[4] = {N, K, P / k, Q / k};
    dp_tensor_t *y, *mask = NULL;
    DP_TRY(dp__tape_alloc(&y, xin->dev, xin->dtype, 4, shape, 1));
    dp_tensor_t *ts[3] = {xin, w, b};
    bool record = dp__tape_needs_grad(ts, 3);
    if (record && p.relu) {
        /* a bit per convolution output under a window, in 16-bit words,
         * allocated as int32s */
        int64_t words = (N * (P / k) * k * (Q / k) * k * mask_words(K) + 1) / 2;
        DP_TRY(dp__tape_alloc(&mask, xin->dev, DP_I32, 1, &words, 0));
    }
    dp__conv2d_pool_args a = {.pool = k, .mask = mask ? mask->data : NULL};
    dp__conv_args_init(&a.conv, &g, xin, w, y);
    a.conv.b = dp__desc(b);
    a.conv.fuse_relu = p.relu;
    a.conv.precision = prec;
    if (N > 0)
        DP_TRY(xin->dev->ops->conv2d_pool_forward(xin->dev, &a));
    dp__tensor_written(y);
    if (record) {
        dp__conv_pool_node cp = {{g, p.relu, prec, dp_get_conv_algo()}, k};
        dp__saved saved = {.tensor = mask};
        DP_TRY(dp__tape_record_saved(DP__OP_conv2d_pool, conv_pool_backward, ts, 3, y, &saved, &cp,
                                     sizeof cp));
    }
    dp__op_temp_free(xin, x);
    *out = y;
    return 0;
}
