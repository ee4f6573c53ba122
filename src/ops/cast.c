/* cast: y = x converted between float32 and bfloat16 (to bf16 rounding to
 * nearest even, to f32 exactly; kernel cast), or between float32 and int32
 * (to int32 truncating toward zero, device/int_convert.h's rule; kernel
 * cast_int32), same shape and layout. Backward of a float-to-float cast converts the gradient back
 * to x's dtype (=); a cast from or to int32 is never recorded (no gradient flows through integers,
 * as torch). Mixed precision inserts float casts where an op wants another dtype than its input
 * has, as autocast does; a cast to the dtype x already has returns x itself. */
#include "ops/op.h"

static int cast_into(dp_tensor_t *dst, const dp_tensor_t *src)
{
    dp_device_t *dev = src->dev;
    bool ints = src->dtype == DP_I32 || dst->dtype == DP_I32;
    if (!ints && (!(dev->caps & DP_DEVICE_BF16) || !dev->ops->cast)) {
        DP_ERROR("cast: %s has no bf16 tensors", dev->name);
        return DP_ENOTSUP;
    }
    if (ints && !dev->ops->cast_int32) {
        DP_ERROR("cast: to or from int32 is not implemented on %s", dev->name);
        return DP_ENOTSUP;
    }
    dp__cast_args a = {.src = src->data,
                       .dst = dst->data,
                       .n = dp__numel(src->ndim, src->shape),
                       .src_dtype = src->dtype,
                       .dst_dtype = dst->dtype};
    return ints ? dev->ops->cast_int32(dev, &a) : dev->ops->cast(dev, &a);
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

/* Whether dp_cast converts `from` to `to`: float32 with bf16 or int32. */
static bool cast_pair(dp_dtype from, dp_dtype to)
{
    return from == to || (from == DP_F32 && (to == DP_BF16 || to == DP_I32)) ||
           (to == DP_F32 && (from == DP_BF16 || from == DP_I32));
}

int dp_cast(dp_tensor_t **out, dp_tensor_t *x, dp_dtype dtype)
{
    if (!x) {
        DP_ERROR("cast: the input is NULL");
        return DP_EINVAL;
    }
    if ((unsigned)dtype > DP_BF16 || !cast_pair(x->dtype, dtype)) {
        DP_ERROR("cast: %s to %s: float32 converts to and from bfloat16 and int32 only",
                 dp__dtype_name(x->dtype), dp__dtype_name(dtype));
        return DP_EINVAL;
    }
    if (x->dtype == dtype) {
        *out = x;
        return 0;
    }
    dp_tensor_t *y;
    DP_TRY(dp__tape_alloc(&y, x->dev, dtype, x->ndim, x->shape, x->nhwc));
    int rc = cast_into(y, x);
    dp__tensor_written(y);
    bool floats = x->dtype != DP_I32 && dtype != DP_I32;
    if (rc == 0 && floats && dp__tape_needs_grad(&x, 1))
        rc = dp__tape_record(DP__OP_cast, cast_backward, &x, 1, y, NULL, 0);
    if (rc < 0) {
        dp__op_temp_free(y, NULL);
        return rc;
    }
    *out = y;
    return 0;
}
