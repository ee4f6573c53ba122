/* concat and split along axis 1 (channels) of (N, C, H, W) tensors, either
 * layout each, or of (N, K) matrices, as torch.cat(xs, 1) and
 * torch.split(x, sizes, 1). Concat's output is NHWC when any input is (a
 * network's activations after a convolution), else NCHW; split's pieces
 * keep their input's layout. Each piece is one copy of a channel range
 * (the channel_copy kernel, either layout on either side). Backward: each
 * input of a concat gets its channels of the gradient (=); a split's input
 * gets each piece's gradient in its channels, the first piece to arrive
 * writing zeros elsewhere and the others adding into their channels in
 * place, so no full-size temporary is made per piece.
 *
 * A tape node has at most DP__NODE_INPUTS inputs, so a concat of more
 * (a DenseNet's block concatenates every earlier layer's features) records
 * one node per group of inputs, all with the same output; each passes its
 * own inputs their channels. Inputs of a concat are f32 or bf16; when they
 * differ, all are cast to f32. */
#include "ops/nodes.h"

#include <string.h>

/* 2-D and 4-D tensors; the copy kernel sees (N, C) as (N, C, 1, 1). */
static dp__tdesc desc4(const dp_tensor_t *t)
{
    dp__tdesc d = dp__desc(t);
    if (t->ndim == 2) {
        d.ndim = 4;
        d.shape[2] = d.shape[3] = 1;
        d.nhwc = 0;
    }
    return d;
}

static int copy_channels(const dp_tensor_t *src, int64_t src_off, dp_tensor_t *dst, int64_t dst_off,
                         int64_t count, bool accumulate)
{
    dp__channel_copy_args a;
    memset(&a, 0, sizeof a);
    a.src = desc4(src);
    a.dst = desc4(dst);
    a.src_off = src_off;
    a.dst_off = dst_off;
    a.count = count;
    a.accumulate = accumulate;
    if (count == 0 || dp__numel(src->ndim, src->shape) == 0 ||
        dp__numel(dst->ndim, dst->shape) == 0)
        return 0;
    return src->dev->ops->channel_copy(src->dev, &a);
}

static int concat_backward(dp__node *node)
{
    const dp__concat_node *cn = (const dp__concat_node *)node->params;
    dp_tensor_t *g = node->output->ag->grad;
    for (int i = 0; i < node->ninputs; i++) {
        dp_tensor_t *x = node->inputs[i], *dx;
        DP_TRY(dp__grad_begin(x, &dx));
        if (!dx)
            continue;
        DP_TRY(copy_channels(g, cn->offset[i], dx, 0, x->shape[1], false));
        DP_TRY(dp__grad_end(x, dx));
    }
    return 0;
}

/* Checks that xs[0..n) can be concatenated or are one tensor to split. */
static int check_pieces(const char *op, dp_tensor_t *const *xs, int n)
{
    char s0[64], si[64];
    for (int i = 0; i < n; i++) {
        DP_TRY(dp__check_rank(op, "input", xs[i], -1));
        const dp_tensor_t *x = xs[i], *x0 = xs[0];
        bool ok =
            (x->ndim == 2 || x->ndim == 4) && x->ndim == x0->ndim && x->shape[0] == x0->shape[0];
        for (int d = 2; ok && d < x->ndim; d++)
            ok = x->shape[d] == x0->shape[d];
        if (!ok) {
            DP_ERROR("%s: %s and %s: (N, C, H, W) or (N, K) tensors that differ in axis 1 only", op,
                     dp_tensor_shape_str(x0, s0, sizeof s0), dp_tensor_shape_str(x, si, sizeof si));
            return DP_ESHAPE;
        }
    }
    return dp__check_same_device(op, xs, n);
}

int dp_concat(dp_tensor_t **out, dp_tensor_t *const *inputs, int n)
{
    const char *op = dp__op_name(DP__OP_concat);
    if (n < 1 || !inputs) {
        DP_ERROR("%s: needs at least one input", op);
        return DP_EINVAL;
    }
    DP_TRY(check_pieces(op, inputs, n));
    dp_device_t *dev = inputs[0]->dev;
    if (!dev->ops->channel_copy) {
        DP_ERROR("%s: not implemented on %s", op, dev->name);
        return DP_ENOTSUP;
    }
    dp_tensor_t **xs = dp__malloc((size_t)n * sizeof *xs);
    if (!xs)
        return DP_ENOMEM;
    memcpy(xs, inputs, (size_t)n * sizeof *xs);
    bool mixed = false;
    int nhwc = 0;
    int64_t shape[4];
    memcpy(shape, xs[0]->shape, sizeof shape);
    shape[1] = 0;
    for (int i = 0; i < n; i++) {
        mixed = mixed || xs[i]->dtype != xs[0]->dtype;
        nhwc = nhwc || xs[i]->nhwc;
        shape[1] += xs[i]->shape[1];
    }
    int rc = 0;
    for (int i = 0; mixed && rc == 0 && i < n; i++)
        rc = dp__as_f32(&xs[i]);
    dp_tensor_t *y = NULL;
    if (rc == 0)
        rc = dp__tape_alloc(&y, dev, xs[0]->dtype, xs[0]->ndim, shape, nhwc);
    int64_t off = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        rc = copy_channels(xs[i], 0, y, off, xs[i]->shape[1], false);
        off += xs[i]->shape[1];
    }
    if (rc == 0)
        dp__tensor_written(y);
    /* One node per group of inputs, all writing y's gradient to theirs. */
    off = 0;
    for (int first = 0; rc == 0 && first < n; first += DP__NODE_INPUTS) {
        int k = n - first < DP__NODE_INPUTS ? n - first : DP__NODE_INPUTS;
        dp__concat_node cn;
        memset(&cn, 0, sizeof cn);
        for (int i = 0; i < k; i++) {
            cn.offset[i] = off;
            off += xs[first + i]->shape[1];
        }
        if (dp__tape_needs_grad(xs + first, k))
            rc = dp__tape_record(DP__OP_concat, concat_backward, xs + first, k, y, &cn, sizeof cn);
    }
    dp__free(xs);
    DP_TRY(rc);
    *out = y;
    return 0;
}

static int split_backward(dp__node *node)
{
    const dp__split_node *sn = (const dp__split_node *)node->params;
    dp_tensor_t *x = node->inputs[0], *y = node->output, *g = y->ag->grad;
    if (!x->ag)
        return 0;
    if (dp__grad_written(x)) {
        /* A later piece: into its channels of the gradient, in place. */
        DP_TRY(copy_channels(g, 0, x->ag->grad, sn->offset, y->shape[1], true));
        dp__tensor_written(x->ag->grad);
        x->ag->grad_masked = 0;
        dp__grad_touch(x);
        return 0;
    }
    dp_tensor_t *dx;
    DP_TRY(dp__grad_begin(x, &dx));
    dp__fill_args z = {dx->data, dp__numel(dx->ndim, dx->shape), 0.0f, dx->dtype};
    if (z.n > 0)
        DP_TRY(x->dev->ops->fill(x->dev, &z));
    DP_TRY(copy_channels(g, 0, dx, sn->offset, y->shape[1], false));
    return dp__grad_end(x, dx);
}

int dp_split(dp_tensor_t **outs, dp_tensor_t *x, int n, const int64_t *sizes)
{
    const char *op = dp__op_name(DP__OP_split);
    char xs[64];
    DP_TRY(check_pieces(op, &x, 1));
    int64_t total = 0;
    bool negative = false;
    for (int i = 0; i < n && sizes; i++) {
        negative = negative || sizes[i] < 0;
        total += sizes[i];
    }
    if (n < 1 || !sizes || !outs || negative || total != x->shape[1]) {
        DP_ERROR("%s: %d pieces of %s: sizes that are not negative and add up to its %lld "
                 "channels",
                 op, n, dp_tensor_shape_str(x, xs, sizeof xs), (long long)x->shape[1]);
        return DP_ESHAPE;
    }
    if (!x->dev->ops->channel_copy || !x->dev->ops->fill) {
        DP_ERROR("%s: not implemented on %s", op, x->dev->name);
        return DP_ENOTSUP;
    }
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        int64_t shape[4];
        memcpy(shape, x->shape, sizeof shape);
        shape[1] = sizes[i];
        dp_tensor_t *y;
        DP_TRY(dp__tape_alloc(&y, x->dev, x->dtype, x->ndim, shape, x->nhwc));
        DP_TRY(copy_channels(x, off, y, 0, sizes[i], false));
        dp__tensor_written(y);
        if (dp__tape_needs_grad(&x, 1)) {
            dp__split_node sn = {off};
            DP_TRY(dp__tape_record(DP__OP_split, split_backward, &x, 1, y, &sn, sizeof sn));
        }
        outs[i] = y;
        off += sizes[i];
    }
    return 0;
}
