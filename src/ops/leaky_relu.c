/* leaky_relu: y = x > 0 ? x : negative_slope x, any shape and layout, as
 * PyTorch's F.leaky_relu (nn.LeakyReLU's default slope is 0.01). Backward
 * from the saved input: dx = dy where x > 0, else negative_slope dy (=), so
 * that a zero or negative slope differentiates as PyTorch's does. The
 * kernels are f32: a bf16 input is cast first (autocast's float32 list).
 * Kernels: leaky_relu_forward (a = x, out = y, alpha = negative_slope) and
 * leaky_relu_backward (a = dy, b = x, out = dx) over dp__eltwise_args. */
#include "ops/nodes.h"

#include <math.h>

static int leaky_relu_backward(dp__node *node)
{
    const dp__leaky_relu_node *ln = (const dp__leaky_relu_node *)node->params;
    dp_tensor_t *x = node->inputs[0], *y = node->output, *dx;
    DP_TRY(dp__grad_begin(x, &dx));
    if (!dx)
        return 0;
    dp__eltwise_args a = {.a = y->ag->grad->data,
                          .b = x->data,
                          .out = dx->data,
                          .n = dp__numel(x->ndim, x->shape),
                          .alpha = ln->negative_slope,
                          .dtype = DP_F32};
    DP_TRY(x->dev->ops->leaky_relu_backward(x->dev, &a));
    return dp__grad_end(x, dx);
}

int dp_leaky_relu(dp_tensor_t **out, dp_tensor_t *x, float negative_slope)
{
    const char *op = dp__op_name(DP__OP_leaky_relu);
    DP_TRY(dp__check_rank(op, "input", x, -1));
    if (!isfinite(negative_slope)) {
        DP_ERROR("%s: negative_slope must be a finite number, got %g", op, (double)negative_slope);
        return DP_EINVAL;
    }
    dp_device_t *dev = x->dev;
    if (!dev->ops->leaky_relu_forward || !dev->ops->leaky_relu_backward) {
        DP_ERROR("%s: not implemented on %s", op, dev->name);
        return DP_ENOTSUP;
    }
    DP_TRY(dp__as_f32(&x));
    dp_tensor_t *y;
    DP_TRY(dp__tape_alloc_like(&y, x));
    dp__eltwise_args a = {.a = x->data,
                          .out = y->data,
                          .n = dp__numel(x->ndim, x->shape),
                          .alpha = negative_slope,
                          .dtype = DP_F32};
    DP_TRY(dev->ops->leaky_relu_forward(dev, &a));
    dp__tensor_written(y);
    if (dp__tape_needs_grad(&x, 1)) {
        dp__leaky_relu_node ln = {negative_slope};
        DP_TRY(dp__tape_record(DP__OP_leaky_relu, leaky_relu_backward, &x, 1, y, &ln, sizeof ln));
    }
    *out = y;
    return 0;
}
