/* The ONNX operators of graphs beyond a chain of layers (onnx_ops.h), each
 * one call of the public graph ops: PRelu (dp_prelu), Softmax and
 * LogSoftmax over the channels, Add, Sub, Mul and Div broadcast over the
 * channels (dp_binary), Split along any axis (dp_split),
 * GlobalMaxPool, Transpose of a matrix, MatMul of two matrices and Gelu
 * (dp_activation). */
#include "onnx/onnx_ops.h"

#include "core/internal.h"

#include <math.h>
#include <string.h>

/* PRelu: the slope is (C), (1), or as torch.onnx.export writes it in eval
 * mode (C, 1, 1) or (1, 1, 1); dp_prelu takes its values as (C) or (1). */
int dp__onnx_run_prelu(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *x = dp__onnx_in_t(r, n, 0), *w = dp__onnx_in_t(r, n, 1), *y;
    DP_TRY(dp__onnx_want_rank(r, n, x, 2, 4));
    int64_t c = dp_tensor_numel(w);
    bool fits = c == 1 || c == dp_tensor_dim(x, 1);
    for (int d = 1; fits && d < dp_tensor_ndim(w); d++)
        fits = dp_tensor_dim(w, d) == 1;
    if (!fits) {
        char ws[64], xs[64];
        return dp__onnx_node_error(
            r->g, n, "a slope %s is neither one per channel of %s nor one for all",
            dp_tensor_shape_str(w, ws, sizeof ws), dp_tensor_shape_str(x, xs, sizeof xs));
    }
    if (dp_tensor_ndim(w) != 1)
        DP_TRY(dp_reshape(&w, w, 1, &c));
    DP_TRY(dp_prelu(&y, x, w));
    return dp__onnx_put(r, n, 0, y);
}

/* Softmax and LogSoftmax. From opset 13 over the axis itself (default
 * -1); before, over the input seen as a matrix from the axis on (default
 * 1). dp_softmax runs over axis 1: of x itself where that is the axis
 * (the channels, either layout), else of x seen as the matrix (the
 * dimensions before the axis, those from it on), which covers every
 * opset-6-to-12 axis and the last axis from 13 on. */
int dp__onnx_prep_softmax(const dp__onnx_graph *g, dp__onnx_node *n)
{
    n->axis = dp__onnx_attr_int(n, "axis", g->opset >= 13 ? -1 : 1);
    return 0;
}

int dp__onnx_run_softmax(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *x = dp__onnx_in_t(r, n, 0), *y;
    DP_TRY(dp__onnx_want_rank(r, n, x, 2, 4));
    int rank = dp_tensor_ndim(x), axis;
    DP_TRY(dp__onnx_axis(r, n, n->axis, rank, &axis));
    bool old = r->g->opset < 13, channels = axis == 1;
    for (int d = 2; old && channels && d < rank; d++)
        channels = dp_tensor_dim(x, d) == 1;
    if (!channels && !old && axis != rank - 1) {
        char xs[64];
        return dp__onnx_node_error(r->g, n,
                                   "axis %lld of %s (opset %lld): dptrain's softmax runs over "
                                   "the channels (axis 1) or the last axis only",
                                   (long long)n->axis, dp_tensor_shape_str(x, xs, sizeof xs),
                                   (long long)r->g->opset);
    }
    bool log = strcmp(n->proto->op_type, "LogSoftmax") == 0;
    if (channels) {
        DP_TRY(log ? dp_log_softmax(&y, x) : dp_softmax(&y, x));
        return dp__onnx_put(r, n, 0, y);
    }
    int64_t m[2] = {1, 1}, shape[4];
    for (int d = 0; d < rank; d++) {
        shape[d] = dp_tensor_dim(x, d);
        m[d >= axis] *= shape[d];
    }
    dp_tensor_t *xm, *ym;
    DP_TRY(dp_reshape(&xm, x, 2, m));
    DP_TRY(log ? dp_log_softmax(&ym, xm) : dp_softmax(&ym, xm));
    DP_TRY(dp_reshape(&y, ym, rank, shape));
    return dp__onnx_put(r, n, 0, y);
}

/* Whether `other` broadcasts over `full` as dp_binary takes it: the same
 * shape, one element, or aligned from the right one value per channel
 * (axis 1 of full) or per sample and channel. */
static bool broadcasts(const dp_tensor_t *full, const dp_tensor_t *other)
{
    int fr = dp_tensor_ndim(full), orank = dp_tensor_ndim(other);
    if (dp_tensor_numel(other) == 1 && orank <= fr)
        return true;
    if (orank > fr)
        return false;
    bool same = orank == fr, chan = true, sample_chan = orank == fr;
    for (int d = 0; d < orank; d++) {
        int fd = d + fr - orank; /* full's axis that other's axis d meets */
        int64_t o = dp_tensor_dim(other, d), f = dp_tensor_dim(full, fd);
        same = same && o == f;
        chan = chan && (fd == 1 ? o == f : o == 1);
        sample_chan = sample_chan && (fd <= 1 ? o == f : o == 1);
    }
    return same || (fr >= 2 && (chan || sample_chan));
}

/* a op b for node n, z as dp_binary makes it; shapes it cannot
 * broadcast are refused naming the node. */
static int binary(dp__onnx_run *r, const dp__onnx_node *n, dp_binary_op op, dp_tensor_t *a,
                  dp_tensor_t *b, dp_tensor_t **z)
{
    bool b_full = dp_tensor_numel(b) > dp_tensor_numel(a);
    if (!broadcasts(b_full ? b : a, b_full ? a : b)) {
        char sa[64], sb[64];
        return dp__onnx_node_error(r->g, n,
                                   "%s and %s: dptrain broadcasts one value, one per channel "
                                   "or one per sample and channel only",
                                   dp_tensor_shape_str(a, sa, sizeof sa),
                                   dp_tensor_shape_str(b, sb, sizeof sb));
    }
    return dp_binary(z, op, a, b);
}

int dp__onnx_binary_add(dp__onnx_run *r, const dp__onnx_node *n, dp_tensor_t *a, dp_tensor_t *b,
                        dp_tensor_t **z)
{
    return binary(r, n, DP_BINARY_ADD, a, b, z);
}

/* Add, Sub, Mul, Div: the operand with fewer elements broadcast over the
 * other (dp_binary); which is first keeps its place. */
/* x op c or c op x with c a constant of one number (a host value, as
 * torch.onnx.export writes x + 1 or x * 0.5): alpha x + beta, one
 * dp_activation; x / c is x times 1 / c. c / x is refused by name. */
static int with_constant(dp__onnx_run *r, const dp__onnx_node *n, dp_binary_op op, dp_tensor_t **z)
{
    const dp__onnx_host *h0 = dp__onnx_in_h(r, n, 0), *h1 = dp__onnx_in_h(r, n, 1);
    if (h0 && h1)
        return dp__onnx_node_error(r->g, n,
                                   "both operands are constants; dptrain computes "
                                   "constants on the host only as shapes");
    const dp__onnx_host *h = h0 ? h0 : h1;
    if (!h->is_float || h->numel != 1)
        return dp__onnx_node_error(r->g, n,
                                   "input %d is a constant of %lld %s values; dptrain takes a "
                                   "constant operand of one float",
                                   h0 ? 0 : 1, (long long)h->numel,
                                   h->is_float ? "float" : "integer");
    float c = h->f[0];
    dp_tensor_t *x = dp__onnx_in_t(r, n, h0 ? 1 : 0);
    float alpha = 1.0f, beta = 0.0f;
    switch (op) {
    case DP_BINARY_ADD:
        beta = c;
        break;
    case DP_BINARY_SUB: /* x - c, or c - x */
        alpha = h0 ? -1.0f : 1.0f;
        beta = h0 ? c : -c;
        break;
    case DP_BINARY_MUL:
        alpha = c;
        break;
    default: /* DP_BINARY_DIV */
        if (h0)
            return dp__onnx_node_error(r->g, n,
                                       "divides a constant by a tensor, which dptrain "
                                       "does not compute");
        if (c == 0.0f || !isfinite(1.0f / c))
            return dp__onnx_node_error(r->g, n, "divides by the constant %g", (double)c);
        alpha = 1.0f / c;
    }
    return dp_activation(z, x, DP_ACT_LINEAR, alpha, beta);
}

int dp__onnx_run_binary(dp__onnx_run *r, const dp__onnx_node *n)
{
    static const char *const types[] = {"Add", "Sub", "Mul", "Div"};
    int op = 0;
    while (strcmp(types[op], n->proto->op_type) != 0)
        op++;
    dp_tensor_t *z;
    if (dp__onnx_in_h(r, n, 0) || dp__onnx_in_h(r, n, 1)) {
        DP_TRY(with_constant(r, n, (dp_binary_op)op, &z));
    } else {
        DP_TRY(binary(r, n, (dp_binary_op)op, dp__onnx_in_t(r, n, 0), dp__onnx_in_t(r, n, 1), &z));
    }
    return dp__onnx_put(r, n, 0, z);
}

/* Split along any axis: sizes from the `split` attribute (opset 11
 * and 12) or input (13 on), else equal parts, one per output. */
int dp__onnx_prep_split(const dp__onnx_graph *g, dp__onnx_node *n)
{
    n->axis = dp__onnx_attr_int(n, "axis", 0);
    n->nints = 0;
    const Onnx__AttributeProto *a = g->opset < 13 ? dp__onnx_attr(n, "split") : NULL;
    if (a && a->n_ints != (size_t)n->nout)
        return dp__onnx_node_error(g, n, "split has %zu sizes for %d outputs", a->n_ints, n->nout);
    if (a && a->n_ints > DP__ONNX_MAX_RANK)
        return dp__onnx_node_error(g, n, "splits into %zu parts; dptrain takes at most %d",
                                   a->n_ints, DP__ONNX_MAX_RANK);
    for (size_t i = 0; a && i < a->n_ints; i++)
        n->ints[n->nints++] = a->ints[i];
    return n->nout <= DP__ONNX_MAX_RANK
               ? 0
               : dp__onnx_node_error(g, n, "has %d outputs; dptrain splits into at most %d",
                                     n->nout, DP__ONNX_MAX_RANK);
}

int dp__onnx_run_split(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *x = dp__onnx_in_t(r, n, 0), *ys[DP__ONNX_MAX_RANK];
    DP_TRY(dp__onnx_want_rank(r, n, x, 1, 4));
    int rank = dp_tensor_ndim(x), axis;
    DP_TRY(dp__onnx_axis(r, n, n->axis, rank, &axis));
    int64_t sizes[DP__ONNX_MAX_RANK], C = dp_tensor_dim(x, axis), total = 0;
    const dp__onnx_host *s = dp__onnx_in_h(r, n, 1);
    int parts = n->nout;
    for (int i = 0; i < parts; i++) {
        if (s && (s->is_float || s->numel != parts))
            return dp__onnx_node_error(r->g, n, "its split holds %lld sizes for %d outputs",
                                       (long long)s->numel, parts);
        sizes[i] = s ? s->i[i] : n->nints ? n->ints[i] : C / parts;
        if (sizes[i] < 0)
            return dp__onnx_node_error(r->g, n, "its split holds the size %lld",
                                       (long long)sizes[i]);
        total += sizes[i];
    }
    if (total != C) {
        char xs[64];
        return dp__onnx_node_error(r->g, n, "its sizes sum to %lld, not the %lld of axis %d of %s",
                                   (long long)total, (long long)C, axis,
                                   dp_tensor_shape_str(x, xs, sizeof xs));
    }
    /* dp_split cuts dimension 1 of 2 to 4: x goes as (N, C) or (N, C, H, W)
     * itself, any other rank or axis as the view (outer, C, inner, 1) of
     * its dimensions before, at and after the axis. */
    bool direct = axis == 1 && (rank == 2 || rank == 4);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < rank; d++)
        if (d != axis)
            *(d < axis ? &outer : &inner) *= dp_tensor_dim(x, d);
    dp_tensor_t *in = x;
    if (!direct)
        DP_TRY(dp_reshape(&in, x, 4, (const int64_t[]){outer, C, inner, 1}));
    DP_TRY(dp_split(ys, in, parts, sizes));
    for (int i = 0; i < parts; i++) {
        if (!direct) {
            int64_t shape[DP__ONNX_MAX_RANK];
            for (int d = 0; d < rank; d++)
                shape[d] = d == axis ? sizes[i] : dp_tensor_dim(x, d);
            DP_TRY(dp_reshape(&ys[i], ys[i], rank, shape));
        }
        DP_TRY(dp__onnx_put(r, n, i, ys[i]));
    }
    return 0;
}

/* GlobalMaxPool: y (N, C, 1, 1), the max over (H, W). */
int dp__onnx_run_global_max_pool(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *x = dp__onnx_in_t(r, n, 0), *y;
    DP_TRY(dp__onnx_want_rank(r, n, x, 4, 4));
    DP_TRY(dp_global_max_pool2d(&y, x));
    return dp__onnx_put(r, n, 0, y);
}

/* Transpose: a matrix's two axes swapped (perm absent or [1, 0]). */
int dp__onnx_prep_transpose(const dp__onnx_graph *g, dp__onnx_node *n)
{
    const Onnx__AttributeProto *a = dp__onnx_attr(n, "perm");
    if (a && !(a->n_ints == 2 && a->ints[0] == 1 && a->ints[1] == 0))
        return dp__onnx_node_error(g, n,
                                   "perm of %zu axes: dptrain transposes a matrix (perm 1, 0) "
                                   "only",
                                   a->n_ints);
    return 0;
}

int dp__onnx_run_transpose(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *x = dp__onnx_in_t(r, n, 0), *y;
    DP_TRY(dp__onnx_want_rank(r, n, x, 2, 2));
    DP_TRY(dp_transpose(&y, x));
    return dp__onnx_put(r, n, 0, y);
}

/* MatMul of two matrices, a (N, K) b (K, M). */
int dp__onnx_run_matmul(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *a = dp__onnx_in_t(r, n, 0), *b = dp__onnx_in_t(r, n, 1), *y;
    char sa[64], sb[64];
    if (dp_tensor_ndim(a) != 2 || dp_tensor_ndim(b) != 2 ||
        dp_tensor_dim(a, 1) != dp_tensor_dim(b, 0))
        return dp__onnx_node_error(r->g, n, "multiplies %s by %s: dptrain takes (N, K) by (K, M)",
                                   dp_tensor_shape_str(a, sa, sizeof sa),
                                   dp_tensor_shape_str(b, sb, sizeof sb));
    DP_TRY(dp_matmul(&y, a, b));
    return dp__onnx_put(r, n, 0, y);
}

/* Gelu (opset 20's, read at any opset): exact, or approximate "tanh". */
int dp__onnx_prep_gelu(const dp__onnx_graph *g, dp__onnx_node *n)
{
    if (dp__onnx_attr_is(n, "approximate", "none", true))
        n->kind = DP_ACT_GELU;
    else if (dp__onnx_attr_is(n, "approximate", "tanh", false))
        n->kind = DP_ACT_GELU_TANH;
    else
        return dp__onnx_node_error(g, n, "approximate is neither 'none' nor 'tanh'");
    return 0;
}
