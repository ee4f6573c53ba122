/* prelu: y = x > 0 ? x : w[c] x over channel axis 1 of x (N, C, ...), 2- to
 * 4-D in either layout, as torch.nn.functional.prelu: w holds C slopes, or
 * one slope for every channel (nn.PReLU()'s num_parameters=1). Backward
 * from the saved input: dx = x > 0 ? dy : w[c] dy (=), and dw[c] = the sum
 * over channel c's elements of x dy where x <= 0, accumulated into w's
 * gradient. At x = 0 the slope side is taken, as PyTorch's backward does.
 * The kernels are f32: a bf16 input is cast first. Kernels: prelu_forward
 * (x, w, y) and prelu_backward (x, w, dy, dx, dw) over dp__prelu_args. */
#include "ops/op.h"

#include <string.h>

/* dx of the batch's rows [row0, row0 + count) and their sum dw. */
typedef struct slope_block {
    dp_device_t *dev;
    const dp__prelu_args *a;
} slope_block;

static int slope_of_rows(void *ctx, int64_t row0, int64_t count, dp_tensor_t *const *out)
{
    const slope_block *sb = ctx;
    dp__prelu_args a = *sb->a;
    int64_t per_row = dp__numel(a.x.ndim, a.x.shape) / a.x.shape[0];
    a.x = dp__rows_of(a.x, row0, count);
    a.dy += row0 * per_row;
    a.dx += row0 * per_row;
    a.dw = out[0]->data;
    return sb->dev->ops->prelu_backward(sb->dev, &a);
}

static int prelu_backward(dp__node *node)
{
    dp_tensor_t *x = node->inputs[0], *w = node->inputs[1], *y = node->output;
    dp_device_t *dev = x->dev;
    dp_tensor_t *dx = NULL, *dw = NULL, *scratch = NULL;
    DP_TRY(dp__grad_begin(x, &dx));
    DP_TRY(dp__grad_begin(w, &dw));
    if (!dx && !dw)
        return 0;
    /* The kernels compute both; the one not needed goes to scratch. */
    if (!dx)
        DP_TRY(dp__tape_alloc_like(&scratch, x));
    else if (!dw)
        DP_TRY(dp__tape_alloc_like(&scratch, w));
    dp__prelu_args a;
    memset(&a, 0, sizeof a);
    a.x = dp__desc(x);
    a.w = w->data;
    a.nw = dp__numel(w->ndim, w->shape);
    a.dy = y->ag->grad->data;
    a.dx = (dx ? dx : scratch)->data;
    a.dw = (dw ? dw : scratch)->data;
    if (dw && x->shape[0] > 0) {
        /* dw is a sum over the batch: block by block when split-invariant */
        slope_block sb = {dev, &a};
        DP_TRY(dp__split_sums(dev, x->shape[0], 1, &dw, slope_of_rows, &sb));
    } else {
        DP_TRY(dev->ops->prelu_backward(dev, &a));
    }
    if (dx)
        DP_TRY(dp__grad_end(x, dx));
    if (dw)
        DP_TRY(dp__grad_end(w, dw));
    return 0;
}

int dp_prelu(dp_tensor_t **out, dp_tensor_t *x, dp_tensor_t *w)
{
    const char *op = dp__op_name(DP__OP_prelu);
    char xs[64], ws[64];
    DP_TRY(dp__check_rank(op, "input", x, -1));
    DP_TRY(dp__check_rank(op, "weight", w, 1));
    dp_tensor_t *ts[] = {x, w};
    DP_TRY(dp__check_same_device(op, ts, 2));
    int64_t C = x->ndim >= 2 ? x->shape[1] : 1;
    if (x->ndim < 2 || x->ndim > 4 || w->dtype != DP_F32 ||
        (w->shape[0] != 1 && w->shape[0] != C)) {
        DP_ERROR("%s: input %s and weight %s: an input of 2 to 4 dimensions and a float32 weight "
                 "of one slope or one per channel (axis 1)",
                 op, dp_tensor_shape_str(x, xs, sizeof xs), dp_tensor_shape_str(w, ws, sizeof ws));
        return DP_ESHAPE;
    }
    dp_device_t *dev = x->dev;
    if (!dev->ops->prelu_forward || !dev->ops->prelu_backward) {
        DP_ERROR("%s: not implemented on %s", op, dev->name);
        return DP_ENOTSUP;
    }
    DP_TRY(dp__as_f32(&x));
    ts[0] = x;
    dp_tensor_t *y;
    DP_TRY(dp__tape_alloc_like(&y, x));
    if (dp__numel(x->ndim, x->shape) > 0) {
        dp__prelu_args a;
        memset(&a, 0, sizeof a);
        a.x = dp__desc(x);
        a.w = w->data;
        a.nw = w->shape[0];
        a.y = y->data;
        DP_TRY(dev->ops->prelu_forward(dev, &a));
    }
    dp__tensor_written(y);
    if (dp__tape_needs_grad(ts, 2))
        DP_TRY(dp__tape_record(DP__OP_prelu, prelu_backward, ts, 2, y, NULL, 0));
    *out = y;
    return 0;
}
