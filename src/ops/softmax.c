/* softmax and log_softmax over axis 1 of x (N, C) or (N, C, H, W) (either
 * layout; (N, C, L) too), as torch.nn.functional.softmax(x, dim=1) and
 * log_softmax: y[n, :, p] = exp(x[n, :, p] - m) / sum exp(x[n, :, p] - m),
 * m the max over the C values (log: x - m - log sum). Backward from the
 * saved output (=): dx = y (dy - sum_c dy y), or for log-softmax
 * dx = dy - exp(y) sum_c dy. The kernels are f32: a bf16 input is cast
 * first. Kernels: softmax_forward (x, y) and softmax_backward (y_in, dy,
 * dx) over dp__softmax_args, `log` choosing the function. */
#include "ops/op.h"

#include <string.h>

typedef struct softmax_node {
    bool log;
} softmax_node;

static int softmax_backward(dp__node *node)
{
    const softmax_node *sn = (const softmax_node *)node->params;
    dp_tensor_t *x = node->inputs[0], *y = node->output, *dx;
    DP_TRY(dp__grad_begin(x, &dx));
    if (!dx)
        return 0;
    dp__softmax_args a;
    memset(&a, 0, sizeof a);
    a.x = dp__desc(y);
    a.y_in = y->data;
    a.dy = y->ag->grad->data;
    a.dx = dx->data;
    a.log = sn->log;
    if (dp__numel(y->ndim, y->shape) > 0)
        DP_TRY(x->dev->ops->softmax_backward(x->dev, &a));
    return dp__grad_end(x, dx);
}

static int softmax(dp_tensor_t **out, dp_tensor_t *x, bool log)
{
    dp__op id = log ? DP__OP_log_softmax : DP__OP_softmax;
    const char *op = dp__op_name(id);
    char xs[64];
    DP_TRY(dp__check_rank(op, "input", x, -1));
    if (x->ndim < 2 || x->ndim > 4) {
        DP_ERROR("%s: input %s: over axis 1 of an input of 2 to 4 dimensions", op,
                 dp_tensor_shape_str(x, xs, sizeof xs));
        return DP_ESHAPE;
    }
    dp_device_t *dev = x->dev;
    if (!dev->ops->softmax_forward || !dev->ops->softmax_backward) {
        DP_ERROR("%s: not implemented on %s", op, dev->name);
        return DP_ENOTSUP;
    }
    DP_TRY(dp__as_f32(&x));
    dp_tensor_t *y;
    DP_TRY(dp__tape_alloc_like(&y, x));
    if (dp__numel(x->ndim, x->shape) > 0) {
        dp__softmax_args a;
        memset(&a, 0, sizeof a);
        a.x = dp__desc(x);
        a.y = y->data;
        a.log = log;
        DP_TRY(dev->ops->softmax_forward(dev, &a));
    }
    dp__tensor_written(y);
    if (dp__tape_needs_grad(&x, 1)) {
        softmax_node sn = {log};
        DP_TRY(dp__tape_record(id, softmax_backward, &x, 1, y, &sn, sizeof sn));
    }
    *out = y;
    return 0;
}

int dp_softmax(dp_tensor_t **y, dp_tensor_t *x)
{
    return softmax(y, x, false);
}

int dp_log_softmax(dp_tensor_t **y, dp_tensor_t *x)
{
    return softmax(y, x, true);
}
