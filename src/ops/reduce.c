/* sum, mean and argmax over one dimension of x, or over all of it, as
 * torch.sum, torch.mean and torch.argmax:
 *   y = sum_l x[o, l, i] (mean: / len), x seen as (outer, len, inner) in
 *   logical order, len the reduced dimension's size (all elements for
 *   dim -1, y then a scalar of 0 dimensions); y (outer, inner) shaped as
 *   x without that dimension, or with it as 1 under keepdim.
 * Backward (float32): dx[o, l, i] = dy[o, i] (/ len for mean), written
 * (=). A bf16 x is cast to float32 first (a recorded cast), an x stored
 * N, H, W, C is brought to logical order first (a recorded reshape), so
 * the kernels see float32 or int32 in logical order only. int32 sums are
 * not recorded; argmax never is. */
#include "ops/nodes.h"

/* The view of x that reducing `dim` takes, and y's shape. */
typedef struct reduce_shape {
    int64_t outer, len, inner;
    int ndim;
    int64_t shape[DP_MAX_DIMS];
} reduce_shape;

static int reduce_shape_of(const char *op, const dp_tensor_t *x, int dim, bool keepdim,
                           reduce_shape *r)
{
    char xs[64];
    if (dim < -1 || dim >= (x->ndim ? x->ndim : 1)) {
        DP_ERROR("%s: dim %d is outside -1 .. %d for a tensor %s (-1: every element)", op, dim,
                 x->ndim ? x->ndim - 1 : 0, dp_tensor_shape_str(x, xs, sizeof xs));
        return DP_EINVAL;
    }
    if (dim == -1 || x->ndim == 0) {
        r->outer = r->inner = 1;
        r->len = dp__numel(x->ndim, x->shape);
        r->ndim = keepdim ? x->ndim : 0;
        for (int d = 0; d < r->ndim; d++)
            r->shape[d] = 1;
        return 0;
    }
    r->outer = dp__numel(dim, x->shape);
    r->len = x->shape[dim];
    r->inner = dp__numel(x->ndim - dim - 1, x->shape + dim + 1);
    r->ndim = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (d != dim)
            r->shape[r->ndim++] = x->shape[d];
        else if (keepdim)
            r->shape[r->ndim++] = 1;
    }
    return 0;
}

static int check_input(const char *op, const dp_tensor_t *x)
{
    if (!x) {
        DP_ERROR("%s: the input is NULL", op);
        return DP_EINVAL;
    }
    return 0;
}

static int reduce_backward(dp__node *node)
{
    const dp__reduce_node *rn = (const dp__reduce_node *)node->params;
    dp_tensor_t *x = node->inputs[0], *dx;
    DP_TRY(dp__grad_begin(x, &dx));
    if (!dx)
        return 0;
    dp__reduce_args a = {.dy = node->output->ag->grad->data,
                         .dx = dx->data,
                         .dtype = DP_F32,
                         .outer = rn->outer,
                         .len = rn->len,
                         .inner = rn->inner,
                         .scale = rn->scale};
    DP_TRY(x->dev->ops->reduce_backward(x->dev, &a));
    return dp__grad_end(x, dx);
}

static int reduce(dp__op id, dp_tensor_t **out, dp_tensor_t *x, int dim, bool keepdim)
{
    const char *op = dp__op_name(id);
    DP_TRY(check_input(op, x));
    if (x->dtype == DP_I32 && id == DP__OP_mean) {
        DP_ERROR("mean: of an int32 tensor (torch refuses it too): cast it to float32 first");
        return DP_EINVAL;
    }
    reduce_shape r;
    DP_TRY(reduce_shape_of(op, x, dim, keepdim, &r));
    dp_device_t *dev = x->dev;
    if (!dev->ops->reduce_forward) {
        DP_ERROR("%s: not implemented on %s", op, dev->name);
        return DP_ENOTSUP;
    }
    dp_tensor_t *in = x, *logical = x, *y;
    if (x->nhwc)
        DP_TRY(dp_reshape(&logical, x, x->ndim, x->shape)); /* logical order, recorded */
    x = logical;
    int rc = dp__as_f32(&x);
    if (rc < 0) {
        dp__op_temp_free(logical, in);
        return rc;
    }
    rc = dp__tape_alloc(&y, dev, x->dtype, r.ndim, r.shape, 0);
    if (rc < 0) {
        dp__op_temp_free(x, logical);
        dp__op_temp_free(logical, in);
        return rc;
    }
    dp__reduce_node rn = {r.outer, r.len, r.inner, id == DP__OP_mean ? 1.0 / (double)r.len : 1.0};
    dp__reduce_args a = {.x = x->data,
                         .y = y->data,
                         .dtype = x->dtype,
                         .outer = r.outer,
                         .len = r.len,
                         .inner = r.inner,
                         .scale = rn.scale};
    rc = dev->ops->reduce_forward(dev, &a);
    dp__tensor_written(y);
    if (rc == 0 && x->dtype == DP_F32 && dp__tape_needs_grad(&x, 1))
        rc = dp__tape_record(id, reduce_backward, &x, 1, y, &rn, sizeof rn);
    dp__op_temp_free(x, logical);
    dp__op_temp_free(logical, in);
    if (rc < 0) {
        dp__op_temp_free(y, NULL);
        return rc;
    }
    *out = y;
    return 0;
}

int dp_sum(dp_tensor_t **y, dp_tensor_t *x, int dim, bool keepdim)
{
    return reduce(DP__OP_sum, y, x, dim, keepdim);
}

int dp_mean(dp_tensor_t **y, dp_tensor_t *x, int dim, bool keepdim)
{
    return reduce(DP__OP_mean, y, x, dim, keepdim);
}

int dp_argmax(dp_tensor_t **out, dp_tensor_t *x, int dim, bool keepdim)
{
    const char *op = dp__op_name(DP__OP_argmax);
    DP_TRY(check_input(op, x));
    reduce_shape r;
    DP_TRY(reduce_shape_of(op, x, dim, keepdim, &r));
    if (r.len == 0) {
        DP_ERROR("argmax: over an empty dimension (torch refuses it too)");
        return DP_EINVAL;
    }
    dp_device_t *dev = x->dev;
    if (!dev->ops->argmax) {
        DP_ERROR("%s: not implemented on %s", op, dev->name);
        return DP_ENOTSUP;
    }
    dp_tensor_t *logical = x, *y = NULL;
    int rc = 0;
    if (x->nhwc) { /* not recorded: argmax has no gradient */
        rc = dp__tape_alloc(&logical, dev, x->dtype, x->ndim, x->shape, 0);
        if (rc < 0)
            return rc;
        rc = dp__tensor_copy_logical(logical, x);
    }
    if (rc == 0)
        rc = dp__tape_alloc(&y, dev, DP_I32, r.ndim, r.shape, 0);
    dp__reduce_args a = {.x = logical->data,
                         .y = y ? y->data : NULL,
                         .dtype = x->dtype,
                         .outer = r.outer,
                         .len = r.len,
                         .inner = r.inner};
    if (rc == 0)
        rc = dev->ops->argmax(dev, &a);
    dp__op_temp_free(logical, x);
    if (rc < 0) {
        dp__op_temp_free(y, NULL);
        return rc;
    }
    dp__tensor_written(y);
    *out = y;
    return 0;
}
