/* torch.chunk, scatter and gather: each of scatter and gather is recorded on
 * the tape, and each is the other's backward. Copies between devices go
 * through dp__copy_between (comm/comm.h), ordered by events. */
#include "dp/parallel.h"

#include "autograd/tape.h"
#include "comm/comm.h"
#include "core/internal.h"
#include "device/storage.h"

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

static void shape_of(const dp_tensor_t *t, int64_t *shape)
{
    for (int i = 0; i < dp_tensor_ndim(t); i++)
        shape[i] = dp_tensor_dim(t, i);
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
    if (!dp__grad_written(x)) {
        DP_TRY(dp__grad_begin(x, &dx));
        DP_TRY(dp_tensor_fill(dx, 0.0f));
        DP_TRY(dp__grad_end(x, dx));
    }
    /* Copy into a temporary on x's device, then add into the rows. */
    int64_t shape[DP_MAX_DIMS];
    shape_of(piece, shape);
    dp_tensor_t *tmp, *piece_grad = dp_tensor_grad(piece);
    DP_TRY(dp__tape_alloc(&tmp, dp_tensor_device(x), DP_F32, dp_tensor_ndim(piece), shape, 0));
    DP_TRY(dp__copy_between(tmp, 0, piece_grad, 0, dp__tensor_bytes(piece_grad)));
    int64_t row_elems = (int64_t)(dp__tensor_row_bytes(x) / 4);
    DP_TRY(
        dp__range_add(dp_tensor_grad(x), pn->row_offset * row_elems, tmp, 0, dp_tensor_numel(tmp)));
    dp__grad_touch(x);
    x->ag->grad_masked = 0;
    return 0;
}

int dp_scatter(dp_tensor_t **chunks, int *nchunks, dp_tensor_t *x, dp_device_t *const *devs, int n)
{
    char xs[64];
    if (!x || n < 1 || n > DP_MAX_DEVICES || dp_tensor_ndim(x) < 1) {
        DP_ERROR("scatter: need a tensor with a batch dimension and 1..%d devices", DP_MAX_DEVICES);
        return DP_EINVAL;
    }
    if (dp__tensor_nhwc(x)) {
        DP_ERROR("scatter: %s must be in logical layout", dp_tensor_shape_str(x, xs, sizeof xs));
        return DP_EINVAL;
    }
    int64_t sizes[DP_MAX_DEVICES];
    int count = dp_chunk_sizes(dp_tensor_dim(x, 0), n, sizes);
    size_t rb = dp__tensor_row_bytes(x);
    int64_t offset = 0;
    for (int k = 0; k < count; k++) {
        int64_t shape[DP_MAX_DIMS];
        shape_of(x, shape);
        shape[0] = sizes[k];
        dp_tensor_t *piece;
        DP_TRY(dp__tape_alloc(&piece, devs[k], dp_tensor_dtype(x), dp_tensor_ndim(x), shape, 0));
        DP_TRY(dp__copy_between(piece, 0, x, (size_t)offset * rb, (size_t)sizes[k] * rb));
        if (dp__tape_needs_grad(&x, 1)) {
            piece_node pn = {offset};
            DP_TRY(dp__tape_record(DP__OP_scatter, piece_backward, &x, 1, piece, &pn, sizeof pn));
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
    size_t rb = dp__tensor_row_bytes(x);
    DP_TRY(dp__copy_between(dx, 0, dp_tensor_grad(out), (size_t)pn->row_offset * rb,
                            (size_t)dp_tensor_dim(x, 0) * rb));
    return dp__grad_end(x, dx);
}

int dp_gather(dp_tensor_t **out, dp_tensor_t *const *xs, int n, dp_device_t *dst)
{
    if (n < 1 || n > DP_MAX_DEVICES) {
        DP_ERROR("gather: need 1..%d tensors", DP_MAX_DEVICES);
        return DP_EINVAL;
    }
    int64_t shape[DP_MAX_DIMS];
    shape_of(xs[0], shape);
    shape[0] = 0;
    int ndim = dp_tensor_ndim(xs[0]);
    for (int k = 0; k < n; k++) {
        int same = dp_tensor_ndim(xs[k]) == ndim &&
                   dp_tensor_dtype(xs[k]) == dp_tensor_dtype(xs[0]) && !dp__tensor_nhwc(xs[k]);
        for (int i = 1; same && i < ndim; i++)
            same = dp_tensor_dim(xs[k], i) == dp_tensor_dim(xs[0], i);
        if (!same) {
            DP_ERROR("gather: piece %d differs in shape, type or layout from piece 0", k);
            return DP_ESHAPE;
        }
        shape[0] += dp_tensor_dim(xs[k], 0);
    }
    dp_tensor_t *y;
    DP_TRY(dp__tape_alloc(&y, dst, dp_tensor_dtype(xs[0]), ndim, shape, 0));
    size_t rb = dp__tensor_row_bytes(xs[0]);
    int64_t offset = 0;
    for (int k = 0; k < n; k++) {
        DP_TRY(dp__copy_between(y, (size_t)offset * rb, xs[k], 0,
                                (size_t)dp_tensor_dim(xs[k], 0) * rb));
        offset += dp_tensor_dim(xs[k], 0);
    }
    offset = 0;
    for (int k = 0; k < n; k++) {
        if (dp__tape_needs_grad(&xs[k], 1)) {
            piece_node pn = {offset};
            DP_TRY(dp__tape_record(DP__OP_gather, gather_piece_backward, &xs[k], 1, y, &pn,
                                   sizeof pn));
        }
        offset += dp_tensor_dim(xs[k], 0);
    }
    *out = y;
    return 0;
}
