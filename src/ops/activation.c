/* activation: y = f(x) for the activations of dp_activation_kind, any
 * shape and layout, as torch.nn.functional has them (hardtanh and relu6,
 * hardswish, hardsigmoid, elu, selu, gelu exact and tanh, silu; and alpha x +
 * beta, ONNX's arithmetic with a constant). Backward
 * from the saved input: dx = dy f'(x) (=), with PyTorch's derivative at the
 * kinks: hardtanh's and hardsigmoid's gradient is 0 on their bounds, and
 * hardswish's (2x + 3) / 6 reaches its ends inclusive. The kernels are f32:
 * a bf16 input is cast first (autocast's float32 list). Kernels:
 * activation_forward (x, out) and activation_backward (x, dy, out) over
 * dp__activation_args. */
#include "ops/nodes.h"

#include "device/activation_math.h"

#include <math.h>

/* The kernels' numbering (device/activation_math.h) is the public one. */
_Static_assert((int)DP_ACT_HARDTANH == DP__ACT_HARDTANH &&
                   (int)DP_ACT_HARDSWISH == DP__ACT_HARDSWISH &&
                   (int)DP_ACT_HARDSIGMOID == DP__ACT_HARDSIGMOID &&
                   (int)DP_ACT_ELU == DP__ACT_ELU && (int)DP_ACT_SELU == DP__ACT_SELU &&
                   (int)DP_ACT_GELU == DP__ACT_GELU && (int)DP_ACT_GELU_TANH == DP__ACT_GELU_TANH &&
                   (int)DP_ACT_SILU == DP__ACT_SILU && (int)DP_ACT_LINEAR == DP__ACT_LINEAR &&
                   (int)DP_ACT_COUNT == DP__ACT_LINEAR + 1,
               "one numbering of the activations");

static int activation_backward(dp__node *node)
{
    const dp__activation_node *an = (const dp__activation_node *)node->params;
    dp_tensor_t *x = node->inputs[0], *y = node->output, *dx;
    DP_TRY(dp__grad_begin(x, &dx));
    if (!dx)
        return 0;
    dp__activation_args a = {.kind = an->kind,
                             .x = x->data,
                             .dy = y->ag->grad->data,
                             .out = dx->data,
                             .n = dp__numel(x->ndim, x->shape),
                             .alpha = an->alpha,
                             .beta = an->beta};
    DP_TRY(x->dev->ops->activation_backward(x->dev, &a));
    return dp__grad_end(x, dx);
}

int dp_activation(dp_tensor_t **out, dp_tensor_t *x, dp_activation_kind kind, float alpha,
                  float beta)
{
    const char *op = dp__op_name(DP__OP_activation);
    DP_TRY(dp__check_rank(op, "input", x, -1));
    if ((unsigned)kind >= DP_ACT_COUNT || !isfinite(alpha) || !isfinite(beta) ||
        (kind == DP_ACT_HARDTANH && !(alpha <= beta))) {
        DP_ERROR("%s: kind %d with alpha %g and beta %g: an activation of dp_activation_kind "
                 "with finite parameters (hardtanh: min <= max)",
                 op, (int)kind, (double)alpha, (double)beta);
        return DP_EINVAL;
    }
    dp_device_t *dev = x->dev;
    if (!dev->ops->activation_forward || !dev->ops->activation_backward) {
        DP_ERROR("%s: not implemented on %s", op, dev->name);
        return DP_ENOTSUP;
    }
    DP_TRY(dp__as_f32(&x));
    dp_tensor_t *y;
    DP_TRY(dp__tape_alloc_like(&y, x));
    dp__activation_args a = {.kind = kind,
                             .x = x->data,
                             .out = y->data,
                             .n = dp__numel(x->ndim, x->shape),
                             .alpha = alpha,
                             .beta = beta};
    DP_TRY(dev->ops->activation_forward(dev, &a));
    dp__tensor_written(y);
    if (dp__tape_needs_grad(&x, 1)) {
        dp__activation_node an = {kind, alpha, beta};
        DP_TRY(dp__tape_record(DP__OP_activation, activation_backward, &x, 1, y, &an, sizeof an));
    }
    *out = y;
    return 0;
}

int dp_relu6(dp_tensor_t **y, dp_tensor_t *x)
{
    return dp_activation(y, x, DP_ACT_HARDTANH, 0.0f, 6.0f);
}

int dp_hardswish(dp_tensor_t **y, dp_tensor_t *x)
{
    return dp_activation(y, x, DP_ACT_HARDSWISH, 0.0f, 0.0f);
}

int dp_hardsigmoid(dp_tensor_t **y, dp_tensor_t *x)
{
    return dp_activation(y, x, DP_ACT_HARDSIGMOID, 1.0f / 6.0f, 0.5f);
}

int dp_elu(dp_tensor_t **y, dp_tensor_t *x, float alpha)
{
    return dp_activation(y, x, DP_ACT_ELU, alpha, 0.0f);
}

int dp_selu(dp_tensor_t **y, dp_tensor_t *x)
{
    /* torch.nn.functional.selu's constants. */
    return dp_activation(y, x, DP_ACT_SELU, 1.6732632423543772f, 1.0507009873554805f);
}

int dp_gelu(dp_tensor_t **y, dp_tensor_t *x)
{
    return dp_activation(y, x, DP_ACT_GELU, 0.0f, 0.0f);
}

int dp_silu(dp_tensor_t **y, dp_tensor_t *x)
{
    return dp_activation(y, x, DP_ACT_SILU, 0.0f, 0.0f);
}
