/* Parameters: one value buffer, one gradient buffer, named views into both. */
#include "dp/autograd.h"
#include "dp/core.h"
#include "dp/nn.h"

#include "autograd/tape.h"
#include "core/internal.h"
#include "device/device.h"

#include <math.h>
#include <string.h>

struct dp_params {
    dp_device_t *dev;
    int n;
    dp_param_spec *specs;
    dp_tensor_t *values, *grads; /* 1-D, numel floats */
    dp_tensor_t **views;         /* n parameters, each with its gradient view */
    int64_t *offsets;
    int64_t numel;
};

void dp_params_close(dp_params_t *p)
{
    if (!p)
        return;
    for (int i = 0; p->views && i < p->n; i++)
        dp_tensor_free(p->views[i]); /* frees its gradient view too */
    dp_tensor_free(p->values);
    dp_tensor_free(p->grads);
    dp__free(p->views);
    dp__free(p->offsets);
    dp__free(p->specs);
    dp__free(p);
}

dp_param_spec dp_param_spec_make(const char *name, int ndim, const int64_t *shape, dp_init init,
                                 float scale)
{
    dp_param_spec s;
    memset(&s, 0, sizeof s);
    s.name = name;
    s.ndim = ndim;
    memcpy(s.shape, shape, (size_t)ndim * sizeof *shape);
    s.init = init;
    s.scale = scale;
    return s;
}

void dp_param_specs_set_weight_init(dp_param_spec *specs, int n, dp_weight_init init, float std)
{
    for (int i = 0; init != DP_WEIGHTS_AS_DEFINED && i < n; i++) {
        dp_param_spec *s = &specs[i];
        if (s->ndim < 2)
            continue;
        int64_t receptive = 1;
        for (int d = 2; d < s->ndim; d++)
            receptive *= s->shape[d];
        double fan_in = (double)(s->shape[1] * receptive),
               fan_out = (double)(s->shape[0] * receptive);
        if (init == DP_WEIGHTS_NORMAL) {
            s->init = DP_INIT_NORMAL;
            s->scale = std;
        } else {
            s->init = DP_INIT_UNIFORM;
            s->scale = (float)sqrt(6.0 / (fan_in + fan_out));
        }
    }
}

int dp_params_init(dp_params_t **out, dp_device_t *dev, const dp_param_spec *specs, int n,
                   bool with_grads)
{
    dp_params_t *p = dp__calloc(1, sizeof *p);
    if (!p)
        return DP_ENOMEM;
    p->dev = dev;
    p->n = n;
    p->specs = dp__calloc((size_t)n, sizeof *p->specs);
    p->views = dp__calloc((size_t)n, sizeof *p->views);
    p->offsets = dp__calloc((size_t)n, sizeof *p->offsets);
    if (!p->specs || !p->views || !p->offsets)
        goto nomem;
    memcpy(p->specs, specs, (size_t)n * sizeof *specs);
    for (int i = 0; i < n; i++) {
        p->offsets[i] = p->numel;
        p->numel += dp__numel(specs[i].ndim, specs[i].shape);
    }
    int rc = dp_tensor_new(&p->values, dev, DP_F32, 1, &p->numel);
    if (rc == 0 && with_grads)
        rc = dp_tensor_new(&p->grads, dev, DP_F32, 1, &p->numel);
    if (rc == 0 && with_grads)
        rc = dp_tensor_fill(p->grads, 0.0f);
    if (rc < 0) {
        dp_params_close(p);
        return rc;
    }
    for (int i = 0; i < n; i++) {
        float *v = (float *)p->values->data + p->offsets[i];
        p->views[i] = dp__tensor_view(dev, DP_F32, specs[i].ndim, specs[i].shape, v);
        if (!p->views[i])
            goto nomem;
        p->views[i]->name = p->specs[i].name;
        p->views[i]->base = p->values;
        if (!with_grads)
            continue;
        float *g = (float *)p->grads->data + p->offsets[i];
        dp_tensor_t *gv = dp__tensor_view(dev, DP_F32, specs[i].ndim, specs[i].shape, g);
        if (!gv)
            goto nomem;
        gv->base = p->grads;
        dp_tensor_set_requires_grad(p->views[i], gv);
    }
    *out = p;
    return 0;
nomem:
    dp_params_close(p);
    return DP_ENOMEM;
}

int dp_params_count(const dp_params_t *p)
{
    return p->n;
}

dp_tensor_t *dp_params_get(const dp_params_t *p, int i)
{
    return i >= 0 && i < p->n ? p->views[i] : NULL;
}

int dp_params_find(const dp_params_t *p, const char *name)
{
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->specs[i].name, name) == 0)
            return i;
    return -1;
}

const char *dp_params_name(const dp_params_t *p, int i)
{
    return i >= 0 && i < p->n ? p->specs[i].name : NULL;
}

dp_tensor_t *dp_params_values(const dp_params_t *p)
{
    return p->values;
}

dp_tensor_t *dp_params_grads(const dp_params_t *p)
{
    return p->grads;
}

int64_t dp_params_numel(const dp_params_t *p)
{
    return p->numel;
}

int dp_params_init_random(dp_params_t *p, uint64_t seed)
{
    float *host = dp__malloc((size_t)p->numel * sizeof *host);
    if (!host)
        return DP_ENOMEM;
    for (int i = 0; i < p->n; i++) {
        /* One RNG stream per parameter: adding a parameter does not move
         * the numbers drawn for the others. */
        dp_rng rng;
        dp_rng_init(&rng, seed, (uint64_t)i + 1);
        int64_t count = dp__numel(p->specs[i].ndim, p->specs[i].shape);
        float *v = host + p->offsets[i];
        float scale = p->specs[i].scale;
        for (int64_t j = 0; j < count; j++) {
            switch (p->specs[i].init) {
            case DP_INIT_NORMAL:
                v[j] = scale * dp_rng_normal(&rng);
                break;
            case DP_INIT_UNIFORM:
                v[j] = scale * (2.0f * dp_rng_uniform(&rng) - 1.0f);
                break;
            case DP_INIT_ONES:
                v[j] = 1.0f;
                break;
            case DP_INIT_CONSTANT:
                v[j] = scale;
                break;
            default:
                v[j] = 0.0f;
            }
        }
    }
    int rc = dp_params_set(p, host);
    dp__free(host);
    return rc;
}

int dp_params_set(dp_params_t *p, const float *values)
{
    DP_TRY(dp_tensor_copy_from_host(p->values, values, (size_t)p->numel * sizeof(float)));
    return dp_tensor_wait(p->values);
}

int dp_params_get_all(const dp_params_t *p, float *values)
{
    return dp_tensor_to_host(p->values, values, (size_t)p->numel * sizeof(float));
}

void dp_params_zero_grad(dp_params_t *p)
{
    if (p->grads)
        dp_zero_grad(p->views, p->n);
}

int dp_params_finish_grad(dp_params_t *p)
{
    for (int i = 0; p->grads && i < p->n; i++) {
        if (!dp__grad_written(p->views[i])) {
            DP_TRY(dp_tensor_fill(dp_tensor_grad(p->views[i]), 0.0f));
            dp__grad_set_written(p->views[i]);
        }
    }
    return 0;
}
