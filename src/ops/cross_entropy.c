/* cross_entropy: loss (1) = sum or mean over i of -log softmax(logits_i)[y_i]
 * for logits (N, K) and int32 labels (N), or loss (N) of each row's term
 * (reduction "none"); with label smoothing eps the target is (1 - eps) on
 * y_i plus eps / K on every class, as CrossEntropyLoss(label_smoothing=
 * eps); backward writes dlogits (=), each row's scaled by its gradient.
 * accuracy: correct (1) += count of rows whose argmax is the label;
 * eval_counts: the same, the top-5 count and the confusion matrix. */
#include "ops/op.h"

typedef struct xent_node {
    dp_reduction reduction;
    float smoothing;
} xent_node;

static int check_labels(const char *op, dp_tensor_t *logits, dp_tensor_t *labels)
{
    DP_TRY(dp__check_rank(op, "logits", logits, 2));
    if (!labels || labels->dtype != DP_I32 || labels->ndim != 1 ||
        labels->shape[0] != logits->shape[0]) {
        DP_ERROR("%s: labels must be an int32 vector of %lld entries", op,
                 (long long)logits->shape[0]);
        return DP_ESHAPE;
    }
    dp_tensor_t *ts[] = {logits, labels};
    return dp__check_same_device(op, ts, 2);
}

static int xent_backward(dp__node *node)
{
    const xent_node *xn = (const xent_node *)node->params;
    dp_tensor_t *logits = node->inputs[0], *labels = node->inputs[1], *dz;
    DP_TRY(dp__grad_begin(logits, &dz));
    if (!dz)
        return 0;
    dp__xent_args a = {.logits = logits->data,
                       .labels = labels->data,
                       .dloss = node->output->ag->grad->data,
                       .dlogits = dz->data,
                       .n = logits->shape[0],
                       .k = logits->shape[1],
                       .mean = xn->reduction == DP_REDUCE_MEAN,
                       .smoothing = xn->smoothing,
                       .per_row = xn->reduction == DP_REDUCE_NONE};
    DP_TRY(logits->dev->ops->cross_entropy_backward(logits->dev, &a));
    return dp__grad_end(logits, dz);
}

int dp_cross_entropy(dp_tensor_t **out, dp_tensor_t *logits, dp_tensor_t *labels,
                     dp_reduction reduction)
{
    return dp_cross_entropy_smoothed(out, logits, labels, reduction, 0.0f);
}

int dp_cross_entropy_smoothed(dp_tensor_t **out, dp_tensor_t *logits, dp_tensor_t *labels,
                              dp_reduction reduction, float smoothing)
{
    if (!(smoothing >= 0.0f && smoothing <= 1.0f)) {
        DP_ERROR("cross_entropy: label smoothing %g: give 0 to 1 (as CrossEntropyLoss)",
                 (double)smoothing);
        return DP_EINVAL;
    }
    if ((unsigned)reduction > DP_REDUCE_NONE) {
        DP_ERROR("cross_entropy: reduction %d: give sum, mean or none", (int)reduction);
        return DP_EINVAL;
    }
    DP_TRY(check_labels("cross_entropy", logits, labels));
    DP_TRY(dp__as_f32(&logits)); /* softmax and the loss in f32, as autocast */
    int64_t rows = reduction == DP_REDUCE_NONE ? logits->shape[0] : 1;
    dp_tensor_t *loss;
    DP_TRY(dp__tape_alloc(&loss, logits->dev, DP_F32, 1, &rows, 0));
    dp__xent_args a = {.logits = logits->data,
                       .labels = labels->data,
                       .loss = loss->data,
                       .n = logits->shape[0],
                       .k = logits->shape[1],
                       .mean = reduction == DP_REDUCE_MEAN,
                       .smoothing = smoothing,
                       .per_row = reduction == DP_REDUCE_NONE};
    DP_TRY(logits->dev->ops->cross_entropy_forward(logits->dev, &a));
    dp__tensor_written(loss);
    dp_tensor_t *ts[] = {logits, labels};
    if (dp__tape_needs_grad(ts, 1)) {
        xent_node xn = {reduction, smoothing};
        DP_TRY(dp__tape_record(DP__OP_cross_entropy, xent_backward, ts, 2, loss, &xn, sizeof xn));
    }
    *out = loss;
    return 0;
}

int dp_accuracy_accumulate(dp_tensor_t *correct, dp_tensor_t *logits, dp_tensor_t *labels)
{
    DP_TRY(check_labels("accuracy", logits, labels));
    DP_TRY(dp__as_f32(&logits));
    if (!correct || correct->dtype != DP_F32 || dp__numel(correct->ndim, correct->shape) != 1 ||
        correct->dev != logits->dev) {
        DP_ERROR("accuracy: the counter must be a one-element float tensor on the same device");
        return DP_EINVAL;
    }
    dp__accuracy_args a = {.logits = logits->data,
                           .labels = labels->data,
                           .correct = correct->data,
                           .n = logits->shape[0],
                           .k = logits->shape[1]};
    DP_TRY(logits->dev->ops->accuracy(logits->dev, &a));
    dp__tensor_written(correct);
    return 0;
}

int dp_eval_counts_accumulate(dp_tensor_t *counts, dp_tensor_t *logits, dp_tensor_t *labels)
{
    DP_TRY(check_labels("eval_counts", logits, labels));
    DP_TRY(dp__as_f32(&logits));
    int64_t k = logits->shape[1];
    if (!counts || counts->dtype != DP_F32 || dp__numel(counts->ndim, counts->shape) != 2 + k * k ||
        counts->dev != logits->dev) {
        DP_ERROR("eval_counts: the counters must be %lld floats (2 + K^2 for K = %lld classes) "
                 "on the logits' device",
                 (long long)(2 + k * k), (long long)k);
        return DP_EINVAL;
    }
    float *c = counts->data;
    dp__accuracy_args a = {.logits = logits->data,
                           .labels = labels->data,
                           .correct = c,
                           .top5 = c + 1,
                           .confusion = c + 2,
                           .n = logits->shape[0],
                           .k = k};
    DP_TRY(logits->dev->ops->accuracy(logits->dev, &a));
    dp__tensor_written(counts);
    return 0;
}
