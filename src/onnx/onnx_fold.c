/* The ONNX operators computed on the host (onnx_model.h): constants and
 * the chains that make shapes from them and from tensors' shapes
 * (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as torch.onnx.export
 * writes x.view(x.size(0), -1)). They read no tensor's values, only its
 * shape, so they cost nothing on a device and the same graph runs any
 * batch size. */
#include "onnx/onnx_model.h"

#include "core/internal.h"

#include <string.h>

dp__onnx_host *dp__onnx_new_host(dp__onnx_run *r, const dp__onnx_node *n, int k, int ndim,
                                 const int64_t *shape, bool is_float)
{
    dp__onnx_host *h = dp__calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->ndim = ndim;
    h->numel = 1;
    for (int d = 0; d < ndim; d++) {
        h->shape[d] = shape[d];
        h->numel *= shape[d];
    }
    h->is_float = is_float;
    size_t n_el = (size_t)DP_MAX(h->numel, 1);
    if (is_float)
        h->f = dp__calloc(n_el, sizeof *h->f);
    else
        h->i = dp__calloc(n_el, sizeof *h->i);
    if (!h->f && !h->i) {
        dp__free(h);
        return NULL;
    }
    if (n->out[k] >= 0) {
        r->slots[n->out[k]].h = h;
        r->slots[n->out[k]].owned = true;
    } else {
        dp__free(h->f);
        dp__free(h->i);
        dp__free(h);
        return NULL;
    }
    return h;
}

static const dp__onnx_host *in_h(const dp__onnx_run *r, const dp__onnx_node *n, int k)
{
    return k < n->nin && n->in[k] >= 0 ? r->slots[n->in[k]].h : NULL;
}

/* h[i] = src[k]: integers copied exactly (a double holds 53 bits, an
 * int64 shape value 63), floats to integers truncated as Cast does. False
 * when a float is no int64 (NaN, infinite, past 2^63). */
static bool put(dp__onnx_host *h, int64_t i, const dp__onnx_host *src, int64_t k)
{
    if (!src->is_float) {
        if (h->is_float)
            h->f[i] = (float)src->i[k];
        else
            h->i[i] = src->i[k];
        return true;
    }
    if (h->is_float) {
        h->f[i] = src->f[k];
        return true;
    }
    double v = src->f[k];
    if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0))
        return false;
    h->i[i] = (int64_t)v;
    return true;
}

/* A copy of `src` with another shape (Unsqueeze, Squeeze). */
static int reshaped(dp__onnx_run *r, const dp__onnx_node *n, const dp__onnx_host *src, int ndim,
                    const int64_t *shape)
{
    dp__onnx_host *h = dp__onnx_new_host(r, n, 0, ndim, shape, src->is_float);
    if (!h)
        return n->out[0] < 0 ? 0 : DP_ENOMEM;
    for (int64_t i = 0; i < src->numel; i++)
        put(h, i, src, i); /* of one type: exact */
    return 0;
}

int dp__onnx_prep_constant(const dp__onnx_graph *g, dp__onnx_node *n)
{
    static const char *const kinds[] = {"value", "value_float", "value_floats", "value_int",
                                        "value_ints"};
    for (size_t i = 0; i < DP_COUNTOF(kinds); i++)
        if (dp__onnx_attr(n, kinds[i])) {
            n->kind = (int)i;
            return 0;
        }
    return dp__onnx_node_error(g, n, "has no value, value_float(s) or value_int(s)");
}

int dp__onnx_run_constant(dp__onnx_run *r, const dp__onnx_node *n)
{
    static const char *const kinds[] = {"value", "value_float", "value_floats", "value_int",
                                        "value_ints"};
    const Onnx__AttributeProto *a = dp__onnx_attr(n, kinds[n->kind]);
    if (n->kind == 0) {
        if (!a->t)
            return dp__onnx_node_error(r->g, n, "its value is not a tensor");
        dp__onnx_host *h =
            dp__onnx_new_host(r, n, 0, (int)a->t->n_dims, a->t->dims, dp__onnx_is_float(a->t));
        if (!h)
            return n->out[0] < 0 ? 0 : DP_ENOMEM;
        if (h->is_float)
            dp__onnx_to_floats(a->t, h->f);
        else
            dp__onnx_to_int64s(a->t, h->i);
        return 0;
    }
    bool many = n->kind == 2 || n->kind == 4, is_float = n->kind <= 2;
    int64_t len = many ? (int64_t)(is_float ? a->n_floats : a->n_ints) : 1;
    dp__onnx_host *h = dp__onnx_new_host(r, n, 0, many ? 1 : 0, &len, is_float);
    if (!h)
        return n->out[0] < 0 ? 0 : DP_ENOMEM;
    for (int64_t i = 0; i < len; i++) {
        if (is_float)
            h->f[i] = many ? a->floats[i] : a->f;
        else
            h->i[i] = many ? a->ints[i] : a->i;
    }
    return 0;
}

int dp__onnx_run_shape(dp__onnx_run *r, const dp__onnx_node *n)
{
    const dp__onnx_slot *x = &r->slots[n->in[0]];
    int ndim = x->t ? dp_tensor_ndim(x->t) : x->h->ndim;
    int64_t start = dp__onnx_attr_int(n, "start", 0), end = dp__onnx_attr_int(n, "end", ndim);
    start = start < 0 ? start + ndim : start;
    end = end < 0 ? end + ndim : end;
    start = DP_MAX(0, DP_MIN(start, ndim));
    end = DP_MAX(start, DP_MIN(end, ndim));
    int64_t len = end - start;
    dp__onnx_host *h = dp__onnx_new_host(r, n, 0, 1, &len, false);
    if (!h)
        return n->out[0] < 0 ? 0 : DP_ENOMEM;
    for (int64_t d = start; d < end; d++)
        h->i[d - start] = x->t ? dp_tensor_dim(x->t, (int)d) : x->h->shape[d];
    return 0;
}

int dp__onnx_run_gather(dp__onnx_run *r, const dp__onnx_node *n)
{
    const dp__onnx_host *data = in_h(r, n, 0), *idx = in_h(r, n, 1);
    if (data->ndim != 1 || idx->is_float || dp__onnx_attr_int(n, "axis", 0) != 0)
        return dp__onnx_node_error(r->g, n,
                                   "only Gather of a 1-D constant or shape along axis "
                                   "0 is supported");
    dp__onnx_host *h = dp__onnx_new_host(r, n, 0, idx->ndim, idx->shape, data->is_float);
    if (!h)
        return n->out[0] < 0 ? 0 : DP_ENOMEM;
    for (int64_t i = 0; i < idx->numel; i++) {
        int64_t k = idx->i[i] < 0 ? idx->i[i] + data->numel : idx->i[i];
        if (k < 0 || k >= data->numel)
            return dp__onnx_node_error(r->g, n, "index %lld is out of [0, %lld)",
                                       (long long)idx->i[i], (long long)data->numel);
        put(h, i, data, k); /* of one type: exact */
    }
    return 0;
}

/* The axes of Unsqueeze or Squeeze: an attribute before opset 13, input 1
 * since. into axes[0..*n). */
static int axes_of(dp__onnx_run *r, const dp__onnx_node *n, int64_t *axes, int *count)
{
    const Onnx__AttributeProto *a = dp__onnx_attr(n, "axes");
    const dp__onnx_host *h = in_h(r, n, 1);
    size_t len = a ? a->n_ints : h ? (size_t)h->numel : 0;
    if (len > DP__ONNX_MAX_RANK || (h && h->is_float))
        return dp__onnx_node_error(r->g, n, "its axes are not up to %d integers",
                                   DP__ONNX_MAX_RANK);
    for (size_t i = 0; i < len; i++)
        axes[i] = a ? a->ints[i] : h->i[i];
    *count = (int)len;
    return 0;
}

int dp__onnx_run_unsqueeze(dp__onnx_run *r, const dp__onnx_node *n)
{
    const dp__onnx_host *x = in_h(r, n, 0);
    int64_t axes[DP__ONNX_MAX_RANK], shape[DP__ONNX_MAX_RANK];
    int na, nd;
    DP_TRY(axes_of(r, n, axes, &na));
    nd = x->ndim + na;
    if (nd > DP__ONNX_MAX_RANK || na == 0)
        return dp__onnx_node_error(r->g, n, "gives %d dimensions", nd);
    bool inserted[DP__ONNX_MAX_RANK] = {false};
    for (int i = 0; i < na; i++) {
        int64_t ax = axes[i] < 0 ? axes[i] + nd : axes[i];
        if (ax < 0 || ax >= nd || inserted[ax])
            return dp__onnx_node_error(r->g, n, "axis %lld is out of range or repeated",
                                       (long long)axes[i]);
        inserted[ax] = true;
    }
    for (int d = 0, s = 0; d < nd; d++)
        shape[d] = inserted[d] ? 1 : x->shape[s++];
    return reshaped(r, n, x, nd, shape);
}

int dp__onnx_run_squeeze(dp__onnx_run *r, const dp__onnx_node *n)
{
    const dp__onnx_host *x = in_h(r, n, 0);
    int64_t axes[DP__ONNX_MAX_RANK], shape[DP__ONNX_MAX_RANK];
    int na, nd = 0;
    DP_TRY(axes_of(r, n, axes, &na));
    bool drop[DP__ONNX_MAX_RANK] = {false};
    for (int i = 0; i < na; i++) {
        int64_t ax = axes[i] < 0 ? axes[i] + x->ndim : axes[i];
        if (ax < 0 || ax >= x->ndim || x->shape[ax] != 1)
            return dp__onnx_node_error(r->g, n, "axis %lld is not one of size 1",
                                       (long long)axes[i]);
        drop[ax] = true;
    }
    for (int d = 0; d < x->ndim; d++)
        if (!(na ? drop[d] : x->shape[d] == 1))
            shape[nd++] = x->shape[d];
    return reshaped(r, n, x, nd, shape);
}

int dp__onnx_run_concat(dp__onnx_run *r, const dp__onnx_node *n)
{
    int64_t total = 0, axis = dp__onnx_attr_int(n, "axis", 0);
    bool is_float = false;
    if (axis != 0 && axis != -1)
        return dp__onnx_node_error(r->g, n, "axis %lld of 1-D constants and shapes",
                                   (long long)axis);
    for (int k = 0; k < n->nin; k++) {
        const dp__onnx_host *h = in_h(r, n, k);
        if (!h || h->ndim != 1)
            return dp__onnx_node_error(r->g, n,
                                       "only Concat of 1-D constants and shapes is "
                                       "supported");
        total += h->numel;
        is_float |= h->is_float;
    }
    dp__onnx_host *y = dp__onnx_new_host(r, n, 0, 1, &total, is_float);
    if (!y)
        return n->out[0] < 0 ? 0 : DP_ENOMEM;
    int64_t at = 0;
    for (int k = 0; k < n->nin; k++) {
        const dp__onnx_host *h = in_h(r, n, k);
        for (int64_t i = 0; i < h->numel; i++)
            put(y, at++, h, i); /* ints to a float y, or of one type */
    }
    return 0;
}

int dp__onnx_run_cast(dp__onnx_run *r, const dp__onnx_node *n)
{
    const dp__onnx_host *x = in_h(r, n, 0);
    int64_t to = dp__onnx_attr_int(n, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    bool is_float =
        to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || to == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
    dp__onnx_host *h = dp__onnx_new_host(r, n, 0, x->ndim, x->shape, is_float);
    if (!h)
        return n->out[0] < 0 ? 0 : DP_ENOMEM;
    for (int64_t i = 0; i < x->numel; i++)
        if (!put(h, i, x, i))
            return dp__onnx_node_error(r->g, n, "the value %g at %lld is no 64-bit integer",
                                       (double)x->f[i], (long long)i);
    return 0;
}

void dp__onnx_free_slots(const dp__onnx_graph *g, dp__onnx_slot *slots)
{
    for (int v = 0; slots && v < g->nvalues; v++)
        if (slots[v].owned) {
            dp__free(slots[v].h->f);
            dp__free(slots[v].h->i);
            dp__free(slots[v].h);
        }
    dp__free(slots);
}
