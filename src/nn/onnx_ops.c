/* The ONNX operators dptrain runs, each one call of the public ops (or a
 * host computation, onnx_fold.c), in one table: adding an operator is a
 * line there and its functions. prep reads a node's attributes at load and
 * refuses, in one line naming the node, a setting the op cannot run; run
 * makes the node's outputs from its inputs' slots. */
#include "nn/onnx_model.h"

#include "core/internal.h"

#include <float.h>
#include <string.h>

static dp_tensor_t *in_t(const dp__onnx_run *r, const dp__onnx_node *n, int k)
{
    return k < n->nin && n->in[k] >= 0 ? r->slots[n->in[k]].t : NULL;
}

static const dp__onnx_host *in_h(const dp__onnx_run *r, const dp__onnx_node *n, int k)
{
    return k < n->nin && n->in[k] >= 0 ? r->slots[n->in[k]].h : NULL;
}

static int put(dp__onnx_run *r, const dp__onnx_node *n, dp_tensor_t *y)
{
    if (n->out[0] >= 0)
        r->slots[n->out[0]].t = y;
    return 0;
}

/* Input 0 must have `rank` dimensions (0: any of 2 to 4). */
static int want_rank(const dp__onnx_run *r, const dp__onnx_node *n, dp_tensor_t *x, int rank)
{
    int d = dp_tensor_ndim(x);
    if (rank ? d == rank : d >= 2)
        return 0;
    char buf[64];
    return dp__onnx_node_error(r->g, n, "takes %s inputs, not %s",
                               rank == 4 ? "(N, C, H, W)" : "(N, C) or (N, C, L)",
                               dp_tensor_shape_str(x, buf, sizeof buf));
}

/* Output k must not be read by any node nor be a graph output: the
 * optional outputs dptrain does not make (MaxPool's indices, Dropout's
 * mask, batch norm's running statistics in training mode). */
static int unused_output(const dp__onnx_graph *g, const dp__onnx_node *n, int k, const char *what)
{
    if (k >= n->nout || n->out[k] < 0)
        return 0;
    for (int i = 0; i < g->nnodes; i++)
        for (int j = 0; j < g->nodes[i].nin; j++)
            if (g->nodes[i].in[j] == n->out[k])
                return dp__onnx_node_error(g, n,
                                           "its output %s is read, which dptrain does "
                                           "not compute",
                                           what);
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i] == n->out[k])
            return dp__onnx_node_error(g, n, "its output %s is a graph output", what);
    return 0;
}

/* ints attribute `name` into out[0..2): absent gives dflt twice. */
static int pair_attr(const dp__onnx_graph *g, dp__onnx_node *n, const char *name, int64_t dflt,
                     int64_t *out)
{
    const Onnx__AttributeProto *a = dp__onnx_attr(n, name);
    out[0] = out[1] = dflt;
    if (!a)
        return 0;
    if (a->n_ints != 2)
        return dp__onnx_node_error(g, n, "%s has %zu values; dptrain runs 2-D ops only", name,
                                   a->n_ints);
    out[0] = a->ints[0];
    out[1] = a->ints[1];
    return 0;
}

/* Kernel, strides, symmetric pads and unit dilations of Conv and the
 * pools; auto_pad NOTSET or VALID. */
static int window_attrs(const dp__onnx_graph *g, dp__onnx_node *n, int64_t *kernel, int64_t *stride,
                        int64_t *pad)
{
    const Onnx__AttributeProto *ap = dp__onnx_attr(n, "auto_pad");
    if (ap && ap->has_s && ap->s.len > 0 && !(ap->s.len == 6 && !memcmp(ap->s.data, "NOTSET", 6)) &&
        !(ap->s.len == 5 && !memcmp(ap->s.data, "VALID", 5)))
        return dp__onnx_node_error(g, n, "auto_pad %.*s is not supported (explicit pads are)",
                                   (int)DP_MIN(ap->s.len, 16), (const char *)ap->s.data);
    int64_t dil[2];
    DP_TRY(pair_attr(g, n, "kernel_shape", 0, kernel));
    DP_TRY(pair_attr(g, n, "strides", 1, stride));
    DP_TRY(pair_attr(g, n, "dilations", 1, dil));
    if (dil[0] != 1 || dil[1] != 1)
        return dp__onnx_node_error(g, n, "dilations %lld, %lld: dilated windows are to come",
                                   (long long)dil[0], (long long)dil[1]);
    const Onnx__AttributeProto *pa = dp__onnx_attr(n, "pads");
    pad[0] = pad[1] = 0;
    if (pa) {
        if (pa->n_ints != 4)
            return dp__onnx_node_error(g, n, "pads has %zu values; dptrain runs 2-D ops only",
                                       pa->n_ints);
        if (pa->ints[0] != pa->ints[2] || pa->ints[1] != pa->ints[3])
            return dp__onnx_node_error(g, n,
                                       "pads %lld, %lld, %lld, %lld: asymmetric padding "
                                       "is to come",
                                       (long long)pa->ints[0], (long long)pa->ints[1],
                                       (long long)pa->ints[2], (long long)pa->ints[3]);
        pad[0] = pa->ints[0];
        pad[1] = pa->ints[1];
    }
    for (int i = 0; i < 2; i++)
        if (stride[i] < 1 || stride[i] > 1 << 20 || pad[i] < 0 || pad[i] > 1 << 20 ||
            kernel[i] < 0 || kernel[i] > 1 << 20)
            return dp__onnx_node_error(g, n, "a kernel, stride or pad out of range");
    return 0;
}

static int prep_conv(const dp__onnx_graph *g, dp__onnx_node *n)
{
    if (dp__onnx_attr_int(n, "group", 1) != 1)
        return dp__onnx_node_error(g, n, "group %lld: grouped convolution is to come",
                                   (long long)dp__onnx_attr_int(n, "group", 1));
    int64_t k[2], s[2], p[2];
    DP_TRY(window_attrs(g, n, k, s, p));
    n->conv = (dp_conv2d_params){
        .stride_h = (int)s[0], .stride_w = (int)s[1], .pad_h = (int)p[0], .pad_w = (int)p[1]};
    return 0;
}

static int run_conv(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *x = in_t(r, n, 0), *y;
    DP_TRY(want_rank(r, n, x, 4));
    DP_TRY(dp_conv2d(&y, x, in_t(r, n, 1), in_t(r, n, 2), &n->conv));
    return put(r, n, y);
}

static int prep_pool(const dp__onnx_graph *g, dp__onnx_node *n)
{
    int64_t k[2], s[2], p[2];
    DP_TRY(window_attrs(g, n, k, s, p));
    if (k[0] < 1 || k[1] < 1)
        return dp__onnx_node_error(g, n, "needs kernel_shape of two sizes");
    if (dp__onnx_attr_int(n, "ceil_mode", 0) != 0)
        return dp__onnx_node_error(g, n, "ceil_mode 1 is not supported");
    bool avg = strcmp(n->proto->op_type, "AveragePool") == 0;
    if (avg && (p[0] || p[1]) && dp__onnx_attr_int(n, "count_include_pad", 0) == 0)
        return dp__onnx_node_error(g, n,
                                   "padding left out of the mean (count_include_pad 0) is "
                                   "not supported; PyTorch's default counts it");
    n->pool = (dp_pool2d_params){.kernel_h = (int)k[0],
                                 .kernel_w = (int)k[1],
                                 .stride_h = (int)s[0],
                                 .stride_w = (int)s[1],
                                 .pad_h = (int)p[0],
                                 .pad_w = (int)p[1]};
    return avg ? 0 : unused_output(g, n, 1, "Indices");
}

static int run_pool(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *x = in_t(r, n, 0), *y;
    DP_TRY(want_rank(r, n, x, 4));
    if (strcmp(n->proto->op_type, "AveragePool") == 0)
        DP_TRY(dp_avg_pool2d(&y, x, &n->pool));
    else
        DP_TRY(dp_max_pool2d(&y, x, &n->pool));
    return put(r, n, y);
}

static int run_global_avg(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *x = in_t(r, n, 0), *y;
    DP_TRY(want_rank(r, n, x, 4));
    DP_TRY(dp_adaptive_avg_pool2d(&y, x, 1, 1));
    return put(r, n, y);
}

static int prep_bn(const dp__onnx_graph *g, dp__onnx_node *n)
{
    if (n->nin != 5)
        return dp__onnx_node_error(g, n, "has %d inputs, not 5", n->nin);
    for (int k = 1; k < 5; k++) {
        const dp__onnx_value *v = n->in[k] >= 0 ? &g->values[n->in[k]] : NULL;
        if (!v || v->init < 0)
            return dp__onnx_node_error(g, n, "input %d is not an initializer", k);
    }
    if (dp__onnx_attr_int(n, "spatial", 1) != 1)
        return dp__onnx_node_error(g, n, "spatial 0 is not supported");
    /* ONNX's momentum weighs the running statistic, PyTorch's the batch's. */
    float momentum = dp__onnx_attr_float(n, "momentum", 0.9f);
    if (!(momentum >= 0.0f && momentum < 1.0f))
        return dp__onnx_node_error(g, n, "momentum %g is outside [0, 1)", (double)momentum);
    n->a = dp__onnx_attr_float(n, "epsilon", 1e-5f);
    n->b = 1.0f - momentum;
    if (!(n->a > 0.0f))
        return dp__onnx_node_error(g, n, "epsilon %g is not positive", (double)n->a);
    DP_TRY(unused_output(g, n, 1, "running_mean"));
    DP_TRY(unused_output(g, n, 2, "running_var"));
    DP_TRY(unused_output(g, n, 3, "saved_mean"));
    return unused_output(g, n, 4, "saved_var");
}

static int run_bn(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *x = in_t(r, n, 0), *y;
    dp_batch_norm_params p = {.training = r->train};
    if (r->m)
        dp_model_bn_params(r->m, n->layer, r->train, &p);
    p.eps = n->a;
    p.momentum = n->b;
    if (dp_tensor_ndim(x) == 4)
        DP_TRY(
            dp_batch_norm2d(&y, x, in_t(r, n, 1), in_t(r, n, 2), in_t(r, n, 3), in_t(r, n, 4), &p));
    else if (dp_tensor_ndim(x) == 2 || dp_tensor_ndim(x) == 3)
        DP_TRY(
            dp_batch_norm1d(&y, x, in_t(r, n, 1), in_t(r, n, 2), in_t(r, n, 3), in_t(r, n, 4), &p));
    else
        return want_rank(r, n, x, 0);
    return put(r, n, y);
}

static int prep_gemm(const dp__onnx_graph *g, dp__onnx_node *n)
{
    if (dp__onnx_attr_int(n, "transA", 0) != 0 || dp__onnx_attr_float(n, "alpha", 1) != 1.0f ||
        dp__onnx_attr_float(n, "beta", 1) != 1.0f)
        return dp__onnx_node_error(g, n,
                                   "only Y = A B (B transposed or not) + C is supported "
                                   "(transA 0, alpha 1, beta 1)");
    n->kind = dp__onnx_attr_int(n, "transB", 0) ? DP_WEIGHT_OUT_IN : DP_WEIGHT_IN_OUT;
    return 0;
}

static int run_gemm(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *a = in_t(r, n, 0), *w = in_t(r, n, 1), *c = in_t(r, n, 2), *y;
    char buf[64];
    if (dp_tensor_ndim(a) != 2 || dp_tensor_ndim(w) != 2 || (c && dp_tensor_ndim(c) != 1))
        return dp__onnx_node_error(r->g, n, "takes a matrix, a matrix and a vector, not %s ...",
                                   dp_tensor_shape_str(a, buf, sizeof buf));
    DP_TRY(dp_linear(&y, a, w, c, (dp_weight_layout)n->kind));
    return put(r, n, y);
}

/* ---- elementwise ---------------------------------------------------------- */

static int run_relu(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *y;
    DP_TRY(dp_relu(&y, in_t(r, n, 0)));
    return put(r, n, y);
}

static int run_sigmoid(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *y;
    DP_TRY(dp_sigmoid(&y, in_t(r, n, 0)));
    return put(r, n, y);
}

static int run_tanh(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *y;
    DP_TRY(dp_tanh(&y, in_t(r, n, 0)));
    return put(r, n, y);
}

static int prep_leaky(const dp__onnx_graph *g, dp__onnx_node *n)
{
    (void)g;
    n->a = dp__onnx_attr_float(n, "alpha", 0.01f);
    return 0;
}

static int run_leaky(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *y;
    DP_TRY(dp_leaky_relu(&y, in_t(r, n, 0), n->a));
    return put(r, n, y);
}

/* The activations of dp_activation, with ONNX's attributes and defaults. */
static int prep_act(const dp__onnx_graph *g, dp__onnx_node *n)
{
    const char *t = n->proto->op_type;
    if (strcmp(t, "Elu") == 0) {
        n->kind = DP_ACT_ELU;
        n->a = dp__onnx_attr_float(n, "alpha", 1.0f);
    } else if (strcmp(t, "Selu") == 0) {
        n->kind = DP_ACT_SELU;
        n->a = dp__onnx_attr_float(n, "alpha", 1.67326319217681884765625f);
        n->b = dp__onnx_attr_float(n, "gamma", 1.05070102214813232421875f);
    } else if (strcmp(t, "HardSigmoid") == 0) {
        n->kind = DP_ACT_HARDSIGMOID;
        n->a = dp__onnx_attr_float(n, "alpha", 0.2f);
        n->b = dp__onnx_attr_float(n, "beta", 0.5f);
    } else if (strcmp(t, "HardSwish") == 0) {
        n->kind = DP_ACT_HARDSWISH;
    } else { /* Clip: bounds as attributes before opset 11, inputs since */
        n->kind = DP_ACT_HARDTANH;
        n->a = g->opset < 11 ? dp__onnx_attr_float(n, "min", -FLT_MAX) : -FLT_MAX;
        n->b = g->opset < 11 ? dp__onnx_attr_float(n, "max", FLT_MAX) : FLT_MAX;
    }
    return 0;
}

/* A scalar bound of Clip (input k), or dflt when left out. */
static int bound(dp__onnx_run *r, const dp__onnx_node *n, int k, float dflt, float *out)
{
    const dp__onnx_host *h = in_h(r, n, k);
    *out = dflt;
    if (!h)
        return 0;
    if (h->numel != 1)
        return dp__onnx_node_error(r->g, n, "input %d holds %lld values, not one", k,
                                   (long long)h->numel);
    *out = h->is_float ? h->f[0] : (float)h->i[0];
    return 0;
}

static int run_act(dp__onnx_run *r, const dp__onnx_node *n)
{
    float a = n->a, b = n->b;
    if (n->kind == DP_ACT_HARDTANH && r->g->opset >= 11) {
        DP_TRY(bound(r, n, 1, n->a, &a));
        DP_TRY(bound(r, n, 2, n->b, &b));
    }
    dp_tensor_t *y;
    DP_TRY(dp_activation(&y, in_t(r, n, 0), (dp_activation_kind)n->kind, a, b));
    return put(r, n, y);
}

static int run_add(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *a = in_t(r, n, 0), *b = in_t(r, n, 1), *y;
    bool same = dp_tensor_ndim(a) == dp_tensor_ndim(b);
    for (int d = 0; same && d < dp_tensor_ndim(a); d++)
        same = dp_tensor_dim(a, d) == dp_tensor_dim(b, d);
    if (!same) {
        char sa[64], sb[64];
        return dp__onnx_node_error(r->g, n, "adds %s and %s: broadcasting Add is to come",
                                   dp_tensor_shape_str(a, sa, sizeof sa),
                                   dp_tensor_shape_str(b, sb, sizeof sb));
    }
    DP_TRY(dp_add(&y, a, b));
    return put(r, n, y);
}

/* ---- shapes ---------------------------------------------------------------- */

static int prep_flatten(const dp__onnx_graph *g, dp__onnx_node *n)
{
    n->axis = dp__onnx_attr_int(n, "axis", 1);
    if (n->axis != 1)
        return dp__onnx_node_error(g, n, "axis %lld: only Flatten from axis 1 is supported",
                                   (long long)n->axis);
    return 0;
}

static int run_flatten(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *y;
    DP_TRY(dp_flatten(&y, in_t(r, n, 0)));
    return put(r, n, y);
}

static int prep_reshape(const dp__onnx_graph *g, dp__onnx_node *n)
{
    if (dp__onnx_attr_int(n, "allowzero", 0) != 0)
        return dp__onnx_node_error(g, n, "allowzero 1 is not supported");
    return 0;
}

/* The target's first entry is the batch: 0 (copy), -1, or the batch size
 * the graph was exported with (torch.onnx.export bakes x.size(0) in) all
 * mean this batch's size, so a graph traced at batch 1 trains at 256. */
static int run_reshape(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *x = in_t(r, n, 0), *y;
    const dp__onnx_host *s = in_h(r, n, 1);
    if (s->is_float || s->ndim != 1 || s->numel < 1 || s->numel > DP_MAX_DIMS)
        return dp__onnx_node_error(r->g, n, "its shape is not 1 to %d integers", DP_MAX_DIMS);
    int64_t shape[DP_MAX_DIMS], known = 1, total = dp_tensor_numel(x), batch = dp_tensor_dim(x, 0);
    int infer = -1;
    for (int d = 0; d < (int)s->numel; d++) {
        int64_t v = s->i[d];
        if (d == 0 && (v == 0 || v == batch || (r->g->in_rank > 0 && v == r->g->in_shape[0])))
            v = batch;
        else if (v == 0 && d < dp_tensor_ndim(x))
            v = dp_tensor_dim(x, d);
        if (v == -1 && infer < 0) {
            infer = d;
            v = 1;
        } else if (v < 1) {
            return dp__onnx_node_error(r->g, n, "shape entry %d is %lld", d, (long long)s->i[d]);
        }
        shape[d] = v;
        known *= v;
    }
    if (infer >= 0 && known > 0 && total % known == 0)
        shape[infer] = total / known;
    DP_TRY(dp_reshape(&y, x, (int)s->numel, shape));
    return put(r, n, y);
}

/* ---- dropout ---------------------------------------------------------------- */

static int prep_dropout(const dp__onnx_graph *g, dp__onnx_node *n)
{
    n->a = g->opset < 12 ? dp__onnx_attr_float(n, "ratio", 0.5f) : 0.5f;
    return unused_output(g, n, 1, "mask");
}

static int run_dropout(dp__onnx_run *r, const dp__onnx_node *n)
{
    float ratio = n->a;
    if (r->g->opset >= 12)
        DP_TRY(bound(r, n, 1, n->a, &ratio));
    dp_dropout_params p = {.prob = ratio, .training = r->train, .layer = (uint32_t)n->layer};
    if (r->m)
        dp_model_dropout_params(r->m, n->layer, ratio, r->train, &p);
    dp_tensor_t *y;
    DP_TRY(dp_dropout(&y, in_t(r, n, 0), &p));
    return put(r, n, y);
}

/* ---- the table ---------------------------------------------------------------- */

#define ALL 0xffu /* every input on the host */

/* clang-format off */
static const dp__onnx_op ops[] = {
    {"Add", 2, 0, 0, 0, NULL, run_add},
    {"AveragePool", 1, 0, 0, 0, prep_pool, run_pool},
    {"BatchNormalization", 5, 0, 3u << 3, 0, prep_bn, run_bn},
    {"Cast", 1, ALL, 0, 1, NULL, dp__onnx_run_cast},
    {"Clip", 1, 6u, 0, 0, prep_act, run_act},
    {"Concat", 1, ALL, 0, 1, NULL, dp__onnx_run_concat},
    {"Constant", 0, 0, 0, 2, dp__onnx_prep_constant, dp__onnx_run_constant},
    {"Conv", 2, 0, 0, 0, prep_conv, run_conv},
    {"Dropout", 1, 6u, 0, 0, prep_dropout, run_dropout},
    {"Elu", 1, 0, 0, 0, prep_act, run_act},
    {"Flatten", 1, 0, 0, 0, prep_flatten, run_flatten},
    {"Gather", 2, ALL, 0, 1, NULL, dp__onnx_run_gather},
    {"Gemm", 2, 0, 0, 0, prep_gemm, run_gemm},
    {"GlobalAveragePool", 1, 0, 0, 0, NULL, run_global_avg},
    {"HardSigmoid", 1, 0, 0, 0, prep_act, run_act},
    {"HardSwish", 1, 0, 0, 0, prep_act, run_act},
    {"Identity", 1, 0, 0, 1, NULL, dp__onnx_run_identity},
    {"LeakyRelu", 1, 0, 0, 0, prep_leaky, run_leaky},
    {"MaxPool", 1, 0, 0, 0, prep_pool, run_pool},
    {"Relu", 1, 0, 0, 0, NULL, run_relu},
    {"Reshape", 2, 2u, 0, 0, prep_reshape, run_reshape},
    {"Selu", 1, 0, 0, 0, prep_act, run_act},
    {"Shape", 1, 0, 0, 2, NULL, dp__onnx_run_shape},
    {"Sigmoid", 1, 0, 0, 0, NULL, run_sigmoid},
    {"Squeeze", 1, ALL, 0, 1, NULL, dp__onnx_run_squeeze},
    {"Tanh", 1, 0, 0, 0, NULL, run_tanh},
    {"Unsqueeze", 1, ALL, 0, 1, NULL, dp__onnx_run_unsqueeze},
    /* a new operator: one line above this one, in order */
};
/* clang-format on */

const dp__onnx_op *dp__onnx_find_op(const char *type)
{
    for (size_t i = 0; i < DP_COUNTOF(ops); i++)
        if (strcmp(ops[i].type, type) == 0)
            return &ops[i];
    return NULL;
}

const char *dp__onnx_op_names(void)
{
    static char names[1024];
    if (!names[0]) {
        size_t off = 0;
        for (size_t i = 0; i < DP_COUNTOF(ops) && off < sizeof names; i++)
            off += (size_t)snprintf(names + off, sizeof names - off, "%s%s", i ? ", " : "",
                                    ops[i].type);
    }
    return names;
}
