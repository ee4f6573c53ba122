/* matmul and transpose of 2-D matrices, as ONNX's MatMul and Transpose
 * (perm [1, 0]) where torch.onnx.export writes them for x @ w and w.t():
 * matmul: y (N, M) = a (N, K) b (K, M), b a float32 parameter or constant
 * (dp_linear's in-out layout without a bias, recorded as linear: its FLOPs
 * and its gradients, dA written, dB accumulated); transpose: y (M, N) =
 * x (N, M)^T, backward dx = dy^T (=). Transpose's kernel is f32: a bf16
 * input is cast first. Kernel: transpose (src, dst, rows, cols), the same
 * one both ways. */
#include "ops/op.h"

int dp_matmul(dp_tensor_t **y, dp_tensor_t *a, dp_tensor_t *b)
{
    return dp_linear(y, a, b, NULL, DP_WEIGHT_IN_OUT);
}

static int transpose_backward(dp__node *node)
{
    dp_tensor_t *x = node->inputs[0], *y = node->output, *dx;
    DP_TRY(dp__grad_begin(x, &dx));
    if (!dx)
        return 0;
    dp__transpose_args a = {
        .src = y->ag->grad->data, .dst = dx->data, .rows = y->shape[0], .cols = y->shape[1]};
    if (a.rows > 0 && a.cols > 0)
        DP_TRY(x->dev->ops->transpose(x->dev, &a));
    return dp__grad_end(x, dx);
}

int dp_transpose(dp_tensor_t **out, dp_tensor_t *x)
{
    const char *op = dp__op_name(DP__OP_transpose);
    DP_TRY(dp__check_rank(op, "input", x, 2));
    dp_device_t *dev = x->dev;
    if (!dev->ops->transpose) {
        DP_ERROR("%s: not implemented on %s", op, dev->name);
        return DP_ENOTSUP;
    }
    DP_TRY(dp__as_f32(&x));
    int64_t shape[2] = {x->shape[1], x->shape[0]};
    dp_tensor_t *y;
    DP_TRY(dp__tape_alloc(&y, dev, DP_F32, 2, shape, 0));
    dp__transpose_args a = {
        .src = x->data, .dst = y->data, .rows = x->shape[0], .cols = x->shape[1]};
    if (a.rows > 0 && a.cols > 0)
        DP_TRY(dev->ops->transpose(dev, &a));
    dp__tensor_written(y);
    if (dp__tape_needs_grad(&x, 1))
        DP_TRY(dp__tape_record(DP__OP_transpose, transpose_backward, &x, 1, y, NULL, 0));
    *out = y;
    return 0;
}
