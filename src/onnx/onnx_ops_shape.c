/* The ONNX operators that move or join values (onnx_ops.h): Flatten,
 * Reshape, Concat of device tensors along the channels (dp_concat; a
 * Concat of constants and shapes is computed on the host, onnx_fold.c),
 * and Gemm. */
#include "onnx/onnx_ops.h"

#include "core/internal.h"

#include <string.h>

int dp__onnx_prep_flatten(const dp__onnx_graph *g, dp__onnx_node *n)
{
    n->axis = dp__onnx_attr_int(n, "axis", 1);
    if (n->axis != 1)
        return dp__onnx_node_error(g, n, "axis %lld: only Flatten from axis 1 is supported",
                                   (long long)n->axis);
    return 0;
}

int dp__onnx_run_flatten(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *y;
    DP_TRY(dp_flatten(&y, dp__onnx_in_t(r, n, 0)));
    return dp__onnx_put(r, n, 0, y);
}

int dp__onnx_prep_reshape(const dp__onnx_graph *g, dp__onnx_node *n)
{
    if (dp__onnx_attr_int(n, "allowzero", 0) != 0)
        return dp__onnx_node_error(g, n, "allowzero 1 is not supported");
    return 0;
}

/* The target's first entry is the batch: 0 (copy), -1, or the batch size
 * the graph was exported with (torch.onnx.export bakes x.size(0) in) all
 * mean this batch's size, so a graph traced at batch 1 trains at 256. */
int dp__onnx_run_reshape(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *x = dp__onnx_in_t(r, n, 0), *y;
    const dp__onnx_host *s = dp__onnx_in_h(r, n, 1);
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
        if (!dp__mul_size(known, v, &known))
            return dp__onnx_node_error(r->g, n, "its shape holds more values than a tensor can");
    }
    if (infer >= 0 && known > 0 && total % known == 0)
        shape[infer] = total / known;
    DP_TRY(dp_reshape(&y, x, (int)s->numel, shape));
    return dp__onnx_put(r, n, 0, y);
}

/* Concat of device tensors: along axis 1 of (N, C, H, W) or (N, C) inputs,
 * the channels, as torch.cat(xs, 1) in DenseNet's and SqueezeNet's blocks;
 * (N, C, L) inputs go through (N, C, L, 1). */
static int concat_tensors(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *xs[DP__ONNX_MAX_IO], *y;
    dp_tensor_t *x0 = dp__onnx_in_t(r, n, 0);
    int rank = dp_tensor_ndim(x0), axis;
    DP_TRY(dp__onnx_want_rank(r, n, x0, 2, 4));
    DP_TRY(dp__onnx_axis(r, n, dp__onnx_attr_int(n, "axis", 1), rank, &axis));
    if (axis != 1)
        return dp__onnx_node_error(r->g, n,
                                   "axis %lld: dptrain joins tensors along the channels "
                                   "(axis 1) only",
                                   (long long)dp__onnx_attr_int(n, "axis", 1));
    for (int k = 0; k < n->nin; k++) {
        dp_tensor_t *x = dp__onnx_in_t(r, n, k);
        bool fits = x && dp_tensor_ndim(x) == rank && dp_tensor_dim(x, 0) == dp_tensor_dim(x0, 0);
        for (int d = 2; fits && d < rank; d++)
            fits = dp_tensor_dim(x, d) == dp_tensor_dim(x0, d);
        if (!fits) {
            char a[64], b[64];
            return dp__onnx_node_error(r->g, n, "input %d %s does not fit input 0 %s", k,
                                       x ? dp_tensor_shape_str(x, a, sizeof a) : "(a constant)",
                                       dp_tensor_shape_str(x0, b, sizeof b));
        }
        xs[k] = x;
        if (rank == 3) {
            int64_t s[4] = {dp_tensor_dim(x, 0), dp_tensor_dim(x, 1), dp_tensor_dim(x, 2), 1};
            DP_TRY(dp_reshape(&xs[k], x, 4, s));
        }
    }
    DP_TRY(dp_concat(&y, xs, n->nin));
    if (rank == 3) {
        int64_t s[3] = {dp_tensor_dim(y, 0), dp_tensor_dim(y, 1), dp_tensor_dim(y, 2)};
        DP_TRY(dp_reshape(&y, y, 3, s));
    }
    return dp__onnx_put(r, n, 0, y);
}

/* Concat runs where the loader placed it: on the host when every input is
 * a constant or a shape, else on the device. */
int dp__onnx_run_concat_any(dp__onnx_run *r, const dp__onnx_node *n)
{
    if (dp__onnx_in_h(r, n, 0))
        return dp__onnx_run_concat(r, n);
    return concat_tensors(r, n);
}

/* Gemm: Y = A' B' + C, A' = A or its transpose (transA), B' likewise
 * (transB: nn.Linear's (D_out, D_in) weight), C (M), (N, M) or one value,
 * or left out, or beta 0 (onnx_bind.c then drops it); alpha 1 and beta 0
 * or 1 only, since dptrain has no scaling op. */
int dp__onnx_prep_gemm(const dp__onnx_graph *g, dp__onnx_node *n)
{
    float alpha = dp__onnx_attr_float(n, "alpha", 1), beta = dp__onnx_attr_float(n, "beta", 1);
    if (alpha != 1.0f || (beta != 1.0f && beta != 0.0f))
        return dp__onnx_node_error(g, n,
                                   "alpha %g, beta %g: dptrain runs Y = A B + C (alpha 1, beta "
                                   "0 or 1) only",
                                   (double)alpha, (double)beta);
    n->kind = dp__onnx_attr_int(n, "transB", 0) ? DP_WEIGHT_OUT_IN : DP_WEIGHT_IN_OUT;
    n->axis = dp__onnx_attr_int(n, "transA", 0) != 0;
    return 0;
}

int dp__onnx_run_gemm(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *a = dp__onnx_in_t(r, n, 0), *w = dp__onnx_in_t(r, n, 1),
                *c = dp__onnx_in_t(r, n, 2);
    dp_tensor_t *y;
    char sa[64], sw[64], sc[64];
    if (dp_tensor_ndim(a) != 2 || dp_tensor_ndim(w) != 2 || (c && dp_tensor_ndim(c) > 2))
        return dp__onnx_node_error(
            r->g, n, "takes two matrices and C of 0 to 2 dimensions, not %s, %s, %s",
            dp_tensor_shape_str(a, sa, sizeof sa), dp_tensor_shape_str(w, sw, sizeof sw),
            c ? dp_tensor_shape_str(c, sc, sizeof sc) : "none");
    if (n->axis)
        DP_TRY(dp_transpose(&a, a));
    int64_t m = dp_tensor_dim(w, n->kind == DP_WEIGHT_OUT_IN ? 0 : 1);
    bool bias = c && dp_tensor_ndim(c) == 1 && dp_tensor_dim(c, 0) == m;
    DP_TRY(dp_linear(&y, a, w, bias ? c : NULL, (dp_weight_layout)n->kind));
    if (c && !bias)
        DP_TRY(dp__onnx_binary_add(r, n, y, c, &y));
    return dp__onnx_put(r, n, 0, y);
}

/* Pad: torch.onnx.export (1.13) writes one before each AvgPool2d, padding
 * nothing where the pool has no padding (that one passes x on) and the
 * pool's padding where it has some (onnx_fuse.c gives that to the pool).
 * Any other padding needs an op dptrain does not have, and is refused
 * naming the node when the graph runs. */
int dp__onnx_prep_pad(const dp__onnx_graph *g, dp__onnx_node *n)
{
    if (!dp__onnx_attr_is(n, "mode", "constant", true))
        return dp__onnx_node_error(g, n, "mode other than 'constant' is not supported");
    return 0;
}

int dp__onnx_run_pad(dp__onnx_run *r, const dp__onnx_node *n)
{
    const dp__onnx_host *p = dp__onnx_in_h(r, n, 1);
    const Onnx__AttributeProto *a = r->g->opset < 11 ? dp__onnx_attr(n, "pads") : NULL;
    int64_t count = a ? (int64_t)a->n_ints : p ? p->numel : 0;
    for (int64_t i = 0; i < count; i++) {
        int64_t v = a ? a->ints[i] : p->is_float ? (int64_t)p->f[i] : p->i[i];
        if (v != 0)
            return dp__onnx_node_error(r->g, n,
                                       "pads entry %lld is %lld: dptrain runs Pad only where it "
                                       "pads nothing",
                                       (long long)i, (long long)v);
    }
    return dp__onnx_put(r, n, 0, dp__onnx_in_t(r, n, 0));
}
