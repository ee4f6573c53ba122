/* dp_model_summary: the ops of one forward, read back from the tape that
 * recorded them, with their output shapes, the parameters each uses first
 * and their FLOPs: torchinfo.summary's table for any model definition. */
#include "nn/trace.h"

#include "dp/nn.h"

#include "core/internal.h"
#include "device/device.h"

#include <stdlib.h>

enum { BATCH = 2 }; /* two samples: batch norm's unbiased variance needs two */

/* FLOPs of a node for the whole batch, by its op's cost rule in the op
 * list (device/op_list.h): 2 per multiply-add where the op is a product
 * with a weight, else one per output element. */
static int64_t node_flops(const dp__node *node)
{
    const dp_tensor_t *y = node->output;
    int64_t out = dp_tensor_numel(y);
    switch (dp__op_cost_rule(node->op)) {
    case DP__COST_CONV:
        if (node->ninputs >= 2) {
            const dp_tensor_t *w = node->inputs[1]; /* (K, C / groups, R, S) */
            return 2 * out * (dp_tensor_numel(w) / dp_tensor_dim(w, 0));
        }
        break;
    case DP__COST_CONV_TRANSPOSE:
        if (node->ninputs >= 2) {
            /* each input element scatters into K / groups R S outputs */
            const dp_tensor_t *x = node->inputs[0],
                              *w = node->inputs[1]; /* (C, K / groups, R, S) */
            return 2 * dp_tensor_numel(x) * (dp_tensor_numel(w) / dp_tensor_dim(w, 0));
        }
        break;
    case DP__COST_MATMUL:
        if (node->ninputs >= 2) {
            const dp_tensor_t *x = node->inputs[0]; /* (N, D_in) */
            return 2 * out * dp_tensor_dim(x, dp_tensor_ndim(x) - 1);
        }
        break;
    case DP__COST_ELEMENTS:
    case DP__COST_NONE:
        break;
    }
    return out;
}

/* The parameters among the node's inputs not counted by an earlier row. */
static int64_t node_params(const dp__node *node, dp_params_t *P, bool *seen)
{
    int64_t n = 0;
    for (int i = 0; i < node->ninputs; i++)
        for (int j = 0; j < dp_params_count(P); j++)
            if (node->inputs[i] == dp_params_get(P, j) && !seen[j]) {
                seen[j] = true;
                n += dp_tensor_numel(dp_params_get(P, j));
            }
    return n;
}

/* The node that wrote t; -1 for the model's input x; -2 for anything else
 * (parameters, buffers: each stage has its own). */
static int producer(const dp__tape *tape, const dp_tensor_t *x, const dp_tensor_t *t)
{
    for (size_t i = 0; i < tape->nnodes; i++)
        if (tape->nodes[i].output == t)
            return (int)i;
    return t == x ? -1 : -2;
}

/* can_start of every row: a cut before op i is clean when no op from i on
 * reads a tensor written before op i - 1 (or the input, for i > 0). */
static void mark_stage_starts(const dp__tape *tape, const dp_tensor_t *x, dp_layer_summary *rows)
{
    int n = (int)tape->nnodes;
    for (int i = 0; i < n; i++)
        rows[i].can_start = true;
    for (int j = 0; j < n; j++)
        for (int k = 0; k < tape->nodes[j].ninputs; k++) {
            int from = producer(tape, x, tape->nodes[j].inputs[k]);
            /* Op j reads what op `from` wrote: no stage starts in between. */
            for (int i = from + 2; from > -2 && i <= j; i++)
                rows[i].can_start = false;
        }
}

int dp__trace_activations(const dp_model_def *def, const int64_t *in_chw, double *total,
                          double *largest)
{
    *total = *largest = 0;
    dp__trace trace;
    int rc = dp__trace_forward(&trace, def, in_chw, BATCH, true, true);
    for (size_t i = 0; rc == 0 && i < trace.tape->nnodes; i++) {
        double e = (double)dp_tensor_numel(trace.tape->nodes[i].output) / BATCH;
        *total += e;
        *largest = e > *largest ? e : *largest;
    }
    dp__trace_close(&trace);
    return rc;
}

int dp_model_summary(const dp_model_def *def, const int64_t *in_chw, dp_layer_summary **rows,
                     int *n)
{
    static const int64_t fashion_mnist[3] = {1, 28, 28};
    const int64_t *chw = in_chw ? in_chw : fashion_mnist;
    *rows = NULL;
    *n = 0;
    bool *seen = NULL;
    dp__trace trace;
    int rc = dp__trace_forward(&trace, def, chw, BATCH, true, false);
    const dp__tape *tape = trace.tape;
    dp_params_t *P = trace.model ? dp_model_params(trace.model) : NULL;
    if (rc == 0) {
        seen = calloc((size_t)dp_params_count(P), sizeof *seen);
        *rows = calloc(tape->nnodes ? tape->nnodes : 1, sizeof **rows);
        if (!seen || !*rows)
            rc = DP_ENOMEM;
    }
    for (size_t i = 0; rc == 0 && i < tape->nnodes; i++) {
        const dp__node *node = &tape->nodes[i];
        dp_layer_summary *r = &(*rows)[(*n)++];
        snprintf(r->op, sizeof r->op, "%s", dp__op_name(node->op));
        r->ndim = dp_tensor_ndim(node->output);
        for (int d = 0; d < r->ndim; d++)
            r->shape[d] = d == 0 ? 1 : dp_tensor_dim(node->output, d);
        r->params = node_params(node, P, seen);
        r->flops = node_flops(node) / BATCH;
    }
    if (rc == 0)
        mark_stage_starts(tape, trace.x, *rows);
    /* A model that cuts its forward elsewhere says where (an ONNX graph:
     * where one tensor crosses between its nodes). */
    if (rc == 0 && def->stage_starts)
        def->stage_starts(def, *rows, *n);
    if (rc < 0) {
        free(*rows);
        *rows = NULL;
        *n = 0;
    }
    free(seen);
    dp__trace_close(&trace);
    return rc;
}
