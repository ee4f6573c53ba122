/* The modules of nn.Sequential files: their arguments as PyTorch's
 * constructors take them (read through sequential_bind.h), the shape each
 * gives, its parameters and its forward. */
#include "nn/sequential/sequential_modules.h"

#include "core/internal.h"
#include "nn/sequential/sequential_bind.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* PyTorch's constructor arguments, in order, of the modules whose lists
 * are long or shared (the others' are on their line of the module list). */
static const char *const conv_args[] = {
    "in_channels", "out_channels", "kernel_size", "stride",       "padding",
    "dilation",    "groups",       "bias",        "padding_mode", NULL};
static const char *const conv_transpose_args[] = {
    "in_channels", "out_channels", "kernel_size", "stride",       "padding", "output_padding",
    "groups",      "bias",         "dilation",    "padding_mode", NULL};
static const char *const max_pool_args[] = {"kernel_size",    "stride",    "padding", "dilation",
                                            "return_indices", "ceil_mode", NULL};
static const char *const avg_pool_args[] = {
    "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override", NULL};
static const char *const bn_args[] = {"num_features",        "eps", "momentum", "affine",
                                      "track_running_stats", NULL};

/* padding_mode: 'zeros' only. */
static int zeros_padding(const dp__seq_bound *b, int j)
{
    const dp__seq_arg *v = b->v[j];
    return dp__seq_only(b, j, v && v->kind == DP__ARG_STRING && strcmp(v->text, "zeros") == 0,
                        "'zeros'");
}

/* groups: dividing the input and output channels, as PyTorch asks. */
static int get_groups(const dp__seq_bound *b, int j, int64_t cin, int64_t cout, int64_t *groups)
{
    DP_TRY(dp__seq_get_ints(b, j, 1, 1, groups, NULL));
    if (cin % *groups != 0 || cout % *groups != 0)
        return dp__seq_bad(b,
                           "%s: in_channels (%lld) and out_channels (%lld) must be divisible "
                           "by groups (%lld)",
                           b->call->source, (long long)cin, (long long)cout, (long long)*groups);
    return 0;
}

static int need_channels(const dp__seq_bound *b, const dp__seq_shape *sh, int64_t cin)
{
    DP_TRY(dp__seq_need_images(b, sh));
    if (sh->c != cin)
        return dp__seq_bad(b, "%s expects %lld input channels, the layer before gives %lld",
                           b->call->source, (long long)cin, (long long)sh->c);
    return 0;
}

/* Conv2d's padding: a number, a pair, or 'valid' (none) or 'same' (stride
 * 1; PyTorch puts the odd one of an even kernel's padding below and right). */
static int conv_padding(const dp__seq_bound *b, int64_t kh, int64_t kw, int64_t sth, int64_t stw,
                        dp_conv2d_params *p)
{
    const dp__seq_arg *v = b->v[4];
    if (!v || v->kind != DP__ARG_STRING) {
        int64_t ph, pw;
        DP_TRY(dp__seq_get_ints(b, 4, 0, 0, &ph, &pw));
        p->pad_h = (int)ph, p->pad_w = (int)pw;
        return 0;
    }
    if (strcmp(v->text, "valid") == 0)
        return 0;
    if (strcmp(v->text, "same") != 0)
        return dp__seq_bad(b, "%s: Conv2d's 'padding' must be a number, a pair, 'valid' or 'same'",
                           b->call->source);
    if (sth != 1 || stw != 1)
        return dp__seq_bad(b, "%s: padding='same' is not supported for strided convolutions",
                           b->call->source);
    int64_t th = (int64_t)p->dilation_h * (kh - 1), tw = (int64_t)p->dilation_w * (kw - 1);
    p->pad_top = (int)(th / 2), p->pad_bottom = (int)(th - th / 2);
    p->pad_left = (int)(tw / 2), p->pad_right = (int)(tw - tw / 2);
    return 0;
}

static int bind_conv(dp__seq_bound *b, dp__seq *s, dp__seq_layer *l, int idx, dp__seq_shape *sh)
{
    int64_t cin, cout, kh, kw, sth, stw, dh, dw, groups;
    bool bias;
    DP_TRY(dp__seq_get_ints(b, 0, 0, 1, &cin, NULL));
    DP_TRY(dp__seq_get_ints(b, 1, 0, 1, &cout, NULL));
    DP_TRY(dp__seq_get_ints(b, 2, 0, 1, &kh, &kw));
    DP_TRY(dp__seq_get_ints(b, 3, 1, 1, &sth, &stw));
    DP_TRY(dp__seq_get_ints(b, 5, 1, 1, &dh, &dw));
    DP_TRY(get_groups(b, 6, cin, cout, &groups));
    DP_TRY(dp__seq_get_bool(b, 7, true, &bias));
    DP_TRY(zeros_padding(b, 8));
    l->conv = (dp_conv2d_params){.stride_h = (int)sth,
                                 .stride_w = (int)stw,
                                 .groups = (int)groups,
                                 .dilation_h = (int)dh,
                                 .dilation_w = (int)dw};
    DP_TRY(conv_padding(b, kh, kw, sth, stw, &l->conv));
    DP_TRY(need_channels(b, sh, cin));
    const dp_conv2d_params *p = &l->conv;
    int64_t oh, ow;
    DP_TRY(dp__seq_window_out(b, sh->h, dh * (kh - 1) + 1, sth,
                              p->pad_top + p->pad_bottom + 2 * p->pad_h, &oh));
    DP_TRY(dp__seq_window_out(b, sh->w, dw * (kw - 1) + 1, stw,
                              p->pad_left + p->pad_right + 2 * p->pad_w, &ow));
    /* kaiming_uniform(a=sqrt(5)) over the fan-in, weight.size(1) R S */
    float bound_ = 1.0f / sqrtf((float)(cin / groups * kh * kw));
    int64_t ws[4] = {cout, cin / groups, kh, kw}, bs[1] = {cout};
    l->weight = dp__seq_add_spec(s, false, idx, "weight", 4, ws, DP_INIT_UNIFORM, bound_);
    l->bias = bias ? dp__seq_add_spec(s, false, idx, "bias", 1, bs, DP_INIT_UNIFORM, bound_) : -1;
    *sh = (dp__seq_shape){3, cout, oh, ow};
    return 0;
}

/* ConvTranspose2d(in_channels, out_channels, kernel_size, stride=1,
 * padding=0, output_padding=0, groups=1, bias=True, dilation=1,
 * padding_mode='zeros'): weight (in, out / groups, R, S), whose size(1)
 * is the fan-in PyTorch's initialisation takes. */
static int bind_conv_transpose(dp__seq_bound *b, dp__seq *s, dp__seq_layer *l, int idx,
                               dp__seq_shape *sh)
{
    int64_t cin, cout, kh, kw, sth, stw, ph, pw, oph, opw, groups, dh, dw;
    bool bias;
    DP_TRY(dp__seq_get_ints(b, 0, 0, 1, &cin, NULL));
    DP_TRY(dp__seq_get_ints(b, 1, 0, 1, &cout, NULL));
    DP_TRY(dp__seq_get_ints(b, 2, 0, 1, &kh, &kw));
    DP_TRY(dp__seq_get_ints(b, 3, 1, 1, &sth, &stw));
    DP_TRY(dp__seq_get_ints(b, 4, 0, 0, &ph, &pw));
    DP_TRY(dp__seq_get_ints(b, 5, 0, 0, &oph, &opw));
    DP_TRY(get_groups(b, 6, cin, cout, &groups));
    DP_TRY(dp__seq_get_bool(b, 7, true, &bias));
    DP_TRY(dp__seq_get_ints(b, 8, 1, 1, &dh, &dw));
    DP_TRY(zeros_padding(b, 9));
    if (oph >= sth || opw >= stw)
        return dp__seq_bad(b, "%s: output_padding must be smaller than the stride",
                           b->call->source);
    DP_TRY(need_channels(b, sh, cin));
    int64_t oh = (sh->h - 1) * sth - 2 * ph + dh * (kh - 1) + oph + 1;
    int64_t ow = (sh->w - 1) * stw - 2 * pw + dw * (kw - 1) + opw + 1;
    if (oh < 1 || ow < 1)
        return dp__seq_bad(b, "%s: the padding leaves no output of an input of %lld x %lld",
                           b->call->source, (long long)sh->h, (long long)sh->w);
    float bound_ = 1.0f / sqrtf((float)(cout / groups * kh * kw));
    int64_t ws[4] = {cin, cout / groups, kh, kw}, bs[1] = {cout};
    l->weight = dp__seq_add_spec(s, false, idx, "weight", 4, ws, DP_INIT_UNIFORM, bound_);
    l->bias = bias ? dp__seq_add_spec(s, false, idx, "bias", 1, bs, DP_INIT_UNIFORM, bound_) : -1;
    l->conv_transpose = (dp_conv_transpose2d_params){.stride_h = (int)sth,
                                                     .stride_w = (int)stw,
                                                     .pad_h = (int)ph,
                                                     .pad_w = (int)pw,
                                                     .output_padding_h = (int)oph,
                                                     .output_padding_w = (int)opw,
                                                     .groups = (int)groups,
                                                     .dilation_h = (int)dh,
                                                     .dilation_w = (int)dw};
    *sh = (dp__seq_shape){3, cout, oh, ow};
    return 0;
}

static int bind_linear(dp__seq_bound *b, dp__seq *s, dp__seq_layer *l, int idx, dp__seq_shape *sh)
{
    int64_t din, dout;
    bool bias;
    DP_TRY(dp__seq_get_ints(b, 0, 0, 1, &din, NULL));
    DP_TRY(dp__seq_get_ints(b, 1, 0, 1, &dout, NULL));
    DP_TRY(dp__seq_get_bool(b, 2, true, &bias));
    if (dp__seq_is_images(sh))
        return dp__seq_bad(
            b,
            "%s expects %lld inputs, the layer before gives images (%lld, %lld, %lld): "
            "put Flatten() before it",
            b->call->source, (long long)din, (long long)sh->c, (long long)sh->h, (long long)sh->w);
    if (sh->c != din)
        return dp__seq_bad(b, "%s expects %lld inputs, the layer before gives %lld",
                           b->call->source, (long long)din, (long long)sh->c);
    float bound_ = 1.0f / sqrtf((float)din);
    int64_t ws[2] = {dout, din}, bs[1] = {dout};
    l->weight = dp__seq_add_spec(s, false, idx, "weight", 2, ws, DP_INIT_UNIFORM, bound_);
    l->bias = bias ? dp__seq_add_spec(s, false, idx, "bias", 1, bs, DP_INIT_UNIFORM, bound_) : -1;
    *sh = (dp__seq_shape){1, dout, 1, 1};
    return 0;
}

static int bind_pool(dp__seq_bound *b, dp__seq *s, dp__seq_layer *l, int idx, dp__seq_shape *sh)
{
    bool max = l->kind == DP__SEQ_MaxPool2d;
    int64_t kh, kw, sth, stw, ph, pw;
    DP_TRY(dp__seq_get_ints(b, 0, 0, 1, &kh, &kw));
    DP_TRY(dp__seq_get_ints(b, 1, 0, 1, &sth, &stw));
    if (!b->v[1]) /* stride=None: the kernel size */
        sth = kh, stw = kw;
    DP_TRY(dp__seq_get_ints(b, 2, 0, 0, &ph, &pw));
    bool flag, ceil_mode, include_pad = true;
    int64_t dh = 1, dw = 1; /* dilation: max pooling only, as PyTorch */
    if (max) {
        DP_TRY(dp__seq_get_ints(b, 3, 1, 1, &dh, &dw));
        DP_TRY(dp__seq_get_bool(b, 4, false, &flag));
        DP_TRY(dp__seq_only(b, 4, !flag, "False"));
        DP_TRY(dp__seq_get_bool(b, 5, false, &ceil_mode));
    } else {
        DP_TRY(dp__seq_get_bool(b, 3, false, &ceil_mode));
        DP_TRY(dp__seq_get_bool(b, 4, true, &include_pad));
        DP_TRY(dp__seq_only(b, 5, false, "None"));
    }
    if (2 * ph > kh || 2 * pw > kw)
        return dp__seq_bad(b, "%s: padding should be at most half of the kernel size",
                           b->call->source);
    DP_TRY(dp__seq_need_images(b, sh));
    /* the rows and columns a window spans */
    int64_t span_h = dh * (kh - 1) + 1, span_w = dw * (kw - 1) + 1, oh, ow;
    DP_TRY(dp__seq_window_out(b, sh->h, span_h, sth, 2 * ph, &oh));
    DP_TRY(dp__seq_window_out(b, sh->w, span_w, stw, 2 * pw, &ow));
    /* ceil_mode: one more window where the last would start inside the
     * input or the left padding (PyTorch's rule, as dp_max_pool2d's). */
    if (ceil_mode && (sh->h + 2 * ph - span_h) % sth && oh * sth < sh->h + ph)
        oh++;
    if (ceil_mode && (sh->w + 2 * pw - span_w) % stw && ow * stw < sh->w + pw)
        ow++;
    l->pool = (dp_pool2d_params){(int)kh, (int)kw,   (int)sth,     (int)stw, (int)ph,
                                 (int)pw, ceil_mode, !include_pad, (int)dh,  (int)dw};
    sh->h = oh;
    sh->w = ow;
    return 0;
}

static int bind_batch_norm(dp__seq_bound *b, dp__seq *s, dp__seq_layer *l, int idx,
                           dp__seq_shape *sh)
{
    int64_t c;
    bool flag;
    DP_TRY(dp__seq_get_ints(b, 0, 0, 1, &c, NULL));
    DP_TRY(dp__seq_get_float(b, 1, 1e-5, 1e-12, 1.0, &l->eps));
    DP_TRY(dp__seq_get_float(b, 2, 0.1, 1e-6, 1.0, &l->momentum));
    DP_TRY(dp__seq_get_bool(b, 3, true, &flag));
    DP_TRY(dp__seq_only(b, 3, flag, "True"));
    DP_TRY(dp__seq_get_bool(b, 4, true, &flag));
    DP_TRY(dp__seq_only(b, 4, flag, "True"));
    bool two_d = l->kind == DP__SEQ_BatchNorm2d;
    if (two_d)
        DP_TRY(dp__seq_need_images(b, sh));
    else if (dp__seq_is_images(sh))
        return dp__seq_bad(b,
                           "%s expects %lld features, the layer before gives images (%lld, %lld, "
                           "%lld): BatchNorm2d normalises images",
                           b->call->source, (long long)c, (long long)sh->c, (long long)sh->h,
                           (long long)sh->w);
    if (sh->c != c)
        return dp__seq_bad(b, "%s expects %lld %s, the layer before gives %lld", b->call->source,
                           (long long)c, two_d ? "channels" : "features", (long long)sh->c);
    int64_t cs[1] = {c};
    l->weight = dp__seq_add_spec(s, false, idx, "weight", 1, cs, DP_INIT_ONES, 0);
    l->bias = dp__seq_add_spec(s, false, idx, "bias", 1, cs, DP_INIT_ZEROS, 0);
    l->running_mean = dp__seq_add_spec(s, true, idx, "running_mean", 1, cs, DP_INIT_ZEROS, 0);
    l->running_var = dp__seq_add_spec(s, true, idx, "running_var", 1, cs, DP_INIT_ONES, 0);
    /* bn_names[j] is the layer's own name ("4"): the prefix of its entries. */
    char *prefix = s->names[s->nnames++];
    snprintf(prefix, sizeof s->names[0], "%d", idx);
    l->bn = s->nbn;
    s->bn_names[s->nbn++] = prefix;
    return 0;
}

static int bind_adaptive_pool(dp__seq_bound *b, dp__seq *s, dp__seq_layer *l, int idx,
                              dp__seq_shape *sh)
{
    int64_t v, v2;
    DP_TRY(dp__seq_get_ints(b, 0, 1, 1, &v, &v2));
    DP_TRY(dp__seq_need_images(b, sh));
    l->out_h = (int)v;
    l->out_w = (int)v2;
    sh->h = v;
    sh->w = v2;
    return 0;
}

static int bind_flatten(dp__seq_bound *b, dp__seq *s, dp__seq_layer *l, int idx, dp__seq_shape *sh)
{
    int64_t start = 1;
    if (b->v[0])
        DP_TRY(dp__seq_get_ints(b, 0, 1, 1, &start, NULL));
    if (b->v[1] && !(b->v[1]->kind == DP__ARG_NUMBER && b->v[1]->value == -1))
        DP_TRY(dp__seq_only(b, 1, false, "-1"));
    DP_TRY(dp__seq_only(b, 0, start == 1, "1"));
    if (dp__seq_is_images(sh))
        *sh = (dp__seq_shape){1, sh->c * sh->h * sh->w, 1, 1};
    return 0;
}

static int bind_dropout(dp__seq_bound *b, dp__seq *s, dp__seq_layer *l, int idx, dp__seq_shape *sh)
{
    bool inplace;
    DP_TRY(dp__seq_get_float(b, 0, 0.5, 0.0, 1.0, &l->number));
    DP_TRY(dp__seq_get_bool(b, 1, false, &inplace));
    l->dropout = s->ndropout++;
    return 0;
}

/* nn.PReLU(num_parameters=1, init=0.25): one slope, or one per channel of
 * the layer before; "N.weight" (num_parameters) as its state_dict. */
static int bind_prelu(dp__seq_bound *b, dp__seq *s, dp__seq_layer *l, int idx, dp__seq_shape *sh)
{
    int64_t n;
    float init;
    DP_TRY(dp__seq_get_ints(b, 0, 1, 1, &n, NULL));
    DP_TRY(dp__seq_get_float(b, 1, 0.25, -FLT_MAX, FLT_MAX, &init));
    if (n != 1 && n != sh->c)
        return dp__seq_bad(b, "%s expects %lld channels, the layer before gives %lld",
                           b->call->source, (long long)n, (long long)sh->c);
    l->weight = dp__seq_add_spec(s, false, idx, "weight", 1, &n, DP_INIT_CONSTANT, init);
    return 0;
}

/* Softmax and LogSoftmax over the channels or features: dim=1 (or None,
 * which PyTorch takes as 1 for these inputs, or the same axis counted from
 * the end). */
static int bind_softmax(dp__seq_bound *b, dp__seq *s, dp__seq_layer *l, int idx, dp__seq_shape *sh)
{
    int64_t from_end = dp__seq_is_images(sh) ? -3 : -1;
    const dp__seq_arg *a = b->v[0];
    bool ok = !a || (a->kind == DP__ARG_NUMBER && a->is_int &&
                     (a->value == 1 || a->value == (double)from_end));
    return dp__seq_only(b, 0, ok, dp__seq_is_images(sh) ? "1 (the channels)" : "1 (the features)");
}

/* The binding of a module without .bind, which runs op or op_number: its
 * number (op_number's argument 0) is any float, and "inplace" is read and
 * changes nothing (the op makes a new output either way). */
static int bind_op(dp__seq_bound *b, dp__seq *s, dp__seq_layer *l, int idx, dp__seq_shape *sh)
{
    bool inplace;
    for (int j = 0; b->info->args[j]; j++)
        if (strcmp(b->info->args[j], "inplace") == 0)
            DP_TRY(dp__seq_get_bool(b, j, false, &inplace));
    if (b->info->op_number)
        DP_TRY(dp__seq_get_float(b, 0, b->info->number, -FLT_MAX, FLT_MAX, &l->number));
    return 0;
}

static dp_tensor_t *param(dp_model_t *m, int i)
{
    return i >= 0 ? dp_params_get(dp_model_params(m), i) : NULL;
}

static int forward_conv(const dp__seq_layer *l, dp_model_t *m, dp_tensor_t *x, bool train,
                        dp_tensor_t **y)
{
    return dp_conv2d(y, x, param(m, l->weight), param(m, l->bias), &l->conv);
}

static int forward_conv_transpose(const dp__seq_layer *l, dp_model_t *m, dp_tensor_t *x, bool train,
                                  dp_tensor_t **y)
{
    return dp_conv_transpose2d(y, x, param(m, l->weight), param(m, l->bias), &l->conv_transpose);
}

static int forward_linear(const dp__seq_layer *l, dp_model_t *m, dp_tensor_t *x, bool train,
                          dp_tensor_t **y)
{
    return dp_linear(y, x, param(m, l->weight), param(m, l->bias), DP_WEIGHT_OUT_IN);
}

static int forward_pool(const dp__seq_layer *l, dp_model_t *m, dp_tensor_t *x, bool train,
                        dp_tensor_t **y)
{
    return l->kind == DP__SEQ_MaxPool2d ? dp_max_pool2d(y, x, &l->pool)
                                        : dp_avg_pool2d(y, x, &l->pool);
}

static int forward_adaptive_pool(const dp__seq_layer *l, dp_model_t *m, dp_tensor_t *x, bool train,
                                 dp_tensor_t **y)
{
    return dp_adaptive_avg_pool2d(y, x, l->out_h, l->out_w);
}

static int forward_batch_norm(const dp__seq_layer *l, dp_model_t *m, dp_tensor_t *x, bool train,
                              dp_tensor_t **y)
{
    dp_params_t *B = dp_model_buffers(m);
    dp_batch_norm_params p;
    dp_model_bn_params(m, l->bn, train, &p);
    p.eps = l->eps;
    p.momentum = l->momentum;
    dp_tensor_t *w = param(m, l->weight), *b = param(m, l->bias);
    dp_tensor_t *mean = dp_params_get(B, l->running_mean), *var = dp_params_get(B, l->running_var);
    return l->kind == DP__SEQ_BatchNorm2d ? dp_batch_norm2d(y, x, w, b, mean, var, &p)
                                          : dp_batch_norm1d(y, x, w, b, mean, var, &p);
}

static int forward_prelu(const dp__seq_layer *l, dp_model_t *m, dp_tensor_t *x, bool train,
                         dp_tensor_t **y)
{
    return dp_prelu(y, x, param(m, l->weight));
}

static int forward_dropout(const dp__seq_layer *l, dp_model_t *m, dp_tensor_t *x, bool train,
                           dp_tensor_t **y)
{
    dp_dropout_params p;
    dp_model_dropout_params(m, l->dropout, l->number, train, &p);
    return dp_dropout(y, x, &p);
}

/* The module list's lines, by kind. */
static const dp__seq_module_info modules[] = {
#define MODULE(name_, required_, args_, ...)                                                       \
    [DP__SEQ_##name_] = {.name = #name_, .required = required_, .args = args_, __VA_ARGS__},
    DP__MODULE_LIST(MODULE)
#undef MODULE
};
_Static_assert(DP_COUNTOF(modules) == DP__SEQ_COUNT, "a table line for every kind");

/* "Conv2d, Linear, ...": the modules known, for an error message. */
static void module_names(char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < DP_COUNTOF(modules) && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%s", i ? ", " : "", modules[i].name);
}

int dp__seq_add_layer(dp__seq *s, const dp__seq_call *call, dp__seq_shape *sh)
{
    dp__seq_bound b = {.s = s, .call = call};
    for (size_t i = 0; i < DP_COUNTOF(modules); i++)
        if (strcmp(modules[i].name, call->module) == 0)
            b.info = &modules[i];
    if (!b.info) {
        char known[512];
        module_names(known, sizeof known);
        DP_ERROR("%s: line %d: unknown module '%s' (known: %s)", s->name, call->line, call->module,
                 known);
        return DP_EFORMAT;
    }
    DP_TRY(dp__seq_bind_args(&b));
    int idx = s->nlayers;
    dp__seq_layer *l = &s->layers[idx];
    *l = (dp__seq_layer){.kind = (dp__seq_kind)(b.info - modules),
                         .line = call->line,
                         .weight = -1,
                         .bias = -1,
                         .running_mean = -1,
                         .running_var = -1,
                         .bn = -1,
                         .dropout = -1};
    DP_TRY((b.info->bind ? b.info->bind : bind_op)(&b, s, l, idx, sh));
    if (sh->c > (int64_t)1 << 31 || sh->h * sh->w > (int64_t)1 << 31)
        return dp__seq_bad(&b, "%s gives a sample too large to train", call->source);
    s->nlayers++;
    return 0;
}

int dp__seq_layer_forward(const dp__seq_layer *l, dp_model_t *m, dp_tensor_t *x, bool train,
                          dp_tensor_t **y)
{
    const dp__seq_module_info *info = &modules[l->kind];
    if (info->forward)
        return info->forward(l, m, x, train, y);
    if (info->op_number)
        return info->op_number(y, x, l->number);
    return info->op(y, x);
}
