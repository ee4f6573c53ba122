/* Split-invariant sums over the batch (dp_set_split_invariant).
 *
 * A parameter's gradient is a sum over the batch's rows. One device adds
 * its 64 rows in the order its kernel likes; two devices each add 32 and
 * the allreduce adds the two halves: another order, another rounding.
 * ReLU and max-pool flips then grow that last bit by orders of magnitude a
 * step. With `rows` set, every such sum is taken over blocks of `rows`
 * samples, each by the same kernel on the same shapes, and the blocks are
 * added pairwise in a fixed binary tree (block 0 + block 1, blocks 2 + 3,
 * then those two, ...). A device's share of 2^j blocks is a whole subtree,
 * so the allreduce's a + b of two halves is the tree's own last addition:
 * one device, two devices and two MPI ranks give the same bits.
 *
 * Kernels whose work is per sample (a convolution's forward and backward-
 * data passes, a linear layer's matrix products over the rows) may still
 * pick another algorithm, and so another order of their inner sums, for
 * 8 rows than for 32; with blocks set they run block by block too
 * (dp__for_blocks), so every kernel sees the same shapes on every split.
 *
 * The tree is built as the blocks arrive, as a binary counter: a stack of
 * partial sums, each covering 2^level blocks, where a new block merges
 * with the top while the top covers as many blocks as it does. The result
 * lands in the first slot, the caller's output. */
#include "ops/op.h"

#include <stdatomic.h>

static _Atomic int64_t split_rows = 0;

void dp_set_split_invariant(int64_t rows)
{
    atomic_store(&split_rows, rows > 0 ? rows : 0);
}

int64_t dp_get_split_invariant(void)
{
    return atomic_load(&split_rows);
}

/* The stack can hold a tree of 2^(MAX_LEVELS - 1) blocks and more. */
enum { MAX_LEVELS = 48, MAX_OUTS = 4 };

static int accumulate(dp_device_t *dev, dp_tensor_t *into, const dp_tensor_t *from)
{
    dp__eltwise_args a = {.op = DP__ELT_ACCUMULATE,
                          .a = from->data,
                          .out = into->data,
                          .n = dp__numel(into->ndim, into->shape),
                          .dtype = into->dtype};
    return dev->ops->eltwise(dev, &a);
}

int dp__split_sums(dp_device_t *dev, int64_t rows, int n, dp_tensor_t *const *out, dp__block_sum fn,
                   void *ctx)
{
    DP_ASSERT(n >= 1 && n <= MAX_OUTS);
    int64_t block = dp_get_split_invariant();
    if (block <= 0 || rows <= block)
        return fn(ctx, 0, rows, out);
    /* slot[level][i]: the partial sum of output i at that stack level;
     * level 0 is the caller's output, the deeper ones scratch. */
    dp_tensor_t *slot[MAX_LEVELS][MAX_OUTS];
    int64_t covers[MAX_LEVELS];
    int depth = 0, allocated = 1;
    for (int i = 0; i < n; i++)
        slot[0][i] = out[i];
    for (int64_t row0 = 0; row0 < rows; row0 += block) {
        int64_t count = DP_MIN(block, rows - row0);
        if (depth == allocated) {
            DP_ASSERT(allocated < MAX_LEVELS);
            for (int i = 0; i < n; i++)
                DP_TRY(dp__tape_alloc_like(&slot[allocated][i], out[i]));
            allocated++;
        }
        DP_TRY(fn(ctx, row0, count, slot[depth]));
        covers[depth++] = 1;
        while (depth >= 2 && covers[depth - 1] == covers[depth - 2]) {
            for (int i = 0; i < n; i++)
                DP_TRY(accumulate(dev, slot[depth - 2][i], slot[depth - 1][i]));
            covers[depth - 2] *= 2;
            depth--;
        }
    }
    /* A count of blocks that is not a power of two leaves unequal
     * subtrees: added from the right, the same way every time. */
    for (; depth >= 2; depth--)
        for (int i = 0; i < n; i++)
            DP_TRY(accumulate(dev, slot[depth - 2][i], slot[depth - 1][i]));
    return 0;
}

dp__tdesc dp__rows_of(dp__tdesc d, int64_t row0, int64_t count)
{
    if (!d.data || d.shape[0] == 0)
        return d;
    int64_t per_row = 1;
    for (int i = 1; i < d.ndim; i++)
        per_row *= d.shape[i];
    d.data = (char *)d.data + (size_t)(row0 * per_row) * dp_dtype_size(d.dtype);
    d.shape[0] = count;
    return d;
}

int dp__for_blocks(int64_t rows, dp__block_fn fn, void *ctx)
{
    int64_t block = dp_get_split_invariant();
    if (block <= 0 || rows <= block)
        return fn(ctx, 0, rows);
    for (int64_t row0 = 0; row0 < rows; row0 += block)
        DP_TRY(fn(ctx, row0, DP_MIN(block, rows - row0)));
    return 0;
}

typedef struct gemm_rows {
    dp_device_t *dev;
    const dp__gemm_args *g;
} gemm_rows;

static int gemm_of_rows(void *ctx, int64_t row0, int64_t count)
{
    const gemm_rows *gr = ctx;
    dp__gemm_args g = *gr->g;
    g.m = count;
    g.a = (const char *)g.a + (size_t)(row0 * g.lda) * dp_dtype_size(g.a_dtype);
    g.c = (char *)g.c + (size_t)(row0 * g.ldc) * dp_dtype_size(g.c_dtype);
    return gr->dev->ops->gemm(gr->dev, &g);
}

int dp__gemm_rows(dp_device_t *dev, const dp__gemm_args *g)
{
    DP_ASSERT(!g->trans_a);
    gemm_rows gr = {dev, g};
    return dp__for_blocks(g->m, gemm_of_rows, &gr);
}

int dp__weight_grad_sums(dp_device_t *dev, int64_t rows, dp_tensor_t *w, dp_tensor_t *b,
                         dp__block_sum fn, void *ctx)
{
    dp_tensor_t *dw = NULL, *db = NULL;
    DP_TRY(dp__grad_begin(w, &dw));
    DP_TRY(dp__grad_begin(b, &db));
    if (!dw && !db)
        return 0;
    dp_tensor_t *scratch_dw = NULL, *scratch_db = NULL;
    if (!dw)
        DP_TRY(dp__tape_alloc_like(&scratch_dw, w));
    if (!db && b)
        DP_TRY(dp__tape_alloc_like(&scratch_db, b));
    dp_tensor_t *out[2] = {dw ? dw : scratch_dw, db ? db : scratch_db};
    DP_TRY(dp__split_sums(dev, rows, b ? 2 : 1, out, fn, ctx));
    DP_TRY(dp__grad_end(w, dw));
    return dp__grad_end(b, db);
}
