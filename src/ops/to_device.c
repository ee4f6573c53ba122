/* to_device: y = x copied to another device (x's own gives a copy too),
 * the same dtype and logical shape, stored in logical order, as
 * tensor.to(device). Backward: x's gradient += y's gradient copied back to
 * x's device (=, or accumulated where x already has one this step). The
 * copies are dp_tensor_copy's, ordered across the two devices by events. */
#include "ops/op.h"

static int to_device_backward(dp__node *node)
{
    dp_tensor_t *x = node->inputs[0], *dx;
    DP_TRY(dp__grad_begin(x, &dx));
    if (!dx)
        return 0;
    DP_TRY(dp__tensor_copy_logical(dx, node->output->ag->grad));
    return dp__grad_end(x, dx);
}

int dp_to_device(dp_tensor_t **out, dp_tensor_t *x, dp_device_t *dev)
{
    const char *op = dp__op_name(DP__OP_to_device);
    if (!x || !dev) {
        DP_ERROR("%s: %s is NULL", op, x ? "the device" : "the tensor");
        return DP_EINVAL;
    }
    if (x->dtype == DP_BF16 && !dp_device_has(dev, DP_DEVICE_BF16)) {
        DP_ERROR("%s: %s holds no bfloat16 tensors: cast to float32 first", op, dev->name);
        return DP_EINVAL;
    }
    dp_tensor_t *y;
    DP_TRY(dp__tape_alloc(&y, dev, x->dtype, x->ndim, x->shape, 0));
    int rc = dp__tensor_copy_logical(y, x);
    if (rc == 0 && dp__tape_needs_grad(&x, 1))
        rc = dp__tape_record(DP__OP_to_device, to_device_backward, &x, 1, y, NULL, 0);
    if (rc < 0) {
        dp__op_temp_free(y, NULL);
        return rc;
    }
    *out = y;
    return 0;
}
