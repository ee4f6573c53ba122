/* eq: y (a's shape, int32) = 1 where a == b, else 0, as torch.eq and the
 * `==` of tensors: b of a's shape or of one element (broadcast); a and b
 * of one dtype, compared as that dtype, or of two (int32 and float32, as
 * d2l's accuracy compares argmax's indices with labels), compared as
 * float32, torch's promotion. Operands stored N, H, W, C are compared in
 * logical order. Not differentiable: never recorded. */
#include "ops/op.h"

#include <string.h>

/* t in logical order: itself, or a copy (freed by dp__op_temp_free). */
static int logical_of(dp_tensor_t **out, dp_tensor_t *t)
{
    *out = t;
    if (!t->nhwc)
        return 0;
    DP_TRY(dp__tape_alloc(out, t->dev, t->dtype, t->ndim, t->shape, 0));
    return dp__tensor_copy_logical(*out, t);
}

static int check_operands(const char *op, dp_tensor_t *a, dp_tensor_t *b)
{
    char as[64], bs[64];
    if (!a || !b) {
        DP_ERROR("%s: an operand is NULL", op);
        return DP_EINVAL;
    }
    dp_tensor_t *ts[] = {a, b};
    DP_TRY(dp__check_same_device(op, ts, 2));
    bool same_shape =
        a->ndim == b->ndim && memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape) == 0;
    if (!same_shape && dp__numel(b->ndim, b->shape) != 1) {
        DP_ERROR("%s: %s against %s: give one shape, or one element on the right", op,
                 dp_tensor_shape_str(a, as, sizeof as), dp_tensor_shape_str(b, bs, sizeof bs));
        return DP_ESHAPE;
    }
    return 0;
}

int dp_eq(dp_tensor_t **out, dp_tensor_t *a, dp_tensor_t *b)
{
    const char *op = dp__op_name(DP__OP_eq);
    DP_TRY(check_operands(op, a, b));
    dp_device_t *dev = a->dev;
    if (!dev->ops->eq) {
        DP_ERROR("%s: not implemented on %s", op, dev->name);
        return DP_ENOTSUP;
    }
    dp_tensor_t *la = NULL, *lb = NULL, *y = NULL;
    int rc = logical_of(&la, a);
    if (rc == 0)
        rc = logical_of(&lb, b);
    if (rc == 0)
        rc = dp__tape_alloc(&y, dev, DP_I32, a->ndim, a->shape, 0);
    if (rc == 0) {
        dp__eq_args e = {.a = la->data,
                         .b = lb->data,
                         .y = y->data,
                         .a_dtype = a->dtype,
                         .b_dtype = b->dtype,
                         .n = dp__numel(a->ndim, a->shape),
                         .b_one = dp__numel(b->ndim, b->shape) == 1};
        rc = e.n > 0 ? dev->ops->eq(dev, &e) : 0;
    }
    dp__op_temp_free(la, a);
    dp__op_temp_free(lb, b);
    if (rc < 0) {
        dp__op_temp_free(y, NULL);
        return rc;
    }
    dp__tensor_written(y);
    *out = y;
    return 0;
}
