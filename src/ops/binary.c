/* binary: z = a op b for op add, sub, mul, div, with the broadcasting ONNX
 * graphs exported from PyTorch use: both operands of one shape, or one of
 * them (either) broadcast over the other's shape, numpy's rule from the
 * right restricted to the cases that take one value per channel (axis 1):
 * (1, C, 1, 1), (C, 1, 1) or (1, C) [(C) for (N, C)], per sample and channel
 * (N, C, 1, 1) (a squeeze-and-excitation scale), or a single element. z has
 * the full operand's shape and layout. Backward (=): each operand's
 * gradient, reduced over its broadcast axes (sum), as PyTorch's:
 *   add: da = dy, db = dy         sub: da = dy, db = -dy
 *   mul: da = dy b, db = dy a     div: da = dy / b, db = -dy (a / b) / b
 * Two operands of one shape whose layouts differ meet in logical order (the
 * NHWC one through dp_reshape); add of one shape is dp_add, which keeps
 * bf16. The broadcasting kernels are f32: bf16 operands are cast first.
 * Kernels: binary_forward (a, b, y) and binary_backward (a, b, y_in, dy,
 * da, db) over dp__binary_args. */
#include "ops/nodes.h"

#include <string.h>

static bool same_shape(const dp_tensor_t *a, const dp_tensor_t *b)
{
    if (a->ndim != b->ndim)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return false;
    return true;
}

/* How `small` broadcasts over `full`'s shape (dimensions aligned from the
 * right, as numpy), or -1 when it does not in one of the supported ways. */
static int broadcast_kind(const dp_tensor_t *small, const dp_tensor_t *full)
{
    if (dp__numel(small->ndim, small->shape) == 1)
        return DP__BCAST_SCALAR;
    int r = full->ndim, lead = r - small->ndim;
    if (r < 2 || lead < 0)
        return -1;
    bool channel = true, sample_channel = true;
    for (int i = 0; i < r; i++) {
        int64_t d = i < lead ? 1 : small->shape[i - lead];
        bool want_c = i == 1, want_n = i == 0;
        channel = channel && d == (want_c ? full->shape[1] : 1);
        sample_channel = sample_channel && d == (want_c || want_n ? full->shape[i] : 1);
    }
    return channel ? DP__BCAST_CHANNEL : sample_channel ? DP__BCAST_SAMPLE_CHANNEL : -1;
}

/* args' sizes from the full operand's shape: N, C (axis 1), and the rest. */
static void sizes_of(dp__binary_args *a, const dp_tensor_t *full)
{
    a->N = full->shape[0];
    a->C = full->ndim >= 2 ? full->shape[1] : 1;
    a->HW = 1;
    for (int i = 2; i < full->ndim; i++)
        a->HW *= full->shape[i];
    a->nhwc = full->nhwc;
}

static int binary_backward(dp__node *node)
{
    const dp__binary_node *bn = (const dp__binary_node *)node->params;
    dp_tensor_t *a = node->inputs[0], *b = node->inputs[1], *y = node->output;
    dp_tensor_t *da = NULL, *db = NULL;
    DP_TRY(dp__grad_begin(a, &da));
    DP_TRY(dp__grad_begin(b, &db));
    if (!da && !db)
        return 0;
    dp__binary_args k;
    memset(&k, 0, sizeof k);
    k.op = bn->op;
    k.a_bcast = bn->a_bcast;
    k.b_bcast = bn->b_bcast;
    k.a = a->data;
    k.b = b->data;
    k.y_in = y->data;
    k.dy = y->ag->grad->data;
    k.da = da ? da->data : NULL;
    k.db = db ? db->data : NULL;
    sizes_of(&k, y);
    DP_TRY(y->dev->ops->binary_backward(y->dev, &k));
    if (da)
        DP_TRY(dp__grad_end(a, da));
    if (db)
        DP_TRY(dp__grad_end(b, db));
    return 0;
}

int dp_binary(dp_tensor_t **out, dp_binary_op bop, dp_tensor_t *a, dp_tensor_t *b)
{
    const char *op = dp__op_name(DP__OP_binary);
    char as[64], bs[64];
    DP_TRY(dp__check_rank(op, "a", a, -1));
    DP_TRY(dp__check_rank(op, "b", b, -1));
    dp_tensor_t *ts[] = {a, b};
    DP_TRY(dp__check_same_device(op, ts, 2));
    if ((unsigned)bop > DP_BINARY_DIV) {
        DP_ERROR("%s: unknown operation %d", op, (int)bop);
        return DP_EINVAL;
    }
    int a_bc = DP__BCAST_FULL, b_bc = DP__BCAST_FULL;
    if (same_shape(a, b)) {
        if (a->nhwc != b->nhwc) /* meet in logical order */
            DP_TRY(dp_reshape(a->nhwc ? &a : &b, a->nhwc ? a : b, a->ndim, a->shape));
        if (bop == DP_BINARY_ADD)
            return dp_add(out, a, b);
    } else if ((b_bc = broadcast_kind(b, a)) < 0 && (a_bc = broadcast_kind(a, b)) < 0) {
        DP_ERROR("%s: shapes %s and %s: broadcasting is supported over channels (1, C, 1, 1), "
                 "(C, 1, 1), (1, C), per sample and channel (N, C, 1, 1), or from one element",
                 op, dp_tensor_shape_str(a, as, sizeof as), dp_tensor_shape_str(b, bs, sizeof bs));
        return DP_ESHAPE;
    } else if (b_bc >= 0) {
        a_bc = DP__BCAST_FULL;
    } else {
        b_bc = DP__BCAST_FULL;
    }
    dp_device_t *dev = a->dev;
    if (!dev->ops->binary_forward || !dev->ops->binary_backward) {
        DP_ERROR("%s: not implemented on %s", op, dev->name);
        return DP_ENOTSUP;
    }
    DP_TRY(dp__as_f32(&a));
    DP_TRY(dp__as_f32(&b));
    ts[0] = a;
    ts[1] = b;
    dp_tensor_t *full = a_bc == DP__BCAST_FULL ? a : b, *y;
    DP_TRY(dp__tape_alloc_like(&y, full));
    dp__binary_args k;
    memset(&k, 0, sizeof k);
    k.op = (dp__binary_op)bop;
    k.a_bcast = (dp__broadcast)a_bc;
    k.b_bcast = (dp__broadcast)b_bc;
    k.a = a->data;
    k.b = b->data;
    k.y = y->data;
    sizes_of(&k, full);
    if (dp__numel(y->ndim, y->shape) > 0)
        DP_TRY(dev->ops->binary_forward(dev, &k));
    dp__tensor_written(y);
    if (dp__tape_needs_grad(ts, 2)) {
        dp__binary_node bn = {k.op, k.a_bcast, k.b_bcast};
        DP_TRY(dp__tape_record(DP__OP_binary, binary_backward, ts, 2, y, &bn, sizeof bn));
    }
    *out = y;
    return 0;
}
