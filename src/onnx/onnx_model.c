/* ONNX graphs as model definitions (onnx_model.h): every value named in the
 * graph found once, the nodes put in an order that runs (a cycle is
 * refused), each node's operator looked up and its attributes read, the
 * float initializers that nodes read as tensors made parameters (batch
 * norm's running statistics buffers) named by the initializers' names and
 * starting from their values, and a run of the nodes (onnx_load.c makes
 * the definition around it). */
#include "onnx/onnx_model.h"

#include "core/internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *dp__onnx_node_name(const dp__onnx_graph *g, const dp__onnx_node *n, char *buf,
                               size_t size)
{
    if (n->proto->name && n->proto->name[0])
        return n->proto->name;
    snprintf(buf, size, "#%d", (int)(n - g->nodes));
    return buf;
}

int dp__onnx_node_error(const dp__onnx_graph *g, const dp__onnx_node *n, const char *fmt, ...)
{
    char what[512], nb[32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    DP_ERROR("%s: node '%s' (%s): %s", g->name, dp__onnx_node_name(g, n, nb, sizeof nb),
             n->proto->op_type ? n->proto->op_type : "?", what);
    return DP_EFORMAT;
}

/* The context of a running node's errors: "<file>: node 'NAME' (TYPE)",
 * as dp__onnx_node_error begins. */
typedef struct node_where {
    const dp__onnx_graph *g;
    const dp__onnx_node *n;
} node_where;

static void describe_node(const void *arg, char *buf, size_t size)
{
    const node_where *w = arg;
    char nb[32];
    snprintf(buf, size, "%s: node '%s' (%s)", w->g->name,
             dp__onnx_node_name(w->g, w->n, nb, sizeof nb),
             w->n->proto->op_type ? w->n->proto->op_type : "?");
}

int dp__onnx_run_node(dp__onnx_run *r, const dp__onnx_node *n)
{
    node_where w = {r->g, n};
    dp__log_context was = dp__log_context_set((dp__log_context){describe_node, &w});
    int rc = n->op->run(r, n);
    dp__log_context_set(was);
    return rc;
}

const Onnx__AttributeProto *dp__onnx_attr(const dp__onnx_node *n, const char *name)
{
    for (size_t i = 0; i < n->proto->n_attribute; i++)
        if (n->proto->attribute[i]->name && strcmp(n->proto->attribute[i]->name, name) == 0)
            return n->proto->attribute[i];
    return NULL;
}

int64_t dp__onnx_attr_int(const dp__onnx_node *n, const char *name, int64_t dflt)
{
    const Onnx__AttributeProto *a = dp__onnx_attr(n, name);
    return a && a->has_i ? a->i : dflt;
}

float dp__onnx_attr_float(const dp__onnx_node *n, const char *name, float dflt)
{
    const Onnx__AttributeProto *a = dp__onnx_attr(n, name);
    return a && a->has_f ? a->f : dflt;
}

/* ---- names to values: open addressing over a power of two ---------------- */

typedef struct name_map {
    int *slot; /* value index + 1, 0 empty */
    size_t mask;
} name_map;

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int map_find(const name_map *mp, const dp__onnx_graph *g, const char *name)
{
    for (size_t i = hash(name) & mp->mask;; i = (i + 1) & mp->mask) {
        if (!mp->slot[i])
            return -1;
        if (strcmp(g->values[mp->slot[i] - 1].name, name) == 0)
            return mp->slot[i] - 1;
    }
}

/* Adds a value named `name`; DP_EFORMAT (logged) when the name is taken. */
static int add_value(name_map *mp, dp__onnx_graph *g, const char *name, dp__onnx_where where,
                     int index, int producer)
{
    if (!name || !name[0]) {
        DP_ERROR("%s: a value without a name is %s", g->name,
                 producer >= 0 ? "a node's output" : "a graph input or initializer");
        return DP_EFORMAT;
    }
    if (map_find(mp, g, name) >= 0) {
        DP_ERROR("%s: the value '%s' is given twice (by two nodes, inputs or initializers)",
                 g->name, name);
        return DP_EFORMAT;
    }
    size_t i = hash(name) & mp->mask;
    while (mp->slot[i])
        i = (i + 1) & mp->mask;
    g->values[g->nvalues] = (dp__onnx_value){
        .name = name, .where = where, .index = index, .producer = producer, .init = -1};
    mp->slot[i] = ++g->nvalues;
    return 0;
}

/* ---- building ------------------------------------------------------------ */

void dp__onnx_count_readers(dp__onnx_graph *g)
{
    for (int v = 0; v < g->nvalues; v++)
        g->values[v].readers = 0;
    for (int i = 0; i < g->nnodes; i++)
        for (int k = 0; k < g->nodes[i].nin; k++)
            if (g->nodes[i].in[k] >= 0)
                g->values[g->nodes[i].in[k]].readers++;
    for (int k = 0; k < g->noutputs; k++)
        g->values[g->outputs[k]].readers++;
}

dp__onnx_node *dp__onnx_producer(const dp__onnx_graph *g, int v)
{
    return v >= 0 && g->values[v].producer >= 0 ? &g->nodes[g->values[v].producer] : NULL;
}

void dp__onnx_graph_free(dp__onnx_graph *g)
{
    if (!g)
        return;
    for (int i = 0; g->consts && i < g->nconsts; i++) {
        dp__free(g->consts[i].f);
        dp__free(g->consts[i].i);
    }
    dp__free(g->consts);
    dp__free(g->values);
    dp__free(g->nodes);
    dp__free(g->ports);
    dp__free(g->params);
    dp__free(g->buffers);
    dp__free(g->param_init);
    dp__free(g->buffer_init);
    dp__free(g->bn_names);
    dp__free(g->bn_store);
    dp__free(g->init_values);
    dp__free(g->stages);
    dp__free(g->name);
    dp__onnx_free(g->model);
    dp__free(g);
}

/* A host value from a tensor of the file (an initializer, a Constant). */
int dp__onnx_host_from_tensor(dp__onnx_host *h, const Onnx__TensorProto *t)
{
    h->ndim = (int)t->n_dims;
    if (t->n_dims) /* a scalar has no dims array */
        memcpy(h->shape, t->dims, t->n_dims * sizeof *t->dims);
    h->numel = dp__onnx_numel(t);
    h->is_float = dp__onnx_is_float(t);
    size_t n = (size_t)DP_MAX(h->numel, 1);
    if (h->is_float) {
        if (!(h->f = dp__malloc(n * sizeof *h->f)))
            return DP_ENOMEM;
        dp__onnx_to_floats(t, h->f);
    } else {
        if (!(h->i = dp__malloc(n * sizeof *h->i)))
            return DP_ENOMEM;
        dp__onnx_to_int64s(t, h->i);
    }
    return 0;
}

/* Kahn's order over the nodes by the values they read; a node left over
 * sits on a cycle. `order` gets node indices of the file. */
static int sort_nodes(const dp__onnx_graph *g, const Onnx__GraphProto *gp, const int *producer_of,
                      const int *ins, const int *in_start, int *order)
{
    int n = (int)gp->n_node, done = 0;
    int *waiting = dp__calloc((size_t)DP_MAX(n, 1), sizeof *waiting);
    int *users_start = dp__calloc((size_t)n + 1, sizeof *users_start);
    int *users = dp__calloc((size_t)DP_MAX(in_start[n], 1), sizeof *users);
    int rc = 0;
    if (!waiting || !users_start || !users) {
        rc = DP_ENOMEM;
        goto out;
    }
    /* users of node j: the nodes reading one of its outputs (once per read). */
    for (int i = 0; i < n; i++)
        for (int k = in_start[i]; k < in_start[i + 1]; k++)
            if (ins[k] >= 0 && producer_of[ins[k]] >= 0) {
                users_start[producer_of[ins[k]] + 1]++;
                waiting[i]++;
            }
    for (int j = 0; j < n; j++)
        users_start[j + 1] += users_start[j];
    int *fill = dp__calloc((size_t)DP_MAX(n, 1), sizeof *fill);
    if (!fill) {
        rc = DP_ENOMEM;
        goto out;
    }
    for (int i = 0; i < n; i++)
        for (int k = in_start[i]; k < in_start[i + 1]; k++)
            if (ins[k] >= 0 && producer_of[ins[k]] >= 0) {
                int j = producer_of[ins[k]];
                users[users_start[j] + fill[j]++] = i;
            }
    dp__free(fill);
    for (int i = 0; i < n; i++)
        if (waiting[i] == 0)
            order[done++] = i;
    for (int head = 0; head < done; head++)
        for (int k = users_start[order[head]]; k < users_start[order[head] + 1]; k++)
            if (--waiting[users[k]] == 0)
                order[done++] = users[k];
    if (done < n) {
        int stuck = 0;
        while (waiting[stuck] == 0)
            stuck++;
        const Onnx__NodeProto *np = gp->node[stuck];
        DP_ERROR("%s: the graph has a cycle: node '%s' (%s) needs its own output, through %d "
                 "node(s) that never run",
                 g->name, np->name && np->name[0] ? np->name : "(unnamed)",
                 np->op_type ? np->op_type : "?", n - done);
        rc = DP_EFORMAT;
    }
out:
    dp__free(waiting);
    dp__free(users_start);
    dp__free(users);
    return rc;
}

/* Dimension d of the graph's input `name`, of rank g->in_rank: a size of
 * 1 or more (given), or a name; a sample (the dimensions after the batch)
 * no larger than DP_MAX_INPUT_CHANNELS x DP_MAX_INPUT_SIDE^2, the channels
 * of an (N, C, H, W) input at most DP_MAX_INPUT_CHANNELS and each other
 * dimension at most DP_MAX_INPUT_SIDE. */
static int check_input_dim(const dp__onnx_graph *g, const char *name, int d, int64_t v, bool given)
{
    if (!given)
        return 0; /* dim_param: any batch, or the data's size */
    int64_t max = d == 0                      ? INT32_MAX
                  : d == 1 && g->in_rank == 4 ? DP_MAX_INPUT_CHANNELS
                                              : DP_MAX_INPUT_SIDE;
    if (v >= 1 && v <= max)
        return 0;
    if (v < 1)
        DP_ERROR("%s: the input '%s' declares dimension %d as %lld; a dimension is a size of 1 "
                 "or more, or a name (dim_param)",
                 g->name, name, d, (long long)v);
    else if (d == 0)
        DP_ERROR("%s: the input '%s' declares a batch of %lld, more than %lld", g->name, name,
                 (long long)v, (long long)max);
    else
        DP_ERROR("%s: the input '%s' declares dimension %d as %lld, more than %lld (dptrain's "
                 "largest sample is %dx%dx%d)",
                 g->name, name, d, (long long)v, (long long)max, DP_MAX_INPUT_CHANNELS,
                 DP_MAX_INPUT_SIDE, DP_MAX_INPUT_SIDE);
    return DP_EFORMAT;
}

/* The graph's first input's declared shape, checked against in_chw. */
static int read_input_shape(dp__onnx_graph *g, const Onnx__ValueInfoProto *vi,
                            const int64_t *in_chw)
{
    const Onnx__TypeProto *t = vi->type;
    g->in_rank = 0;
    if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type ||
        !t->tensor_type->shape)
        return 0;
    const Onnx__TensorShapeProto *s = t->tensor_type->shape;
    if (s->n_dim > DP__ONNX_MAX_RANK) {
        DP_ERROR("%s: the input '%s' has %zu dimensions, more than %d", g->name, vi->name, s->n_dim,
                 DP__ONNX_MAX_RANK);
        return DP_EFORMAT;
    }
    g->in_rank = (int)s->n_dim;
    for (int d = 0; d < g->in_rank; d++) {
        bool given = s->dim[d]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        int64_t v = given ? s->dim[d]->dim_value : -1;
        g->in_shape[d] = v;
        DP_TRY(check_input_dim(g, vi->name, d, v, given));
    }
    if (!in_chw || g->in_rank != 4)
        return 0;
    for (int d = 1; d < 4; d++)
        if (g->in_shape[d] > 0 && g->in_shape[d] != in_chw[d - 1]) {
            DP_ERROR("%s: the graph takes %lldx%lldx%lld inputs, the data are %lldx%lldx%lld",
                     g->name, (long long)g->in_shape[1], (long long)g->in_shape[2],
                     (long long)g->in_shape[3], (long long)in_chw[0], (long long)in_chw[1],
                     (long long)in_chw[2]);
            return DP_ESHAPE;
        }
    return 0;
}

int dp__onnx_build(dp__onnx_graph *g, const int64_t *in_chw)
{
    const Onnx__GraphProto *gp = g->model->graph;
    size_t cap = gp->n_input + gp->n_initializer;
    for (size_t i = 0; i < gp->n_node; i++)
        cap += gp->node[i]->n_output;
    size_t slots = 16;
    while (slots < 2 * cap)
        slots *= 2;
    name_map mp = {.slot = dp__calloc(slots, sizeof(int)), .mask = slots - 1};
    g->values = dp__calloc(DP_MAX(cap, 1), sizeof *g->values);
    g->nodes = dp__calloc(DP_MAX(gp->n_node, 1), sizeof *g->nodes);
    g->consts = dp__calloc(DP_MAX(gp->n_initializer, 1), sizeof *g->consts);
    size_t nin = 0, nout = 0;
    for (size_t i = 0; i < gp->n_node; i++) {
        nin += gp->node[i]->n_input;
        nout += gp->node[i]->n_output;
    }
    g->ports = dp__calloc(DP_MAX(nin + nout, 1), sizeof *g->ports);
    int *ins = dp__calloc(DP_MAX(nin, 1), sizeof *ins);
    int *in_start = dp__calloc(gp->n_node + 1, sizeof *in_start);
    int *producer_of = dp__calloc(DP_MAX(cap, 1), sizeof *producer_of);
    int *order = dp__calloc(DP_MAX(gp->n_node, 1), sizeof *order);
    int rc = 0;
    if (!mp.slot || !g->values || !g->nodes || !g->consts || !g->ports || !ins || !in_start ||
        !producer_of || !order) {
        rc = DP_ENOMEM;
        goto out;
    }
    for (size_t i = 0; rc == 0 && i < gp->n_initializer; i++) {
        rc = add_value(&mp, g, gp->initializer[i]->name, DP__OV_CONST, -1, -1);
        if (rc == 0)
            g->values[g->nvalues - 1].init = (int)i;
    }
    for (size_t i = 0; rc == 0 && i < gp->n_input; i++) {
        const char *name = gp->input[i]->name;
        if (name && map_find(&mp, g, name) >= 0)
            continue; /* an initializer listed among the inputs (IR 3) */
        if (g->ninputs == DP__ONNX_MAX_IO) {
            DP_ERROR("%s: more than %d graph inputs", g->name, DP__ONNX_MAX_IO);
            rc = DP_EFORMAT;
            break;
        }
        if (g->ninputs == 0)
            rc = read_input_shape(g, gp->input[i], NULL);
        g->inputs[g->ninputs] = g->nvalues;
        if (rc == 0)
            rc = add_value(&mp, g, name, DP__OV_INPUT, g->ninputs++, -1);
    }
    for (size_t i = 0; rc == 0 && i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        for (size_t k = 0; rc == 0 && k < np->n_output; k++) {
            if (!np->output[k][0])
                continue; /* an optional output left out */
            producer_of[g->nvalues] = (int)i;
            rc = add_value(&mp, g, np->output[k], DP__OV_NODE, 0, (int)i);
        }
    }
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].where != DP__OV_NODE)
            producer_of[v] = -1;
    for (size_t i = 0; rc == 0 && i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        in_start[i + 1] = in_start[i] + (int)np->n_input;
        for (size_t k = 0; k < np->n_input; k++) {
            int v = np->input[k][0] ? map_find(&mp, g, np->input[k]) : -1;
            if (np->input[k][0] && v < 0) {
                DP_ERROR("%s: node '%s' (%s) reads '%s', which no node, graph input or "
                         "initializer gives",
                         g->name, np->name && np->name[0] ? np->name : "(unnamed)",
                         np->op_type ? np->op_type : "?", np->input[k]);
                rc = DP_EFORMAT;
                break;
            }
            ins[in_start[i] + (int)k] = v;
        }
    }
    for (size_t i = 0; rc == 0 && i < gp->n_output; i++) {
        int v = gp->output[i]->name ? map_find(&mp, g, gp->output[i]->name) : -1;
        if (v < 0 || g->noutputs == DP__ONNX_MAX_IO) {
            DP_ERROR("%s: the graph output '%s' is %s", g->name,
                     gp->output[i]->name ? gp->output[i]->name : "",
                     v < 0 ? "given by no node, input or initializer" : "one too many");
            rc = DP_EFORMAT;
            break;
        }
        g->outputs[g->noutputs++] = v;
    }
    if (rc == 0 && (g->ninputs == 0 || g->noutputs == 0)) {
        DP_ERROR("%s: the graph has no %s", g->name, g->ninputs == 0 ? "input" : "output");
        rc = DP_EFORMAT;
    }
    if (rc == 0)
        rc = sort_nodes(g, gp, producer_of, ins, in_start, order);
    /* The nodes in that order, their inputs and outputs as values (in
     * g->ports: the inputs in the file's order of nodes, then the
     * outputs), each value knowing its producer's place. */
    size_t out_at = nin;
    for (size_t r = 0; rc == 0 && r < gp->n_node; r++) {
        int i = order[r];
        const Onnx__NodeProto *np = gp->node[i];
        dp__onnx_node *n = &g->nodes[g->nnodes++];
        n->proto = np;
        if (np->n_input > DP__ONNX_MAX_IO || np->n_output > DP__ONNX_MAX_IO) {
            rc = dp__onnx_node_error(g, n, "more than %d inputs or outputs", DP__ONNX_MAX_IO);
            break;
        }
        n->nin = (int)np->n_input;
        n->in = g->ports + in_start[i];
        for (int k = 0; k < n->nin; k++)
            n->in[k] = ins[in_start[i] + k];
        n->nout = (int)np->n_output;
        n->out = g->ports + out_at;
        out_at += np->n_output;
        for (int k = 0; k < n->nout; k++) {
            n->out[k] = np->output[k][0] ? map_find(&mp, g, np->output[k]) : -1;
            if (n->out[k] >= 0)
                g->values[n->out[k]].producer = (int)r;
        }
    }
    if (rc == 0)
        rc = dp__onnx_bind(g);
    /* The first input's declared shape, against the data's. */
    for (size_t i = 0; rc == 0 && i < gp->n_input; i++)
        if (strcmp(gp->input[i]->name, g->values[g->inputs[0]].name) == 0)
            rc = read_input_shape(g, gp->input[i], in_chw);
out:
    dp__free(mp.slot);
    dp__free(ins);
    dp__free(in_start);
    dp__free(producer_of);
    dp__free(order);
    return rc;
}

/* ---- running ------------------------------------------------------------- */

int dp__onnx_run_graph(const dp__onnx_graph *g, dp_model_t *m, dp_tensor_t *const *params,
                       dp_tensor_t *const *buffers, dp_tensor_t *const *inputs, bool train,
                       dp_tensor_t **outputs)
{
    dp__onnx_slot *slots = dp__calloc((size_t)g->nvalues, sizeof *slots);
    if (!slots)
        return DP_ENOMEM;
    dp__onnx_run r = {
        .g = g, .m = m, .train = train, .params = params, .buffers = buffers, .slots = slots};
    for (int v = 0; v < g->nvalues; v++) {
        const dp__onnx_value *val = &g->values[v];
        if (val->where == DP__OV_INPUT)
            slots[v].t = inputs[val->index];
        else if (val->where == DP__OV_PARAM)
            slots[v].t = params[val->index];
        else if (val->where == DP__OV_BUFFER)
            slots[v].t = buffers[val->index];
        else if (val->where == DP__OV_CONST)
            slots[v].h = &g->consts[val->index];
    }
    int rc = 0;
    for (int i = 0; rc == 0 && i < g->nnodes; i++)
        rc = dp__onnx_run_node(&r, &g->nodes[i]);
    for (int k = 0; rc == 0 && k < g->noutputs; k++) {
        outputs[k] = slots[g->outputs[k]].t;
        if (!outputs[k]) {
            DP_ERROR("%s: the graph output '%s' is a constant, not a tensor", g->name,
                     g->values[g->outputs[k]].name);
            rc = DP_EFORMAT;
        }
    }
    dp__onnx_free_slots(g, slots);
    return rc;
}
