/* dp_model_export_onnx: a model with its current weights as an ONNX file
 * that ONNX Runtime runs, batch norm in inference mode. An imported graph
 * is written back with its initializers replaced; the built-in LeNet and
 * nn.Sequential files get a graph made here, node by node, each module as
 * torch.onnx.export writes it at opset 17. */
#include "nn/onnx_model.h"

#include "dp/dp.h"

#include "core/internal.h"
#include "device/device.h"
#include "nn/sequential_modules.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { EXPORT_OPSET = 17 };

/* ---- a graph under construction: every allocation in one list ---------- */

typedef struct builder {
    void **mem;
    size_t nmem, capmem;
    Onnx__NodeProto **nodes;
    size_t nnodes;
    Onnx__TensorProto **inits;
    size_t ninits;
    int next; /* for fresh value names */
    int rc;
} builder;

static void *b_alloc(builder *b, size_t bytes)
{
    if (b->rc)
        return NULL;
    if (b->nmem == b->capmem) {
        size_t cap = b->capmem ? 2 * b->capmem : 64;
        void **mem = realloc(b->mem, cap * sizeof *mem);
        if (!mem) {
            b->rc = DP_ENOMEM;
            return NULL;
        }
        b->mem = mem;
        b->capmem = cap;
    }
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p)
        b->rc = DP_ENOMEM;
    else
        b->mem[b->nmem++] = p;
    return p;
}

static void b_free(builder *b)
{
    for (size_t i = 0; i < b->nmem; i++)
        free(b->mem[i]);
    free(b->mem);
}

static char *b_str(builder *b, const char *s)
{
    char *p = b_alloc(b, strlen(s) + 1);
    if (p)
        strcpy(p, s);
    return p;
}

/* Appends to a growing array of pointers (nodes, initializers). */
static void b_push(builder *b, void ***arr, size_t *n, void *item)
{
    void **grown = b_alloc(b, (*n + 1) * sizeof *grown);
    if (!grown)
        return;
    if (*n)
        memcpy(grown, *arr, *n * sizeof *grown);
    grown[(*n)++] = item;
    *arr = grown;
}

static void b_attr_ints(builder *b, Onnx__NodeProto *n, const char *name, int count,
                        const int64_t *v, bool scalar)
{
    Onnx__AttributeProto *a = b_alloc(b, sizeof *a);
    int64_t *ints = b_alloc(b, (size_t)count * sizeof *ints);
    if (!a || !ints)
        return;
    onnx__attribute_proto__init(a);
    a->name = b_str(b, name);
    a->has_type = 1;
    if (scalar) {
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
        a->has_i = 1;
        a->i = v[0];
    } else {
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        memcpy(ints, v, (size_t)count * sizeof *ints);
        a->n_ints = (size_t)count;
        a->ints = ints;
    }
    b_push(b, (void ***)&n->attribute, &n->n_attribute, a);
}

static void b_attr_float(builder *b, Onnx__NodeProto *n, const char *name, float v)
{
    Onnx__AttributeProto *a = b_alloc(b, sizeof *a);
    if (!a)
        return;
    onnx__attribute_proto__init(a);
    a->name = b_str(b, name);
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    a->has_f = 1;
    a->f = v;
    b_push(b, (void ***)&n->attribute, &n->n_attribute, a);
}

/* A node of `op` reading ins[0..nin); its output's fresh name is returned. */
static Onnx__NodeProto *b_node(builder *b, const char *op, const char *const *ins, int nin,
                               const char **out)
{
    Onnx__NodeProto *n = b_alloc(b, sizeof *n);
    char **in = b_alloc(b, (size_t)nin * sizeof *in), **outs = b_alloc(b, sizeof *outs);
    char name[32];
    snprintf(name, sizeof name, "t%d", b->next++);
    if (!n || !in || !outs)
        return NULL;
    onnx__node_proto__init(n);
    for (int i = 0; i < nin; i++)
        in[i] = b_str(b, ins[i]);
    outs[0] = b_str(b, name);
    n->n_input = (size_t)nin;
    n->input = in;
    n->n_output = 1;
    n->output = outs;
    n->op_type = b_str(b, op);
    snprintf(name, sizeof name, "%s_%zu", op, b->nnodes);
    n->name = b_str(b, name);
    b_push(b, (void ***)&b->nodes, &b->nnodes, n);
    *out = outs[0];
    return b->rc ? NULL : n;
}

/* A float initializer `name` of shape[0..ndim) holding v. */
static void b_init(builder *b, const char *name, int ndim, const int64_t *shape, const float *v)
{
    Onnx__TensorProto *t = b_alloc(b, sizeof *t);
    int64_t *dims = b_alloc(b, (size_t)ndim * sizeof *dims);
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++)
        numel *= shape[d];
    uint8_t *raw = b_alloc(b, (size_t)numel * 4);
    if (!t || !dims || !raw)
        return;
    onnx__tensor_proto__init(t);
    if (ndim) /* a scalar has no shape */
        memcpy(dims, shape, (size_t)ndim * sizeof *dims);
    memcpy(raw, v, (size_t)numel * 4);
    t->n_dims = (size_t)ndim;
    t->dims = dims;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->name = b_str(b, name);
    t->has_raw_data = 1;
    t->raw_data.len = (size_t)numel * 4;
    t->raw_data.data = raw;
    b_push(b, (void ***)&b->inits, &b->ninits, t);
}

/* ---- the modules as ONNX nodes ------------------------------------------- */

typedef struct weights {
    const dp_param_spec *specs;
    const float *values; /* all of them, spec order */
    int64_t *offset;
} weights;

/* Initializer for spec i (named as it), once; its name. */
static const char *use(builder *b, const weights *w, int i, bool *added)
{
    if (!added[i])
        b_init(b, w->specs[i].name, w->specs[i].ndim, w->specs[i].shape, w->values + w->offset[i]);
    added[i] = true;
    return w->specs[i].name;
}

static const char *scalar(builder *b, float v)
{
    char name[32];
    snprintf(name, sizeof name, "c%d", b->next++);
    b_init(b, name, 0, NULL, &v);
    return b_str(b, name);
}

static void window(builder *b, Onnx__NodeProto *n, int kh, int kw, int sh, int sw, int ph, int pw)
{
    if (!n)
        return;
    const int64_t k[2] = {kh, kw}, s[2] = {sh ? sh : 1, sw ? sw : 1}, p[4] = {ph, pw, ph, pw};
    b_attr_ints(b, n, "kernel_shape", 2, k, false);
    b_attr_ints(b, n, "strides", 2, s, false);
    b_attr_ints(b, n, "pads", 4, p, false);
}

static const char *unary(builder *b, const char *op, const char *x)
{
    const char *y = x;
    b_node(b, op, &x, 1, &y);
    return y;
}

static const char *binary(builder *b, const char *op, const char *x1, const char *x2)
{
    const char *ins[2] = {x1, x2}, *y = x1;
    b_node(b, op, ins, 2, &y);
    return y;
}

/* Layer l of an nn.Sequential file after x; its output's name. */
static const char *seq_layer(builder *b, const dp__seq_layer *l, const weights *P, const weights *B,
                             bool *pa, bool *ba, const char *x)
{
    const char *y = x;
    Onnx__NodeProto *n = NULL;
    switch (l->kind) {
    case DP__SEQ_Conv2d: {
        const char *ins[3] = {x, use(b, P, l->weight, pa),
                              l->bias >= 0 ? use(b, P, l->bias, pa) : ""};
        const int64_t *ws = P->specs[l->weight].shape;
        n = b_node(b, "Conv", ins, l->bias >= 0 ? 3 : 2, &y);
        window(b, n, (int)ws[2], (int)ws[3], l->conv.stride_h, l->conv.stride_w, l->conv.pad_h,
               l->conv.pad_w);
        return l->conv.relu ? unary(b, "Relu", y) : y;
    }
    case DP__SEQ_Linear: {
        const char *ins[3] = {x, use(b, P, l->weight, pa),
                              l->bias >= 0 ? use(b, P, l->bias, pa) : ""};
        n = b_node(b, "Gemm", ins, l->bias >= 0 ? 3 : 2, &y);
        if (n)
            b_attr_ints(b, n, "transB", 1, (const int64_t[]){1}, true);
        return y;
    }
    case DP__SEQ_MaxPool2d:
    case DP__SEQ_AvgPool2d:
        n = b_node(b, l->kind == DP__SEQ_MaxPool2d ? "MaxPool" : "AveragePool", &x, 1, &y);
        window(b, n, l->pool.kernel_h, l->pool.kernel_w, l->pool.stride_h, l->pool.stride_w,
               l->pool.pad_h, l->pool.pad_w);
        if (n && l->kind == DP__SEQ_AvgPool2d)
            b_attr_ints(b, n, "count_include_pad", 1, (const int64_t[]){1}, true);
        return y;
    case DP__SEQ_AdaptiveAvgPool2d:
        if (l->out_h != 1 || l->out_w != 1) {
            DP_ERROR("AdaptiveAvgPool2d(%d, %d): only (1, 1) is exported (GlobalAveragePool)",
                     l->out_h, l->out_w);
            b->rc = DP_ENOTSUP;
            return y;
        }
        return unary(b, "GlobalAveragePool", x);
    case DP__SEQ_BatchNorm2d:
    case DP__SEQ_BatchNorm1d: {
        const char *ins[5] = {x, use(b, P, l->weight, pa), use(b, P, l->bias, pa),
                              use(b, B, l->running_mean, ba), use(b, B, l->running_var, ba)};
        n = b_node(b, "BatchNormalization", ins, 5, &y);
        if (n) {
            b_attr_float(b, n, "epsilon", l->eps);
            b_attr_float(b, n, "momentum", 1.0f - l->momentum);
        }
        return y;
    }
    case DP__SEQ_Flatten:
        n = b_node(b, "Flatten", &x, 1, &y);
        if (n)
            b_attr_ints(b, n, "axis", 1, (const int64_t[]){1}, true);
        return y;
    case DP__SEQ_Dropout:
        return x; /* inference */
    case DP__SEQ_ReLU:
        return unary(b, "Relu", x);
    case DP__SEQ_Sigmoid:
        return unary(b, "Sigmoid", x);
    case DP__SEQ_Tanh:
        return unary(b, "Tanh", x);
    case DP__SEQ_LeakyReLU:
    case DP__SEQ_ELU:
        n = b_node(b, l->kind == DP__SEQ_ELU ? "Elu" : "LeakyRelu", &x, 1, &y);
        if (n)
            b_attr_float(b, n, "alpha", l->number);
        return y;
    case DP__SEQ_ReLU6: {
        const char *ins[3] = {x, scalar(b, 0.0f), scalar(b, 6.0f)};
        b_node(b, "Clip", ins, 3, &y);
        return y;
    }
    case DP__SEQ_Hardswish:
        return unary(b, "HardSwish", x);
    case DP__SEQ_Hardsigmoid:
        n = b_node(b, "HardSigmoid", &x, 1, &y);
        if (n)
            b_attr_float(b, n, "alpha", 1.0f / 6.0f);
        return y;
    case DP__SEQ_SELU:
        return unary(b, "Selu", x);
    case DP__SEQ_SiLU:
        return binary(b, "Mul", x, unary(b, "Sigmoid", x));
    case DP__SEQ_GELU: { /* x 0.5 (1 + erf(x / sqrt 2)), as torch.onnx.export at opset 17 */
        const char *e = unary(b, "Erf", binary(b, "Div", x, scalar(b, (float)M_SQRT2)));
        return binary(b, "Mul", binary(b, "Mul", x, binary(b, "Add", e, scalar(b, 1.0f))),
                      scalar(b, 0.5f));
    }
    default:
        DP_ERROR("module %d: not exported", (int)l->kind);
        b->rc = DP_ENOTSUP;
        return y;
    }
}

/* The seeds' LeNet (lenet.c) as nodes: W3 and W4 are (in, out). */
static const char *lenet_nodes(builder *b, const weights *P, bool *pa, const char *x)
{
    const char *y = x;
    for (int c = 0; c < 2; c++) {
        const char *ins[3] = {y, use(b, P, 2 * c, pa), use(b, P, 2 * c + 1, pa)};
        const int64_t *ws = P->specs[2 * c].shape;
        window(b, b_node(b, "Conv", ins, 3, &y), (int)ws[2], (int)ws[3], 1, 1, 0, 0);
        y = unary(b, "Relu", y);
        window(b, b_node(b, "AveragePool", &y, 1, &y), 2, 2, 2, 2, 0, 0);
    }
    Onnx__NodeProto *n = b_node(b, "Flatten", &y, 1, &y);
    if (n)
        b_attr_ints(b, n, "axis", 1, (const int64_t[]){1}, true);
    for (int f = 0; f < 2; f++) {
        const char *ins[3] = {y, use(b, P, 4 + 2 * f, pa), use(b, P, 5 + 2 * f, pa)};
        b_node(b, "Gemm", ins, 3, &y);
        if (f == 0)
            y = unary(b, "Relu", y);
    }
    return y;
}

/* ---- the model around the nodes ------------------------------------------ */

/* A float tensor's type: dims[d] < 0 is the symbolic batch "N". */
static Onnx__ValueInfoProto *value_info(builder *b, const char *name, int ndim, const int64_t *dims)
{
    Onnx__ValueInfoProto *vi = b_alloc(b, sizeof *vi);
    Onnx__TypeProto *tp = b_alloc(b, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = b_alloc(b, sizeof *tt);
    Onnx__TensorShapeProto *sp = b_alloc(b, sizeof *sp);
    Onnx__TensorShapeProto__Dimension **dim = b_alloc(b, (size_t)ndim * sizeof *dim);
    if (!vi || !tp || !tt || !sp || !dim)
        return NULL;
    for (int d = 0; d < ndim; d++) {
        if (!(dim[d] = b_alloc(b, sizeof **dim)))
            return NULL;
        onnx__tensor_shape_proto__dimension__init(dim[d]);
        if (dims[d] < 0) {
            dim[d]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dim[d]->dim_param = b_str(b, "N");
        } else {
            dim[d]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dim[d]->dim_value = dims[d];
        }
    }
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sp);
    sp->n_dim = (size_t)ndim;
    sp->dim = dim;
    tt->has_elem_type = 1;
    tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tt->shape = sp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->name = b_str(b, name);
    vi->type = tp;
    return vi;
}

/* Rows of a model's values: each spec's offset in the one buffer. */
static int read_weights(dp_params_t *p, const dp_param_spec *specs, int n, weights *w,
                        float **store)
{
    w->specs = specs;
    w->offset = dp__calloc((size_t)DP_MAX(n, 1), sizeof *w->offset);
    int64_t total = p ? dp_params_numel(p) : 0;
    *store = dp__malloc((size_t)DP_MAX(total, 1) * sizeof **store);
    if (!w->offset || !*store)
        return DP_ENOMEM;
    for (int i = 1; i < n; i++)
        w->offset[i] = w->offset[i - 1] + dp__numel(specs[i - 1].ndim, specs[i - 1].shape);
    w->values = *store;
    return p ? dp_params_get_all(p, *store) : 0;
}

int dp_model_export_onnx(dp_model_t *m, const int64_t *in_chw, const char *path)
{
    static const int64_t fashion_mnist[3] = {1, 28, 28};
    const int64_t *chw = in_chw ? in_chw : fashion_mnist;
    const dp_model_def *def = dp_model_definition(m), *lenet = NULL;
    if (dp__onnx_graph_of(def))
        return dp__onnx_export_graph(m, path);
    const dp__seq *seq = dp__seq_of(def);
    if (!seq && strcmp(def->name, "lenet") == 0)
        DP_TRY(dp_model_builtin(&lenet, "lenet", chw));
    if (!seq && !(lenet && lenet->forward == def->forward)) {
        DP_ERROR("%s: no ONNX graph for this model (export writes ONNX models, lenet and "
                 "nn.Sequential files)",
                 def->name);
        return DP_ENOTSUP;
    }
    builder b = {0};
    weights P = {0}, B = {0};
    float *pstore = NULL, *bstore = NULL;
    bool *pa = dp__calloc((size_t)def->nparams + 1, 1),
         *ba = dp__calloc((size_t)def->nbuffers + 1, 1);
    int rc = pa && ba ? 0 : DP_ENOMEM;
    if (rc == 0)
        rc = read_weights(dp_model_params(m), def->params, def->nparams, &P, &pstore);
    if (rc == 0)
        rc = read_weights(dp_model_buffers(m), def->buffers, def->nbuffers, &B, &bstore);
    const char *y = "input";
    if (rc == 0 && seq)
        for (int i = 0; i < seq->nlayers && !b.rc; i++)
            y = seq_layer(&b, &seq->layers[i], &P, &B, pa, ba, y);
    else if (rc == 0)
        y = lenet_nodes(&b, &P, pa, y);
    /* The input (N, C, H, W) and the output (N, classes), any batch. */
    const int64_t in_dims[4] = {-1, chw[0], chw[1], chw[2]};
    int64_t out_dims[2] = {-1, 0};
    for (int i = def->nparams - 1; i >= 0 && !out_dims[1]; i--)
        if (def->params[i].ndim == 1)
            out_dims[1] = def->params[i].shape[0];
    Onnx__ValueInfoProto *in = value_info(&b, "input", 4, in_dims);
    Onnx__ValueInfoProto *out = value_info(&b, y, 2, out_dims);
    if (rc == 0)
        rc = b.rc;
    if (rc == 0) {
        Onnx__GraphProto graph;
        Onnx__OperatorSetIdProto opset;
        Onnx__OperatorSetIdProto *opsets[1] = {&opset};
        Onnx__ModelProto model;
        onnx__graph_proto__init(&graph);
        onnx__operator_set_id_proto__init(&opset);
        onnx__model_proto__init(&model);
        graph.name = (char *)"dptrain";
        graph.n_node = b.nnodes;
        graph.node = b.nodes;
        graph.n_initializer = b.ninits;
        graph.initializer = b.inits;
        graph.n_input = 1;
        graph.input = &in;
        graph.n_output = 1;
        graph.output = &out;
        opset.domain = (char *)"";
        opset.has_version = 1;
        opset.version = EXPORT_OPSET;
        model.has_ir_version = 1;
        model.ir_version = 8;
        model.n_opset_import = 1;
        model.opset_import = opsets;
        model.producer_name = (char *)"dptrain";
        model.producer_version = (char *)DP_VERSION_STRING;
        model.graph = &graph;
        rc = dp__onnx_write(&model, path);
    }
    b_free(&b);
    dp__free(pa);
    dp__free(ba);
    dp__free(P.offset);
    dp__free(B.offset);
    dp__free(pstore);
    dp__free(bstore);
    return rc;
}
