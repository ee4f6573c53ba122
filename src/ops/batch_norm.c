/* batch_norm2d: y (N, C, H, W) = gamma (C) xhat + beta (C) [then ReLU],
 * xhat = (x - mean) / sqrt(var + eps) per channel over (N, H, W).
 * batch_norm1d: the same over x (N, C) or (N, C, L), statistics over N (and
 * L), as PyTorch's BatchNorm1d: the kernels see it as (N, C, 1, 1) or
 * (N, C, L, 1), where both layouts are the same memory.
 * Training: the batch's mean and biased var; running_mean and running_var
 * (C) are updated in place, the var unbiased (n / (n - 1), n = N H W), as
 * PyTorch. Eval: the running statistics, as constants.
 * Backward: dx written (=); dgamma, dbeta accumulated into the parameters'
 * gradients. The running statistics are not differentiable inputs.
 * The output keeps x's layout and dtype (f32 or bf16; the statistics,
 * gamma and beta are f32). The statistics the forward used (C each,
 * mean then var) are kept in a tensor of the tape for the backward pass,
 * so a later forward that moves the running ones cannot change it. */
#include "ops/batch_norm_add.h"
#include "ops/bn_exchange.h"
#include "ops/nodes.h"

#include <math.h>
#include <string.h>

/* Training's forward or backward pass of a SyncBatchNorm replica: this
 * shard's sums (the batch_norm_sums kernel), the group's exchange of them
 * (src/comm/ issues it, ops/bn_exchange.h), then the pass on the group's
 * sums. Every step is a command on dev's stream, in that order. */
static int sync_pass(dp_device_t *dev, dp__batch_norm_args *a, const dp_batch_norm_params *p,
                     bool backward)
{
    typedef int (*kernel)(dp_device_t *, const dp__batch_norm_args *);
    kernel sums_kernel =
        backward ? dev->ops->batch_norm_sums_backward : dev->ops->batch_norm_sums_forward;
    kernel pass = backward ? dev->ops->batch_norm_backward : dev->ops->batch_norm_forward;
    int64_t len = 1 + 2 * a->x.shape[1];
    size_t bytes = (size_t)len * sizeof(double);
    double *sums = dp__device_alloc(dev, bytes);
    if (!sums)
        return DP_ENOMEM;
    a->sums = sums;
    a->totals = sums;
    int rc = sums_kernel(dev, a);
    if (rc == 0)
        rc = dp__bn_exchange_of(p->sync)->issue(p->sync, dev, p->rank, p->ranks, sums, len);
    if (rc == 0)
        rc = pass(dev, a);
    dp__device_release_later(dev, sums, bytes);
    return rc;
}

/* t described for the kernels as 4-D: (N, C) as (N, C, 1, 1), (N, C, L) as
 * (N, C, L, 1). */
static dp__tdesc bn_desc(const dp_tensor_t *t)
{
    dp__tdesc d = dp__desc(t);
    if (t && t->ndim < 4) {
        d.shape[2] = t->ndim == 3 ? t->shape[2] : 1;
        d.shape[3] = 1;
        d.ndim = 4;
        d.nhwc = 0;
    }
    return d;
}

/* Batch norm's backward pass from dy (already through any ReLU after it):
 * dx, dgamma and dbeta where each needs one. */
static int backward_from(const dp_batch_norm_params *p, dp_tensor_t *x, dp_tensor_t *gamma,
                         dp_tensor_t *beta, dp_tensor_t *stats, dp_tensor_t *dy)
{
    dp_device_t *dev = x->dev;
    int64_t C = x->shape[1];
    dp_tensor_t *dx = NULL, *dgamma = NULL, *dbeta = NULL;
    DP_TRY(dp__grad_begin(x, &dx));
    DP_TRY(dp__grad_begin(gamma, &dgamma));
    DP_TRY(dp__grad_begin(beta, &dbeta));
    /* oneDNN computes all three together; those not needed go to scratch. */
    dp_tensor_t *scratch_dx = NULL, *scratch_dgamma = NULL, *scratch_dbeta = NULL;
    if (!dx)
        DP_TRY(dp__tape_alloc_like(&scratch_dx, x));
    if (!dgamma)
        DP_TRY(dp__tape_alloc_like(&scratch_dgamma, gamma));
    if (!dbeta)
        DP_TRY(dp__tape_alloc_like(&scratch_dbeta, beta));
    dp__batch_norm_args a;
    memset(&a, 0, sizeof a);
    a.x = bn_desc(x);
    a.dy = bn_desc(dy);
    a.dx = bn_desc(dx ? dx : scratch_dx);
    a.gamma = gamma->data;
    a.beta = beta->data;
    a.dgamma = (dgamma ? dgamma : scratch_dgamma)->data;
    a.dbeta = (dbeta ? dbeta : scratch_dbeta)->data;
    a.save_mean = stats->data;
    a.save_var = (float *)stats->data + C;
    a.relu = p->relu;
    a.eps = p->eps;
    a.training = p->training;
    a.block_rows = dp_get_split_invariant();
    if (p->sync && p->training) {
        /* A replica in a SyncBatchNorm group joins every exchange. */
        DP_TRY(sync_pass(dev, &a, p, true));
    } else if (dp__numel(x->ndim, x->shape) > 0) {
        DP_TRY(dev->ops->batch_norm_backward(dev, &a));
    } else {
        /* An empty batch (eval only): no gradient for gamma and beta. */
        dp__fill_args zg = {a.dgamma, C, 0.0f, DP_F32}, zb = {a.dbeta, C, 0.0f, DP_F32};
        DP_TRY(dev->ops->fill(dev, &zg));
        DP_TRY(dev->ops->fill(dev, &zb));
    }
    DP_TRY(dp__grad_end(x, dx));
    DP_TRY(dp__grad_end(gamma, dgamma));
    DP_TRY(dp__grad_end(beta, dbeta));
    return 0;
}

static int batch_norm_backward(dp__node *node)
{
    const dp__batch_norm_node *bn = (const dp__batch_norm_node *)node->params;
    dp_tensor_t *y = node->output, *dy = y->ag->grad;
    /* Through the fused ReLU first, as conv2d. */
    if (bn->p.relu)
        DP_TRY(dp__relu_masked_grad(y, &dy));
    return backward_from(&bn->p, node->inputs[0], node->inputs[1], node->inputs[2], node->saved,
                         dy);
}

static int check_vector(const char *op, const char *what, const dp_tensor_t *v, int64_t C)
{
    char vs[64];
    DP_TRY(dp__check_rank(op, what, v, 1));
    if (v->dtype != DP_F32) {
        DP_ERROR("%s: %s must be float32", op, what);
        return DP_EINVAL;
    }
    if (v->shape[0] != C) {
        DP_ERROR("%s: %s %s does not match the input's %lld channels", op, what,
                 dp_tensor_shape_str(v, vs, sizeof vs), (long long)C);
        return DP_ESHAPE;
    }
    return 0;
}

static int record_add(dp_tensor_t *const *ts, dp_tensor_t *residual, dp_tensor_t *y,
                      dp_tensor_t *stats, const dp__batch_norm_node *bn);

/* x (N, C, H, W) for batch_norm2d, (N, C) or (N, C, L) for batch_norm1d.
 * With a residual (batch_norm2d only, which fusable() admitted): y =
 * batch_norm(x) + residual [then ReLU], the batch_norm_add kernel. */
static int batch_norm(dp__op id, dp_tensor_t **out, dp_tensor_t *x, dp_tensor_t *gamma,
                      dp_tensor_t *beta, dp_tensor_t *running_mean, dp_tensor_t *running_var,
                      dp_tensor_t *residual, const dp_batch_norm_params *params)
{
    const char *op = dp__op_name(id);
    char xs[64];
    dp_batch_norm_params p = params ? *params : (dp_batch_norm_params){0};
    if (p.momentum == 0.0f)
        p.momentum = 0.1f;
    if (p.eps == 0.0f)
        p.eps = 1e-5f;
    if (!(p.momentum > 0.0f && p.momentum <= 1.0f) || !(p.eps > 0.0f) || !isfinite(p.eps)) {
        DP_ERROR("%s: momentum must be in (0, 1] and eps positive", op);
        return DP_EINVAL;
    }
    dp__tdesc xd = bn_desc(x);
    int64_t N = xd.shape[0], C = xd.shape[1], H = xd.shape[2], W = xd.shape[3];
    DP_TRY(check_vector(op, "gamma", gamma, C));
    DP_TRY(check_vector(op, "beta", beta, C));
    DP_TRY(check_vector(op, "running_mean", running_mean, C));
    DP_TRY(check_vector(op, "running_var", running_var, C));
    dp_tensor_t *ts[] = {x, gamma, beta, running_mean, running_var};
    DP_TRY(dp__check_same_device(op, ts, 5));
    if (p.training && N * H * W <= 1) {
        DP_ERROR("%s: Expected more than 1 value per channel when training, got input size %s", op,
                 dp_tensor_shape_str(x, xs, sizeof xs));
        return DP_EINVAL;
    }
    dp_device_t *dev = x->dev;
    if (!dev->ops->batch_norm_forward || !dev->ops->batch_norm_backward) {
        DP_ERROR("%s: not implemented on %s", op, dev->name);
        return DP_ENOTSUP;
    }
    bool sync = p.sync && p.training;
    if (sync && (!dev->ops->batch_norm_sums_forward || !dev->ops->batch_norm_sums_backward)) {
        DP_ERROR("%s: SyncBatchNorm is not implemented on %s (its backend has no batch_norm_sums "
                 "kernels); train without sync_bn",
                 op, dev->name);
        return DP_ENOTSUP;
    }
    if (sync && (p.rank < 0 || p.rank >= p.ranks)) {
        DP_ERROR("%s: rank %d outside the group of %d", op, p.rank, p.ranks);
        return DP_EINVAL;
    }
    /* Only x, gamma and beta (and the residual) are differentiable. */
    dp_tensor_t *diff[] = {x, gamma, beta, residual};
    int record = dp__tape_needs_grad(diff, residual ? 4 : 3);
    dp_tensor_t *y, *stats = NULL;
    DP_TRY(dp__tape_alloc_like(&y, x));
    /* The statistics: mean, var (C each). */
    if (p.training || record) {
        int64_t floats = 2 * C;
        DP_TRY(dp__tape_alloc(&stats, dev, DP_F32, 1, &floats, 0));
    }
    dp__batch_norm_args a;
    memset(&a, 0, sizeof a);
    a.x = xd;
    a.y = bn_desc(y);
    a.gamma = gamma->data;
    a.beta = beta->data;
    a.running_mean = running_mean->data;
    a.running_var = running_var->data;
    a.save_mean = stats ? stats->data : NULL;
    a.save_var = stats ? (float *)stats->data + C : NULL;
    a.momentum = p.momentum;
    a.eps = p.eps;
    a.training = p.training;
    a.relu = p.relu;
    a.block_rows = dp_get_split_invariant();
    if (residual)
        a.residual = bn_desc(residual);
    int rc = 0;
    /* A replica in a SyncBatchNorm group must join every exchange. */
    if (N * C * H * W > 0 || sync) {
        rc = sync       ? sync_pass(dev, &a, &p, false)
             : residual ? dev->ops->batch_norm_add(dev, &a)
                        : dev->ops->batch_norm_forward(dev, &a);
        if (rc == 0 && p.training) {
            dp__tensor_written(running_mean);
            dp__tensor_written(running_var);
        }
    }
    if (stats && !dp__tape_current()) {
        /* No tape to own the statistics: released once the forward has run. */
        dp_tensor_free(stats);
        stats = NULL;
    }
    DP_TRY(rc);
    dp__tensor_written(y);
    if (record && residual) {
        dp__batch_norm_node bn = {p, running_mean, running_var};
        DP_TRY(record_add(ts, residual, y, stats, &bn));
    } else if (record) {
        dp__batch_norm_node bn = {p, running_mean, running_var};
        dp__saved saved = {.tensor = stats, .relu_output = p.relu};
        DP_TRY(dp__tape_record_saved(id, batch_norm_backward, ts, 3, y, &saved, &bn, sizeof bn));
    }
    *out = y;
    return 0;
}

int dp_batch_norm2d(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *gamma, dp_tensor_t *beta,
                    dp_tensor_t *running_mean, dp_tensor_t *running_var,
                    const dp_batch_norm_params *p)
{
    DP_TRY(dp__check_rank(dp__op_name(DP__OP_batch_norm2d), "input", x, 4));
    return batch_norm(DP__OP_batch_norm2d, y, x, gamma, beta, running_mean, running_var, NULL, p);
}

int dp_batch_norm1d(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *gamma, dp_tensor_t *beta,
                    dp_tensor_t *running_mean, dp_tensor_t *running_var,
                    const dp_batch_norm_params *p)
{
    const char *op = dp__op_name(DP__OP_batch_norm1d);
    char xs[64];
    DP_TRY(dp__check_rank(op, "input", x, -1));
    if (x->ndim != 2 && x->ndim != 3) {
        DP_ERROR("%s: expected 2D or 3D input (N, C) or (N, C, L), got %s", op,
                 dp_tensor_shape_str(x, xs, sizeof xs));
        return DP_ESHAPE;
    }
    return batch_norm(DP__OP_batch_norm1d, y, x, gamma, beta, running_mean, running_var, NULL, p);
}

/* ---- batch norm + residual [+ ReLU] in one op -------------------------- */

/* What the row that runs the fused backward keeps: p.relu says whether its
 * output passed the ReLU. The tensors are inputs of the op's rows before
 * it (the tape holds them) and the statistics the batch norm row saved. */
typedef struct bn_add_node {
    dp_batch_norm_params p;
    dp_tensor_t *x, *gamma, *beta, *residual, *stats;
} bn_add_node;

_Static_assert(sizeof(bn_add_node) <= DP__NODE_PARAMS, "the fused node fits a tape node");

/* relu(batch_norm(x) + residual)'s backward, from the gradient g of the
 * sum: the residual's gradient is g itself, adopted where it can be (the
 * copy add's backward would make is spared), and batch norm's backward
 * reads g. Passes over each activation: the ReLU mask (none when the next
 * op applied it, grad_masked), batch norm's two. */
static int bn_add_backward(dp__node *node)
{
    const bn_add_node *f = (const bn_add_node *)node->params;
    dp_tensor_t *y = node->output, *g = y->ag->grad;
    if (f->p.relu)
        DP_TRY(dp__relu_masked_grad(y, &g));
    if (!dp__grad_adopt(f->residual, g)) {
        dp_tensor_t *dr;
        DP_TRY(dp__grad_begin(f->residual, &dr));
        if (dr) {
            dp__eltwise_args e = {.op = DP__ELT_COPY,
                                  .a = g->data,
                                  .out = dr->data,
                                  .n = dp__numel(y->ndim, y->shape),
                                  .dtype = y->dtype};
            DP_TRY(y->dev->ops->eltwise(y->dev, &e));
            DP_TRY(dp__grad_end(f->residual, dr));
        }
    }
    dp_batch_norm_params q = f->p;
    q.relu = false;
    return backward_from(&q, f->x, f->gamma, f->beta, f->stats, g);
}

/* The rows dp_batch_norm2d, dp_add (and dp_relu) would record, so that
 * dp_model_summary, pipeline cuts and exports see the unfused graph: the
 * batch norm row (x, gamma, beta -> a view of y), the add row (that view,
 * residual -> y, or a second view of y when a ReLU follows) and the ReLU
 * row (-> y). The views' values are never read. The last row runs the
 * whole backward (bn_add_backward), and the rows before it receive no
 * gradient, so they never run; each row's function is still its own
 * correct backward. */
static int record_add(dp_tensor_t *const *ts, dp_tensor_t *residual, dp_tensor_t *y,
                      dp_tensor_t *stats, const dp__batch_norm_node *bn)
{
    bool relu = bn->p.relu;
    dp__batch_norm_node bn_row = *bn;
    bn_row.p.relu = false;
    dp_tensor_t *normalised, *sum = y;
    DP_TRY(dp__tape_view(&normalised, y));
    dp__saved saved = {.tensor = stats};
    DP_TRY(dp__tape_record_saved(DP__OP_batch_norm2d, batch_norm_backward, ts, 3, normalised,
                                 &saved, &bn_row, sizeof bn_row));
    bn_add_node f = {bn->p, ts[0], ts[1], ts[2], residual, stats};
    f.p.relu = false;
    if (relu)
        DP_TRY(dp__tape_view(&sum, y));
    dp_tensor_t *add_in[] = {normalised, residual};
    DP_TRY(dp__tape_record(DP__OP_add, bn_add_backward, add_in, 2, sum, &f, sizeof f));
    if (!relu)
        return 0;
    f.p.relu = true;
    /* y is not marked a fused ReLU's output (relu_output), as dp_relu's is
     * not: the CPU's adaptive pooling that follows the last block would
     * apply the mask in its own backward, and measured 12.5 ms a call
     * there against 0.5 ms unmasked (bf16, 256x512x4x4, loaded Zen 5),
     * far more than the mask's own sweep over that small tensor. */
    return dp__tape_record(DP__OP_relu, bn_add_backward, &sum, 1, y, &f, sizeof f);
}

/* Whether the batch_norm_add kernel runs x + residual here: the device has
 * it, both tensors agree in shape, dtype and layout, and no SyncBatchNorm
 * exchange splits the forward. */
static bool fusable(const dp_tensor_t *x, const dp_tensor_t *residual,
                    const dp_batch_norm_params *p)
{
    if (!x->dev->ops->batch_norm_add || residual->dev != x->dev || residual->ndim != 4 ||
        residual->dtype != x->dtype || (p && p->sync && p->training))
        return false;
    for (int i = 0; i < 4; i++)
        if (residual->shape[i] != x->shape[i])
            return false;
    return residual->nhwc == x->nhwc || x->shape[1] == 1;
}

int dp__batch_norm2d_add(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *gamma, dp_tensor_t *beta,
                         dp_tensor_t *running_mean, dp_tensor_t *running_var, dp_tensor_t *residual,
                         const dp_batch_norm_params *p)
{
    const char *op = dp__op_name(DP__OP_batch_norm2d);
    DP_TRY(dp__check_rank(op, "input", x, 4));
    DP_TRY(dp__check_rank(op, "residual", residual, -1));
    if (fusable(x, residual, p))
        return batch_norm(DP__OP_batch_norm2d, y, x, gamma, beta, running_mean, running_var,
                          residual, p);
    /* Unfused: the ops the fused one stands for. */
    dp_batch_norm_params q = p ? *p : (dp_batch_norm_params){0};
    bool relu = q.relu;
    q.relu = false;
    dp_tensor_t *normalised;
    DP_TRY(dp_batch_norm2d(&normalised, x, gamma, beta, running_mean, running_var, &q));
    int rc = relu ? dp_add_relu(y, normalised, residual) : dp_add(y, normalised, residual);
    dp__op_temp_free(normalised, x);
    return rc;
}
