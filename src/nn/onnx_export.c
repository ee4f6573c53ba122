/* dp_model_export_onnx: a model with its current weights as an ONNX file
 * that ONNX Runtime runs, batch norm in inference mode. An imported graph
 * is written back with its initializers replaced; the built-in LeNet and
 * resnet18 (onnx_export_resnet.c) and nn.Sequential files get a graph made
 * here (onnx_build.c), node by node, each module as torch.onnx.export
 * writes it at opset 17, the initializers named and ordered as the
 * model's parameters and buffers. */
#include "nn/onnx_build.h"
#include "nn/onnx_model.h"

#include "dp/dp.h"

#include "core/internal.h"
#include "device/device.h"
#include "nn/sequential_modules.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { EXPORT_OPSET = 17 };

/* Conv's and ConvTranspose's pads [top, left, bottom, right]: the four
 * sides where any is set, else the symmetric pair. */
static void conv_pads(int64_t *p, int ph, int pw, int t, int l, int bt, int r)
{
    bool sides = t || l || bt || r;
    p[0] = sides ? t : ph;
    p[1] = sides ? l : pw;
    p[2] = sides ? bt : ph;
    p[3] = sides ? r : pw;
}

static void conv_extras(dp__ob_builder *b, Onnx__NodeProto *n, int groups, int dh, int dw)
{
    if (!n)
        return;
    const int64_t d[2] = {dh ? dh : 1, dw ? dw : 1}, g = groups ? groups : 1;
    dp__ob_attr_ints(b, n, "dilations", 2, d, false);
    dp__ob_attr_ints(b, n, "group", 1, &g, true);
}

/* Layer l of an nn.Sequential file after x, a tensor of *rank dimensions
 * (4 for images, 2 after Flatten); its output's name. */
static const char *seq_layer(dp__ob_builder *b, const dp__seq_layer *l, const dp__ob_weights *P,
                             const dp__ob_weights *B, bool *pa, bool *ba, const char *x, int *rank)
{
    const char *y = x;
    Onnx__NodeProto *n = NULL;
    int64_t pads[4];
    switch (l->kind) {
    case DP__SEQ_Conv2d:
    case DP__SEQ_ConvTranspose2d: {
        const char *ins[3] = {x, dp__ob_use(b, P, l->weight, pa),
                              l->bias >= 0 ? dp__ob_use(b, P, l->bias, pa) : ""};
        const int64_t *ws = P->specs[l->weight].shape;
        if (l->kind == DP__SEQ_Conv2d) {
            const dp_conv2d_params *c = &l->conv;
            n = dp__ob_node(b, "Conv", ins, l->bias >= 0 ? 3 : 2, &y);
            conv_pads(pads, c->pad_h, c->pad_w, c->pad_top, c->pad_left, c->pad_bottom,
                      c->pad_right);
            dp__ob_window(b, n, (int)ws[2], (int)ws[3], c->stride_h, c->stride_w, pads);
            conv_extras(b, n, c->groups, c->dilation_h, c->dilation_w);
            return c->relu ? dp__ob_unary(b, "Relu", y) : y;
        }
        const dp_conv_transpose2d_params *c = &l->conv_transpose;
        n = dp__ob_node(b, "ConvTranspose", ins, l->bias >= 0 ? 3 : 2, &y);
        conv_pads(pads, c->pad_h, c->pad_w, c->pad_top, c->pad_left, c->pad_bottom, c->pad_right);
        dp__ob_window(b, n, (int)ws[2], (int)ws[3], c->stride_h, c->stride_w, pads);
        conv_extras(b, n, c->groups, c->dilation_h, c->dilation_w);
        if (n)
            dp__ob_attr_ints(b, n, "output_padding", 2,
                             (const int64_t[]){c->output_padding_h, c->output_padding_w}, false);
        return y;
    }
    case DP__SEQ_Linear: {
        const char *ins[3] = {x, dp__ob_use(b, P, l->weight, pa),
                              l->bias >= 0 ? dp__ob_use(b, P, l->bias, pa) : ""};
        n = dp__ob_node(b, "Gemm", ins, l->bias >= 0 ? 3 : 2, &y);
        if (n)
            dp__ob_attr_ints(b, n, "transB", 1, (const int64_t[]){1}, true);
        return y;
    }
    case DP__SEQ_MaxPool2d:
    case DP__SEQ_AvgPool2d: {
        const dp_pool2d_params *p = &l->pool;
        n = dp__ob_node(b, l->kind == DP__SEQ_MaxPool2d ? "MaxPool" : "AveragePool", &x, 1, &y);
        conv_pads(pads, p->pad_h, p->pad_w, 0, 0, 0, 0);
        dp__ob_window(b, n, p->kernel_h, p->kernel_w, p->stride_h, p->stride_w, pads);
        if (n)
            dp__ob_attr_ints(b, n, "ceil_mode", 1, (const int64_t[]){p->ceil_mode}, true);
        if (n && (p->dilation_h > 1 || p->dilation_w > 1))
            dp__ob_attr_ints(b, n, "dilations", 2, (const int64_t[]){p->dilation_h, p->dilation_w},
                             false);
        if (n && l->kind == DP__SEQ_AvgPool2d)
            dp__ob_attr_ints(b, n, "count_include_pad", 1, (const int64_t[]){!p->exclude_pad},
                             true);
        return y;
    }
    case DP__SEQ_AdaptiveAvgPool2d:
        if (l->out_h != 1 || l->out_w != 1) {
            DP_ERROR("AdaptiveAvgPool2d(%d, %d): only (1, 1) is exported (GlobalAveragePool)",
                     l->out_h, l->out_w);
            b->rc = DP_ENOTSUP;
            return y;
        }
        return dp__ob_unary(b, "GlobalAveragePool", x);
    case DP__SEQ_BatchNorm2d:
    case DP__SEQ_BatchNorm1d: {
        const char *ins[5] = {x, dp__ob_use(b, P, l->weight, pa), dp__ob_use(b, P, l->bias, pa),
                              dp__ob_use(b, B, l->running_mean, ba),
                              dp__ob_use(b, B, l->running_var, ba)};
        n = dp__ob_node(b, "BatchNormalization", ins, 5, &y);
        if (n) {
            dp__ob_attr_float(b, n, "epsilon", l->eps);
            dp__ob_attr_float(b, n, "momentum", 1.0f - l->momentum);
        }
        return y;
    }
    case DP__SEQ_Flatten:
        n = dp__ob_node(b, "Flatten", &x, 1, &y);
        if (n)
            dp__ob_attr_ints(b, n, "axis", 1, (const int64_t[]){1}, true);
        *rank = 2;
        return y;
    case DP__SEQ_Dropout:
        return x; /* inference */
    case DP__SEQ_ReLU:
        return dp__ob_unary(b, "Relu", x);
    case DP__SEQ_Sigmoid:
        return dp__ob_unary(b, "Sigmoid", x);
    case DP__SEQ_Tanh:
        return dp__ob_unary(b, "Tanh", x);
    case DP__SEQ_LeakyReLU:
    case DP__SEQ_ELU:
        n = dp__ob_node(b, l->kind == DP__SEQ_ELU ? "Elu" : "LeakyRelu", &x, 1, &y);
        if (n)
            dp__ob_attr_float(b, n, "alpha", l->number);
        return y;
    case DP__SEQ_ReLU6: {
        const char *ins[3] = {x, dp__ob_scalar(b, 0.0f), dp__ob_scalar(b, 6.0f)};
        dp__ob_node(b, "Clip", ins, 3, &y);
        return y;
    }
    case DP__SEQ_Hardswish:
        return dp__ob_unary(b, "HardSwish", x);
    case DP__SEQ_Hardsigmoid:
        n = dp__ob_node(b, "HardSigmoid", &x, 1, &y);
        if (n)
            dp__ob_attr_float(b, n, "alpha", 1.0f / 6.0f);
        return y;
    case DP__SEQ_SELU:
        return dp__ob_unary(b, "Selu", x);
    case DP__SEQ_SiLU:
        return dp__ob_binary(b, "Mul", x, dp__ob_unary(b, "Sigmoid", x));
    case DP__SEQ_GELU: { /* x 0.5 (1 + erf(x / sqrt 2)), as torch.onnx.export at opset 17 */
        const char *e =
            dp__ob_unary(b, "Erf", dp__ob_binary(b, "Div", x, dp__ob_scalar(b, (float)M_SQRT2)));
        return dp__ob_binary(
            b, "Mul",
            dp__ob_binary(b, "Mul", x, dp__ob_binary(b, "Add", e, dp__ob_scalar(b, 1.0f))),
            dp__ob_scalar(b, 0.5f));
    }
    case DP__SEQ_PReLU: {
        /* The slope keeps its name and shape (C); on images it broadcasts
         * over the channels as (C, 1, 1), which Unsqueeze makes (as
         * torch.onnx.export does in training mode). */
        const char *w = dp__ob_use(b, P, l->weight, pa);
        if (*rank == 4 && P->specs[l->weight].shape[0] > 1) {
            const char *ins[2] = {w, dp__ob_init_i64(b, 2, (const int64_t[]){1, 2})};
            dp__ob_node(b, "Unsqueeze", ins, 2, &w);
        }
        return dp__ob_binary(b, "PRelu", x, w);
    }
    case DP__SEQ_Softmax:
    case DP__SEQ_LogSoftmax:
        n = dp__ob_node(b, l->kind == DP__SEQ_Softmax ? "Softmax" : "LogSoftmax", &x, 1, &y);
        if (n)
            dp__ob_attr_ints(b, n, "axis", 1, (const int64_t[]){1}, true);
        return y;
    default:
        DP_ERROR("module %d: not exported", (int)l->kind);
        b->rc = DP_ENOTSUP;
        return y;
    }
}

/* The seeds' LeNet (lenet.c) as nodes: W3 and W4 are (in, out). */
static const char *lenet_nodes(dp__ob_builder *b, const dp__ob_weights *P, bool *pa, const char *x)
{
    const char *y = x;
    for (int c = 0; c < 2; c++) {
        const char *ins[3] = {y, dp__ob_use(b, P, 2 * c, pa), dp__ob_use(b, P, 2 * c + 1, pa)};
        const int64_t *ws = P->specs[2 * c].shape;
        const int64_t none[4] = {0, 0, 0, 0};
        dp__ob_window(b, dp__ob_node(b, "Conv", ins, 3, &y), (int)ws[2], (int)ws[3], 1, 1, none);
        y = dp__ob_unary(b, "Relu", y);
        dp__ob_window(b, dp__ob_node(b, "AveragePool", &y, 1, &y), 2, 2, 2, 2, none);
    }
    Onnx__NodeProto *n = dp__ob_node(b, "Flatten", &y, 1, &y);
    if (n)
        dp__ob_attr_ints(b, n, "axis", 1, (const int64_t[]){1}, true);
    for (int f = 0; f < 2; f++) {
        const char *ins[3] = {y, dp__ob_use(b, P, 4 + 2 * f, pa), dp__ob_use(b, P, 5 + 2 * f, pa)};
        dp__ob_node(b, "Gemm", ins, 3, &y);
        if (f == 0)
            y = dp__ob_unary(b, "Relu", y);
    }
    return y;
}

/* Rows of a model's values: each spec's offset in the one buffer. */
static int read_weights(dp_params_t *p, const dp_param_spec *specs, int n, dp__ob_weights *w,
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
    const dp_model_def *def = dp_model_definition(m), *builtin = NULL;
    if (def->export_onnx)
        return def->export_onnx(m, in_chw, path);
    const dp__seq *seq = dp__seq_of(def);
    bool is_lenet = strcmp(def->name, "lenet") == 0, is_resnet = strcmp(def->name, "resnet18") == 0;
    if (!seq && (is_lenet || is_resnet))
        DP_TRY(dp_model_builtin(&builtin, def->name, chw));
    if (!seq && !(builtin && builtin->forward == def->forward)) {
        DP_ERROR("%s: no ONNX graph for this model (export writes ONNX models, lenet, resnet18 "
                 "and nn.Sequential files)",
                 def->name);
        return DP_ENOTSUP;
    }
    dp__ob_builder b = {0};
    dp__ob_weights P = {0}, B = {0};
    float *pstore = NULL, *bstore = NULL;
    bool *pa = dp__calloc((size_t)def->nparams + 1, 1),
         *ba = dp__calloc((size_t)def->nbuffers + 1, 1);
    int rc = pa && ba ? 0 : DP_ENOMEM;
    if (rc == 0)
        rc = read_weights(dp_model_params(m), def->params, def->nparams, &P, &pstore);
    if (rc == 0)
        rc = read_weights(dp_model_buffers(m), def->buffers, def->nbuffers, &B, &bstore);
    /* The initializers in the model's order, which the loader keeps:
     * a checkpoint of the file then lists them as the model's does. */
    for (int i = 0; rc == 0 && i < def->nparams; i++)
        dp__ob_use(&b, &P, i, pa);
    for (int i = 0; rc == 0 && i < def->nbuffers; i++)
        dp__ob_use(&b, &B, i, ba);
    const char *y = "input";
    int rank = 4;
    if (rc == 0 && seq)
        for (int i = 0; i < seq->nlayers && !b.rc; i++)
            y = seq_layer(&b, &seq->layers[i], &P, &B, pa, ba, y, &rank);
    else if (rc == 0 && is_resnet)
        y = dp__ob_resnet18(&b, m, &P, &B, pa, ba, y);
    else if (rc == 0)
        y = lenet_nodes(&b, &P, pa, y);
    /* The input (N, C, H, W) and the output (N, classes), any batch. */
    const int64_t in_dims[4] = {-1, chw[0], chw[1], chw[2]};
    int64_t out_dims[2] = {-1, 0};
    for (int i = def->nparams - 1; i >= 0 && !out_dims[1]; i--)
        if (def->params[i].ndim == 1)
            out_dims[1] = def->params[i].shape[0];
    Onnx__ValueInfoProto *in = dp__ob_value_info(&b, "input", 4, in_dims);
    Onnx__ValueInfoProto *out = dp__ob_value_info(&b, y, 2, out_dims);
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
    dp__ob_free(&b);
    dp__free(pa);
    dp__free(ba);
    dp__free(P.offset);
    dp__free(B.offset);
    dp__free(pstore);
    dp__free(bstore);
    return rc;
}
