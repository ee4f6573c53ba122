/* The ONNX operators dptrain runs, each one call of the public ops (or a
 * host computation, onnx_fold.c), in one table: adding an operator is a
 * line there and its functions, which live in a file of their family
 * (onnx_ops_conv.c, onnx_ops_eltwise.c, onnx_ops_graph.c, onnx_ops_shape.c). Here also the
 * helpers those files share (onnx_ops.h). */
#include "onnx/onnx_ops.h"

#include "core/internal.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

dp_tensor_t *dp__onnx_in_t(const dp__onnx_run *r, const dp__onnx_node *n, int k)
{
    return k < n->nin && n->in[k] >= 0 ? r->slots[n->in[k]].t : NULL;
}

const dp__onnx_host *dp__onnx_in_h(const dp__onnx_run *r, const dp__onnx_node *n, int k)
{
    return k < n->nin && n->in[k] >= 0 ? r->slots[n->in[k]].h : NULL;
}

int dp__onnx_put(dp__onnx_run *r, const dp__onnx_node *n, int k, dp_tensor_t *y)
{
    if (k < n->nout && n->out[k] >= 0)
        r->slots[n->out[k]].t = y;
    return 0;
}

int dp__onnx_want_rank(const dp__onnx_run *r, const dp__onnx_node *n, const dp_tensor_t *x, int lo,
                       int hi)
{
    int d = dp_tensor_ndim(x);
    if (d >= lo && d <= hi)
        return 0;
    char buf[64], want[64];
    if (lo == hi)
        snprintf(want, sizeof want, "%d", lo);
    else
        snprintf(want, sizeof want, "%d to %d", lo, hi);
    return dp__onnx_node_error(r->g, n, "takes inputs of %s dimensions, not %s", want,
                               dp_tensor_shape_str(x, buf, sizeof buf));
}

int dp__onnx_unused_output(const dp__onnx_graph *g, const dp__onnx_node *n, int k, const char *what)
{
    if (k >= n->nout || n->out[k] < 0)
        return 0;
    int as_output = 0; /* the value's readers are nodes' inputs and graph outputs */
    for (int i = 0; i < g->noutputs; i++)
        as_output += g->outputs[i] == n->out[k];
    if (g->values[n->out[k]].readers > as_output)
        return dp__onnx_node_error(g, n, "its output %s is read, which dptrain does not compute",
                                   what);
    if (as_output)
        return dp__onnx_node_error(g, n, "its output %s is a graph output", what);
    return 0;
}

int dp__onnx_ints_attr(const dp__onnx_graph *g, const dp__onnx_node *n, const char *name, int count,
                       int64_t dflt, int64_t *out)
{
    const Onnx__AttributeProto *a = dp__onnx_attr(n, name);
    for (int i = 0; i < count; i++)
        out[i] = dflt;
    if (!a)
        return 0;
    if (a->n_ints != (size_t)count)
        return dp__onnx_node_error(g, n, "%s has %zu values, not %d: dptrain runs 2-D ops only",
                                   name, a->n_ints, count);
    for (int i = 0; i < count; i++)
        out[i] = a->ints[i];
    return 0;
}

int dp__onnx_finite_attr(const dp__onnx_graph *g, const dp__onnx_node *n, const char *name,
                         float dflt, float *out)
{
    *out = dp__onnx_attr_float(n, name, dflt);
    if (isfinite(*out))
        return 0;
    return dp__onnx_node_error(g, n, "%s %g is not a finite number", name, (double)*out);
}

bool dp__onnx_attr_is(const dp__onnx_node *n, const char *name, const char *s, bool absent)
{
    const Onnx__AttributeProto *a = dp__onnx_attr(n, name);
    if (!a || !a->has_s)
        return absent;
    return a->s.len == strlen(s) && memcmp(a->s.data, s, a->s.len) == 0;
}

int dp__onnx_scalar_input(dp__onnx_run *r, const dp__onnx_node *n, int k, float dflt, float *out)
{
    const dp__onnx_host *h = dp__onnx_in_h(r, n, k);
    *out = dflt;
    if (!h)
        return 0;
    if (h->numel != 1)
        return dp__onnx_node_error(r->g, n, "input %d holds %lld values, not one", k,
                                   (long long)h->numel);
    *out = h->is_float ? h->f[0] : (float)h->i[0];
    return 0;
}

int dp__onnx_axis(const dp__onnx_run *r, const dp__onnx_node *n, int64_t axis, int rank, int *out)
{
    int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank)
        return dp__onnx_node_error(r->g, n, "axis %lld is outside a tensor of %d dimensions",
                                   (long long)axis, rank);
    *out = (int)a;
    return 0;
}

/* Identity: onnx_bind.c makes every reader of its output read its input
 * (a tensor, a parameter or a host value alike), so it runs nothing. */
static int run_nothing(dp__onnx_run *r, const dp__onnx_node *n)
{
    (void)r;
    (void)n;
    return 0;
}

/* ---- the table ---------------------------------------------------------------- */

#define ALL 0xffu /* every input on the host */

/* clang-format off */
static const dp__onnx_op ops[] = {
    {"Add", 2, 0, 0, 0, NULL, dp__onnx_run_binary, 3u},
    {"AveragePool", 1, 0, 0, 0, dp__onnx_prep_pool, dp__onnx_run_pool, 0},
    {"BatchNormalization", 5, 0, 3u << 3, 0, dp__onnx_prep_bn, dp__onnx_run_bn, 0},
    {"Cast", 1, ALL, 0, 1, NULL, dp__onnx_run_cast, 0},
    {"Clip", 1, 6u, 0, 0, dp__onnx_prep_act, dp__onnx_run_act, 0},
    {"Concat", 1, 0, 0, 1, NULL, dp__onnx_run_concat_any, 0},
    {"Constant", 0, 0, 0, 2, dp__onnx_prep_constant, dp__onnx_run_constant, 0},
    {"Conv", 2, 0, 0, 0, dp__onnx_prep_conv, dp__onnx_run_conv, 0},
    {"ConvTranspose", 2, 0, 0, 0, dp__onnx_prep_conv_transpose, dp__onnx_run_conv_transpose, 0},
    {"Div", 2, 0, 0, 0, NULL, dp__onnx_run_binary, 3u},
    {"Dropout", 1, 6u, 0, 0, dp__onnx_prep_dropout, dp__onnx_run_dropout, 0},
    {"Elu", 1, 0, 0, 0, dp__onnx_prep_act, dp__onnx_run_act, 0},
    {"Flatten", 1, 0, 0, 0, dp__onnx_prep_flatten, dp__onnx_run_flatten, 0},
    {"Gather", 2, ALL, 0, 1, NULL, dp__onnx_run_gather, 0},
    {"Gelu", 1, 0, 0, 0, dp__onnx_prep_gelu, dp__onnx_run_act, 0},
    {"Gemm", 2, 0, 0, 0, dp__onnx_prep_gemm, dp__onnx_run_gemm, 0},
    {"GlobalAveragePool", 1, 0, 0, 0, NULL, dp__onnx_run_global_pool, 0},
    {"GlobalMaxPool", 1, 0, 0, 0, NULL, dp__onnx_run_global_max_pool, 0},
    {"HardSigmoid", 1, 0, 0, 0, dp__onnx_prep_act, dp__onnx_run_act, 0},
    {"HardSwish", 1, 0, 0, 0, dp__onnx_prep_act, dp__onnx_run_act, 0},
    {"Identity", 1, 0, 0, 1, NULL, run_nothing, 0},
    {"LeakyRelu", 1, 0, 0, 0, dp__onnx_prep_leaky, dp__onnx_run_leaky, 0},
    {"LogSoftmax", 1, 0, 0, 0, dp__onnx_prep_softmax, dp__onnx_run_softmax, 0},
    {"MatMul", 2, 0, 0, 0, NULL, dp__onnx_run_matmul, 0},
    {"MaxPool", 1, 0, 0, 0, dp__onnx_prep_pool, dp__onnx_run_pool, 0},
    {"Mul", 2, 0, 0, 0, NULL, dp__onnx_run_binary, 3u},
    {"PRelu", 2, 0, 0, 0, NULL, dp__onnx_run_prelu, 0},
    {"Pad", 1, 6u, 0, 0, dp__onnx_prep_pad, dp__onnx_run_pad, 0},
    {"Relu", 1, 0, 0, 0, NULL, dp__onnx_run_relu, 0},
    {"Reshape", 2, 2u, 0, 0, dp__onnx_prep_reshape, dp__onnx_run_reshape, 0},
    {"Selu", 1, 0, 0, 0, dp__onnx_prep_act, dp__onnx_run_act, 0},
    {"Shape", 1, 0, 0, 2, NULL, dp__onnx_run_shape, 0},
    {"Sigmoid", 1, 0, 0, 0, NULL, dp__onnx_run_sigmoid, 0},
    {"Softmax", 1, 0, 0, 0, dp__onnx_prep_softmax, dp__onnx_run_softmax, 0},
    {"Split", 1, 2u, 0, 0, dp__onnx_prep_split, dp__onnx_run_split, 0},
    {"Squeeze", 1, ALL, 0, 1, NULL, dp__onnx_run_squeeze, 0},
    {"Sub", 2, 0, 0, 0, NULL, dp__onnx_run_binary, 3u},
    {"Tanh", 1, 0, 0, 0, NULL, dp__onnx_run_tanh, 0},
    {"Transpose", 1, 0, 0, 0, dp__onnx_prep_transpose, dp__onnx_run_transpose, 0},
    {"Unsqueeze", 1, ALL, 0, 1, NULL, dp__onnx_run_unsqueeze, 0},
    /* a new operator: one line above this one, in order */
};
/* clang-format on */

/* nn.GELU's sub-graphs as onnx_fuse.c finds them: not in the table (no
 * file names them), each the activation kind it stands for. */
static int prep_gelu_exact(const dp__onnx_graph *g, dp__onnx_node *n)
{
    (void)g;
    n->kind = DP_ACT_GELU;
    return 0;
}

static int prep_gelu_tanh(const dp__onnx_graph *g, dp__onnx_node *n)
{
    (void)g;
    n->kind = DP_ACT_GELU_TANH;
    return 0;
}

static const dp__onnx_op gelu_ops[2] = {
    {"Gelu", 1, 0, 0, 0, prep_gelu_exact, dp__onnx_run_act, 0},
    {"Gelu", 1, 0, 0, 0, prep_gelu_tanh, dp__onnx_run_act, 0},
};

const dp__onnx_op *dp__onnx_gelu_op(bool tanh_form)
{
    return &gelu_ops[tanh_form];
}

const dp__onnx_op *dp__onnx_find_op(const char *type)
{
    for (size_t i = 0; i < DP_COUNTOF(ops); i++)
        if (strcmp(ops[i].type, type) == 0)
            return &ops[i];
    return NULL;
}

/* The list of names, made once for the process: loads on several threads
 * may refuse a node at once. */
static char names[2048];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static void make_names(void)
{
    size_t off = 0;
    for (size_t i = 0; i < DP_COUNTOF(ops); i++) {
        int n = snprintf(names + off, sizeof names - off, "%s%s", i ? ", " : "", ops[i].type);
        DP_ASSERT(n > 0 && (size_t)n < sizeof names - off); /* the buffer holds the table */
        off += (size_t)n;
    }
}

const char *dp__onnx_op_names(void)
{
    pthread_once(&names_once, make_names);
    return names;
}
