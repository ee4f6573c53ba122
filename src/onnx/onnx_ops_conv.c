/* The ONNX operators of windows over images (onnx_ops.h): Conv (groups,
 * depthwise when group is the channel count, dilations, strides, pads on
 * each side, auto_pad), the pools (ceil_mode, count_include_pad either
 * way) and batch norm, each one call of the
 * public op on x (N, C, H, W). */
#include "onnx/onnx_ops.h"

#include "core/internal.h"

#include <math.h>
#include <string.h>

/* n->kind of Conv: how its padding is given. */
enum { PAD_EXPLICIT, PAD_SAME_UPPER, PAD_SAME_LOWER };

/* auto_pad: NOTSET (the pads attribute), VALID (none), SAME_UPPER or
 * SAME_LOWER (as much as keeps ceil(H / stride) rows, the odd one below
 * and right for UPPER, above and left for LOWER; computed when the input's
 * size is known). */
static int auto_pad(const dp__onnx_graph *g, const dp__onnx_node *n, int *mode)
{
    static const char *const known[] = {"NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"};
    const Onnx__AttributeProto *a = dp__onnx_attr(n, "auto_pad");
    *mode = PAD_EXPLICIT;
    if (!a || !a->has_s || a->s.len == 0)
        return 0;
    for (size_t i = 0; i < DP_COUNTOF(known); i++)
        if (dp__onnx_attr_is(n, "auto_pad", known[i], false)) {
            *mode = i == 2 ? PAD_SAME_UPPER : i == 3 ? PAD_SAME_LOWER : PAD_EXPLICIT;
            if (i >= 1 && dp__onnx_attr(n, "pads"))
                return dp__onnx_node_error(g, n, "has both auto_pad %s and pads", known[i]);
            return 0;
        }
    return dp__onnx_node_error(g, n,
                               "auto_pad '%.*s' is none of NOTSET, VALID, SAME_UPPER, "
                               "SAME_LOWER",
                               (int)DP_MIN(a->s.len, 32), (const char *)a->s.data);
}

/* The largest kernel, stride, dilation and padding read: beyond any
 * image dptrain takes (DP_MAX_INPUT_SIDE), and an int's room for the
 * products of two. */
enum { BIG = 1 << 20 };

/* The ints attribute `name` of `count` entries (dflt each when absent),
 * each from lo to BIG; else one line naming the attribute and its values. */
static int window_ints(const dp__onnx_graph *g, const dp__onnx_node *n, const char *name, int count,
                       int64_t dflt, int64_t lo, int64_t *out)
{
    DP_TRY(dp__onnx_ints_attr(g, n, name, count, dflt, out));
    for (int i = 0; i < count; i++)
        if (out[i] < lo || out[i] > BIG) {
            char list[128];
            size_t at = 0;
            for (int k = 0; k < count && at < sizeof list; k++)
                at += (size_t)snprintf(list + at, sizeof list - at, "%s%lld", k ? ", " : "",
                                       (long long)out[k]);
            return dp__onnx_node_error(g, n, "%s %s: each must be %lld to %d", name, list,
                                       (long long)lo, BIG);
        }
    return 0;
}

/* kernel_shape (0, 0 when absent: the weight's), strides, dilations and
 * pads [top, left, bottom, right] of a 2-D window, each within bounds. */
static int window_attrs(const dp__onnx_graph *g, const dp__onnx_node *n, int64_t *kernel,
                        int64_t *stride, int64_t *dil, int64_t *pads)
{
    bool kernel_given = dp__onnx_attr(n, "kernel_shape") != NULL;
    DP_TRY(window_ints(g, n, "kernel_shape", 2, 0, kernel_given ? 1 : 0, kernel));
    DP_TRY(window_ints(g, n, "strides", 2, 1, 1, stride));
    DP_TRY(window_ints(g, n, "dilations", 2, 1, 1, dil));
    return window_ints(g, n, "pads", 4, 0, 0, pads);
}

int dp__onnx_prep_conv(const dp__onnx_graph *g, dp__onnx_node *n)
{
    int64_t group = dp__onnx_attr_int(n, "group", 1), k[2], s[2], d[2], p[4];
    if (group < 1 || group > BIG)
        return dp__onnx_node_error(g, n, "group %lld: it must be 1 to %d", (long long)group, BIG);
    DP_TRY(window_attrs(g, n, k, s, d, p));
    DP_TRY(auto_pad(g, n, &n->kind));
    /* kernel_shape is checked against the weight when it runs. */
    n->ints[0] = k[0];
    n->ints[1] = k[1];
    n->nints = 2;
    n->conv = (dp_conv2d_params){.stride_h = (int)s[0],
                                 .stride_w = (int)s[1],
                                 .groups = (int)group,
                                 .dilation_h = (int)d[0],
                                 .dilation_w = (int)d[1],
                                 .pad_top = (int)p[0],
                                 .pad_left = (int)p[1],
                                 .pad_bottom = (int)p[2],
                                 .pad_right = (int)p[3]};
    return 0;
}

/* SAME padding of one side's size: ceil(size / stride) outputs, the
 * extent they need beyond size split in two, the odd one at the end
 * (upper) or at the beginning (lower). */
static void same_pads(int64_t size, int stride, int dil, int64_t kernel, bool upper, int *begin,
                      int *end)
{
    int64_t out = (size + stride - 1) / stride;
    int64_t total = DP_MAX(0, (out - 1) * stride + (kernel - 1) * dil + 1 - size);
    int64_t small = total / 2;
    *begin = (int)(upper ? small : total - small);
    *end = (int)(total - *begin);
}

int dp__onnx_run_conv(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *x = dp__onnx_in_t(r, n, 0), *w = dp__onnx_in_t(r, n, 1), *y;
    DP_TRY(dp__onnx_want_rank(r, n, x, 4, 4));
    char xs[64], ws[64];
    int64_t group = n->conv.groups;
    if (!w || dp_tensor_ndim(w) != 4 || dp_tensor_dim(w, 0) % group != 0 ||
        dp_tensor_dim(w, 1) * group != dp_tensor_dim(x, 1) ||
        (n->ints[0] && (n->ints[0] != dp_tensor_dim(w, 2) || n->ints[1] != dp_tensor_dim(w, 3))))
        return dp__onnx_node_error(
            r->g, n,
            "a weight %s does not fit input %s in %lld group(s) with kernel_shape %lld, %lld",
            w ? dp_tensor_shape_str(w, ws, sizeof ws) : "(none)",
            dp_tensor_shape_str(x, xs, sizeof xs), (long long)group, (long long)n->ints[0],
            (long long)n->ints[1]);
    dp_conv2d_params p = n->conv;
    if (n->kind != PAD_EXPLICIT) {
        bool upper = n->kind == PAD_SAME_UPPER;
        same_pads(dp_tensor_dim(x, 2), p.stride_h, p.dilation_h, dp_tensor_dim(w, 2), upper,
                  &p.pad_top, &p.pad_bottom);
        same_pads(dp_tensor_dim(x, 3), p.stride_w, p.dilation_w, dp_tensor_dim(w, 3), upper,
                  &p.pad_left, &p.pad_right);
    }
    DP_TRY(dp_conv2d(&y, x, w, dp__onnx_in_t(r, n, 2), &p));
    return dp__onnx_put(r, n, 0, y);
}

int dp__onnx_prep_pool(const dp__onnx_graph *g, dp__onnx_node *n)
{
    int64_t k[2], s[2], d[2], p[4];
    DP_TRY(window_attrs(g, n, k, s, d, p));
    if (k[0] < 1 || k[1] < 1)
        return dp__onnx_node_error(g, n, "needs kernel_shape of two sizes");
    if (!dp__onnx_attr_is(n, "auto_pad", "NOTSET", true) &&
        !dp__onnx_attr_is(n, "auto_pad", "VALID", false))
        return dp__onnx_node_error(g, n,
                                   "auto_pad other than NOTSET and VALID is not supported "
                                   "for pooling");
    if (p[0] != p[2] || p[1] != p[3])
        return dp__onnx_node_error(g, n,
                                   "pads %lld, %lld, %lld, %lld: pooling pads each side "
                                   "alike",
                                   (long long)p[0], (long long)p[1], (long long)p[2],
                                   (long long)p[3]);
    int64_t ceil_mode = dp__onnx_attr_int(n, "ceil_mode", 0);
    if (ceil_mode != 0 && ceil_mode != 1)
        return dp__onnx_node_error(g, n, "ceil_mode %lld is neither 0 nor 1", (long long)ceil_mode);
    bool avg = strcmp(n->proto->op_type, "AveragePool") == 0;
    if (avg && (d[0] != 1 || d[1] != 1)) /* AveragePool has dilations from opset 19 */
        return dp__onnx_node_error(g, n,
                                   "dilations %lld, %lld: dilated average pooling is not "
                                   "supported",
                                   (long long)d[0], (long long)d[1]);
    /* ONNX's default leaves padding out of the mean, PyTorch's counts it. */
    n->pool =
        (dp_pool2d_params){.kernel_h = (int)k[0],
                           .kernel_w = (int)k[1],
                           .stride_h = (int)s[0],
                           .stride_w = (int)s[1],
                           .pad_h = (int)p[0],
                           .pad_w = (int)p[1],
                           .ceil_mode = ceil_mode == 1,
                           .exclude_pad = avg && dp__onnx_attr_int(n, "count_include_pad", 0) == 0,
                           .dilation_h = (int)d[0],
                           .dilation_w = (int)d[1]};
    return avg ? 0 : dp__onnx_unused_output(g, n, 1, "Indices");
}

int dp__onnx_run_pool(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *x = dp__onnx_in_t(r, n, 0), *y;
    DP_TRY(dp__onnx_want_rank(r, n, x, 4, 4));
    const dp_pool2d_params *p = &n->pool;
    if (strcmp(n->proto->op_type, "AveragePool") == 0) {
        /* A mean counting pads of 1 or more whose last ceil_mode window
         * hangs past them: dp_avg_pool2d refuses it; say which node. */
        for (int d = 0; p->ceil_mode && !p->exclude_pad && (p->pad_h || p->pad_w) && d < 2; d++) {
            int64_t size = dp_tensor_dim(x, 2 + d), k = d ? p->kernel_w : p->kernel_h;
            int64_t st = d ? p->stride_w : p->stride_h, pad = d ? p->pad_w : p->pad_h;
            int64_t outs = (size + 2 * pad - k + st - 1) / st + 1;
            if ((outs - 1) * st >= size + pad)
                outs--;
            if ((outs - 1) * st + k > size + 2 * pad)
                return dp__onnx_node_error(r->g, n,
                                           "ceil_mode 1 with pads counted in the mean "
                                           "(count_include_pad 1): its last window hangs past "
                                           "the padding of a side of %lld, which dptrain does "
                                           "not run",
                                           (long long)size);
        }
        DP_TRY(dp_avg_pool2d(&y, x, p));
    } else {
        DP_TRY(dp_max_pool2d(&y, x, p));
    }
    return dp__onnx_put(r, n, 0, y);
}

/* GlobalAveragePool: y (N, C, 1, 1), the mean over (H, W). */
int dp__onnx_run_global_pool(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *x = dp__onnx_in_t(r, n, 0), *y;
    DP_TRY(dp__onnx_want_rank(r, n, x, 4, 4));
    DP_TRY(dp_adaptive_avg_pool2d(&y, x, 1, 1));
    return dp__onnx_put(r, n, 0, y);
}

int dp__onnx_prep_bn(const dp__onnx_graph *g, dp__onnx_node *n)
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
    if (!(n->a > 0.0f) || !isfinite(n->a))
        return dp__onnx_node_error(g, n, "epsilon %g is not a positive number", (double)n->a);
    DP_TRY(dp__onnx_unused_output(g, n, 1, "running_mean"));
    DP_TRY(dp__onnx_unused_output(g, n, 2, "running_var"));
    DP_TRY(dp__onnx_unused_output(g, n, 3, "saved_mean"));
    return dp__onnx_unused_output(g, n, 4, "saved_var");
}

int dp__onnx_run_bn(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *x = dp__onnx_in_t(r, n, 0), *y;
    dp_tensor_t *gamma = dp__onnx_in_t(r, n, 1), *beta = dp__onnx_in_t(r, n, 2);
    dp_tensor_t *mean = dp__onnx_in_t(r, n, 3), *var = dp__onnx_in_t(r, n, 4);
    dp_batch_norm_params p = {.training = r->train};
    if (r->m)
        dp_model_bn_params(r->m, n->layer, r->train, &p);
    p.eps = n->a;
    p.momentum = n->b;
    DP_TRY(dp__onnx_want_rank(r, n, x, 2, 4));
    if (dp_tensor_ndim(x) == 4)
        DP_TRY(dp_batch_norm2d(&y, x, gamma, beta, mean, var, &p));
    else
        DP_TRY(dp_batch_norm1d(&y, x, gamma, beta, mean, var, &p));
    return dp__onnx_put(r, n, 0, y);
}

/* ConvTranspose: strides, pads on each side, output_padding, group and
 * dilations as dp_conv_transpose2d takes them; output_shape only where
 * those give it (ints[2..4) keeps it, 0 when absent). */
int dp__onnx_prep_conv_transpose(const dp__onnx_graph *g, dp__onnx_node *n)
{
    int64_t group = dp__onnx_attr_int(n, "group", 1), k[2], s[2], d[2], p[4], op[2], os[2];
    if (group < 1 || group > BIG)
        return dp__onnx_node_error(g, n, "group %lld: it must be 1 to %d", (long long)group, BIG);
    DP_TRY(window_attrs(g, n, k, s, d, p));
    DP_TRY(dp__onnx_ints_attr(g, n, "output_padding", 2, 0, op));
    if (dp__onnx_attr(n, "output_shape"))
        DP_TRY(window_ints(g, n, "output_shape", 2, 0, 1, os));
    else
        os[0] = os[1] = 0;
    if (!dp__onnx_attr_is(n, "auto_pad", "NOTSET", true) &&
        !dp__onnx_attr_is(n, "auto_pad", "VALID", false))
        return dp__onnx_node_error(g, n, "auto_pad SAME_* is not supported for ConvTranspose");
    for (int i = 0; i < 2; i++)
        if (op[i] < 0 || (op[i] >= s[i] && op[i] >= d[i]))
            return dp__onnx_node_error(g, n,
                                       "output_padding %lld is not below the stride %lld or "
                                       "the dilation %lld",
                                       (long long)op[i], (long long)s[i], (long long)d[i]);
    n->ints[0] = k[0];
    n->ints[1] = k[1];
    n->ints[2] = os[0];
    n->ints[3] = os[1];
    n->nints = 4;
    n->deconv = (dp_conv_transpose2d_params){.stride_h = (int)s[0],
                                             .stride_w = (int)s[1],
                                             .output_padding_h = (int)op[0],
                                             .output_padding_w = (int)op[1],
                                             .groups = (int)group,
                                             .dilation_h = (int)d[0],
                                             .dilation_w = (int)d[1],
                                             .pad_top = (int)p[0],
                                             .pad_left = (int)p[1],
                                             .pad_bottom = (int)p[2],
                                             .pad_right = (int)p[3]};
    return 0;
}

int dp__onnx_run_conv_transpose(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *x = dp__onnx_in_t(r, n, 0), *w = dp__onnx_in_t(r, n, 1), *y;
    DP_TRY(dp__onnx_want_rank(r, n, x, 4, 4));
    char xs[64], ws[64];
    const dp_conv_transpose2d_params *p = &n->deconv;
    if (!w || dp_tensor_ndim(w) != 4 || dp_tensor_dim(w, 0) != dp_tensor_dim(x, 1) ||
        dp_tensor_dim(w, 0) % p->groups != 0 ||
        (n->ints[0] && (n->ints[0] != dp_tensor_dim(w, 2) || n->ints[1] != dp_tensor_dim(w, 3))))
        return dp__onnx_node_error(r->g, n, "a weight %s does not fit input %s in %d group(s)",
                                   w ? dp_tensor_shape_str(w, ws, sizeof ws) : "(none)",
                                   dp_tensor_shape_str(x, xs, sizeof xs), p->groups);
    /* P = (H - 1) stride - pads + dilation (R - 1) + output_padding + 1 */
    int64_t out[2];
    for (int i = 0; i < 2; i++) {
        int st = i ? p->stride_w : p->stride_h, dil = i ? p->dilation_w : p->dilation_h;
        int pads = i ? p->pad_left + p->pad_right : p->pad_top + p->pad_bottom;
        int opad = i ? p->output_padding_w : p->output_padding_h;
        out[i] = (dp_tensor_dim(x, 2 + i) - 1) * st - pads +
                 (int64_t)dil * (dp_tensor_dim(w, 2 + i) - 1) + opad + 1;
    }
    if (n->ints[2] && (n->ints[2] != out[0] || n->ints[3] != out[1]))
        return dp__onnx_node_error(r->g, n,
                                   "output_shape %lld x %lld is not the %lld x %lld its pads "
                                   "and output_padding give: dptrain does not infer pads",
                                   (long long)n->ints[2], (long long)n->ints[3], (long long)out[0],
                                   (long long)out[1]);
    DP_TRY(dp_conv_transpose2d(&y, x, w, dp__onnx_in_t(r, n, 2), p));
    return dp__onnx_put(r, n, 0, y);
}
