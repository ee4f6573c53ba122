/* Split-invariant accumulation over micro-batches (dp_set_split_invariant).
 *
 * A stage adds its micro-batches' gradients as their backward passes end:
 * ((g0 + g1) + g2) + g3. One device's whole-batch sum of the same blocks
 * is the tree (g0 + g1) + (g2 + g3) (ops/split_invariant.c), and so is the
 * allreduce of 4 devices, one micro-batch's rows each, when it adds
 * pairwise. With split-invariant sums each micro-batch's backward writes a
 * stage's gradient buffer afresh; the buffer is then pushed onto a binary
 * counter of partial sums (a stack whose entries cover 2^level
 * micro-batches, merged pairwise as they fill), and the step's sum is left
 * in the buffer at the end. Micro-batches whose backward runs in reverse
 * order pair the same way: a + b = b + a. */
#include "parallel/pipeline.h"

#include "core/internal.h"

/* The binary counter of stage k of pipeline d. */
static dp__pipeline_tree *tree_of(dp_pipeline_t *p, int d, int k)
{
    return &p->tree[d * p->K + k];
}

bool dp__pipeline_tree_on(int m_count)
{
    return m_count > 1 && dp_get_split_invariant() > 0;
}

int dp__pipeline_tree_begin(dp_pipeline_t *p, int d, int k)
{
    /* The micro-batch's first contribution to each gradient writes. */
    dp_params_zero_grad(dp_model_params(stage_replica(p, d, k)));
    return 0;
}

int dp__pipeline_tree_push(dp_pipeline_t *p, int d, int k)
{
    dp_params_t *params = dp_model_params(stage_replica(p, d, k));
    /* the parameters of other stages got nothing: zeros */
    DP_TRY(dp_params_finish_grad(params));
    dp_tensor_t *grads = dp_params_grads(params);
    int64_t n = dp_tensor_numel(grads);
    dp__pipeline_tree *t = tree_of(p, d, k);
    if (t->depth == DP__PIPELINE_TREE_LEVELS)
        return DP_EINVAL; /* more than 2^LEVELS micro-batches: cannot happen */
    if (!t->level[t->depth])
        DP_TRY(dp_tensor_new(&t->level[t->depth], stage_device(p, d, k), DP_F32, 1, &n));
    DP_TRY(dp__copy_written(t->level[t->depth], grads, true));
    t->covers[t->depth++] = 1;
    for (; t->depth >= 2 && t->covers[t->depth - 1] == t->covers[t->depth - 2]; t->depth--) {
        DP_TRY(dp__range_add(t->level[t->depth - 2], 0, t->level[t->depth - 1], 0, n));
        t->covers[t->depth - 2] *= 2;
    }
    return 0;
}

int dp__pipeline_tree_end(dp_pipeline_t *p, int d, int k)
{
    dp_params_t *params = dp_model_params(stage_replica(p, d, k));
    dp_tensor_t *grads = dp_params_grads(params);
    int64_t n = dp_tensor_numel(grads);
    dp__pipeline_tree *t = tree_of(p, d, k);
    if (t->depth == 0)
        return 0;
    /* A count that is not a power of two: the unequal subtrees from the
     * right, the same way every step. */
    for (; t->depth >= 2; t->depth--)
        DP_TRY(dp__range_add(t->level[t->depth - 2], 0, t->level[t->depth - 1], 0, n));
    t->depth = 0;
    DP_TRY(dp__copy_written(grads, t->level[0], true));
    /* Each parameter's gradient, a view of the buffer, is written now:
     * what waits for it (the allreduce's buckets) waits for this copy. */
    for (int i = 0; i < dp_params_count(params); i++)
        dp__tensor_written(dp_tensor_grad(dp_params_get(params, i)));
    return 0;
}

void dp__pipeline_tree_close(dp_pipeline_t *p)
{
    for (int i = 0; p->tree && i < p->D * p->K; i++)
        for (int l = 0; l < DP__PIPELINE_TREE_LEVELS; l++)
            dp_tensor_free(p->tree[i].level[l]);
    dp__free(p->tree);
    p->tree = NULL;
}
