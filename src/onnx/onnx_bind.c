/* What each value of an ONNX graph is (onnx_model.h): every node's
 * operator found (one line naming the node, its op type and the opset for
 * one that is not), which values are computed on the host (constants and
 * the shapes made from them) and which on a device, which initializers are
 * trained parameters, which batch norm buffers and which constants, the
 * batch norm layers' names, and each node's attributes read. */
#include "onnx/onnx_model.h"

#include "core/internal.h"

#include <math.h>
#include <string.h>

enum { ROLE_NONE, ROLE_PARAM, ROLE_BUFFER, ROLE_HOST };

static int find_ops(dp__onnx_graph *g)
{
    for (int i = 0; i < g->nnodes; i++) {
        dp__onnx_node *n = &g->nodes[i];
        if (n->op) /* a fused GELU's */
            continue;
        const char *dom = n->proto->domain;
        if (dom && dom[0] && strcmp(dom, "ai.onnx") != 0)
            return dp__onnx_node_error(g, n,
                                       "from the domain '%s'; dptrain reads ONNX's own "
                                       "operators only",
                                       dom);
        n->op = n->proto->op_type ? dp__onnx_find_op(n->proto->op_type) : NULL;
        if (!n->op)
            return dp__onnx_node_error(g, n, "not supported (opset %lld); dptrain supports %s",
                                       (long long)g->opset, dp__onnx_op_names());
        for (int k = 0; k < n->op->min_inputs; k++)
            if (k >= n->nin || n->in[k] < 0)
                return dp__onnx_node_error(g, n, "has %d inputs; it needs %d", n->nin,
                                           n->op->min_inputs);
    }
    return 0;
}

/* Each value's place (host or device) and each initializer's role, in the
 * nodes' order: a node runs on the host when its operator folds and every
 * input it has is a host value. */
static int place_values(dp__onnx_graph *g, int *role)
{
    for (int i = 0; i < g->nnodes; i++) {
        dp__onnx_node *n = &g->nodes[i];
        const dp__onnx_op *op = n->op;
        bool all_host = true;
        for (int k = 0; k < n->nin; k++) {
            const dp__onnx_value *v = n->in[k] >= 0 ? &g->values[n->in[k]] : NULL;
            if (v && !(v->host || v->init >= 0))
                all_host = false;
        }
        bool on_host = op->fold == 2 || (op->fold == 1 && all_host);
        for (int k = 0; k < n->nin; k++) {
            if (n->in[k] < 0)
                continue;
            dp__onnx_value *v = &g->values[n->in[k]];
            bool want_host = on_host || (op->host_inputs >> k & 1u);
            if (op->fold == 2 && k == 0 && !v->host && v->init < 0)
                continue; /* Shape of a tensor: its shape, read on the host */
            if (v->init >= 0) {
                const Onnx__TensorProto *t = g->model->graph->initializer[v->init];
                int want = want_host                     ? ROLE_HOST
                           : op->buffer_inputs >> k & 1u ? ROLE_BUFFER
                                                         : ROLE_PARAM;
                if (want != ROLE_HOST && !dp__onnx_is_float(t))
                    return dp__onnx_node_error(g, n, "reads the %s initializer '%s' as a weight",
                                               "non-float", v->name);
                if (role[v->init] != ROLE_NONE && role[v->init] != want)
                    return dp__onnx_node_error(
                        g, n, "reads the initializer '%s' as a %s, another node as a %s", v->name,
                        want == ROLE_HOST ? "constant" : "tensor",
                        role[v->init] == ROLE_HOST ? "constant" : "tensor");
                role[v->init] = want;
                v->host = want == ROLE_HOST;
            } else if (want_host && !v->host) {
                return dp__onnx_node_error(g, n,
                                           "input %d ('%s') is computed on the device; "
                                           "only constants and shapes can be read here",
                                           k, v->name);
            } else if (!want_host && v->host && !(op->scalar_inputs >> k & 1u)) {
                return dp__onnx_node_error(g, n,
                                           "input %d ('%s') is a constant where a tensor "
                                           "is expected",
                                           k, v->name);
            }
        }
        for (int k = 0; k < n->nout; k++)
            if (n->out[k] >= 0)
                g->values[n->out[k]].host = on_host;
    }
    return 0;
}

/* The batch norm layer's name for its num_batches_tracked entry: its
 * scale's name less ".weight" (torch.onnx.export names initializers by
 * state_dict keys: "layer1.0.bn1.weight"), else the running mean's less
 * ".running_mean", else the node's. */
static void bn_name(const dp__onnx_graph *g, const dp__onnx_node *n, char *out, size_t size)
{
    static const char *const suffix[2] = {".weight", ".running_mean"};
    for (int s = 0; s < 2; s++) {
        int k = s == 0 ? 1 : 3;
        if (n->nin <= k || n->in[k] < 0)
            continue;
        const char *name = g->values[n->in[k]].name;
        size_t len = strlen(name), sl = strlen(suffix[s]);
        if (len > sl && strcmp(name + len - sl, suffix[s]) == 0 && len - sl < size) {
            memcpy(out, name, len - sl);
            out[len - sl] = '\0';
            return;
        }
    }
    char nb[32];
    snprintf(out, size, "%s", dp__onnx_node_name(g, n, nb, sizeof nb));
}

static int make_specs(dp__onnx_graph *g, const int *role, const bool *ones)
{
    const Onnx__GraphProto *gp = g->model->graph;
    int64_t total = 0;
    int np = 0, nb = 0, nc = 0;
    for (size_t i = 0; i < gp->n_initializer; i++) {
        np += role[i] == ROLE_PARAM;
        nb += role[i] == ROLE_BUFFER;
        nc += role[i] == ROLE_HOST;
        if (role[i] == ROLE_PARAM || role[i] == ROLE_BUFFER)
            total += dp__onnx_numel(gp->initializer[i]);
    }
    /* The file's bytes bound the values (check_tensor), so this fits. */
    g->init_values = dp__malloc((size_t)DP_MAX(total, 1) * sizeof(float));
    g->params = dp__calloc((size_t)DP_MAX(np, 1), sizeof *g->params);
    g->buffers = dp__calloc((size_t)DP_MAX(nb, 1), sizeof *g->buffers);
    g->param_init = dp__calloc((size_t)DP_MAX(np, 1), sizeof *g->param_init);
    g->buffer_init = dp__calloc((size_t)DP_MAX(nb, 1), sizeof *g->buffer_init);
    if (!g->init_values || !g->params || !g->buffers || !g->param_init || !g->buffer_init)
        return DP_ENOMEM;
    int64_t poff = 0, boff = 0, pnumel = 0;
    for (size_t i = 0; i < gp->n_initializer; i++)
        if (role[i] == ROLE_PARAM)
            pnumel += dp__onnx_numel(gp->initializer[i]);
    for (int v = 0; v < g->nvalues; v++) {
        dp__onnx_value *val = &g->values[v];
        if (val->init < 0)
            continue;
        const Onnx__TensorProto *t = gp->initializer[val->init];
        int r = role[val->init];
        if (r == ROLE_HOST || r == ROLE_NONE) {
            val->where = DP__OV_CONST;
            val->index = g->nconsts;
            DP_TRY(dp__onnx_host_from_tensor(&g->consts[g->nconsts++], t));
            continue;
        }
        if (t->n_dims > DP_MAX_DIMS || t->n_dims < 1) {
            DP_ERROR("%s: the initializer '%s' has %zu dimensions; a weight has 1 to %d", g->name,
                     val->name, t->n_dims, DP_MAX_DIMS);
            return DP_EFORMAT;
        }
        if (dp__onnx_numel(t) == 0) { /* a 0 x 0 kernel would widen its output */
            char dims[96];
            DP_ERROR("%s: the initializer '%s' %s is read as a weight and holds no values", g->name,
                     val->name, dp__shape_str(dims, sizeof dims, (int)t->n_dims, t->dims));
            return DP_EFORMAT;
        }
        dp_param_spec s = dp_param_spec_make(val->name, (int)t->n_dims, t->dims, DP_INIT_ZEROS, 0);
        if (s.ndim >= 2) { /* drawn only on request (--init): PyTorch's default */
            int64_t fan_in = 1;
            for (int d = 1; d < s.ndim; d++)
                fan_in *= s.shape[d];
            s.init = DP_INIT_UNIFORM;
            s.scale = fan_in > 0 ? (float)(1.0 / sqrt((double)fan_in)) : 0.0f;
        }
        if (ones[val->init])
            s.init = DP_INIT_ONES; /* batch norm's scale and running variance */
        /* The parameters' values, then the buffers', each in spec order. */
        int64_t *off = r == ROLE_PARAM ? &poff : &boff;
        dp__onnx_to_floats(t, g->init_values + (r == ROLE_PARAM ? 0 : pnumel) + *off);
        *off += dp__onnx_numel(t);
        if (r == ROLE_PARAM) {
            val->where = DP__OV_PARAM;
            val->index = g->nparams;
            g->param_init[g->nparams] = val->init;
            g->params[g->nparams++] = s;
        } else {
            val->where = DP__OV_BUFFER;
            val->index = g->nbuffers;
            g->buffer_init[g->nbuffers] = val->init;
            g->buffers[g->nbuffers++] = s;
        }
    }
    g->buffer_values = g->init_values + pnumel;
    return 0;
}

/* Batch norm's and dropout's places, and batch norm's names. */
static int number_layers(dp__onnx_graph *g)
{
    int nbn = 0;
    for (int i = 0; i < g->nnodes; i++)
        nbn += strcmp(g->nodes[i].op->type, "BatchNormalization") == 0;
    enum { NAME = 256 };
    g->bn_names = dp__calloc((size_t)DP_MAX(nbn, 1), sizeof *g->bn_names);
    g->bn_store = dp__calloc((size_t)DP_MAX(nbn, 1), NAME);
    if (!g->bn_names || !g->bn_store)
        return DP_ENOMEM;
    for (int i = 0; i < g->nnodes; i++) {
        dp__onnx_node *n = &g->nodes[i];
        if (strcmp(n->op->type, "BatchNormalization") == 0) {
            char *name = g->bn_store + (size_t)g->nbn * NAME;
            bn_name(g, n, name, NAME);
            g->bn_names[g->nbn] = name;
            n->layer = g->nbn++;
        } else if (strcmp(n->op->type, "Dropout") == 0) {
            n->layer = g->ndropout++;
        }
    }
    return 0;
}

/* Identity: each reader of its output reads its input instead (a graph
 * output too), and the node keeps no input of its own, so that the value
 * it passes is placed by what reads it: torch.onnx.export shares one
 * initializer among convolutions through Identity nodes, which must then
 * read it as a parameter. In the nodes' order, where every reader comes
 * after its producer, a chain of them resolves to its first input: one
 * pass, each input looked up in `alias` (a value's stand-in). */
static int alias_identities(dp__onnx_graph *g)
{
    int *alias = dp__malloc((size_t)DP_MAX(g->nvalues, 1) * sizeof *alias);
    if (!alias)
        return DP_ENOMEM;
    for (int v = 0; v < g->nvalues; v++)
        alias[v] = v;
    for (int i = 0; i < g->nnodes; i++) {
        dp__onnx_node *n = &g->nodes[i];
        for (int k = 0; k < n->nin; k++)
            if (n->in[k] >= 0)
                n->in[k] = alias[n->in[k]];
        if (strcmp(n->op->type, "Identity") != 0 || n->nout < 1 || n->out[0] < 0)
            continue;
        alias[n->out[0]] = n->in[0];
        n->nin = n->nout = 0;
    }
    for (int k = 0; k < g->noutputs; k++)
        g->outputs[k] = alias[g->outputs[k]];
    dp__free(alias);
    return 0;
}

/* torch.onnx.export in training mode writes nn.PReLU(C)'s slope as
 * Unsqueeze(weight, [1, 2]) -> PRelu: PRelu then reads the initializer
 * itself, so that the parameter keeps the state_dict's name and shape (C)
 * and a checkpoint loads strictly into PyTorch; dp_prelu takes it as it
 * is. Only where every reader of the Unsqueeze is a PRelu's slope (readers
 * counted, slopes counted, in one pass each). */
static int alias_slope_unsqueezes(dp__onnx_graph *g)
{
    dp__onnx_count_readers(g);
    int *slopes = dp__calloc((size_t)DP_MAX(g->nvalues, 1), sizeof *slopes);
    if (!slopes)
        return DP_ENOMEM;
    for (int i = 0; i < g->nnodes; i++) {
        const dp__onnx_node *n = &g->nodes[i];
        if (strcmp(n->op->type, "PRelu") == 0 && n->nin > 1 && n->in[1] >= 0)
            slopes[n->in[1]]++;
    }
    for (int k = 0; k < g->noutputs; k++)
        slopes[g->outputs[k]] = -1; /* a graph output is no slope */
    bool any = false;
    for (int i = 0; i < g->nnodes; i++) {
        dp__onnx_node *n = &g->nodes[i];
        if (strcmp(n->op->type, "Unsqueeze") != 0 || n->nin < 1 || n->nout != 1 || n->out[0] < 0 ||
            n->in[0] < 0 || g->values[n->in[0]].init < 0)
            continue;
        int from = n->out[0];
        if (g->values[from].readers == 0 || slopes[from] != g->values[from].readers)
            continue;
        slopes[from] = -2 - n->in[0];         /* read as the initializer from here on */
        n->op = dp__onnx_find_op("Identity"); /* runs nothing */
        n->nin = n->nout = 0;
        any = true;
    }
    for (int i = 0; any && i < g->nnodes; i++)
        for (int k = 0; k < g->nodes[i].nin; k++) {
            int v = g->nodes[i].in[k];
            if (v >= 0 && slopes[v] <= -2)
                g->nodes[i].in[k] = -2 - slopes[v];
        }
    dp__free(slopes);
    return 0;
}

int dp__onnx_bind(dp__onnx_graph *g)
{
    dp__onnx_count_readers(g);
    dp__onnx_fuse_gelu(g);
    DP_TRY(find_ops(g));
    DP_TRY(alias_identities(g));
    DP_TRY(alias_slope_unsqueezes(g));
    /* Gemm with beta 0 reads no C (PyTorch's exported torch.mm gives a
     * Constant there). */
    for (int i = 0; i < g->nnodes; i++)
        if (strcmp(g->nodes[i].op->type, "Gemm") == 0 &&
            dp__onnx_attr_float(&g->nodes[i], "beta", 1) == 0.0f && g->nodes[i].nin > 2)
            g->nodes[i].nin = 2;
    dp__onnx_count_readers(g); /* as the nodes read them from here on */
    size_t ninit = g->model->graph->n_initializer;
    int *role = dp__calloc(DP_MAX(ninit, 1), sizeof *role);
    if (!role)
        return DP_ENOMEM;
    bool *ones = dp__calloc(DP_MAX(ninit, 1), sizeof *ones);
    int rc = ones ? place_values(g, role) : DP_ENOMEM;
    for (int i = 0; rc == 0 && i < g->nnodes; i++) {
        const dp__onnx_node *n = &g->nodes[i];
        if (strcmp(n->op->type, "BatchNormalization") != 0)
            continue;
        for (int k = 1; k < n->nin && k <= 4; k++)
            if ((k == 1 || k == 4) && n->in[k] >= 0 && g->values[n->in[k]].init >= 0)
                ones[g->values[n->in[k]].init] = true;
    }
    if (rc == 0)
        rc = make_specs(g, role, ones);
    dp__free(role);
    dp__free(ones);
    DP_TRY(rc);
    DP_TRY(number_layers(g));
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op->prep)
            DP_TRY(g->nodes[i].op->prep(g, &g->nodes[i]));
    dp__onnx_fuse_pad_pool(g);
    return dp__onnx_plan_stages(g);
}
