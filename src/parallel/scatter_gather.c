/* torch.chunk, scatter and gather: each of scatter and gather is recorded on
 * the tape, and each is the other's backward. Copies between devices go
 * through dp__copy_between (order.c), ordered by events. */
#include "dp/parallel.h"

#include "autograd/tape.h"
#include "core/internal.h"
#include "parallel/order.h"

#include <string.h>

int dp_chunk_sizes(int64_t rows, int n, int64_t *sizes)
{
    DP_ASSERT(n > 0 && rows >= 0);
    for (int k = 0; k < n; k++)
        sizes[k] = 0;
    if (rows == 0)
        return n; /* PyTorch: n empty chunks */
    int64_t size = (rows + n - 1) / n;
    int count = 0;
    for (int64_t start = 0; start < rows; start += size)
        sizes[count++] = DP_MIN(size, rows - start);
    return count;
}

static size_t row_bytes(const dp_tensor_t *t)
{
    size_t b = 4;
    for (int i = 1; i < t->ndim; i++)
        b *= (size_t)t->shape[i];
    return b;
}

/* ---- scatter and gather, each the other's backward ------------------------ */

/* Pieces of a scatter are recorded one node each: node k copies the grad of
 * piece k back into rows [offset, offset + n_k) of x's gradient. */
typedef struct piece_node {
    int64_t row_offset;
} piece_node;

static int piece_backward(dp__node *node)
{
    const piece_node *pn = (const piece_node *)node->params;
    dp_tensor_t *x = node->inputs[0], *piece = node->output, *dx;
    /* All pieces of one scatter write disjoint rows of x's gradient. The
     * first piece to arrive allocates it and zeroes it (pieces may not cover
     * every row when a replica got no chunk), later ones add their rows. */
    if (!x->ag)
        return 0;
    if (!x->ag->grad || !x->ag->grad_written) {
        DP_TRY(dp__grad_begin(x, &dx));
        DP_TRY(dp_tensor_fill(dx, 0.0f));
        DP_TRY(dp__grad_end(x, dx));
    }
    size_t rb = row_bytes(x);
    /* Copy into a temporary on x's device, then add into the rows. */
    int64_t shape[DP_MAX_DIMS];
    memcpy(shape, piece->shape, sizeof shape);
    dp_tensor_t *tmp;
    DP_TRY(dp__tape_alloc(&tmp, x->dev, DP_F32, piece->ndim, shape, 0));
    DP_TRY(dp__copy_between(x->dev, tmp->data, piece->dev, piece->ag->grad->data,
                            (size_t)piece->shape[0] * rb));
    dp__eltwise_args a = {.op = DP__ELT_ACCUMULATE,
                          .a = tmp->data,
                          .out = (float *)x->ag->grad->data + pn->row_offset * (int64_t)(rb / 4),
                          .n = dp__numel(piece->ndim, piece->shape)};
    DP_TRY(x->dev->ops->eltwise(x->dev, &a));
    dp__tensor_written(x->ag->grad);
    dp__grad_touch(x);
    x->ag->grad_masked = 0;
    return 0;
}

int dp_scatter(dp_tensor_t **chunks, int *nchunks, dp_tensor_t *x, dp_device_t *const *devs, int n)
{
    char xs[64];
    if (!x || n < 1 || n > DP_MAX_DEVICES || x->ndim < 1) {
        DP_ERROR("scatter: need a tensor with a batch dimension and 1..%d devices", DP_MAX_DEVICES);
        return DP_EINVAL;
    }
    if (x->nhwc) {
        DP_ERROR("scatter: %s must be in logical layout", dp_tensor_shape_str(x, xs, sizeof xs));
        return DP_EINVAL;
    }
    int64_t sizes[DP_MAX_DEVICES];
    int count = dp_chunk_sizes(x->shape[0], n, sizes);
    size_t rb = row_bytes(x);
    int64_t offset = 0;
    for (int k = 0; k < count; k++) {
        int64_t shape[DP_MAX_DIMS];
        memcpy(shape, x->shape, sizeof shape);
        shape[0] = sizes[k];
        dp_tensor_t *piece;
        DP_TRY(dp__tape_alloc(&piece, devs[k], x->dtype, x->ndim, shape, 0));
        DP_TRY(dp__copy_between(devs[k], piece->data, x->dev, (char *)x->data + offset * rb,
                                (size_t)sizes[k] * rb));
        dp__tensor_written(piece);
        if (dp__tape_needs_grad(&x, 1)) {
            piece_node pn = {offset};
            DP_TRY(dp__tape_record("scatter", piece_backward, &x, 1, piece, &pn, sizeof pn));
        }
        chunks[k] = piece;
        offset += sizes[k];
    }
    *nchunks = count;
    return 0;
}

/* Gather: one node per input; node k copies rows of the output's gradient
 * back to input k's device. */
static int gather_piece_backward(dp__node *node)
{
    const piece_node *pn = (const piece_node *)node->params;
    dp_tensor_t *x = node->inputs[0], *out = node->output, *dx;
    DP_TRY(dp__grad_begin(x, &dx));
    if (!dx)
        return 0;
    size_t rb = row_bytes(x);
    DP_TRY(dp__copy_between(x->dev, dx->data, out->dev,
                            (char *)out->ag->grad->data + pn->row_offset * rb,
                            (size_t)x->shape[0] * rb));
    return dp__grad_end(x, dx);
}

int dp_gather(dp_tensor_t **out, dp_tensor_t *const *xs, int n, dp_device_t *dst)
{
    if (n < 1 || n > DP_MAX_DEVICES) {
        DP_ERROR("gather: need 1..%d tensors", DP_MAX_DEVICES);
        return DP_EINVAL;
    }
    int64_t shape[DP_MAX_DIMS];
    memcpy(shape, xs[0]->shape, sizeof shape);
    shape[0] = 0;
    for (int k = 0; k < n; k++) {
        int same = xs[k]->ndim == xs[0]->ndim && xs[k]->dtype == xs[0]->dtype && !xs[k]->nhwc;
        for (int i = 1; same && i < xs[0]->ndim; i++)
            same = xs[k]->shape[i] == xs[0]->shape[i];
        if (!same) {
            DP_ERROR("gather: piece %d differs in shape, type or layout from piece 0", k);
            return DP_ESHAPE;
        }
        shape[0] += xs[k]->shape[0];
    }
    dp_tensor_t *y;
    DP_TRY(dp__tape_alloc(&y, dst, xs[0]->dtype, xs[0]->ndim, shape, 0));
    size_t rb = row_bytes(xs[0]);
    int64_t offset = 0;
    for (int k = 0; k < n; k++) {
        DP_TRY(dp__copy_between(dst, (char *)y->data + offset * rb, xs[k]->dev, xs[k]->data,
                                (size_t)xs[k]->shape[0] * rb));
        offset += xs[k]->shape[0];
    }
    dp__tensor_written(y);
    offset = 0;
    for (int k = 0; k < n; k++) {
        if (dp__tape_needs_grad(&xs[k], 1)) {
            piece_node pn = {offset};
            DP_TRY(dp__tape_record("gather", gather_piece_backward, &xs[k], 1, y, &pn, sizeof pn));
        }
        offset += xs[k]->shape[0];
    }
    *out = y;
    return 0;
}
