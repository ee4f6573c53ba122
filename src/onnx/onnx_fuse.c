/* Sub-graphs that torch.onnx.export (1.13) writes for one PyTorch module,
 * recognised at load and run as that module's one op: nn.GELU() as
 *   Div(x, sqrt 2) -> Erf -> Add 1 -> Mul x -> Mul 0.5
 * and nn.GELU(approximate='tanh') as
 *   Mul(x, x) -> Mul x -> Mul 0.044715 -> Add x -> Mul sqrt(2 / pi) ->
 *   Tanh -> Add 1 -> Mul x -> Mul 0.5
 * (each product and sum in either order, the constants Constant nodes or
 * initializers of one value). The last Mul becomes the GELU, reading x;
 * the others run nothing. Only where each inner value is read by the next
 * node alone (the readers dp__onnx_count_readers counted, kept as the
 * fusions change what the nodes read), so nothing else sees a value the
 * fusion drops.
 *
 * And nn.AvgPool2d(k, s, padding=p) (count_include_pad=True), which torch
 * writes as Pad(x, p of zeros on H and W) -> AveragePool(pads 0): the
 * pool of x with pads p, counted in the mean, is the same. */
#include "onnx/onnx_ops.h"

#include "core/internal.h"

#include <math.h>
#include <string.h>

/* Whether v is a constant of one float value within 1e-6 of want: an
 * initializer or a Constant node's "value". */
static bool is_const(dp__onnx_graph *g, int v, double want)
{
    const Onnx__TensorProto *t = NULL;
    if (v < 0)
        return false;
    if (g->values[v].init >= 0) {
        t = g->model->graph->initializer[g->values[v].init];
    } else {
        dp__onnx_node *p = dp__onnx_producer(g, v);
        const Onnx__AttributeProto *a =
            p && p->proto->op_type && strcmp(p->proto->op_type, "Constant") == 0
                ? dp__onnx_attr(p, "value")
                : NULL;
        t = a ? a->t : NULL;
    }
    if (!t || !dp__onnx_is_float(t) || dp__onnx_numel(t) != 1)
        return false;
    float f;
    dp__onnx_to_floats(t, &f);
    return fabs((double)f - want) <= 1e-6 * fmax(1.0, fabs(want));
}

/* The node of type `type` producing v, read only once, with two inputs;
 * NULL otherwise. */
static dp__onnx_node *single(dp__onnx_graph *g, int v, const char *type, int nin)
{
    dp__onnx_node *p = dp__onnx_producer(g, v);
    if (!p || !p->proto->op_type || strcmp(p->proto->op_type, type) != 0 || p->nin != nin ||
        p->nout != 1 || g->values[v].readers != 1)
        return NULL;
    return p;
}

/* For a two-input node, the input that is not `v` (-1 if v is not one). */
static int other(const dp__onnx_node *n, int v)
{
    return n->in[0] == v ? n->in[1] : n->in[1] == v ? n->in[0] : -1;
}

/* Of a two-input node n, the input that is a constant `c` is dropped: the
 * other one, or -1. */
static int beside_const(dp__onnx_graph *g, const dp__onnx_node *n, double c)
{
    if (n->nin != 2)
        return -1;
    return is_const(g, n->in[1], c) ? n->in[0] : is_const(g, n->in[0], c) ? n->in[1] : -1;
}

/* x * (1 + inner) * 0.5 ending at `last` (a Mul): the value that is
 * (1 + inner)'s inner, and x, or -1. *mul_x and *add1 the nodes. */
static int outer(dp__onnx_graph *g, dp__onnx_node *last, int *x, dp__onnx_node **mul_x,
                 dp__onnx_node **add1)
{
    int m = beside_const(g, last, 0.5);
    *mul_x = single(g, m, "Mul", 2);
    if (!*mul_x)
        return -1;
    /* one input of mul_x is 1 + inner, the other x */
    for (int k = 0; k < 2; k++) {
        *add1 = single(g, (*mul_x)->in[k], "Add", 2);
        int inner = *add1 ? beside_const(g, *add1, 1.0) : -1;
        if (inner >= 0) {
            *x = (*mul_x)->in[1 - k];
            return inner;
        }
    }
    return -1;
}

/* Node n runs nothing from here on, and reads nothing. */
static void drop(dp__onnx_graph *g, dp__onnx_node *n, const dp__onnx_op *nothing)
{
    for (int k = 0; k < n->nin; k++)
        if (n->in[k] >= 0)
            g->values[n->in[k]].readers--;
    n->op = nothing;
    n->nin = n->nout = 0;
}

/* Node n reads value v alone from here on. */
static void read_only(dp__onnx_graph *g, dp__onnx_node *n, int v)
{
    for (int k = 0; k < n->nin; k++)
        if (n->in[k] >= 0)
            g->values[n->in[k]].readers--;
    n->in[0] = v;
    n->nin = 1;
    g->values[v].readers++;
}

/* The GELU ending at `last`, or false. */
static bool fuse_at(dp__onnx_graph *g, dp__onnx_node *last)
{
    dp__onnx_node *mul_x, *add1, *chain[6];
    int x, inner = outer(g, last, &x, &mul_x, &add1), n = 0;
    if (inner < 0)
        return false;
    bool tanh_form = false;
    dp__onnx_node *erf = single(g, inner, "Erf", 1), *t = single(g, inner, "Tanh", 1);
    if (erf) {
        /* erf(x / sqrt 2) */
        dp__onnx_node *div = single(g, erf->in[0], "Div", 2);
        if (!div || div->in[0] != x || !is_const(g, div->in[1], sqrt(2.0)))
            return false;
        chain[n++] = erf;
        chain[n++] = div;
    } else if (t) {
        /* tanh(sqrt(2 / pi) (x + 0.044715 x x x)) */
        dp__onnx_node *scale = single(g, t->in[0], "Mul", 2);
        dp__onnx_node *sum =
            scale ? single(g, beside_const(g, scale, 0.7978845608028654), "Add", 2) : NULL;
        dp__onnx_node *cubic = sum ? single(g, other(sum, x), "Mul", 2) : NULL;
        dp__onnx_node *cube = cubic ? single(g, beside_const(g, cubic, 0.044715), "Mul", 2) : NULL;
        dp__onnx_node *square = cube ? single(g, other(cube, x), "Mul", 2) : NULL;
        if (!square || square->in[0] != x || square->in[1] != x)
            return false;
        dp__onnx_node *found[] = {t, scale, sum, cubic, cube, square};
        memcpy(chain, found, sizeof found);
        n = 6;
        tanh_form = true;
    } else {
        return false;
    }
    const dp__onnx_op *nothing = dp__onnx_find_op("Identity");
    for (int i = 0; i < n; i++)
        drop(g, chain[i], nothing);
    drop(g, mul_x, nothing);
    drop(g, add1, nothing);
    last->op = dp__onnx_gelu_op(tanh_form);
    read_only(g, last, x);
    return true;
}

void dp__onnx_fuse_gelu(dp__onnx_graph *g)
{
    for (int i = 0; i < g->nnodes; i++) {
        dp__onnx_node *n = &g->nodes[i];
        if (!n->op && n->proto->op_type && strcmp(n->proto->op_type, "Mul") == 0 && n->nin == 2 &&
            n->nout == 1)
            fuse_at(g, n);
    }
}

/* v's values as int64 when it is a constant (an initializer or a Constant
 * node's "value") of at most max of them; their count, or -1. */
static int const_ints(dp__onnx_graph *g, int v, int64_t *out, int max)
{
    const Onnx__TensorProto *t = NULL;
    if (v < 0)
        return -1;
    if (g->values[v].init >= 0) {
        t = g->model->graph->initializer[g->values[v].init];
    } else {
        dp__onnx_node *p = dp__onnx_producer(g, v);
        const Onnx__AttributeProto *a =
            p && p->op && strcmp(p->op->type, "Constant") == 0 ? dp__onnx_attr(p, "value") : NULL;
        t = a ? a->t : NULL;
    }
    if (!t || dp__onnx_numel(t) > max)
        return -1;
    dp__onnx_to_int64s(t, out);
    return (int)dp__onnx_numel(t);
}

void dp__onnx_fuse_pad_pool(dp__onnx_graph *g)
{
    for (int i = 0; i < g->nnodes; i++) {
        /* from each AveragePool to the Pad before it, when that one's
         * output goes to the pool alone */
        dp__onnx_node *pool = &g->nodes[i];
        if (!pool->op || strcmp(pool->op->type, "AveragePool") != 0 || pool->nin < 1)
            continue;
        dp__onnx_node *pad = dp__onnx_producer(g, pool->in[0]);
        if (!pad || !pad->op || strcmp(pad->op->type, "Pad") != 0 || pad->nout != 1 ||
            pad->out[0] < 0)
            continue;
        int64_t p[8];
        const Onnx__AttributeProto *a = g->opset < 11 ? dp__onnx_attr(pad, "pads") : NULL;
        int np = a ? (int)a->n_ints : const_ints(g, pad->nin > 1 ? pad->in[1] : -1, p, 8);
        for (int k = 0; a && k < np && k < 8; k++)
            p[k] = a->ints[k];
        float value = g->opset < 11 ? dp__onnx_attr_float(pad, "value", 0.0f) : 0.0f;
        bool zero = g->opset < 11 ? value == 0.0f
                                  : pad->nin < 3 || pad->in[2] < 0 || is_const(g, pad->in[2], 0.0);
        /* pads [N, C, top, left, N, C, bottom, right]: the rows and columns
         * alike on both sides */
        if (np != 8 || !zero || p[0] || p[1] || p[4] || p[5] || p[2] != p[6] || p[3] != p[7] ||
            g->values[pad->out[0]].readers != 1)
            continue;
        dp_pool2d_params *pp = &pool->pool;
        if (pp->pad_h || pp->pad_w || pp->ceil_mode || 2 * p[2] > pp->kernel_h ||
            2 * p[3] > pp->kernel_w)
            continue;
        pp->pad_h = (int)p[2];
        pp->pad_w = (int)p[3];
        pp->exclude_pad = false; /* the padded zeros count */
        g->values[pool->in[0]].readers--;
        pool->in[0] = pad->in[0];
        g->values[pool->in[0]].readers++;
        drop(g, pad, dp__onnx_find_op("Identity"));
    }
}
