/* The binding of nn.Sequential modules' arguments, as PyTorch's
 * constructors bind them (positional, then by keyword, with PyTorch's
 * defaults), and the helpers that read and check them
 * (sequential_bind.h); the modules themselves are sequential_modules.c's. */
#include "nn/sequential/sequential_bind.h"

#include "core/internal.h"

#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int dp__seq_bad(const dp__seq_bound *b, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    DP_ERROR("%s: line %d: %s", b->s->name, b->call->line, msg);
    return DP_EFORMAT;
}

int dp__seq_bind_args(dp__seq_bound *b)
{
    const dp__seq_module_info *info = b->info;
    int nargs = 0;
    while (info->args[nargs])
        nargs++;
    for (int i = 0; i < b->call->nargs; i++) {
        const dp__seq_arg *a = &b->call->args[i];
        int at = -1;
        if (!a->key[0]) {
            if (i >= nargs)
                return dp__seq_bad(b, "%s: %s takes at most %d arguments", b->call->source,
                                   info->name, nargs);
            at = i;
        } else {
            for (int j = 0; j < nargs; j++)
                if (strcmp(info->args[j], a->key) == 0)
                    at = j;
            if (at < 0)
                return dp__seq_bad(b, "%s: %s has no argument '%s'", b->call->source, info->name,
                                   a->key);
        }
        if (b->v[at])
            return dp__seq_bad(b, "%s: %s's '%s' is given twice", b->call->source, info->name,
                               info->args[at]);
        b->v[at] = a->kind == DP__ARG_NONE ? NULL : a;
    }
    for (int j = 0; j < info->required; j++)
        if (!b->v[j])
            return dp__seq_bad(b, "%s: %s needs '%s'", b->call->source, info->name, info->args[j]);
    return 0;
}

/* A positive integer (or pair of them, both must be equal unless `pair`
 * is given) at argument j, else `fallback`. min: the least value. */
int dp__seq_get_ints(const dp__seq_bound *b, int j, int64_t fallback, int64_t min, int64_t *first,
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
        return dp__seq_bad(b, "%s: %s's '%s' must be an integer >= %lld%s", b->call->source,
                           b->info->name, b->info->args[j], (long long)min,
                           second ? " or a pair of them" : "");
    *first = (int64_t)a->value;
    if (second)
        *second = a->kind == DP__ARG_PAIR ? (int64_t)a->second : *first;
    return 0;
}

int dp__seq_get_float(const dp__seq_bound *b, int j, double fallback, double lo, double hi,
                      float *out)
{
    const dp__seq_arg *a = b->v[j];
    *out = (float)fallback;
    if (!a)
        return 0;
    if (a->kind != DP__ARG_NUMBER || a->value < lo || a->value > hi) {
        if (lo <= -FLT_MAX && hi >= FLT_MAX) /* any float */
            return dp__seq_bad(b, "%s: %s's '%s' must be a number", b->call->source, b->info->name,
                               b->info->args[j]);
        return dp__seq_bad(b, "%s: %s's '%s' must be a number in [%g, %g]", b->call->source,
                           b->info->name, b->info->args[j], lo, hi);
    }
    *out = (float)a->value;
    return 0;
}

int dp__seq_get_bool(const dp__seq_bound *b, int j, bool fallback, bool *out)
{
    const dp__seq_arg *a = b->v[j];
    *out = fallback;
    if (!a)
        return 0;
    if (a->kind != DP__ARG_BOOL)
        return dp__seq_bad(b, "%s: %s's '%s' must be True or False", b->call->source, b->info->name,
                           b->info->args[j]);
    *out = a->value != 0;
    return 0;
}

/* Refuses an argument whose value dptrain does not implement. */
int dp__seq_only(const dp__seq_bound *b, int j, bool supported, const char *what)
{
    if (b->v[j] && !supported)
        return dp__seq_bad(b, "%s: %s's '%s' other than %s is not supported", b->call->source,
                           b->info->name, b->info->args[j], what);
    return 0;
}

int dp__seq_add_spec(dp__seq *s, bool buffer, int layer, const char *suffix, int ndim,
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

bool dp__seq_is_images(const dp__seq_shape *sh)
{
    return sh->rank == 3;
}

int dp__seq_need_images(const dp__seq_bound *b, const dp__seq_shape *sh)
{
    if (dp__seq_is_images(sh))
        return 0;
    return dp__seq_bad(b, "%s expects images (C, H, W), the layer before gives %lld features",
                       b->call->source, (long long)sh->c);
}

int dp__seq_window_out(const dp__seq_bound *b, int64_t n, int64_t k, int64_t st, int64_t pad,
                       int64_t *out)
{
    *out = (n + pad - k) / st + 1;
    if (n + pad < k)
        return dp__seq_bad(b, "%s: a window of %lld does not fit an input of %lld (padding %lld)",
                           b->call->source, (long long)k, (long long)n, (long long)pad);
    return 0;
}
