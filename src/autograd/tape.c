/* The tape: the tensors of one step and, when recording, one node per op in
 * the order the ops were issued. That order is topological, so dp_backward
 * walks it backwards and calls each node whose output received a gradient. */
#include "autograd/tape.h"

#include "core/internal.h"

#include <string.h>

static _Thread_local dp__tape *current;
/* Numbers the dp_backward calls of this thread: a node runs in a call only
 * if its output received a gradient in that call, so several losses over
 * disjoint parts of one tape (one per replica, as the seed's train_batch)
 * each backpropagate through their own part once. */
static _Thread_local uint64_t backward_gen;

dp__tape *dp__tape_current(void)
{
    return current;
}

int dp_tape_init(dp_tape_t **out, bool record)
{
    dp__tape *t = dp__calloc(1, sizeof *t);
    if (!t)
        return DP_ENOMEM;
    t->record = record;
    *out = t;
    return 0;
}

void dp_tape_begin(dp_tape_t *tape)
{
    DP_ASSERT(tape != current);
    tape->prev = current;
    current = tape;
}

void dp_tape_end(dp_tape_t *tape)
{
    DP_ASSERT(tape == current);
    current = tape->prev;
    tape->prev = NULL;
}

void dp_tape_reset(dp_tape_t *tape)
{
    /* Grads of owned tensors are owned too; detach them so no tensor is
     * released twice. */
    for (size_t i = 0; i < tape->ntensors; i++)
        tape->tensors[i]->grad = NULL;
    for (size_t i = 0; i < tape->ntensors; i++)
        dp_tensor_free(tape->tensors[i]);
    tape->ntensors = 0;
    tape->nnodes = 0;
}

void dp_tape_close(dp_tape_t *tape)
{
    if (!tape)
        return;
    dp_tape_reset(tape);
    dp__free(tape->tensors);
    dp__free(tape->nodes);
    dp__free(tape);
}

/* Hands a new tensor to the active tape (no-op without one). */
static int own(dp_tensor_t *t)
{
    dp__tape *tape = current;
    if (!tape)
        return 0;
    if (tape->ntensors == tape->cap_tensors) {
        size_t cap = tape->cap_tensors ? 2 * tape->cap_tensors : 64;
        dp_tensor_t **p = realloc(tape->tensors, cap * sizeof *p);
        if (!p) {
            DP_ERROR("out of memory growing the tape");
            return DP_ENOMEM;
        }
        tape->tensors = p;
        tape->cap_tensors = cap;
    }
    tape->tensors[tape->ntensors++] = t;
    t->tape = tape;
    return 0;
}

int dp__tape_alloc(dp_tensor_t **out, dp_device_t *dev, dp_dtype dtype, int ndim,
                   const int64_t *shape, int nhwc)
{
    dp_tensor_t *t;
    DP_TRY(dp__tensor_alloc(&t, dev, dtype, ndim, shape, nhwc));
    int rc = own(t);
    if (rc < 0) {
        dp_tensor_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

int dp__tape_alloc_like(dp_tensor_t **out, const dp_tensor_t *like)
{
    return dp__tape_alloc(out, like->dev, like->dtype, like->ndim, like->shape, like->nhwc);
}

int dp__tape_needs_grad(dp_tensor_t *const *inputs, int n)
{
    if (!current || !current->record)
        return 0;
    for (int i = 0; i < n; i++)
        if (inputs[i] && inputs[i]->requires_grad)
            return 1;
    return 0;
}

int dp__tape_record_saved(const char *op, dp__backward_fn backward, dp_tensor_t *const *inputs,
                          int ninputs, dp_tensor_t *output, const dp__saved *saved,
                          const void *params, size_t params_size)
{
    dp__tape *tape = current;
    DP_ASSERT(tape && tape->record && ninputs <= DP__NODE_INPUTS);
    DP_ASSERT(params_size <= DP__NODE_PARAMS);
    if (tape->nnodes == tape->cap_nodes) {
        size_t cap = tape->cap_nodes ? 2 * tape->cap_nodes : 64;
        dp__node *p = realloc(tape->nodes, cap * sizeof *p);
        if (!p) {
            DP_ERROR("out of memory growing the tape");
            return DP_ENOMEM;
        }
        tape->nodes = p;
        tape->cap_nodes = cap;
    }
    dp__node *node = &tape->nodes[tape->nnodes++];
    memset(node, 0, sizeof *node);
    node->op = op;
    node->backward = backward;
    node->ninputs = ninputs;
    for (int i = 0; i < ninputs; i++)
        node->inputs[i] = inputs[i];
    node->output = output;
    if (saved) {
        node->saved = saved->tensor;
        output->relu_output = saved->relu_output;
    }
    if (params_size)
        memcpy(node->params, params, params_size);
    output->requires_grad = 1;
    return 0;
}

int dp__tape_record(const char *op, dp__backward_fn backward, dp_tensor_t *const *inputs,
                    int ninputs, dp_tensor_t *output, const void *params, size_t params_size)
{
    return dp__tape_record_saved(op, backward, inputs, ninputs, output, NULL, params,
                                 params_size);
}

int dp_tensor_set_requires_grad(dp_tensor_t *t, dp_tensor_t *grad)
{
    if (t->dtype != DP_F32) {
        DP_ERROR("only float tensors can require gradients");
        return DP_EINVAL;
    }
    if (!grad) {
        DP_TRY(dp_tensor_new(&grad, t->dev, DP_F32, t->ndim, t->shape));
        DP_TRY(dp_tensor_fill(grad, 0.0f));
    } else if (grad->dev != t->dev || dp__numel(grad->ndim, grad->shape) !=
                                           dp__numel(t->ndim, t->shape)) {
        DP_ERROR("gradient tensor does not match its parameter");
        return DP_ESHAPE;
    }
    t->requires_grad = 1;
    t->grad = grad;
    t->grad_written = 1; /* the fresh gradient holds zeros: accumulate */
    return 0;
}

void dp_zero_grad(dp_tensor_t *const *params, int n)
{
    for (int i = 0; i < n; i++)
        params[i]->grad_written = 0;
}

int dp__grad_begin(dp_tensor_t *x, dp_tensor_t **out)
{
    *out = NULL;
    if (!x || !x->requires_grad)
        return 0;
    if (!x->grad)
        DP_TRY(dp__tape_alloc_like(&x->grad, x));
    x->grad_gen = backward_gen;
    if (!x->grad_written) {
        x->grad_written = 1;
        x->grad_masked = 0;
        *out = x->grad;
        return 0;
    }
    dp_tensor_t *tmp;
    DP_TRY(dp__tape_alloc_like(&tmp, x->grad));
    *out = tmp;
    return 0;
}

void dp__grad_touch(dp_tensor_t *x)
{
    x->grad_gen = backward_gen;
}

int dp__grad_end(dp_tensor_t *x, dp_tensor_t *contribution)
{
    if (!contribution || contribution == x->grad) {
        if (contribution)
            dp__tensor_written(contribution);
        return 0;
    }
    x->grad_masked = 0; /* the sum is not known to be masked */
    dp__eltwise_args a = {.op = DP__ELT_ACCUMULATE,
                          .a = contribution->data,
                          .out = x->grad->data,
                          .n = dp__numel(x->ndim, x->shape)};
    DP_TRY(x->dev->ops->eltwise(x->dev, &a));
    dp__tensor_written(x->grad);
    return 0;
}

int dp_backward(dp_tensor_t *loss)
{
    dp__tape *tape = loss->tape;
    if (!tape || !tape->record || !loss->requires_grad) {
        DP_ERROR("dp_backward: the loss was not computed on a recording tape from parameters");
        return DP_EINVAL;
    }
    if (dp__numel(loss->ndim, loss->shape) != 1) {
        DP_ERROR("dp_backward: the loss must have one element");
        return DP_ESHAPE;
    }
    int active = current == tape;
    if (!active)
        dp_tape_begin(tape);
    uint64_t gen = ++backward_gen;
    int rc = 0;
    dp_tensor_t *g = NULL;
    rc = dp__grad_begin(loss, &g);
    if (rc == 0)
        rc = dp_tensor_fill(g, 1.0f);
    if (rc == 0)
        rc = dp__grad_end(loss, g);
    for (size_t i = tape->nnodes; i-- > 0 && rc == 0;) {
        dp__node *node = &tape->nodes[i];
        if (!node->output->grad || !node->output->grad_written || node->output->grad_gen != gen)
            continue;
        rc = node->backward(node);
    }
    if (!active)
        dp_tape_end(tape);
    return rc;
}
