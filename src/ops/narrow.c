/* narrow: y = x[start : start + length] along dimension 0, as
 * torch.narrow(x, 0, start, length), for x (N, ...) of any dtype: y
 * (length, ...) a copy of those rows in x's layout (rows are the outermost
 * axis of both layouts, so they are one block of memory either way).
 * Backward: dx = y's gradient in those rows, zero elsewhere (=). Kernels:
 * the device's own copy (and fill), as scatter's. */
#include "ops/nodes.h"

/* Enqueues bytes of src at src_off into dst at dst_off, on dev. */
static int copy_rows(dp_device_t *dev, dp_tensor_t *dst, size_t dst_off, const dp_tensor_t *src,
                     size_t src_off, size_t bytes)
{
    if (bytes == 0)
        return 0;
    return dev->ops->copy_device(dev, (char *)dst->data + dst_off,
                                 (const char *)src->data + src_off, bytes);
}

static size_t row_bytes(const dp_tensor_t *x)
{
    return dp__bytes_of(x->dtype, x->ndim - 1, x->shape + 1);
}

static int narrow_backward(dp__node *node)
{
    const dp__narrow_node *nn = (const dp__narrow_node *)node->params;
    dp_tensor_t *x = node->inputs[0], *y = node->output, *dx;
    DP_TRY(dp__grad_begin(x, &dx));
    if (!dx)
        return 0;
    size_t rb = row_bytes(dx);
    DP_TRY(dp_tensor_fill(dx, 0.0f));
    DP_TRY(copy_rows(x->dev, dx, (size_t)nn->start * rb, y->ag->grad, 0, (size_t)y->shape[0] * rb));
    return dp__grad_end(x, dx);
}

int dp_narrow(dp_tensor_t **out, dp_tensor_t *x, int64_t start, int64_t length)
{
    const char *op = dp__op_name(DP__OP_narrow);
    char xs[64];
    if (!x || x->ndim < 1) {
        DP_ERROR("%s: the input must have a dimension 0%s", op, x ? " (it is a scalar)" : "");
        return DP_EINVAL;
    }
    int64_t rows = x->shape[0], first = start < 0 ? start + rows : start;
    if (first < 0 || length < 0 || first > rows || length > rows - first) {
        DP_ERROR("%s: rows %lld .. %lld + %lld are not inside a tensor %s", op, (long long)start,
                 (long long)start, (long long)length, dp_tensor_shape_str(x, xs, sizeof xs));
        return DP_EINVAL;
    }
    int64_t shape[DP_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++)
        shape[d] = x->shape[d];
    shape[0] = length;
    dp_tensor_t *y;
    DP_TRY(dp__tape_alloc(&y, x->dev, x->dtype, x->ndim, shape, x->nhwc));
    size_t rb = row_bytes(x);
    int rc = copy_rows(x->dev, y, 0, x, (size_t)first * rb, (size_t)length * rb);
    dp__tensor_written(y);
    if (rc == 0 && dp__tape_needs_grad(&x, 1)) {
        dp__narrow_node nn = {first};
        rc = dp__tape_record(DP__OP_narrow, narrow_backward, &x, 1, y, &nn, sizeof nn);
    }
    if (rc < 0) {
        dp__op_temp_free(y, NULL);
        return rc;
    }
    *out = y;
    return 0;
}
