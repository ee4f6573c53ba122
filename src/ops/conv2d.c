/* conv2d: y (N, K, P, Q) = conv(x (N, C, H, W), w (K, C / groups, R, S))
 * + b (K), optionally followed by a fused ReLU; strides, dilation, groups
 * and padding symmetric or per side (dp/ops.h).
 * P = (H + pad_top + pad_bottom - dilation_h (R - 1) - 1) / stride_h + 1,
 * Q likewise.
 * Backward: dx written (=) when x needs it; dw, db accumulated into the
 * parameters' gradients (first use of a step writes, later uses add).
 * The output is stored NHWC, the layout oneDNN and cuDNN run fastest.
 * Under bf16 precision x is taken as bf16 (a recorded cast when it is f32)
 * and y is bf16; w, b and their gradients stay f32 (dp/ops.h). The
 * precision and the algorithm in force at the call also run its backward. */
#include "ops/nodes.h"

#include "device/conv_choice.h"

#include <string.h>

int dp__conv_geometry(const char *op, const dp_conv2d_params *p, dp__conv_geom *g)
{
    bool sides = p->pad_top || p->pad_left || p->pad_bottom || p->pad_right;
    if (p->stride_h < 0 || p->stride_w < 0 || p->pad_h < 0 || p->pad_w < 0 || p->pad_top < 0 ||
        p->pad_left < 0 || p->pad_bottom < 0 || p->pad_right < 0) {
        DP_ERROR("%s: negative stride or padding", op);
        return DP_EINVAL;
    }
    if (p->dilation_h < 0 || p->dilation_w < 0 || p->groups < 0) {
        DP_ERROR("%s: negative dilation (%d, %d) or groups (%d)", op, p->dilation_h, p->dilation_w,
                 p->groups);
        return DP_EINVAL;
    }
    if (sides && (p->pad_h || p->pad_w)) {
        DP_ERROR("%s: padding given both ways (pad_h, pad_w %d, %d and per side %d, %d, %d, %d): "
                 "the sides' padding needs pad_h = pad_w = 0",
                 op, p->pad_h, p->pad_w, p->pad_top, p->pad_left, p->pad_bottom, p->pad_right);
        return DP_EINVAL;
    }
    *g = (dp__conv_geom){
        .stride_h = p->stride_h ? p->stride_h : 1,
        .stride_w = p->stride_w ? p->stride_w : 1,
        .pad_h = sides ? p->pad_top : p->pad_h,
        .pad_w = sides ? p->pad_left : p->pad_w,
        .pad_bottom = sides ? p->pad_bottom : p->pad_h,
        .pad_right = sides ? p->pad_right : p->pad_w,
        .dilation_h = p->dilation_h ? p->dilation_h : 1,
        .dilation_w = p->dilation_w ? p->dilation_w : 1,
        .groups = p->groups ? p->groups : 1,
    };
    return 0;
}

void dp__conv_args_init(dp__conv2d_args *a, const dp__conv_geom *g, const dp_tensor_t *x,
                        const dp_tensor_t *w, const dp_tensor_t *y)
{
    memset(a, 0, sizeof *a);
    a->x = dp__desc(x);
    a->w = dp__desc(w);
    a->y = dp__desc(y);
    a->stride_h = g->stride_h;
    a->stride_w = g->stride_w;
    a->pad_h = g->pad_h;
    a->pad_w = g->pad_w;
    a->pad_bottom = g->pad_bottom;
    a->pad_right = g->pad_right;
    a->dilation_h = g->dilation_h;
    a->dilation_w = g->dilation_w;
    a->groups = g->groups;
}

static int conv2d_backward(dp__node *node)
{
    const dp__conv_node *cn = (const dp__conv_node *)node->params;
    dp_tensor_t *x = node->inputs[0], *w = node->inputs[1], *b = node->inputs[2];
    dp_tensor_t *y = node->output;
    dp_device_t *dev = x->dev;
    dp_tensor_t *dy = y->ag->grad;
    /* Through the fused ReLU first. (An average pool right after it applies
     * the mask in its own backward pass and says so with grad_masked.) */
    if (cn->relu)
        DP_TRY(dp__relu_masked_grad(y, &dy));
    dp__conv2d_args a;
    dp__conv_args_init(&a, &cn->geom, x, w, y);
    a.dy = dp__desc(dy);
    a.precision = cn->precision;
    a.algo = cn->algo;
    return dp__conv_backward_passes(x, w, b, &a, dev->ops->conv2d_backward_weights,
                                    dev->ops->conv2d_backward_data);
}

/* A per-sample pass (forward, backward-data) over the batch's rows [row0,
 * row0 + count). */
typedef struct rows_pass {
    dp_device_t *dev;
    const dp__conv2d_args *a;
    dp__conv_kernel kernel;
} rows_pass;

static int pass_of_rows(void *ctx, int64_t row0, int64_t count)
{
    const rows_pass *rp = ctx;
    dp__conv2d_args a = *rp->a;
    a.x = dp__rows_of(a.x, row0, count);
    a.y = dp__rows_of(a.y, row0, count);
    a.dx = dp__rows_of(a.dx, row0, count);
    a.dy = dp__rows_of(a.dy, row0, count);
    return rp->kernel(rp->dev, &a);
}

int dp__conv_rows(dp_device_t *dev, dp__conv_kernel kernel, const dp__conv2d_args *a, int64_t rows)
{
    rows_pass rp = {dev, a, kernel};
    return dp__for_blocks(rows, pass_of_rows, &rp);
}

/* dw (and db) of the batch's rows [row0, row0 + count). */
typedef struct weights_block {
    dp_device_t *dev;
    const dp__conv2d_args *a;
    dp__conv_kernel weights;
    bool bias;
} weights_block;

static int weights_of_rows(void *ctx, int64_t row0, int64_t count, dp_tensor_t *const *out)
{
    const weights_block *wb = ctx;
    dp__conv2d_args a = *wb->a;
    a.x = dp__rows_of(a.x, row0, count);
    a.y = dp__rows_of(a.y, row0, count);
    a.dy = dp__rows_of(a.dy, row0, count);
    a.dw = dp__desc(out[0]);
    a.db = dp__desc(wb->bias ? out[1] : NULL);
    return wb->weights(wb->dev, &a);
}

int dp__conv_backward_passes(dp_tensor_t *x, dp_tensor_t *w, dp_tensor_t *b, dp__conv2d_args *a,
                             dp__conv_kernel weights, dp__conv_kernel data)
{
    dp_device_t *dev = x->dev;
    dp_tensor_t *dx = NULL;
    /* oneDNN computes dw and db together */
    weights_block wb = {dev, a, weights, b != NULL};
    DP_TRY(dp__weight_grad_sums(dev, x->shape[0], w, b, weights_of_rows, &wb));
    DP_TRY(dp__grad_begin(x, &dx));
    if (dx) {
        a->dx = dp__desc(dx);
        DP_TRY(dp__conv_rows(dev, data, a, x->shape[0]));
        DP_TRY(dp__grad_end(x, dx));
    }
    return 0;
}

/* dp_conv2d's checks, with the geometry g and y's shape (N, K, P, Q), for
 * x in the type the precision gives it (the shapes do not depend on it). */
static int conv2d_check(const char *op, const dp_tensor_t *x, const dp_tensor_t *w,
                        const dp_tensor_t *b, const dp_conv2d_params *p, dp__conv_geom *g,
                        int64_t shape[4])
{
    char xs[64], ws[64];
    DP_TRY(dp__conv_geometry(op, p, g));
    DP_TRY(dp__check_weight_args(op, (dp_tensor_t *)x, (dp_tensor_t *)w, (dp_tensor_t *)b, 4));
    DP_TRY(dp__precision_check(op, x->dev, dp_get_precision()));
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
    int64_t K = w->shape[0], R = w->shape[2], S = w->shape[3], G = g->groups;
    if (C % G != 0 || K % G != 0) {
        DP_ERROR("%s: groups %lld must divide the input's %lld channels and the weight's %lld "
                 "outputs",
                 op, (long long)G, (long long)C, (long long)K);
        return DP_ESHAPE;
    }
    /* the dilated kernel's extent must fit the padded input */
    int64_t span_h = (int64_t)g->dilation_h * (R - 1) + 1;
    int64_t span_w = (int64_t)g->dilation_w * (S - 1) + 1;
    if (w->shape[1] * G != C || (b && b->shape[0] != K)) {
        DP_ERROR("%s: input %s does not fit weight %s (groups %lld)", op,
                 dp_tensor_shape_str(x, xs, sizeof xs), dp_tensor_shape_str(w, ws, sizeof ws),
                 (long long)G);
        return DP_ESHAPE;
    }
    if (H + g->pad_h + g->pad_bottom < span_h || W + g->pad_w + g->pad_right < span_w) {
        DP_ERROR("%s: the %lld x %lld kernel dilated by %d x %d spans %lld x %lld, more than "
                 "input %s padded to %lld x %lld",
                 op, (long long)R, (long long)S, g->dilation_h, g->dilation_w, (long long)span_h,
                 (long long)span_w, dp_tensor_shape_str(x, xs, sizeof xs),
                 (long long)(H + g->pad_h + g->pad_bottom),
                 (long long)(W + g->pad_w + g->pad_right));
        return DP_ESHAPE;
    }
    shape[0] = N;
    shape[1] = K;
    shape[2] = dp__conv_out(H, g->pad_h, g->pad_bottom, R, g->dilation_h, g->stride_h);
    shape[3] = dp__conv_out(W, g->pad_w, g->pad_right, S, g->dilation_w, g->stride_w);
    return 0;
}

int dp_conv2d_output(int64_t shape[4], dp_dtype *dtype, const dp_tensor_t *x, const dp_tensor_t *w,
                     const dp_tensor_t *b, const dp_conv2d_params *params)
{
    dp_conv2d_params p = params ? *params : (dp_conv2d_params){0};
    dp__conv_geom g;
    DP_TRY(conv2d_check(dp__op_name(DP__OP_conv2d), x, w, b, &p, &g, shape));
    *dtype = dp_get_precision() == DP_PRECISION_FP32 ? DP_F32 : DP_BF16;
    return 0;
}

int dp_conv2d(dp_tensor_t **out, dp_tensor_t *x, dp_tensor_t *w, dp_tensor_t *b,
              const dp_conv2d_params *params)
{
    const char *op = dp__op_name(DP__OP_conv2d);
    dp_conv2d_params p = params ? *params : (dp_conv2d_params){0};
    dp__conv_geom g;
    int64_t shape[4];
    DP_TRY(conv2d_check(op, x, w, b, &p, &g, shape));
    dp_tensor_t *ts[] = {x, w, b};
    dp_precision prec = dp_get_precision();
    /* the activations in the precision's type, as autocast casts them */
    DP_TRY(prec == DP_PRECISION_FP32 ? dp__as_f32(&x) : dp_cast(&x, x, DP_BF16));
    ts[0] = x;
    int64_t N = shape[0];
    dp_tensor_t *y;
    DP_TRY(dp__tape_alloc(&y, x->dev, x->dtype, 4, shape, 1));
    dp__conv2d_args a;
    dp__conv_args_init(&a, &g, x, w, y);
    a.b = dp__desc(b);
    a.fuse_relu = p.relu;
    a.precision = prec;
    a.algo = dp_get_conv_algo();
    if (N > 0)
        DP_TRY(dp__conv_rows(x->dev, x->dev->ops->conv2d_forward, &a, N));
    dp__tensor_written(y);
    if (dp__tape_needs_grad(ts, 3)) {
        dp__conv_node cn = {g, p.relu, prec, a.algo};
        dp__saved saved = {.relu_output = p.relu};
        DP_TRY(dp__tape_record_saved(DP__OP_conv2d, conv2d_backward, ts, 3, y, &saved, &cn,
                                     sizeof cn));
    }
    *out = y;
    return 0;
}

char *dp_conv_choices_save(void)
{
    return dp__conv_choices_text();
}

int dp_conv_choices_load(const char *text)
{
    return text ? dp__conv_choices_parse(text) : DP_EINVAL;
}

void dp_conv_choices_clear(void)
{
    dp__conv_choices_reset();
}
