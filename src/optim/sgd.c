/* SGD: one kernel over the whole parameter buffer. */
#include "dp/optim.h"

#include "core/internal.h"
#include "device/device.h"

struct dp_sgd {
    dp_params_t *params;
    dp_sgd_options opt;
    dp_tensor_t *velocity;
};

int dp_sgd_init(dp_sgd_t **out, dp_params_t *params, const dp_sgd_options *opt)
{
    if (!(opt->lr > 0) || !(opt->momentum >= 0 && opt->momentum < 1) || !(opt->weight_decay >= 0)) {
        DP_ERROR("sgd: need lr > 0, 0 <= momentum < 1 and weight_decay >= 0");
        return DP_EINVAL;
    }
    dp_sgd_t *s = dp__calloc(1, sizeof *s);
    if (!s)
        return DP_ENOMEM;
    s->params = params;
    s->opt = *opt;
    if (opt->momentum > 0) {
        dp_tensor_t *values = dp_params_values(params);
        int64_t n = dp_params_numel(params);
        int rc = dp_tensor_new(&s->velocity, dp_tensor_device(values), DP_F32, 1, &n);
        if (rc == 0)
            rc = dp_tensor_fill(s->velocity, 0.0f);
        if (rc < 0) {
            dp_sgd_close(s);
            return rc;
        }
    }
    *out = s;
    return 0;
}

int dp_sgd_step(dp_sgd_t *s, float grad_scale)
{
    dp_tensor_t *values = dp_params_values(s->params), *grads = dp_params_grads(s->params);
    dp__sgd_args a = {.params = values->data,
                      .grads = grads->data,
                      .velocity = s->velocity ? s->velocity->data : NULL,
                      .n = dp_params_numel(s->params),
                      .lr = s->opt.lr,
                      .grad_scale = grad_scale,
                      .momentum = s->opt.momentum,
                      .weight_decay = s->opt.weight_decay};
    DP_TRY(values->dev->ops->sgd(values->dev, &a));
    dp__tensor_written(values);
    return 0;
}

dp_tensor_t *dp_sgd_velocity(dp_sgd_t *s)
{
    return s->velocity;
}

void dp_sgd_set_lr(dp_sgd_t *s, float lr)
{
    s->opt.lr = lr;
}

void dp_sgd_close(dp_sgd_t *s)
{
    if (!s)
        return;
    dp_tensor_free(s->velocity);
    dp__free(s);
}
