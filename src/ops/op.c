#include "ops/op.h"

int dp__check_rank(const char *op, const char *what, const dp_tensor_t *x, int ndim)
{
    char buf[64];
    if (!x) {
        DP_ERROR("%s: %s is NULL", op, what);
        return DP_EINVAL;
    }
    if (x->dtype != DP_F32 && x->dtype != DP_BF16) {
        DP_ERROR("%s: %s must be a float tensor", op, what);
        return DP_EINVAL;
    }
    if (ndim >= 0 && x->ndim != ndim) {
        DP_ERROR("%s: %s must have %d dimensions, got %s", op, what, ndim,
                 dp_tensor_shape_str(x, buf, sizeof buf));
        return DP_ESHAPE;
    }
    return 0;
}

int dp__relu_masked_grad(dp_tensor_t *y, dp_tensor_t **dz)
{
    if (y->ag->grad_masked) {
        *dz = y->ag->grad;
        return 0;
    }
    DP_TRY(dp__tape_alloc_like(dz, y->ag->grad));
    dp__eltwise_args e = {.op = DP__ELT_RELU_BACKWARD,
                          .a = y->ag->grad->data,
                          .b = y->data,
                          .out = (*dz)->data,
                          .n = dp__numel(y->ndim, y->shape),
                          .dtype = y->dtype};
    return y->dev->ops->eltwise(y->dev, &e);
}

int dp__check_same_device(const char *op, dp_tensor_t *const *ts, int n)
{
    for (int i = 1; i < n; i++) {
        if (ts[i] && ts[i]->dev != ts[0]->dev) {
            DP_ERROR("%s: tensors on different devices (%s and %s)", op, ts[0]->dev->name,
                     ts[i]->dev->name);
            return DP_EINVAL;
        }
    }
    return 0;
}

int dp__check_weight_args(const char *op, dp_tensor_t *x, dp_tensor_t *w, dp_tensor_t *b, int rank)
{
    DP_TRY(dp__check_rank(op, "input", x, rank));
    DP_TRY(dp__check_rank(op, "weight", w, rank));
    if (b)
        DP_TRY(dp__check_rank(op, "bias", b, 1));
    if (w->dtype != DP_F32 || (b && b->dtype != DP_F32)) {
        DP_ERROR("%s: weight and bias must be float32 (bf16 is for activations)", op);
        return DP_EINVAL;
    }
    dp_tensor_t *ts[] = {x, w, b};
    return dp__check_same_device(op, ts, 3);
}

void dp__op_temp_free(dp_tensor_t *t, const dp_tensor_t *in)
{
    if (t && t != in && !dp__tape_current())
        dp_tensor_free(t);
}
