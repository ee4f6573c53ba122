/* Per-tensor gradient state: parameters (leaves), the gradient plumbing of
 * backward functions, and the public calls that read or drop that state.
 * A tensor requires a gradient exactly when autograd attached a state to it
 * (t->ag); the device layer never looks inside. */
#include "autograd/tape.h"

#include "core/internal.h"

int dp_tensor_set_requires_grad(dp_tensor_t *t, dp_tensor_t *grad)
{
    if (t->dtype != DP_F32) {
        DP_ERROR("only float tensors can require gradients");
        return DP_EINVAL;
    }
    if (!grad) {
        DP_TRY(dp_tensor_new(&grad, t->dev, DP_F32, t->ndim, t->shape));
        DP_TRY(dp_tensor_fill(grad, 0.0f));
    } else if (grad->dev != t->dev ||
               dp__numel(grad->ndim, grad->shape) != dp__numel(t->ndim, t->shape)) {
        DP_ERROR("gradient tensor does not match its parameter");
        return DP_ESHAPE;
    }
    if (!t->ag) {
        t->ag = dp__state_new(NULL);
        if (!t->ag)
            return DP_ENOMEM;
    }
    t->ag->grad = grad;
    t->ag->grad_written = 1; /* the fresh gradient holds zeros: accumulate */
    return 0;
}

void dp_zero_grad(dp_tensor_t *const *params, int n)
{
    for (int i = 0; i < n; i++)
        if (params[i]->ag)
            params[i]->ag->grad_written = 0;
}

dp_tensor_t *dp_tensor_grad(const dp_tensor_t *t)
{
    return t->ag ? t->ag->grad : NULL;
}

void dp__state_release(dp_tensor_t *t)
{
    dp__autograd_state *s = t->ag;
    if (s && !s->tape) {
        if (s->grad && s->grad != t)
            dp_tensor_free(s->grad);
        dp__free(s);
    }
    t->ag = NULL;
}

/* Whether s's gradient holds a contribution to add to. A leaf's (no tape)
 * accumulates across backward calls until dp_zero_grad; a recorded
 * tensor's (a non-leaf) starts afresh in each dp_backward call, as
 * PyTorch's: one written by an earlier call (grad_gen older) is
 * overwritten, not added to. */
static bool holds_gradient(const dp__autograd_state *s)
{
    return s->grad_written && (!s->tape || s->grad_gen == dp__backward_gen());
}

bool dp__grad_written(const dp_tensor_t *t)
{
    return t->ag && t->ag->grad && holds_gradient(t->ag);
}

void dp__grad_set_written(dp_tensor_t *t)
{
    t->ag->grad_written = 1;
}

int dp__grad_begin(dp_tensor_t *x, dp_tensor_t **out)
{
    *out = NULL;
    dp__autograd_state *s = x ? x->ag : NULL;
    if (!s)
        return 0;
    if (!s->grad)
        DP_TRY(dp__tape_alloc_like(&s->grad, x));
    bool accumulate = holds_gradient(s);
    s->grad_gen = dp__backward_gen();
    if (!accumulate) {
        s->grad_written = 1;
        s->grad_masked = 0;
        *out = s->grad;
        return 0;
    }
    dp_tensor_t *tmp;
    DP_TRY(dp__tape_alloc_like(&tmp, s->grad));
    *out = tmp;
    return 0;
}

bool dp__grad_adopt(dp_tensor_t *x, dp_tensor_t *g)
{
    dp__autograd_state *s = x ? x->ag : NULL;
    if (!s || !s->tape || holds_gradient(s) || g->dtype != x->dtype || g->nhwc != x->nhwc ||
        g->dev != x->dev || dp__numel(g->ndim, g->shape) != dp__numel(x->ndim, x->shape))
        return false;
    s->grad = g;
    s->grad_gen = dp__backward_gen();
    s->grad_written = 1;
    s->grad_masked = 0;
    return true;
}

void dp__grad_touch(dp_tensor_t *x)
{
    x->ag->grad_gen = dp__backward_gen();
}

int dp__grad_end(dp_tensor_t *x, dp_tensor_t *contribution)
{
    if (!contribution || contribution == x->ag->grad) {
        if (contribution)
            dp__tensor_written(contribution);
        return 0;
    }
    dp_tensor_t *grad = x->ag->grad;
    x->ag->grad_masked = 0; /* the sum is not known to be masked */
    DP_ASSERT(contribution->dtype == grad->dtype);
    dp__eltwise_args a = {.op = DP__ELT_ACCUMULATE,
                          .a = contribution->data,
                          .out = grad->data,
                          .n = dp__numel(x->ndim, x->shape),
                          .dtype = grad->dtype};
    DP_TRY(x->dev->ops->eltwise(x->dev, &a));
    dp__tensor_written(grad);
    return 0;
}
