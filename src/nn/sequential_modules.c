/* The modules of nn.Sequential files: their arguments bound as PyTorch's
 * constructors bind them (positional, then by keyword, with PyTorch's
 * defaults), the shape each gives, its parameters and its forward. */
#include "nn/sequential_modules.h"

#include "core/internal.h"

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
static const char *const max_pool_args[] = {"kernel_size",    "stride",    "padding", "dilation",
                                            "return_indices", "ceil_mode", NULL};
static const char *const avg_pool_args[] = {
    "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override", NULL};
static const char *const bn_args[] = {"num_features",        "eps", "momentum", "affine",
                                      "track_running_stats", NULL};

typedef struct module_info module_info;
typedef struct bound bound;

/* A line of the module list (nn/module_list.h). */
struct module_info {
    const char *name;
    int required;
    const char *const *args;
    /* Reads the bound arguments into l (the model's layer idx) and makes *sh
     * the sample's shape after it; NULL: bind_op. */
    int (*bind)(bound *b, dp__seq *s, dp__seq_layer *l, int idx, dp__seq_shape *sh);
    /* *y = the layer's output for x; NULL: op or op_number. */
    int (*forward)(const dp__seq_layer *l, dp_model_t *m, dp_tensor_t *x, bool train,
                   dp_tensor_t **y);
    int (*op)(dp_tensor_t **y, dp_tensor_t *x);
    int (*op_number)(dp_tensor_t **y, dp_tensor_t *x, float number);
    double number; /* op_number's argument when not given */
};

enum { MAX_BOUND = 10 };

/* The arguments of one call by the module's argument order (NULL: not
 * given, PyTorch's default applies). */
struct bound {
    const module_info *info;
    const dp__seq_arg *v[MAX_BOUND];
    const dp__seq *s;
    const dp__seq_call *call;
};

static int bad(const bound *b, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    DP_ERROR("%s: line %d: %s", b->s->name, b->call->line, msg);
    return DP_EFORMAT;
}

static int bind(bound *b)
{
    const struct module_info *info = b->info;
    int nargs = 0;
    while (info->args[nargs])
        nargs++;
    for (int i = 0; i < b->call->nargs; i++) {
        const dp__seq_arg *a = &b->call->args[i];
        int at = -1;
        if (!a->key[0]) {
            if (i >= nargs)
                return bad(b, "%s: %s takes at most %d arguments", b->call->source, info->name,
                           nargs);
            at = i;
        } else {
            for (int j = 0; j < nargs; j++)
                if (strcmp(info->args[j], a->key) == 0)
                    at = j;
            if (at < 0)
                return bad(b, "%s: %s has no argument '%s'", b->call->source, info->name, a->key);
        }
        if (b->v[at])
            return bad(b, "%s: %s's '%s' is given twice", b->call->source, info->name,
                       info->args[at]);
        b->v[at] = a->kind == DP__ARG_NONE ? NULL : a;
    }
    for (int j = 0; j < info->required; j++)
        if (!b->v[j])
            return bad(b, "%s: %s needs '%s'", b->call->source, info->name, info->args[j]);
    return 0;
}

/* A positive integer (or pair of them, both must be equal unless `pair`
 * is given) at argument j, else `fallback`. min: the least value. */
static int get_ints(const bound *b, int j, int64_t fallback, int64_t min, int64_t *first,
                    int64_t *second)
{
    const dp__seq_arg *a = b->v[j];
    *first = fallback;
    if (second)
        *second = fallback;
    if (!a)
        return 0;
    bool ok = (a->kind == DP__ARG_NUMBER || (a->kind == DP__ARG_PAIR && second)) && a->is_int &&
              a->value >= (double)min && a->value <= 1e9 &&
              (a->kind != DP__ARG_PAIR || (a->second >= (double)min && a->second <= 1e9));
    if (!ok)
        return bad(b, "%s: %s's '%s' must be an integer >= %lld%s", b->call->source, b->info->name,
                   b->info->args[j], (long long)min, second ? " or a pair of them" : "");
    *first = (int64_t)a->value;
    if (second)
        *second = a->kind == DP__ARG_PAIR ? (int64_t)a->second : *first;
    return 0;
}

static int get_float(const bound *b, int j, double fallback, double lo, double hi, float *out)
{
    const dp__seq_arg *a = b->v[j];
    *out = (float)fallback;
    if (!a)
        return 0;
    if (a->kind != DP__ARG_NUMBER || a->value < lo || a->value > hi) {
        if (lo <= -FLT_MAX && hi >= FLT_MAX) /* any float */
            return bad(b, "%s: %s's '%s' must be a number", b->call->source, b->info->name,
                       b->info->args[j]);
        return bad(b, "%s: %s's '%s' must be a number in [%g, %g]", b->call->source, b->info->name,
                   b->info->args[j], lo, hi);
    }
    *out = (float)a->value;
    return 0;
}

static int get_bool(const bound *b, int j, bool fallback, bool *out)
{
    const dp__seq_arg *a = b->v[j];
    *out = fallback;
    if (!a)
        return 0;
    if (a->kind != DP__ARG_BOOL)
        return bad(b, "%s: %s's '%s' must be True or False", b->call->source, b->info->name,
                   b->info->args[j]);
    *out = a->value != 0;
    return 0;
}

/* Refuses an argument whose value dptrain does not implement. */
static int only(const bound *b, int j, bool supported, const char *what)
{
    if (b->v[j] && !supported)
        return bad(b, "%s: %s's '%s' other than %s is not supported", b->call->source,
                   b->info->name, b->info->args[j], what);
    return 0;
}

static int add_spec(dp__seq *s, bool buffer, int layer, const char *suffix, int ndim,
                    const int64_t *shape, dp_init init, float scale)
{
    char *name = s->names[s->nnames++];
    snprintf(name, sizeof s->names[0], "%d.%s", layer, suffix);
    if (buffer) {
        s->buffers[s->nbuffers] = dp_param_spec_make(name, ndim, shape, init, scale);
        return s->nbuffers++;
    }
    s->params[s->nparams] = dp_param_spec_make(name, ndim, shape, init, scale);
    return s->nparams++;
}

static bool is_images(const dp__seq_shape *sh)
{
    return sh->rank == 3;
}

static int need_images(const bound *b, const dp__seq_shape *sh)
{
    if (is_images(sh))
        return 0;
    return bad(b, "%s expects images (C, H, W), the layer before gives %lld features",
               b->call->source, (long long)sh->c);
}

/* Output size of a window of k, stride st, padding p over n (PyTorch,
 * floor mode). */
static int window_out(const bound *b, int64_t n, int64_t k, int64_t st, int64_t p, int64_t *out)
{
    *out = (n + 2 * p - k) / st + 1;
    if (n + 2 * p < k)
        return bad(b, "%s: a window of %lld does not fit an input of %lld (padding %lld)",
                   b->call->source, (long long)k, (long long)n, (long long)p);
    return 0;
}

static int bind_conv(bound *b, dp__seq *s, dp__seq_layer *l, int idx, dp__seq_shape *sh)
{
    int64_t cin, cout, kh, kw, sth, stw, ph, pw, dil, groups;
    bool bias;
    DP_TRY(get_ints(b, 0, 0, 1, &cin, NULL));
    DP_TRY(get_ints(b, 1, 0, 1, &cout, NULL));
    DP_TRY(get_ints(b, 2, 0, 1, &kh, &kw));
    DP_TRY(get_ints(b, 3, 1, 1, &sth, &stw));
    DP_TRY(get_ints(b, 4, 0, 0, &ph, &pw));
    DP_TRY(get_ints(b, 5, 1, 1, &dil, NULL));
    DP_TRY(get_ints(b, 6, 1, 1, &groups, NULL));
    DP_TRY(get_bool(b, 7, true, &bias));
    DP_TRY(only(b, 5, dil == 1, "1"));
    DP_TRY(only(b, 6, groups == 1, "1"));
    DP_TRY(only(b, 8,
                b->v[8] && b->v[8]->kind == DP__ARG_STRING && strcmp(b->v[8]->text, "zeros") == 0,
                "'zeros'"));
    DP_TRY(need_images(b, sh));
    if (sh->c != cin)
        return bad(b, "%s expects %lld input channels, the layer before gives %lld",
                   b->call->source, (long long)cin, (long long)sh->c);
    int64_t oh, ow;
    DP_TRY(window_out(b, sh->h, kh, sth, ph, &oh));
    DP_TRY(window_out(b, sh->w, kw, stw, pw, &ow));
    float bound_ = 1.0f / sqrtf((float)(cin * kh * kw)); /* kaiming_uniform(a=sqrt(5)) */
    int64_t ws[4] = {cout, cin, kh, kw}, bs[1] = {cout};
    l->weight = add_spec(s, false, idx, "weight", 4, ws, DP_INIT_UNIFORM, bound_);
    l->bias = bias ? add_spec(s, false, idx, "bias", 1, bs, DP_INIT_UNIFORM, bound_) : -1;
    l->conv = (dp_conv2d_params){
        .stride_h = (int)sth, .stride_w = (int)stw, .pad_h = (int)ph, .pad_w = (int)pw};
    *sh = (dp__seq_shape){3, cout, oh, ow};
    return 0;
}

static int bind_linear(bound *b, dp__seq *s, dp__seq_layer *l, int idx, dp__seq_shape *sh)
{
    int64_t din, dout;
    bool bias;
    DP_TRY(get_ints(b, 0, 0, 1, &din, NULL));
    DP_TRY(get_ints(b, 1, 0, 1, &dout, NULL));
    DP_TRY(get_bool(b, 2, true, &bias));
    if (is_images(sh))
        return bad(b,
                   "%s expects %lld inputs, the layer before gives images (%lld, %lld, %lld): "
                   "put Flatten() before it",
                   b->call->source, (long long)din, (long long)sh->c, (long long)sh->h,
                   (long long)sh->w);
    if (sh->c != din)
        return bad(b, "%s expects %lld inputs, the layer before gives %lld", b->call->source,
                   (long long)din, (long long)sh->c);
    float bound_ = 1.0f / sqrtf((float)din);
    int64_t ws[2] = {dout, din}, bs[1] = {dout};
    l->weight = add_spec(s, false, idx, "weight", 2, ws, DP_INIT_UNIFORM, bound_);
    l->bias = bias ? add_spec(s, false, idx, "bias", 1, bs, DP_INIT_UNIFORM, bound_) : -1;
    *sh = (dp__seq_shape){1, dout, 1, 1};
    return 0;
}

static int bind_pool(bound *b, dp__seq *s, dp__seq_layer *l, int idx, dp__seq_shape *sh)
{
    bool max = l->kind == DP__SEQ_MaxPool2d;
    int64_t kh, kw, sth, stw, ph, pw;
    DP_TRY(get_ints(b, 0, 0, 1, &kh, &kw));
    DP_TRY(get_ints(b, 1, 0, 1, &sth, &stw));
    if (!b->v[1]) /* stride=None: the kernel size */
        sth = kh, stw = kw;
    DP_TRY(get_ints(b, 2, 0, 0, &ph, &pw));
    bool flag;
    if (max) {
        int64_t dil;
        DP_TRY(get_ints(b, 3, 1, 1, &dil, NULL));
        DP_TRY(only(b, 3, dil == 1, "1"));
        DP_TRY(get_bool(b, 4, false, &flag));
        DP_TRY(only(b, 4, !flag, "False"));
        DP_TRY(get_bool(b, 5, false, &flag));
        DP_TRY(only(b, 5, !flag, "False"));
    } else {
        DP_TRY(get_bool(b, 3, false, &flag));
        DP_TRY(only(b, 3, !flag, "False"));
        DP_TRY(get_bool(b, 4, true, &flag));
        DP_TRY(only(b, 4, flag, "True"));
        DP_TRY(only(b, 5, false, "None"));
    }
    if (2 * ph > kh || 2 * pw > kw)
        return bad(b, "%s: padding should be at most half of the kernel size", b->call->source);
    DP_TRY(need_images(b, sh));
    int64_t oh, ow;
    DP_TRY(window_out(b, sh->h, kh, sth, ph, &oh));
    DP_TRY(window_out(b, sh->w, kw, stw, pw, &ow));
    l->pool = (dp_pool2d_params){(int)kh, (int)kw, (int)sth, (int)stw, (int)ph, (int)pw};
    sh->h = oh;
    sh->w = ow;
    return 0;
}

static int bind_batch_norm(bound *b, dp__seq *s, dp__seq_layer *l, int idx, dp__seq_shape *sh)
{
    int64_t c;
    bool flag;
    DP_TRY(get_ints(b, 0, 0, 1, &c, NULL));
    DP_TRY(get_float(b, 1, 1e-5, 1e-12, 1.0, &l->eps));
    DP_TRY(get_float(b, 2, 0.1, 1e-6, 1.0, &l->momentum));
    DP_TRY(get_bool(b, 3, true, &flag));
    DP_TRY(only(b, 3, flag, "True"));
    DP_TRY(get_bool(b, 4, true, &flag));
    DP_TRY(only(b, 4, flag, "True"));
    bool two_d = l->kind == DP__SEQ_BatchNorm2d;
    if (two_d)
        DP_TRY(need_images(b, sh));
    else if (is_images(sh))
        return bad(b,
                   "%s expects %lld features, the layer before gives images (%lld, %lld, "
                   "%lld): BatchNorm2d normalises images",
                   b->call->source, (long long)c, (long long)sh->c, (long long)sh->h,
                   (long long)sh->w);
    if (sh->c != c)
        return bad(b, "%s expects %lld %s, the layer before gives %lld", b->call->source,
                   (long long)c, two_d ? "channels" : "features", (long long)sh->c);
    int64_t cs[1] = {c};
    l->weight = add_spec(s, false, idx, "weight", 1, cs, DP_INIT_ONES, 0);
    l->bias = add_spec(s, false, idx, "bias", 1, cs, DP_INIT_ZEROS, 0);
    l->running_mean = add_spec(s, true, idx, "running_mean", 1, cs, DP_INIT_ZEROS, 0);
    l->running_var = add_spec(s, true, idx, "running_var", 1, cs, DP_INIT_ONES, 0);
    /* bn_names[j] is the layer's own name ("4"): the prefix of its entries. */
    char *prefix = s->names[s->nnames++];
    snprintf(prefix, sizeof s->names[0], "%d", idx);
    l->bn = s->nbn;
    s->bn_names[s->nbn++] = prefix;
    return 0;
}

static int bind_adaptive_pool(bound *b, dp__seq *s, dp__seq_layer *l, int idx, dp__seq_shape *sh)
{
    int64_t v, v2;
    DP_TRY(get_ints(b, 0, 1, 1, &v, &v2));
    DP_TRY(need_images(b, sh));
    l->out_h = (int)v;
    l->out_w = (int)v2;
    sh->h = v;
    sh->w = v2;
    return 0;
}

static int bind_flatten(bound *b, dp__seq *s, dp__seq_layer *l, int idx, dp__seq_shape *sh)
{
    int64_t start = 1;
    if (b->v[0])
        DP_TRY(get_ints(b, 0, 1, 1, &start, NULL));
    if (b->v[1] && !(b->v[1]->kind == DP__ARG_NUMBER && b->v[1]->value == -1))
        DP_TRY(only(b, 1, false, "-1"));
    DP_TRY(only(b, 0, start == 1, "1"));
    if (is_images(sh))
        *sh = (dp__seq_shape){1, sh->c * sh->h * sh->w, 1, 1};
    return 0;
}

static int bind_dropout(bound *b, dp__seq *s, dp__seq_layer *l, int idx, dp__seq_shape *sh)
{
    bool inplace;
    DP_TRY(get_float(b, 0, 0.5, 0.0, 1.0, &l->number));
    DP_TRY(get_bool(b, 1, false, &inplace));
    l->dropout = s->ndropout++;
    return 0;
}

/* nn.PReLU(num_parameters=1, init=0.25): one slope, or one per channel of
 * the layer before; "N.weight" (num_parameters) as its state_dict. */
static int bind_prelu(bound *b, dp__seq *s, dp__seq_layer *l, int idx, dp__seq_shape *sh)
{
    int64_t n;
    float init;
    DP_TRY(get_ints(b, 0, 1, 1, &n, NULL));
    DP_TRY(get_float(b, 1, 0.25, -FLT_MAX, FLT_MAX, &init));
    if (n != 1 && n != sh->c)
        return bad(b, "%s expects %lld channels, the layer before gives %lld", b->call->source,
                   (long long)n, (long long)sh->c);
    l->weight = add_spec(s, false, idx, "weight", 1, &n, DP_INIT_CONSTANT, init);
    return 0;
}

/* Softmax and LogSoftmax over the channels or features: dim=1 (or None,
 * which PyTorch takes as 1 for these inputs, or the same axis counted from
 * the end). */
static int bind_softmax(bound *b, dp__seq *s, dp__seq_layer *l, int idx, dp__seq_shape *sh)
{
    int64_t from_end = is_images(sh) ? -3 : -1;
    const dp__seq_arg *a = b->v[0];
    bool ok = !a || (a->kind == DP__ARG_NUMBER && a->is_int &&
                     (a->value == 1 || a->value == (double)from_end));
    return only(b, 0, ok, is_images(sh) ? "1 (the channels)" : "1 (the features)");
}

/* The binding of a module without .bind, which runs op or op_number: its
 * number (op_number's argument 0) is any float, and "inplace" is read and
 * changes nothing (the op makes a new output either way). */
static int bind_op(bound *b, dp__seq *s, dp__seq_layer *l, int idx, dp__seq_shape *sh)
{
    bool inplace;
    for (int j = 0; b->info->args[j]; j++)
        if (strcmp(b->info->args[j], "inplace") == 0)
            DP_TRY(get_bool(b, j, false, &inplace));
    if (b->info->op_number)
        DP_TRY(get_float(b, 0, b->info->number, -FLT_MAX, FLT_MAX, &l->number));
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
static const module_info modules[] = {
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
    bound b = {.s = s, .call = call};
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
    DP_TRY(bind(&b));
    int idx = s->nlayers;
    dp__seq_layer *l = &s->layers[idx];
    *l = (dp__seq_layer){.kind = (dp__seq_kind)(b.info - modules),
                         .weight = -1,
                         .bias = -1,
                         .running_mean = -1,
                         .running_var = -1,
                         .bn = -1,
                         .dropout = -1};
    DP_TRY((b.info->bind ? b.info->bind : bind_op)(&b, s, l, idx, sh));
    if (sh->c > (int64_t)1 << 31 || sh->h * sh->w > (int64_t)1 << 31)
        return bad(&b, "%s gives a sample too large to train", call->source);
    s->nlayers++;
    return 0;
}

int dp__seq_layer_forward(const dp__seq_layer *l, dp_model_t *m, dp_tensor_t *x, bool train,
                          dp_tensor_t **y)
{
    const module_info *info = &modules[l->kind];
    if (info->forward)
        return info->forward(l, m, x, train, y);
    if (info->op_number)
        return info->op_number(y, x, l->number);
    return info->op(y, x);
}
