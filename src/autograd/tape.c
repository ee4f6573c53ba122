/* The tape: the tensors of one step and, when recording, one node per op in
 * the order the ops were issued. That order is topological, so dp_backward
 * walks it backwards and calls each node whose output received a gradient.
 * The per-tensor gradient state is in grad.c. */
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

uint64_t dp__backward_gen(void)
{
    return backward_gen;
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
    /* The gradients of owned tensors are owned too (dp__grad_begin runs
     * under the tape), so each tensor is released once, by the tape. The
     * states of recorded outputs go with the pool; a leaf state (a tensor
     * of the tape later given dp_tensor_set_requires_grad) is the tensor's. */
    for (size_t i = 0; i < tape->ntensors; i++) {
        dp_tensor_t *t = tape->tensors[i];
        if (t->ag && !t->ag->tape)
            dp__free(t->ag);
        dp__tensor_release(t);
    }
    tape->ntensors = 0;
    tape->nnodes = 0;
    tape->nstates = 0;
}

void dp_tape_close(dp_tape_t *tape)
{
    if (!tape)
        return;
    dp_tape_reset(tape);
    for (size_t i = 0; i < tape->nchunks; i++)
        dp__free(tape->state_chunks[i]);
    dp__free(tape->state_chunks);
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
    return 0;
}

int dp__tape_alloc(dp_tensor_t **out, dp_device_t *dev, dp_dtype dtype, int ndim,
                   const int64_t *shape, int nhwc)
{
    dp_tensor_t *t;
    DP_TRY(dp__tensor_alloc(&t, dev, dtype, ndim, shape, nhwc));
    int rc = own(t);
    if (rc < 0) {
        dp__tensor_release(t);
        return rc;
    }
    *out = t;
    return 0;
}

int dp__tape_view(dp_tensor_t **out, const dp_tensor_t *of)
{
    dp_tensor_t *t = dp__tensor_view(of->dev, of->dtype, of->ndim, of->shape, of->data);
    if (!t)
        return DP_ENOMEM;
    t->nhwc = of->nhwc;
    t->write_seq = dp__tensor_ready_seq(of);
    int rc = own(t);
    if (rc < 0) {
        dp__tensor_release(t);
        return rc;
    }
    *out = t;
    return 0;
}

int dp__tape_alloc_like(dp_tensor_t **out, const dp_tensor_t *like)
{
    return dp__tape_alloc(out, like->dev, like->dtype, like->ndim, like->shape, like->nhwc);
}

dp__autograd_state *dp__state_new(dp__tape *tape)
{
    if (!tape) {
        /* A leaf's state goes with its tensor: dp_tensor_free (device
         * layer) hands it back here. */
        dp__tensor_set_state_release(dp__state_release);
        return dp__calloc(1, sizeof(dp__autograd_state));
    }
    size_t chunk = tape->nstates / DP__STATE_CHUNK;
    if (chunk == tape->nchunks) {
        dp__autograd_state **p = realloc(tape->state_chunks, (chunk + 1) * sizeof *p);
        if (!p)
            return NULL;
        tape->state_chunks = p;
        p[chunk] = dp__malloc(DP__STATE_CHUNK * sizeof **p);
        if (!p[chunk])
            return NULL;
        tape->nchunks++;
    }
    dp__autograd_state *s = &tape->state_chunks[chunk][tape->nstates++ % DP__STATE_CHUNK];
    memset(s, 0, sizeof *s);
    s->tape = tape;
    return s;
}

int dp__tape_needs_grad(dp_tensor_t *const *inputs, int n)
{
    if (!current || !current->record)
        return 0;
    for (int i = 0; i < n; i++)
        if (inputs[i] && inputs[i]->ag)
            return 1;
    return 0;
}

int dp__tape_record_saved(dp__op op, dp__backward_fn backward, dp_tensor_t *const *inputs,
                          int ninputs, dp_tensor_t *output, const dp__saved *saved,
                          const void *params, size_t params_size)
{
    dp__tape *tape = current;
    DP_ASSERT(tape && tape->record && ninputs <= DP__NODE_INPUTS);
    DP_ASSERT(params_size <= DP__NODE_PARAMS);
    /* The output is new and the tape's (a gather records one node per
     * input, all with the same output). */
    if (!output->ag) {
        output->ag = dp__state_new(tape);
        if (!output->ag) {
            DP_ERROR("out of memory growing the tape");
            return DP_ENOMEM;
        }
    }
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
        output->ag->relu_output = saved->relu_output;
    }
    if (params_size)
        memcpy(node->params, params, params_size);
    return 0;
}

int dp__tape_record(dp__op op, dp__backward_fn backward, dp_tensor_t *const *inputs, int ninputs,
                    dp_tensor_t *output, const void *params, size_t params_size)
{
    return dp__tape_record_saved(op, backward, inputs, ninputs, output, NULL, params, params_size);
}

/* Runs, newest first, every node of `tape` whose output received a
 * gradient in backward call `gen`. */
static int run_nodes(dp__tape *tape, uint64_t gen)
{
    int rc = 0;
    for (size_t i = tape->nnodes; i-- > 0 && rc == 0;) {
        dp__node *node = &tape->nodes[i];
        const dp__autograd_state *s = node->output->ag;
        if (!s->grad || !s->grad_written || s->grad_gen != gen)
            continue;
        rc = node->backward(node);
    }
    return rc;
}

int dp_backward(dp_tensor_t *loss)
{
    dp__tape *tape = loss->ag ? loss->ag->tape : NULL;
    if (!tape || !tape->record) {
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
    dp_tensor_t *g = NULL;
    int rc = dp__grad_begin(loss, &g);
    if (rc == 0)
        rc = dp_tensor_fill(g, 1.0f);
    if (rc == 0)
        rc = dp__grad_end(loss, g);
    if (rc == 0)
        rc = run_nodes(tape, gen);
    if (!active)
        dp_tape_end(tape);
    return rc;
}

int dp_backward_from(dp_tensor_t *y)
{
    dp__tape *tape = y->ag ? y->ag->tape : NULL;
    if (!tape || !tape->record || !y->ag->grad || !y->ag->grad_written) {
        DP_ERROR("dp_backward_from: the tensor was not recorded on a recording tape, or has no "
                 "gradient yet");
        return DP_EINVAL;
    }
    int active = current == tape;
    if (!active)
        dp_tape_begin(tape);
    uint64_t gen = ++backward_gen;
    y->ag->grad_gen = gen;
    int rc = run_nodes(tape, gen);
    if (!active)
        dp_tape_end(tape);
    return rc;
}
