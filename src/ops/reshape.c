/* reshape and flatten: y = x with another shape of the same element count,
 * in logical (PyTorch) order. A tensor stored NHWC is rearranged into logical
 * order on the way; backward rearranges the gradient back (=). */
#include "ops/op.h"

#include <string.h>

static int copy_or_relayout(dp_tensor_t *dst, const dp_tensor_t *src, int dst_nhwc,
                            const int64_t *shape4)
{
    dp_device_t *dev = src->dev;
    if (src->nhwc == dst_nhwc) {
        dp__eltwise_args a = {.op = DP__ELT_COPY,
                              .a = src->data,
                              .out = dst->data,
                              .n = dp__numel(src->ndim, src->shape),
                              .dtype = src->dtype};
        return dev->ops->eltwise(dev, &a);
    }
    dp__relayout_args r;
    memset(&r, 0, sizeof r);
    r.src.data = src->data;
    r.src.dtype = src->dtype;
    r.src.ndim = 4;
    r.src.nhwc = src->nhwc;
    memcpy(r.src.shape, shape4, sizeof r.src.shape);
    r.dst = r.src;
    r.dst.data = dst->data;
    r.dst.nhwc = dst_nhwc;
    return dev->ops->relayout(dev, &r);
}

static int reshape_backward(dp__node *node)
{
    dp_tensor_t *x = node->inputs[0], *dx;
    DP_TRY(dp__grad_begin(x, &dx));
    if (!dx)
        return 0;
    DP_TRY(copy_or_relayout(dx, node->output->ag->grad, dx->nhwc, x->shape));
    return dp__grad_end(x, dx);
}

int dp_reshape(dp_tensor_t **out, dp_tensor_t *x, int ndim, const int64_t *shape)
{
    char xs[64];
    DP_TRY(dp__check_rank("reshape", "input", x, -1));
    if (ndim < 1 || ndim > DP_MAX_DIMS || dp__numel(ndim, shape) != dp__numel(x->ndim, x->shape)) {
        DP_ERROR("reshape: cannot reshape %s into %d dimensions of the same size",
                 dp_tensor_shape_str(x, xs, sizeof xs), ndim);
        return DP_ESHAPE;
    }
    dp_tensor_t *y;
    DP_TRY(dp__tape_alloc(&y, x->dev, x->dtype, ndim, shape, 0));
    DP_TRY(copy_or_relayout(y, x, 0, x->shape));
    dp__tensor_written(y);
    if (dp__tape_needs_grad(&x, 1))
        DP_TRY(dp__tape_record(DP__OP_reshape, reshape_backward, &x, 1, y, NULL, 0));
    *out = y;
    return 0;
}

int dp_flatten(dp_tensor_t **out, dp_tensor_t *x)
{
    DP_TRY(dp__check_rank("flatten", "input", x, -1));
    int64_t shape[2] = {x->ndim ? x->shape[0] : 1, 1};
    for (int i = 1; i < x->ndim; i++)
        shape[1] *= x->shape[i];
    return dp_reshape(out, x, 2, shape);
}
