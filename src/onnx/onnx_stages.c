/* Pipeline stages over an ONNX graph (onnx_model.h, "pipeline stages"):
 * the cuts of the run order where exactly one device tensor crosses, the
 * rows of dp_model_summary that each node records, and forward_layers,
 * which runs the nodes between two such cuts.
 *
 * A residual block's Add reads the block's input and its branch's output
 * (a Concat of device tensors reads its branches'): every cut between the
 * block's first node and its Add has two tensors crossing, so a stage
 * neither starts nor ends inside the block. Host values (shapes and the
 * constants made from them) never cross: a stage computes those it reads
 * again, from the constants and the one tensor it receives. */
#include "onnx/onnx_model.h"

#include "core/internal.h"

#include <stdio.h>
#include <string.h>

/* Whether node n runs on the host, as onnx_bind.c placed it: Shape and
 * Constant always, the folding operators when every input is a host value. */
static bool runs_on_host(const dp__onnx_graph *g, const dp__onnx_node *n)
{
    if (n->op->fold != 1)
        return n->op->fold == 2;
    for (int k = 0; k < n->nin; k++)
        if (n->in[k] >= 0 && !g->values[n->in[k]].host)
            return false;
    return true;
}

/* A tensor that a stage would have to receive: the graph's input or a
 * device node's output (not a parameter, buffer or constant). */
static bool is_device_value(const dp__onnx_value *v)
{
    return !v->host && (v->where == DP__OV_INPUT || v->where == DP__OV_NODE);
}

/* The rows node n records in a training forward: its op records one when
 * an input it reads as a tensor needs a gradient (a parameter, or a value
 * of a node that recorded one); host nodes and Identity (its output is
 * its input) record none. grad[v] gets whether n's outputs need one. */
static int rows_of_node(const dp__onnx_graph *g, const dp__onnx_node *n, bool host, bool *grad)
{
    bool needs = false;
    for (int k = 0; k < n->nin; k++)
        if (n->in[k] >= 0 && !(n->op->host_inputs >> k & 1u) && grad[n->in[k]])
            needs = true;
    for (int k = 0; k < n->nout; k++)
        if (n->out[k] >= 0)
            grad[n->out[k]] = !host && needs;
    return host || !needs || strcmp(n->op->type, "Identity") == 0 ? 0 : 1;
}

/* For every device value v, made before cut made[v] + 1 (-1: the input)
 * and needed up to cut need[v]: it crosses cuts made[v] + 1 .. need[v].
 * Counted with differences over the cuts: O(nodes + values), so that a
 * graph of many nodes (the fuzz target's) costs no more than reading it. */
static int count_crossings(const dp__onnx_graph *g, const int *made, const int *need,
                           dp__onnx_stages *s)
{
    int n = g->nnodes;
    int64_t *dcount = dp__calloc((size_t)n + 2, sizeof *dcount);
    int64_t *dsum = dp__calloc((size_t)n + 2, sizeof *dsum);
    if (!dcount || !dsum) {
        dp__free(dcount);
        dp__free(dsum);
        return DP_ENOMEM;
    }
    for (int v = 0; v < g->nvalues; v++) {
        if (!is_device_value(&g->values[v]) || made[v] < -1 || need[v] <= made[v])
            continue;
        dcount[made[v] + 1]++;
        dcount[need[v] + 1]--;
        dsum[made[v] + 1] += v;
        dsum[need[v] + 1] -= v;
    }
    int64_t count = 0, sum = 0;
    for (int c = 0; c <= n; c++) {
        count += dcount[c];
        sum += dsum[c];
        s->ncross[c] = (int)DP_MIN(count, 1 << 30);
        s->cross[c] = count == 1 ? (int)sum : -1;
    }
    dp__free(dcount);
    dp__free(dsum);
    return 0;
}

int dp__onnx_plan_stages(dp__onnx_graph *g)
{
    int n = g->nnodes, nv = g->nvalues;
    int *made = dp__malloc((size_t)DP_MAX(nv, 1) * sizeof *made);
    int *need = dp__malloc((size_t)DP_MAX(nv, 1) * sizeof *need);
    int *rows = dp__calloc((size_t)n + 1, sizeof *rows);
    bool *grad = dp__calloc((size_t)DP_MAX(nv, 1), sizeof *grad);
    bool *host = dp__calloc((size_t)DP_MAX(n, 1), sizeof *host);
    int rc = made && need && rows && grad && host ? 0 : DP_ENOMEM;
    for (int v = 0; rc == 0 && v < nv; v++) {
        made[v] = -2; /* not a value a node or the input makes */
        need[v] = -1; /* needed by no node */
        grad[v] = g->values[v].where == DP__OV_PARAM;
    }
    for (int k = 0; rc == 0 && k < g->ninputs; k++)
        made[g->inputs[k]] = -1;
    for (int i = 0; rc == 0 && i < n; i++) {
        const dp__onnx_node *nd = &g->nodes[i];
        host[i] = runs_on_host(g, nd);
        for (int k = 0; k < nd->nout; k++)
            if (nd->out[k] >= 0)
                made[nd->out[k]] = i;
        rows[i + 1] = rows[i] + rows_of_node(g, nd, host[i], grad);
    }
    for (int k = 0; rc == 0 && k < g->noutputs; k++)
        need[g->outputs[k]] = n;
    /* Backwards: a node needs its inputs up to itself; a host node before a
     * cut is run again after it when its outputs are needed there, so its
     * inputs are needed as long as its outputs are. */
    for (int i = n - 1; rc == 0 && i >= 0; i--) {
        const dp__onnx_node *nd = &g->nodes[i];
        int until = i;
        for (int k = 0; host[i] && k < nd->nout; k++)
            if (nd->out[k] >= 0)
                until = DP_MAX(until, need[nd->out[k]]);
        for (int k = 0; k < nd->nin; k++)
            if (nd->in[k] >= 0)
                need[nd->in[k]] = DP_MAX(need[nd->in[k]], until);
    }
    int nrows = rc == 0 ? rows[n] : 0;
    size_t ints = 3 * ((size_t)n + 1) + (size_t)nrows + 1;
    dp__onnx_stages *s = NULL;
    if (rc == 0 && !(s = dp__calloc(1, sizeof *s + ints * sizeof(int))))
        rc = DP_ENOMEM;
    if (rc == 0) {
        s->ncross = (int *)(s + 1);
        s->cross = s->ncross + n + 1;
        s->node_rows = s->cross + n + 1;
        s->row_cut = s->node_rows + n + 1;
        s->nrows = nrows;
        memcpy(s->node_rows, rows, ((size_t)n + 1) * sizeof *rows);
        g->stages = s;
        rc = count_crossings(g, made, need, s);
    }
    if (rc == 0) {
        /* Row r may start a stage at the first cut of one crossing value
         * that has r rows before it (host nodes and Identity between two
         * rows give a row several cuts). Row 0 starts from the input. */
        for (int r = 0; r <= nrows; r++)
            s->row_cut[r] = r == 0 ? 0 : -1;
        for (int c = 1; c < n; c++) {
            int r = s->node_rows[c];
            if (r > 0 && r < nrows && s->row_cut[r] < 0 && s->ncross[c] == 1)
                s->row_cut[r] = c;
        }
    }
    dp__free(made);
    dp__free(need);
    dp__free(rows);
    dp__free(grad);
    dp__free(host);
    return rc;
}

void dp__onnx_stage_starts(const dp_model_def *def, dp_layer_summary *rows, int n)
{
    const dp__onnx_graph *g = def->user;
    const dp__onnx_stages *s = g->stages;
    bool known = s && s->nrows == n;
    if (!known && n > 1)
        DP_WARN("%s: the summary has %d rows where the graph's nodes record %d: it is not "
                "split into pipeline stages",
                g->name, n, s ? s->nrows : -1);
    for (int r = 0; r < n; r++)
        rows[r].can_start = r == 0 || (known && s->row_cut[r] >= 0);
}

/* The node that records row r. */
static int node_of_row(const dp__onnx_graph *g, int r)
{
    int i = 0;
    while (i + 1 < g->nnodes && g->stages->node_rows[i + 1] <= r)
        i++;
    return i;
}

/* Logs why no stage starts at row r (ends at row r - 1) and returns
 * DP_EINVAL: the tensors crossing the cut before r's node. */
static int refuse_cut(const dp__onnx_graph *g, int r, bool start)
{
    int i = node_of_row(g, r);
    char nb[32];
    const char *name = dp__onnx_node_name(g, &g->nodes[i], nb, sizeof nb);
    int ncross = g->stages->ncross[i];
    if (start)
        DP_ERROR("%s: a stage cannot start at layer %d (node '%s', %s): %d tensors cross from "
                 "the nodes before it, a stage receives one",
                 g->name, r, name, g->nodes[i].op->type, ncross);
    else
        DP_ERROR("%s: a stage cannot end at layer %d: %d tensors cross from it to node '%s' "
                 "(%s), a stage passes one on",
                 g->name, r - 1, ncross, name, g->nodes[i].op->type);
    return DP_EINVAL;
}

/* Whether every input node n has is in a slot (a host node before a
 * stage's first cut that it can compute again). */
static bool inputs_ready(const dp__onnx_slot *slots, const dp__onnx_node *n)
{
    for (int k = 0; k < n->nin; k++)
        if (n->in[k] >= 0 && !slots[n->in[k]].t && !slots[n->in[k]].h)
            return false;
    return true;
}

/* Nodes from..to - 1 with x as value xv; *y gets value yv's tensor. Host
 * nodes before `from` run again where their inputs are at hand: the
 * constants and, through Shape, x (the stage's other host inputs, by the
 * cut's definition, need nothing else). */
static int run_nodes(const dp__onnx_graph *g, dp_model_t *m, int from, int to, int xv,
                     dp_tensor_t *x, int yv, bool train, dp_tensor_t **y)
{
    dp__onnx_slot *slots = dp__calloc((size_t)g->nvalues, sizeof *slots);
    if (!slots)
        return DP_ENOMEM;
    dp_params_t *P = dp_model_params(m), *B = dp_model_buffers(m);
    dp__onnx_run r = {.g = g, .m = m, .train = train, .slots = slots};
    for (int v = 0; v < g->nvalues; v++) {
        const dp__onnx_value *val = &g->values[v];
        if (val->where == DP__OV_PARAM)
            slots[v].t = dp_params_get(P, val->index);
        else if (val->where == DP__OV_BUFFER)
            slots[v].t = dp_params_get(B, val->index);
        else if (val->where == DP__OV_CONST)
            slots[v].h = &g->consts[val->index];
    }
    slots[xv].t = x;
    int rc = 0;
    for (int i = 0; rc == 0 && i < from; i++)
        if (runs_on_host(g, &g->nodes[i]) && inputs_ready(slots, &g->nodes[i]))
            rc = dp__onnx_run_node(&r, &g->nodes[i]);
    for (int i = from; rc == 0 && i < to; i++)
        rc = dp__onnx_run_node(&r, &g->nodes[i]);
    if (rc == 0 && !(*y = slots[yv].t)) {
        DP_ERROR("%s: the graph output '%s' is a constant, not a tensor", g->name,
                 g->values[yv].name);
        rc = DP_EFORMAT;
    }
    dp__onnx_free_slots(g, slots);
    return rc;
}

int dp__onnx_forward_layers(dp_model_t *m, dp_tensor_t *x, int first, int last, bool train,
                            dp_tensor_t **y)
{
    const dp__onnx_graph *g = dp_model_user(m);
    const dp__onnx_stages *s = g->stages;
    if (first < 0 || first > last || last >= s->nrows) {
        DP_ERROR("%s: layers %d-%d: the model has layers 0-%d", g->name, first, last, s->nrows - 1);
        return DP_EINVAL;
    }
    int from = s->row_cut[first];
    int to = last + 1 == s->nrows ? g->nnodes : s->row_cut[last + 1];
    if (from < 0)
        return refuse_cut(g, first, true);
    if (to < 0)
        return refuse_cut(g, last + 1, false);
    int xv = from == 0 ? g->inputs[0] : s->cross[from];
    int yv = to == g->nnodes ? g->outputs[0] : s->cross[to];
    if (xv == yv) {
        /* Rows whose ops no later node reads: the stage would hand its
         * input on as its output, which has no backward of its own. */
        DP_ERROR("%s: layers %d-%d hand their input '%s' on unchanged", g->name, first, last,
                 g->values[xv].name);
        return DP_EINVAL;
    }
    return run_nodes(g, m, from, to, xv, x, yv, train, y);
}
