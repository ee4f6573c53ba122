/* dp_model_summary: the ops of one forward, read back from the tape that
 * recorded them, with their output shapes, the parameters each uses first
 * and their FLOPs: torchinfo.summary's table for any model definition. */
#include "nn/trace.h"

#include "dp/nn.h"

#include "core/internal.h"
#include "device/device.h"

#include <stdint.h>
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

/* Tensors by address, to find in O(log n) which op wrote a tensor and
 * which parameter it is: a summary of 100,000 ops costs no more than its
 * tape. Sorted by address, then by index, so that the first is found. */
typedef struct tensor_index {
    const dp_tensor_t *t;
    int index;
} tensor_index;

static int by_address(const void *a, const void *b)
{
    const tensor_index *x = a, *y = b;
    uintptr_t p = (uintptr_t)x->t, q = (uintptr_t)y->t;
    return p != q ? (p < q ? -1 : 1) : (x->index > y->index) - (x->index < y->index);
}

/* The index kept with t in sorted[0..n) (the first, if several), or -1. */
static int find(const tensor_index *sorted, int n, const dp_tensor_t *t)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if ((uintptr_t)sorted[mid].t < (uintptr_t)t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && sorted[lo].t == t ? sorted[lo].index : -1;
}

/* The parameters among the node's inputs not counted by an earlier row
 * (params: P's tensors, sorted). */
static int64_t node_params(const dp__node *node, dp_params_t *P, const tensor_index *params,
                           bool *seen)
{
    int64_t n = 0;
    for (int i = 0; i < node->ninputs; i++) {
        int j = find(params, dp_params_count(P), node->inputs[i]);
        if (j >= 0 && !seen[j]) {
            seen[j] = true;
            n += dp_tensor_numel(dp_params_get(P, j));
        }
    }
    return n;
}

/* The node that wrote t (outputs: the tape's outputs, sorted); -1 for the
 * model's input x; -2 for anything else (parameters, buffers: each stage
 * has its own). */
static int producer(const tensor_index *outputs, int n, const dp_tensor_t *x, const dp_tensor_t *t)
{
    int i = find(outputs, n, t);
    return i >= 0 ? i : t == x ? -1 : -2;
}

/* can_start of every row: a cut before op i is clean when no op from i on
 * reads a tensor written before op i - 1 (or the input, for i > 0). Op j
 * reading what op `from` wrote rules out the cuts before ops from + 2 to
 * j: counted over the rows as differences (`cover`), O(ops). */
static int mark_stage_starts(const dp__tape *tape, const dp_tensor_t *x, dp_layer_summary *rows)
{
    int n = (int)tape->nnodes;
    tensor_index *outputs = malloc((size_t)(n ? n : 1) * sizeof *outputs);
    int *cover = calloc((size_t)n + 2, sizeof *cover);
    if (!outputs || !cover) {
        free(outputs);
        free(cover);
        return DP_ENOMEM;
    }
    for (int i = 0; i < n; i++)
        outputs[i] = (tensor_index){tape->nodes[i].output, i};
    qsort(outputs, (size_t)n, sizeof *outputs, by_address);
    for (int j = 0; j < n; j++)
        for (int k = 0; k < tape->nodes[j].ninputs; k++) {
            int from = producer(outputs, n, x, tape->nodes[j].inputs[k]);
            if (from > -2 && from + 2 <= j) {
                cover[from + 2]++;
                cover[j + 1]--;
            }
        }
    for (int i = 0, inside = 0; i < n; i++) {
        inside += cover[i];
        rows[i].can_start = inside == 0;
    }
    free(outputs);
    free(cover);
    return 0;
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
    int nparams = P ? dp_params_count(P) : 0;
    tensor_index *params = NULL;
    if (rc == 0) {
        seen = calloc((size_t)nparams + 1, sizeof *seen);
        params = malloc(((size_t)nparams + 1) * sizeof *params);
        *rows = calloc(tape->nnodes ? tape->nnodes : 1, sizeof **rows);
        if (!seen || !params || !*rows)
            rc = DP_ENOMEM;
    }
    for (int j = 0; rc == 0 && j < nparams; j++)
        params[j] = (tensor_index){dp_params_get(P, j), j};
    if (rc == 0)
        qsort(params, (size_t)nparams, sizeof *params, by_address);
    for (size_t i = 0; rc == 0 && i < tape->nnodes; i++) {
        const dp__node *node = &tape->nodes[i];
        dp_layer_summary *r = &(*rows)[(*n)++];
        snprintf(r->op, sizeof r->op, "%s", dp__op_name(node->op));
        r->ndim = dp_tensor_ndim(node->output);
        for (int d = 0; d < r->ndim; d++)
            r->shape[d] = d == 0 ? 1 : dp_tensor_dim(node->output, d);
        r->params = node_params(node, P, params, seen);
        r->flops = node_flops(node) / BATCH;
    }
    free(params);
    if (rc == 0)
        rc = mark_stage_starts(tape, trace.x, *rows);
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
