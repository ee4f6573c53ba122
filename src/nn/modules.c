/* Conv2d, BatchNorm2d, Linear and d2l's Residual as modules. */
#include "nn/modules.h"

#include "core/internal.h"
#include "ops/batch_norm_add.h"

#include <math.h>
#include <string.h>

/* Specs point at names kept in the builder's table, which lives as long as
 * the model description (static, built once). */
static const char *intern(dp__spec_builder *b, const char *prefix, const char *suffix)
{
    DP_ASSERT(b->nnames < b->cap_names);
    char *name = b->names[b->nnames++];
    if (prefix[0])
        snprintf(name, 64, "%s.%s", prefix, suffix);
    else
        snprintf(name, 64, "%s", suffix);
    return name;
}

static int add(dp_param_spec *list, int *n, int cap, const char *name, int ndim,
               const int64_t *shape, dp_init init, float scale)
{
    DP_ASSERT(*n < cap);
    list[(*n)++] = dp_param_spec_make(name, ndim, shape, init, scale);
    return *n - 1;
}

dp__conv dp__conv_add(dp__spec_builder *b, const char *prefix, int c_in, int c_out, int kernel,
                      int stride, int pad)
{
    dp__conv c;
    memset(&c, 0, sizeof c);
    int64_t ws[4] = {c_out, c_in, kernel, kernel}, bs[1] = {c_out};
    float bound = 1.0f / sqrtf((float)(c_in * kernel * kernel));
    c.weight = add(b->params, &b->nparams, b->cap, intern(b, prefix, "weight"), 4, ws,
                   DP_INIT_NORMAL, 0.01f);
    c.bias = add(b->params, &b->nparams, b->cap, intern(b, prefix, "bias"), 1, bs, DP_INIT_UNIFORM,
                 bound);
    c.p.stride_h = c.p.stride_w = stride;
    c.p.pad_h = c.p.pad_w = pad;
    return c;
}

dp__bn dp__bn_add(dp__spec_builder *b, const char *prefix, int c)
{
    dp__bn bn;
    int64_t s[1] = {c};
    bn.weight =
        add(b->params, &b->nparams, b->cap, intern(b, prefix, "weight"), 1, s, DP_INIT_ONES, 0);
    bn.bias =
        add(b->params, &b->nparams, b->cap, intern(b, prefix, "bias"), 1, s, DP_INIT_ZEROS, 0);
    bn.running_mean = add(b->buffers, &b->nbuffers, b->cap, intern(b, prefix, "running_mean"), 1, s,
                          DP_INIT_ZEROS, 0);
    bn.running_var = add(b->buffers, &b->nbuffers, b->cap, intern(b, prefix, "running_var"), 1, s,
                         DP_INIT_ONES, 0);
    bn.layer = b->nbn;
    b->bn_names[b->nbn++] = intern(b, "", prefix);
    return bn;
}

dp__residual dp__residual_add(dp__spec_builder *b, const char *prefix, int c_in, int c_out,
                              bool use_1x1conv, int stride)
{
    /* Registration order of d2l's Residual: conv1, conv2, conv3, bn1, bn2. */
    char p[64];
    dp__residual r;
    memset(&r, 0, sizeof r);
    snprintf(p, sizeof p, "%s.conv1", prefix);
    r.conv1 = dp__conv_add(b, p, c_in, c_out, 3, stride, 1);
    snprintf(p, sizeof p, "%s.conv2", prefix);
    r.conv2 = dp__conv_add(b, p, c_out, c_out, 3, 1, 1);
    r.use_1x1conv = use_1x1conv;
    if (use_1x1conv) {
        snprintf(p, sizeof p, "%s.conv3", prefix);
        r.conv3 = dp__conv_add(b, p, c_in, c_out, 1, stride, 0);
    }
    snprintf(p, sizeof p, "%s.bn1", prefix);
    r.bn1 = dp__bn_add(b, p, c_out);
    snprintf(p, sizeof p, "%s.bn2", prefix);
    r.bn2 = dp__bn_add(b, p, c_out);
    return r;
}

void dp__linear_add(dp__spec_builder *b, const char *prefix, int d_in, int d_out, int *weight,
                    int *bias)
{
    int64_t ws[2] = {d_out, d_in}, bs[1] = {d_out};
    float bound = 1.0f / sqrtf((float)d_in);
    *weight = add(b->params, &b->nparams, b->cap, intern(b, prefix, "weight"), 2, ws,
                  DP_INIT_NORMAL, 0.01f);
    *bias = add(b->params, &b->nparams, b->cap, intern(b, prefix, "bias"), 1, bs, DP_INIT_UNIFORM,
                bound);
}

int dp__conv_forward(const dp__conv *c, dp_model_t *m, dp_tensor_t *x, dp_tensor_t **y)
{
    return dp_conv2d(y, x, dp_params_get(m->params, c->weight), dp_params_get(m->params, c->bias),
                     &c->p);
}

int dp__bn_forward(const dp__bn *bn, dp_model_t *m, dp_tensor_t *x, bool train, bool relu,
                   dp_tensor_t **y)
{
    dp_batch_norm_params p;
    dp_model_bn_params(m, bn->layer, train, &p);
    p.momentum = 0.1f;
    p.eps = 1e-5f;
    p.relu = relu;
    return dp_batch_norm2d(y, x, dp_params_get(m->params, bn->weight),
                           dp_params_get(m->params, bn->bias),
                           dp_params_get(m->buffers, bn->running_mean),
                           dp_params_get(m->buffers, bn->running_var), &p);
}

int dp__residual_ops(const dp__residual *r)
{
    return r->use_1x1conv ? 7 : 6;
}

int dp__residual_sum(const dp__residual *r, dp_model_t *m, dp_tensor_t *x, bool train, bool relu,
                     dp_tensor_t **sum)
{
    dp_tensor_t *y, *shortcut = x;
    DP_TRY(dp__conv_forward(&r->conv1, m, x, &y));
    DP_TRY(dp__bn_forward(&r->bn1, m, y, train, true, &y));
    DP_TRY(dp__conv_forward(&r->conv2, m, y, &y));
    /* The shortcut before bn2, which adds it in its own sweep. */
    if (r->use_1x1conv)
        DP_TRY(dp__conv_forward(&r->conv3, m, x, &shortcut));
    dp_batch_norm_params p;
    dp_model_bn_params(m, r->bn2.layer, train, &p);
    p.momentum = 0.1f;
    p.eps = 1e-5f;
    p.relu = relu;
    return dp__batch_norm2d_add(sum, y, dp_params_get(m->params, r->bn2.weight),
                                dp_params_get(m->params, r->bn2.bias),
                                dp_params_get(m->buffers, r->bn2.running_mean),
                                dp_params_get(m->buffers, r->bn2.running_var), shortcut, &p);
}
