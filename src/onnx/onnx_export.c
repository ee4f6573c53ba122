/* dp_model_export_onnx: a model with its current weights as an ONNX file
 * that ONNX Runtime runs, batch norm in inference mode, for a batch of any
 * size. A definition with its own export_onnx entry writes itself (an
 * imported graph: onnx_rewrite.c); every other one (the built-ins, an
 * nn.Sequential file, a program's own) is traced: its forward runs once in
 * inference mode on the meta device (shapes, no memory) with the input
 * requiring a gradient, so that every op it runs leaves a node on the
 * tape, and each node is written by its op's rule (onnx_export_ops.c).
 * The initializers are the model's parameters, then its buffers, named and
 * ordered as their specs (the loader keeps that order: a checkpoint of the
 * file lists them as the model's does); the nodes read them by identity
 * with the traced model's views. */
#include "onnx/onnx_export.h"

#include "dp/dp.h"

#include "core/internal.h"
#include "onnx/onnx.h"
#include "nn/trace.h"

#include <string.h>

enum { EXPORT_OPSET = 17, BATCH = 2 };

void dp__export_bind(dp__export *e, const dp_tensor_t *t, const char *name)
{
    if (e->nknown == e->capknown) {
        size_t cap = e->capknown ? 2 * e->capknown : 256;
        const dp_tensor_t **known = dp__ob_alloc(&e->b, cap * sizeof *known);
        const char **names = dp__ob_alloc(&e->b, cap * sizeof *names);
        if (!known || !names)
            return;
        if (e->nknown) {
            memcpy(known, e->known, e->nknown * sizeof *known);
            memcpy(names, e->names, e->nknown * sizeof *names);
        }
        e->known = known;
        e->names = names;
        e->capknown = cap;
    }
    e->known[e->nknown] = t;
    e->names[e->nknown++] = dp__ob_str(&e->b, name);
}

const char *dp__export_name(dp__export *e, const dp__node *n, const dp_tensor_t *t)
{
    /* Newest first: an op's output is most often read by the next op. */
    for (size_t i = e->nknown; t && i-- > 0;)
        if (e->known[i] == t)
            return e->names[i];
    if (!e->b.rc) {
        DP_ERROR("export: op %zu (%s) reads a tensor that is not the input, a parameter, a "
                 "buffer or an earlier op's output (a tensor the forward made otherwise has no "
                 "place in the graph)",
                 (size_t)(n - e->tape->nodes), dp__op_name(n->op));
        e->b.rc = DP_ENOTSUP;
    }
    return NULL;
}

/* Initializers for every tensor of `live` (the exported model's values),
 * named by its specs, and the traced model's views `traced` bound to
 * those names. */
static int add_weights(dp__export *e, dp_params_t *live, dp_params_t *traced,
                       const dp_param_spec *specs, int n)
{
    if (!live || n == 0)
        return 0;
    float *v = dp__malloc((size_t)DP_MAX(dp_params_numel(live), 1) * sizeof *v);
    int rc = v ? dp_params_get_all(live, v) : DP_ENOMEM;
    int64_t off = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        dp__ob_init(&e->b, specs[i].name, specs[i].ndim, specs[i].shape, v + off);
        dp__export_bind(e, dp_params_get(traced, i), specs[i].name);
        off += dp__numel(specs[i].ndim, specs[i].shape);
    }
    dp__free(v);
    return rc ? rc : e->b.rc;
}

/* The ModelProto around the built graph, written to path. */
static int write_model(dp__export *e, const dp_tensor_t *x, const dp_tensor_t *y, const char *out,
                       const char *path)
{
    /* The input and the output with a batch of any size. */
    int64_t in_dims[DP_MAX_DIMS], out_dims[DP_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++)
        in_dims[d] = d ? x->shape[d] : -1;
    for (int d = 0; d < y->ndim; d++)
        out_dims[d] = d ? y->shape[d] : -1;
    Onnx__ValueInfoProto *in = dp__ob_value_info(&e->b, "input", x->ndim, in_dims);
    Onnx__ValueInfoProto *output = dp__ob_value_info(&e->b, out, y->ndim, out_dims);
    if (e->b.rc)
        return e->b.rc;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset;
    Onnx__OperatorSetIdProto *opsets[1] = {&opset};
    Onnx__ModelProto model;
    onnx__graph_proto__init(&graph);
    onnx__operator_set_id_proto__init(&opset);
    onnx__model_proto__init(&model);
    graph.name = (char *)"dptrain";
    graph.n_node = e->b.nnodes;
    graph.node = e->b.nodes;
    graph.n_initializer = e->b.ninits;
    graph.initializer = e->b.inits;
    graph.n_input = 1;
    graph.input = &in;
    graph.n_output = 1;
    graph.output = &output;
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
    return dp__onnx_write(&model, path);
}

/* Writes each node of the tape by its op's rule, then the model. */
static int write_tape(dp__export *e, dp_model_t *m, dp_model_t *traced, const dp_tensor_t *x,
                      const dp_tensor_t *y, const char *path)
{
    const dp_model_def *def = dp_model_definition(m);
    dp__export_bind(e, x, "input");
    DP_TRY(add_weights(e, dp_model_params(m), dp_model_params(traced), def->params, def->nparams));
    DP_TRY(
        add_weights(e, dp_model_buffers(m), dp_model_buffers(traced), def->buffers, def->nbuffers));
    for (e->node = 0; e->node < e->tape->nnodes; e->node = e->next) {
        const dp__node *n = &e->tape->nodes[e->node];
        e->next = e->node + 1;
        DP_TRY(dp__export_rules[n->op](e, n));
    }
    const char *out = NULL;
    for (size_t i = e->nknown; i-- > 0 && !out;)
        if (e->known[i] == y)
            out = e->names[i];
    if (!out || strcmp(out, "input") == 0) {
        DP_ERROR("export: %s: the forward's output is %s", def->name,
                 out ? "its input, unchanged" : "made by no op of the graph");
        return DP_ENOTSUP;
    }
    return write_model(e, x, y, out, path);
}

int dp_model_export_onnx(dp_model_t *m, const int64_t *in_chw, const char *path)
{
    static const int64_t fashion_mnist[3] = {1, 28, 28};
    const int64_t *chw = in_chw ? in_chw : fashion_mnist;
    const dp_model_def *def = dp_model_definition(m);
    if (def->export_onnx)
        return def->export_onnx(m, in_chw, path);
    dp__trace trace;
    int rc = dp__trace_forward(&trace, def, chw, BATCH, false, true);
    if (rc < 0)
        DP_ERROR("%s: export traces the forward on an input of (N, %lld, %lld, %lld), which it "
                 "did not take (a model of another input, such as the tutorial's (N, 5), has no "
                 "ONNX graph here)",
                 def->name, (long long)chw[0], (long long)chw[1], (long long)chw[2]);
    dp__export e = {.tape = trace.tape};
    if (rc == 0)
        rc = write_tape(&e, m, trace.model, trace.x, trace.y, path);
    dp__ob_free(&e.b);
    dp__trace_close(&trace);
    return rc;
}
