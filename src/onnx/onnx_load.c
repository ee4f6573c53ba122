/* An ONNX model file as a model definition (dp_model_def_load_onnx): the
 * graph read and built (onnx_model.c), and the definition's entries: the
 * forward that runs the graph, forward_layers and stage_starts over its
 * cuts (onnx_stages.c), export_onnx that writes it back (onnx_rewrite.c),
 * the input shape it declares, and release. */
#include "onnx/onnx_model.h"

#include "core/internal.h"

#include <string.h>

static int model_forward(dp_model_t *m, dp_tensor_t *x, bool train, dp_tensor_t **logits)
{
    const dp__onnx_graph *g = dp_model_user(m);
    dp_params_t *P = dp_model_params(m), *B = dp_model_buffers(m);
    dp_tensor_t *params[g->nparams + 1], *buffers[g->nbuffers + 1];
    for (int i = 0; i < g->nparams; i++)
        params[i] = dp_params_get(P, i);
    for (int i = 0; i < g->nbuffers; i++)
        buffers[i] = dp_params_get(B, i);
    /* One output: dp_model_def_load_onnx refuses graphs of more. */
    return dp__onnx_run_graph(g, m, params, buffers, &x, train, logits);
}

/* ---- the definition's entries -------------------------------------------- */

static void release(dp_model_def *def)
{
    dp__onnx_graph_free((dp__onnx_graph *)def->user);
}

/* The (C, H, W) that the graph's input (N, C, H, W) declares. */
static int input_chw(const dp_model_def *def, int64_t chw[3])
{
    const dp__onnx_graph *g = def->user;
    if (g->in_rank != 4 || g->in_shape[1] < 1 || g->in_shape[2] < 1 || g->in_shape[3] < 1)
        return DP_ENOENT;
    memcpy(chw, g->in_shape + 1, 3 * sizeof *chw);
    return 0;
}

/* ---- loading ------------------------------------------------------------- */

static int load(dp__onnx_graph **out, Onnx__ModelProto *model, const char *name,
                const int64_t *in_chw)
{
    dp__onnx_graph *g = dp__calloc(1, sizeof *g);
    if (!g) {
        dp__onnx_free(model);
        return DP_ENOMEM;
    }
    g->model = model;
    g->opset = dp__onnx_opset(model);
    g->name = dp__strdup(name);
    int rc = g->name ? dp__onnx_build(g, in_chw) : DP_ENOMEM;
    if (rc < 0) {
        dp__onnx_graph_free(g);
        return rc;
    }
    g->def = (dp_model_def){.name = g->name,
                            .params = g->params,
                            .nparams = g->nparams,
                            .buffers = g->nbuffers ? g->buffers : NULL,
                            .nbuffers = g->nbuffers,
                            .bn_names = g->nbn ? g->bn_names : NULL,
                            .nbn = g->nbn,
                            .forward = model_forward,
                            .forward_layers = dp__onnx_forward_layers,
                            .user = g,
                            .param_values = g->init_values,
                            .buffer_values = g->nbuffers ? g->buffer_values : NULL,
                            .release = release,
                            .export_onnx = dp__onnx_export_graph,
                            .input_chw = input_chw,
                            .stage_starts = dp__onnx_stage_starts};
    *out = g;
    return 0;
}

int dp__onnx_load_bytes(dp__onnx_graph **out, const uint8_t *data, size_t size, const char *name,
                        const int64_t *in_chw)
{
    Onnx__ModelProto *model;
    DP_TRY(dp__onnx_decode(&model, data, size, name));
    return load(out, model, name, in_chw);
}

int dp__onnx_load(dp__onnx_graph **out, const char *path, const int64_t *in_chw)
{
    Onnx__ModelProto *model;
    DP_TRY(dp__onnx_read(&model, path));
    return load(out, model, path, in_chw);
}

int dp_model_def_load_onnx(dp_model_def **out, const char *path, const int64_t *in_chw)
{
    dp__onnx_graph *g;
    DP_TRY(dp__onnx_load(&g, path, in_chw));
    if (g->ninputs != 1 || g->noutputs != 1) {
        DP_ERROR("%s: the graph has %d inputs and %d outputs; a model takes one input and gives "
                 "one output",
                 path, g->ninputs, g->noutputs);
        dp__onnx_graph_free(g);
        return DP_EFORMAT;
    }
    if (g->nparams == 0) {
        DP_ERROR("%s: the graph has no initializer that a node reads as a weight: nothing to "
                 "train",
                 path);
        dp__onnx_graph_free(g);
        return DP_EFORMAT;
    }
    *out = &g->def;
    return 0;
}
