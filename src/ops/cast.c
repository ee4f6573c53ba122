/* cast: y = x converted between float32 and bfloat16, same shape and layout
 * (to bf16 rounding to nearest even, to f32 exactly). Backward converts the
 * gradient back to x's dtype (=). Mixed precision inserts it where an op
 * wants another dtype than its input has, as autocast does; a cast to the
 * dtype x already has returns x itself. */
#include "ops/op.h"

static int cast_into(dp_tensor_t *dst, const dp_tensor_t *src)
{
    dp_device_t *dev = src->dev;
    if (!(dev->caps & DP_DEVICE_BF16) || !dev->ops->cast) {
        DP_ERROR("cast: %s has no bf16 tensors", dev->name);
        return DP_ENOTSUP;
    }
    dp__cast_args a = {.src = src->data,
                       .dst = dst->data,
                       .n = dp__numel(src->ndim, src->shape),
                       .src_dtype = src->dtype,
                       .dst_dtype = dst->dtype};
    return dev->ops->cast(dev, &a);
}

static int cast_backward(dp__node *node)
{
    dp_tensor_t *x = node->inputs[0], *dx;
    DP_TRY(dp__grad_begin(x, &dx));
    if (!dx)
        return 0;
    DP_TRY(cast_into(dx, node->output->ag->grad));
    return dp__grad_end(x, dx);
}

int dp_cast(dp_tensor_t **out, dp_tensor_t *x, dp_dtype dtype)
{
    DP_TRY(dp__check_rank("cast", "input", x, -1));
    if (dtype != DP_F32 && dtype != DP_BF16) {
        DP_ERROR("cast: to dtype %d: only float32 and bf16", (int)dtype);
        return DP_EINVAL;
    }
    if (x->dtype == dtype) {
        *out = x;
        return 0;
    }
    dp_tensor_t *y;
    DP_TRY(dp__tape_alloc(&y, x->dev, dtype, x->ndim, x->shape, x->nhwc));
    DP_TRY(cast_into(y, x));
    dp__tensor_written(y);
    if (dp__tape_needs_grad(&x, 1))
        DP_TRY(dp__tape_record(DP__OP_cast, cast_backward, &x, 1, y, NULL, 0));
    *out = y;
    return 0;
}
