/* dropout: y (N, ...) = x (N, ...) * keep / (1 - prob), any shape and
 * layout, PyTorch's inverted dropout. Whether element i (logical index
 * within its sample) of sample n is kept is a pure function of (seed, step,
 * layer, sample_offset + n, i) through the counter-based RNG: stream
 * 2^63 | step 2^32 | layer (distinct for steps below 2^31, and apart from
 * the small streams of weight init and shuffling), counter
 * (sample_offset + n) * (numel / N) + i. A device holding a shard of the
 * batch therefore draws the mask the whole batch has there.
 * Not training, or prob == 0: y = x. prob == 1: y = 0.
 * Backward writes dx (=): dy through the same mask, regenerated rather than
 * stored. */
#include "ops/op.h"

#include "core/rng_mix.h"

#include <math.h>
#include <string.h>

typedef enum dropout_mode { DROPOUT_IDENTITY, DROPOUT_ZERO, DROPOUT_MASK } dropout_mode;

typedef struct dropout_node {
    dropout_mode mode;
    dp__dropout_args a; /* x and y unset: the backward runs it over dy, dx */
} dropout_node;

_Static_assert(sizeof(dropout_node) <= DP__NODE_PARAMS, "a dropout node fits a tape node");

/* out = in through the node's function, in's layout. */
static int apply(const dropout_node *dn, dp_tensor_t *in, dp_tensor_t *out)
{
    dp_device_t *dev = in->dev;
    int64_t n = dp__numel(in->ndim, in->shape);
    if (dn->mode == DROPOUT_IDENTITY) {
        dp__eltwise_args e = {
            .op = DP__ELT_COPY, .a = in->data, .out = out->data, .n = n, .dtype = in->dtype};
        return dev->ops->eltwise(dev, &e);
    }
    if (dn->mode == DROPOUT_ZERO) {
        dp__fill_args f = {.data = out->data, .n = n, .value = 0.0f, .dtype = out->dtype};
        return dev->ops->fill(dev, &f);
    }
    dp__dropout_args a = dn->a;
    a.x = in->data;
    a.y = out->data;
    a.nhwc = in->ndim == 4 && in->nhwc;
    return n > 0 ? dev->ops->dropout(dev, &a) : 0;
}

static int dropout_backward(dp__node *node)
{
    const dropout_node *dn = (const dropout_node *)node->params;
    dp_tensor_t *x = node->inputs[0], *dx;
    DP_TRY(dp__grad_begin(x, &dx));
    if (!dx)
        return 0;
    DP_TRY(apply(dn, node->output->ag->grad, dx));
    return dp__grad_end(x, dx);
}

int dp_dropout(dp_tensor_t **out, dp_tensor_t *x, const dp_dropout_params *p)
{
    const char *op = dp__op_name(DP__OP_dropout);
    DP_TRY(dp__check_rank(op, "input", x, -1));
    if (!p) {
        DP_ERROR("%s: parameters are NULL", op);
        return DP_EINVAL;
    }
    if (!(p->prob >= 0.0f && p->prob <= 1.0f)) {
        DP_ERROR("%s: probability has to be between 0 and 1, but got %g", op, (double)p->prob);
        return DP_EINVAL;
    }
    if (x->ndim < 1 || p->sample_offset < 0) {
        DP_ERROR("%s: needs a batch dimension and a sample offset >= 0 (got %d dimensions, "
                 "offset %lld)",
                 op, x->ndim, (long long)p->sample_offset);
        return DP_EINVAL;
    }
    dropout_node dn;
    memset(&dn, 0, sizeof dn);
    if (!p->training || p->prob == 0.0f) {
        dn.mode = DROPOUT_IDENTITY;
    } else if (p->prob == 1.0f) {
        dn.mode = DROPOUT_ZERO;
    } else {
        DP_TRY(dp__as_f32(&x)); /* the mask kernel is f32 */
        dn.mode = DROPOUT_MASK;
        int64_t N = x->shape[0];
        uint64_t stream = (1ULL << 63) | (p->step << 32) | p->layer;
        dn.a.samples = N;
        dn.a.sample_size = N > 0 ? dp__numel(x->ndim, x->shape) / N : 0;
        dn.a.sample_offset = p->sample_offset;
        dn.a.key = dp__rng_key(p->seed, stream);
        /* keep when the top 24 bits, a uniform k in [0, 2^24), reach prob 2^24 */
        dn.a.threshold = (uint32_t)ceil((double)p->prob * 16777216.0);
        dn.a.scale = 1.0f / (1.0f - p->prob);
        if (x->ndim == 4) {
            dn.a.C = x->shape[1];
            dn.a.HW = x->shape[2] * x->shape[3];
        }
    }
    dp_tensor_t *y;
    DP_TRY(dp__tape_alloc_like(&y, x));
    DP_TRY(apply(&dn, x, y));
    dp__tensor_written(y);
    if (dp__tape_needs_grad(&x, 1))
        DP_TRY(dp__tape_record(DP__OP_dropout, dropout_backward, &x, 1, y, &dn, sizeof dn));
    *out = y;
    return 0;
}
