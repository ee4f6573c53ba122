/* The export rules: each op of the op list (device/op_list.h) written as
 * the ONNX nodes torch.onnx.export writes at opset 17 for the module that
 * runs it, from the op's tape node (its inputs, output and the settings of
 * ops/nodes.h). The table at the end is made from the op list, so an op
 * without its export_<name> function here does not compile; ops with no
 * ONNX form (kernels, the loss, DataParallel's scatter and gather) refuse
 * by name. Shapes are the trace's, whose batch is any: only settings and
 * the dimensions after the batch are written. */
#include "onnx/onnx_export.h"

#include "core/internal.h"
#include "ops/nodes.h"

#include <math.h>
#include <stdio.h>

static int refuse(const dp__node *n, const char *why)
{
    DP_ERROR("export: the forward runs %s, which has no ONNX form: %s", dp__op_name(n->op), why);
    return DP_ENOTSUP;
}

/* The names of n's first inputs up to the first absent one (a bias left
 * out): their count, or -1 when one has no name (logged). */
static int input_names(dp__export *e, const dp__node *n, const char **names)
{
    int k = 0;
    for (; k < n->ninputs && n->inputs[k]; k++)
        if (!(names[k] = dp__export_name(e, n, n->inputs[k])))
            return -1;
    return k;
}

/* Names n's output y (the last node's output) and returns the graph's
 * state. */
static int finish(dp__export *e, const dp__node *n, const char *y)
{
    if (y && !e->b.rc)
        dp__export_bind(e, n->output, y);
    return e->b.rc;
}

/* Node `type` on n's inputs (all of them, or the first `count`); its output's name. */
static const char *node_on_inputs(dp__export *e, const dp__node *n, const char *type, int count,
                                  Onnx__NodeProto **node)
{
    const char *ins[DP__NODE_INPUTS], *y = NULL;
    int nin = input_names(e, n, ins);
    *node = NULL;
    if (nin < 0)
        return NULL;
    *node = dp__ob_node(&e->b, type, ins, count > 0 && count < nin ? count : nin, &y);
    return y;
}

static int unary(dp__export *e, const dp__node *n, const char *type)
{
    Onnx__NodeProto *node;
    return finish(e, n, node_on_inputs(e, n, type, 1, &node));
}

static void attr_int(dp__ob_builder *b, Onnx__NodeProto *node, const char *name, int64_t v)
{
    if (node)
        dp__ob_attr_ints(b, node, name, 1, &v, true);
}

static void attr_float(dp__ob_builder *b, Onnx__NodeProto *node, const char *name, float v)
{
    if (node)
        dp__ob_attr_float(b, node, name, v);
}

/* x with `count` axes of size 1 inserted from axis `first` on (a per-channel
 * vector (C) broadcast over (N, C, H, W) as (C, 1, 1)). */
static const char *unsqueeze(dp__ob_builder *b, const char *x, int first, int count)
{
    int64_t axes[DP_MAX_DIMS];
    for (int i = 0; i < count; i++)
        axes[i] = first + i;
    const char *ins[2] = {x, dp__ob_init_i64(b, count, axes)}, *y = x;
    dp__ob_node(b, "Unsqueeze", ins, 2, &y);
    return y;
}

/* ---- ops with no ONNX form ------------------------------------------------ */

#include "onnx/onnx_export_refusals.h"

/* ---- convolutions and pools ------------------------------------------------ */

/* kernel_shape from w (K, C / groups, R, S) or (C, K / groups, R, S),
 * strides, pads [top, left, bottom, right], dilations, group. */
static void conv_attrs(dp__ob_builder *b, Onnx__NodeProto *node, const dp_tensor_t *w,
                       const dp__conv_geom *g)
{
    if (!node)
        return;
    const int64_t pads[4] = {g->pad_h, g->pad_w, g->pad_bottom, g->pad_right};
    const int64_t dilations[2] = {g->dilation_h, g->dilation_w};
    dp__ob_window(b, node, (int)w->shape[2], (int)w->shape[3], g->stride_h, g->stride_w, pads);
    dp__ob_attr_ints(b, node, "dilations", 2, dilations, false);
    attr_int(b, node, "group", g->groups);
}

static int export_conv2d(dp__export *e, const dp__node *n)
{
    const dp__conv_node *c = (const dp__conv_node *)n->params;
    Onnx__NodeProto *node;
    const char *y = node_on_inputs(e, n, "Conv", 0, &node);
    conv_attrs(&e->b, node, n->inputs[1], &c->geom);
    return finish(e, n, c->relu && y ? dp__ob_unary(&e->b, "Relu", y) : y);
}

/* The output padding is what the output's size has beyond the input's
 * reach: (in - 1) stride - pads + dilation (k - 1) + 1. */
static int export_conv_transpose2d(dp__export *e, const dp__node *n)
{
    const dp__conv_geom *g = &((const dp__conv_transpose_node *)n->params)->geom;
    const dp_tensor_t *x = n->inputs[0], *w = n->inputs[1], *y = n->output;
    int64_t reach_h = (x->shape[2] - 1) * g->stride_h - g->pad_h - g->pad_bottom +
                      (int64_t)g->dilation_h * (w->shape[2] - 1) + 1;
    int64_t reach_w = (x->shape[3] - 1) * g->stride_w - g->pad_w - g->pad_right +
                      (int64_t)g->dilation_w * (w->shape[3] - 1) + 1;
    const int64_t output_padding[2] = {y->shape[2] - reach_h, y->shape[3] - reach_w};
    Onnx__NodeProto *node;
    const char *out = node_on_inputs(e, n, "ConvTranspose", 0, &node);
    conv_attrs(&e->b, node, w, g);
    if (node)
        dp__ob_attr_ints(&e->b, node, "output_padding", 2, output_padding, false);
    return finish(e, n, out);
}

static int pool(dp__export *e, const dp__node *n, const char *type, bool average)
{
    const dp_pool2d_params *p = &((const dp__pool_node *)n->params)->p;
    const int64_t pads[4] = {p->pad_h, p->pad_w, p->pad_h, p->pad_w};
    Onnx__NodeProto *node;
    const char *y = node_on_inputs(e, n, type, 1, &node);
    if (node) {
        dp__ob_window(&e->b, node, p->kernel_h, p->kernel_w, p->stride_h, p->stride_w, pads);
        attr_int(&e->b, node, "ceil_mode", p->ceil_mode);
        if (p->dilation_h > 1 || p->dilation_w > 1)
            dp__ob_attr_ints(&e->b, node, "dilations", 2,
                             (const int64_t[]){p->dilation_h, p->dilation_w}, false);
        if (average)
            attr_int(&e->b, node, "count_include_pad", !p->exclude_pad);
    }
    return finish(e, n, y);
}

static int export_max_pool2d(dp__export *e, const dp__node *n)
{
    return pool(e, n, "MaxPool", false);
}

static int export_avg_pool2d(dp__export *e, const dp__node *n)
{
    return pool(e, n, "AveragePool", true);
}

static int export_adaptive_avg_pool2d(dp__export *e, const dp__node *n)
{
    const dp_tensor_t *y = n->output;
    if (y->shape[2] != 1 || y->shape[3] != 1) {
        DP_ERROR("export: AdaptiveAvgPool2d(%lld, %lld): only (1, 1) is exported "
                 "(GlobalAveragePool)",
                 (long long)y->shape[2], (long long)y->shape[3]);
        return DP_ENOTSUP;
    }
    return unary(e, n, "GlobalAveragePool");
}

/* ---- element-wise ------------------------------------------------------- */

static int export_relu(dp__export *e, const dp__node *n)
{
    return unary(e, n, "Relu");
}

static int export_sigmoid(dp__export *e, const dp__node *n)
{
    return unary(e, n, "Sigmoid");
}

static int export_tanh(dp__export *e, const dp__node *n)
{
    return unary(e, n, "Tanh");
}

static int export_add(dp__export *e, const dp__node *n)
{
    Onnx__NodeProto *node;
    return finish(e, n, node_on_inputs(e, n, "Add", 2, &node));
}

static int export_leaky_relu(dp__export *e, const dp__node *n)
{
    Onnx__NodeProto *node;
    const char *y = node_on_inputs(e, n, "LeakyRelu", 1, &node);
    attr_float(&e->b, node, "alpha", ((const dp__leaky_relu_node *)n->params)->negative_slope);
    return finish(e, n, y);
}

/* nn.GELU() at opset 17: x 0.5 (1 + erf(x / sqrt 2)); approximate='tanh':
 * x 0.5 (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))). Both as torch writes
 * them, the sub-graphs the ONNX loader fuses back into one GELU. */
static const char *gelu(dp__ob_builder *b, const char *x, bool tanh_form)
{
    const char *inner;
    if (tanh_form) {
        const char *cube = dp__ob_binary(b, "Mul", dp__ob_binary(b, "Mul", x, x), x);
        const char *sum =
            dp__ob_binary(b, "Add", x, dp__ob_binary(b, "Mul", cube, dp__ob_scalar(b, 0.044715f)));
        inner = dp__ob_unary(
            b, "Tanh", dp__ob_binary(b, "Mul", sum, dp__ob_scalar(b, (float)sqrt(2.0 / M_PI))));
    } else {
        inner =
            dp__ob_unary(b, "Erf", dp__ob_binary(b, "Div", x, dp__ob_scalar(b, (float)M_SQRT2)));
    }
    const char *one_plus = dp__ob_binary(b, "Add", inner, dp__ob_scalar(b, 1.0f));
    return dp__ob_binary(b, "Mul", dp__ob_binary(b, "Mul", x, one_plus), dp__ob_scalar(b, 0.5f));
}

static int export_activation(dp__export *e, const dp__node *n)
{
    const dp__activation_node *a = (const dp__activation_node *)n->params;
    dp__ob_builder *b = &e->b;
    const char *x = dp__export_name(e, n, n->inputs[0]), *y = NULL;
    if (!x)
        return b->rc;
    Onnx__NodeProto *node = NULL;
    switch (a->kind) {
    case DP_ACT_HARDTANH: { /* nn.ReLU6 and nn.Hardtanh: Clip(x, min, max) */
        const char *ins[3] = {x, dp__ob_scalar(b, a->alpha), dp__ob_scalar(b, a->beta)};
        dp__ob_node(b, "Clip", ins, 3, &y);
        break;
    }
    case DP_ACT_HARDSWISH:
        y = dp__ob_unary(b, "HardSwish", x);
        break;
    case DP_ACT_HARDSIGMOID:
        node = dp__ob_node(b, "HardSigmoid", &x, 1, &y);
        attr_float(b, node, "alpha", a->alpha);
        attr_float(b, node, "beta", a->beta);
        break;
    case DP_ACT_ELU:
        attr_float(b, dp__ob_node(b, "Elu", &x, 1, &y), "alpha", a->alpha);
        break;
    case DP_ACT_SELU:
        node = dp__ob_node(b, "Selu", &x, 1, &y);
        attr_float(b, node, "alpha", a->alpha);
        attr_float(b, node, "gamma", a->beta);
        break;
    case DP_ACT_GELU:
    case DP_ACT_GELU_TANH:
        y = gelu(b, x, a->kind == DP_ACT_GELU_TANH);
        break;
    case DP_ACT_SILU:
        y = dp__ob_binary(b, "Mul", x, dp__ob_unary(b, "Sigmoid", x));
        break;
    case DP_ACT_LINEAR: /* alpha x + beta */
        y = a->alpha != 1.0f ? dp__ob_binary(b, "Mul", x, dp__ob_scalar(b, a->alpha)) : x;
        if (a->beta != 0.0f)
            y = dp__ob_binary(b, "Add", y, dp__ob_scalar(b, a->beta));
        break;
    }
    return finish(e, n, y);
}

/* The slopes keep their name and shape (C); over (N, C, ...) they
 * broadcast as (C, 1, ...), which Unsqueeze makes (as torch.onnx.export
 * does in training mode). */
static int export_prelu(dp__export *e, const dp__node *n)
{
    const char *ins[2], *y = NULL;
    if (input_names(e, n, ins) < 2)
        return e->b.rc;
    const dp_tensor_t *x = n->inputs[0], *w = n->inputs[1];
    if (x->ndim >= 3 && dp_tensor_numel(w) > 1)
        ins[1] = unsqueeze(&e->b, ins[1], 1, x->ndim - 2);
    dp__ob_node(&e->b, "PRelu", ins, 2, &y);
    return finish(e, n, y);
}

static int softmax(dp__export *e, const dp__node *n, const char *type)
{
    Onnx__NodeProto *node;
    const char *y = node_on_inputs(e, n, type, 1, &node);
    attr_int(&e->b, node, "axis", 1);
    return finish(e, n, y);
}

static int export_softmax(dp__export *e, const dp__node *n)
{
    return softmax(e, n, "Softmax");
}

static int export_log_softmax(dp__export *e, const dp__node *n)
{
    return softmax(e, n, "LogSoftmax");
}

/* dp_binary's operands broadcast per channel where ONNX broadcasts from the
 * last axis: a (C) operand of a 3-D or 4-D output becomes (C, 1[, 1]), an
 * (N, C) one of a 4-D output (N, C, 1, 1). */
static const char *broadcast(dp__ob_builder *b, const char *v, const dp_tensor_t *t,
                             dp__broadcast how, int out_ndim)
{
    if (how == DP__BCAST_CHANNEL && t->ndim == 1 && out_ndim >= 3)
        return unsqueeze(b, v, 1, out_ndim - 2);
    if (how == DP__BCAST_SAMPLE_CHANNEL && t->ndim == 2 && out_ndim >= 3)
        return unsqueeze(b, v, 2, out_ndim - 2);
    return v;
}

static int export_binary(dp__export *e, const dp__node *n)
{
    static const char *const types[] = {[DP__BINARY_ADD] = "Add",
                                        [DP__BINARY_SUB] = "Sub",
                                        [DP__BINARY_MUL] = "Mul",
                                        [DP__BINARY_DIV] = "Div"};
    const dp__binary_node *bn = (const dp__binary_node *)n->params;
    const char *ins[2], *y = NULL;
    if (input_names(e, n, ins) < 2)
        return e->b.rc;
    int out_ndim = n->output->ndim;
    ins[0] = broadcast(&e->b, ins[0], n->inputs[0], bn->a_bcast, out_ndim);
    ins[1] = broadcast(&e->b, ins[1], n->inputs[1], bn->b_bcast, out_ndim);
    dp__ob_node(&e->b, types[bn->op], ins, 2, &y);
    return finish(e, n, y);
}

/* Inference: the identity, no node (torch.onnx.export in eval mode). */
static int export_dropout(dp__export *e, const dp__node *n)
{
    return finish(e, n, dp__export_name(e, n, n->inputs[0]));
}

/* ---- products, normalisation, shapes ----------------------------------- */

/* Gemm: transB where the weight is (out, in), as nn.Linear's. */
static int export_linear(dp__export *e, const dp__node *n)
{
    const dp__linear_node *l = (const dp__linear_node *)n->params;
    Onnx__NodeProto *node;
    const char *y = node_on_inputs(e, n, "Gemm", 0, &node);
    if (l->layout == DP_WEIGHT_OUT_IN)
        attr_int(&e->b, node, "transB", 1);
    return finish(e, n, y);
}

/* BatchNormalization in inference mode: the running statistics are the
 * node's last two inputs; ONNX's momentum is PyTorch's 1 - momentum. */
static int batch_norm(dp__export *e, const dp__node *n)
{
    const dp__batch_norm_node *bn = (const dp__batch_norm_node *)n->params;
    const char *ins[5], *y = NULL;
    if (input_names(e, n, ins) < 3 || !(ins[3] = dp__export_name(e, n, bn->running_mean)) ||
        !(ins[4] = dp__export_name(e, n, bn->running_var)))
        return e->b.rc;
    Onnx__NodeProto *node = dp__ob_node(&e->b, "BatchNormalization", ins, 5, &y);
    attr_float(&e->b, node, "epsilon", bn->p.eps);
    attr_float(&e->b, node, "momentum", 1.0f - bn->p.momentum);
    return finish(e, n, bn->p.relu && y ? dp__ob_unary(&e->b, "Relu", y) : y);
}

static int export_batch_norm2d(dp__export *e, const dp__node *n)
{
    return batch_norm(e, n);
}

static int export_batch_norm1d(dp__export *e, const dp__node *n)
{
    return batch_norm(e, n);
}

/* Flatten(axis 1) for (N, ...) -> (N, D); else Reshape to (-1, ...): any
 * batch, so the batch must stay the first dimension. */
static int export_reshape(dp__export *e, const dp__node *n)
{
    const dp_tensor_t *x = n->inputs[0], *y = n->output;
    if (y->shape[0] != x->shape[0]) {
        char xs[64], ys[64];
        DP_ERROR("export: reshape of %s into %s moves the batch dimension: no ONNX form for "
                 "every batch size",
                 dp_tensor_shape_str(x, xs, sizeof xs), dp_tensor_shape_str(y, ys, sizeof ys));
        return DP_ENOTSUP;
    }
    Onnx__NodeProto *node;
    if (y->ndim == 2) {
        const char *out = node_on_inputs(e, n, "Flatten", 1, &node);
        attr_int(&e->b, node, "axis", 1);
        return finish(e, n, out);
    }
    const char *xn = dp__export_name(e, n, x), *out = NULL;
    if (!xn)
        return e->b.rc;
    int64_t shape[DP_MAX_DIMS] = {-1};
    for (int d = 1; d < y->ndim; d++)
        shape[d] = y->shape[d];
    const char *ins[2] = {xn, dp__ob_init_i64(&e->b, y->ndim, shape)};
    dp__ob_node(&e->b, "Reshape", ins, 2, &out);
    return finish(e, n, out);
}

static int export_transpose(dp__export *e, const dp__node *n)
{
    Onnx__NodeProto *node;
    const char *y = node_on_inputs(e, n, "Transpose", 1, &node);
    if (node)
        dp__ob_attr_ints(&e->b, node, "perm", 2, (const int64_t[]){1, 0}, false);
    return finish(e, n, y);
}

/* One Concat over axis 1 of every input of y: a concat of more inputs than
 * a tape node holds left several nodes of one output, read here together. */
static int export_concat(dp__export *e, const dp__node *n)
{
    const dp__node *nodes = e->tape->nodes;
    size_t last = e->node;
    while (last + 1 < e->tape->nnodes && nodes[last + 1].op == DP__OP_concat &&
           nodes[last + 1].output == n->output)
        last++;
    int count = 0;
    int64_t channels = 0;
    for (size_t i = e->node; i <= last; i++)
        count += nodes[i].ninputs;
    const char **ins = dp__ob_alloc(&e->b, (size_t)count * sizeof *ins), *y = NULL;
    if (!ins)
        return e->b.rc;
    count = 0;
    for (size_t i = e->node; i <= last; i++)
        for (int k = 0; k < nodes[i].ninputs; k++) {
            if (!(ins[count++] = dp__export_name(e, &nodes[i], nodes[i].inputs[k])))
                return e->b.rc;
            channels += nodes[i].inputs[k]->shape[1];
        }
    if (channels != n->output->shape[1]) {
        DP_ERROR("export: a concat of %lld channels recorded %lld of them (its other inputs "
                 "need no gradient and left no node)",
                 (long long)n->output->shape[1], (long long)channels);
        return DP_ENOTSUP;
    }
    e->next = last + 1;
    attr_int(&e->b, dp__ob_node(&e->b, "Concat", ins, count, &y), "axis", 1);
    return finish(e, n, y);
}

/* A piece of x's channels: Slice(x, [offset], [offset + C], axes [1]). */
static int export_split(dp__export *e, const dp__node *n)
{
    int64_t from = ((const dp__split_node *)n->params)->offset;
    int64_t to = from + n->output->shape[1], axis = 1;
    const char *x = dp__export_name(e, n, n->inputs[0]), *y = NULL;
    if (!x)
        return e->b.rc;
    const char *ins[4] = {x, dp__ob_init_i64(&e->b, 1, &from), dp__ob_init_i64(&e->b, 1, &to),
                          dp__ob_init_i64(&e->b, 1, &axis)};
    dp__ob_node(&e->b, "Slice", ins, 4, &y);
    return finish(e, n, y);
}

/* ---- the table ------------------------------------------------------------ */

/* clang-format off */
const dp__export_rule dp__export_rules[DP__OP_COUNT] = {
#define DP__EXPORT_RULE(name, args, kernels, backends, cost) [DP__OP_##name] = export_##name,
    DP__OP_LIST(DP__EXPORT_RULE)
#undef DP__EXPORT_RULE
};
/* clang-format on */
