/* adaptive_avg_pool2d: y (N, C, P, Q) from x (N, C, H, W), each output the
 * mean over PyTorch's window: rows floor(p H / P) .. ceil((p + 1) H / P) - 1,
 * columns likewise. The output keeps the input's physical layout. Backward
 * writes dx (=).
 *
 * When P divides H and Q divides W the windows are an ordinary pooling's
 * (kernel = stride = H / P, no padding) and go to the device's pooling
 * kernel; other sizes, whose windows differ in size and may overlap, go to
 * the adaptive kernel. */
#include "ops/op.h"

#include <string.h>

typedef struct adaptive_node {
    bool tiles; /* the windows tile x: the pooling kernel serves */
} adaptive_node;

static void fill_pool_args(dp__pool2d_args *a, const dp_tensor_t *x, const dp_tensor_t *y)
{
    a->kind = DP__POOL_AVG;
    a->kernel_h = a->stride_h = (int)(x->shape[2] / y->shape[2]);
    a->kernel_w = a->stride_w = (int)(x->shape[3] / y->shape[3]);
}

static int adaptive_backward(dp__node *node)
{
    const adaptive_node *an = (const adaptive_node *)node->params;
    dp_tensor_t *x = node->inputs[0], *y = node->output, *dx;
    DP_TRY(dp__grad_begin(x, &dx));
    if (!dx)
        return 0;
    /* Fold the backward of a fused ReLU that made x into this pass, as
     * pool2d does. */
    const void *relu_mask = x->ag->relu_output && dx == x->ag->grad ? x->data : NULL;
    if (dp__numel(x->ndim, x->shape) == 0) {
        relu_mask = NULL;
    } else if (an->tiles) {
        dp__pool2d_args a;
        memset(&a, 0, sizeof a);
        fill_pool_args(&a, x, y);
        a.x = dp__desc(x);
        a.y = dp__desc(y);
        a.dx = dp__desc(dx);
        a.dy = dp__desc(y->ag->grad);
        a.relu_mask = relu_mask;
        DP_TRY(x->dev->ops->pool2d_backward(x->dev, &a));
    } else {
        dp__adaptive_pool_args a;
        memset(&a, 0, sizeof a);
        a.x = dp__desc(x);
        a.y = dp__desc(y);
        a.dx = dp__desc(dx);
        a.dy = dp__desc(y->ag->grad);
        a.relu_mask = relu_mask;
        DP_TRY(x->dev->ops->adaptive_avg_pool_backward(x->dev, &a));
    }
    DP_TRY(dp__grad_end(x, dx));
    if (relu_mask)
        x->ag->grad_masked = 1;
    return 0;
}

int dp_adaptive_avg_pool2d(dp_tensor_t **out, dp_tensor_t *x, int out_h, int out_w)
{
    const char *op = dp__op_name(DP__OP_adaptive_avg_pool2d);
    char xs[64];
    DP_TRY(dp__check_rank(op, "input", x, 4));
    if (out_h <= 0 || out_w <= 0) {
        DP_ERROR("%s: output size %dx%d must be positive", op, out_h, out_w);
        return DP_EINVAL;
    }
    int64_t H = x->shape[2], W = x->shape[3];
    if (H == 0 || W == 0) {
        DP_ERROR("%s: input %s has no pixels to pool", op, dp_tensor_shape_str(x, xs, sizeof xs));
        return DP_ESHAPE;
    }
    bool tiles = H % out_h == 0 && W % out_w == 0;
    if (!tiles) /* the adaptive kernel is f32 */
        DP_TRY(dp__as_f32(&x));
    dp_device_t *dev = x->dev;
    if (!tiles && (!dev->ops->adaptive_avg_pool_forward || !dev->ops->adaptive_avg_pool_backward)) {
        DP_ERROR("%s: %s to %dx%d is not implemented on %s", op,
                 dp_tensor_shape_str(x, xs, sizeof xs), out_h, out_w, dev->name);
        return DP_ENOTSUP;
    }
    int64_t shape[4] = {x->shape[0], x->shape[1], out_h, out_w};
    dp_tensor_t *y;
    DP_TRY(dp__tape_alloc(&y, dev, x->dtype, 4, shape, x->nhwc));
    if (dp__numel(4, shape) > 0) {
        if (tiles) {
            dp__pool2d_args a;
            memset(&a, 0, sizeof a);
            fill_pool_args(&a, x, y);
            a.x = dp__desc(x);
            a.y = dp__desc(y);
            DP_TRY(dev->ops->pool2d_forward(dev, &a));
        } else {
            dp__adaptive_pool_args a;
            memset(&a, 0, sizeof a);
            a.x = dp__desc(x);
            a.y = dp__desc(y);
            DP_TRY(dev->ops->adaptive_avg_pool_forward(dev, &a));
        }
    }
    dp__tensor_written(y);
    if (dp__tape_needs_grad(&x, 1)) {
        adaptive_node an = {tiles};
        DP_TRY(dp__tape_record(DP__OP_adaptive_avg_pool2d, adaptive_backward, &x, 1, y, &an,
                               sizeof an));
    }
    *out = y;
    return 0;
}
