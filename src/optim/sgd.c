/* SGD: one kernel over the whole parameter buffer. */
#include "dp/optim.h"

#include "core/internal.h"
#include "device/device.h"

struct dp_sgd {
    dp_params_t *params;
    dp_sgd_options opt;
    dp_tensor_t *velocity;
    dp_device_t *dev;
    int64_t *first_nonfinite; /* device word of dp_sgd_check_finite; NULL: off */
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
    s->dev = dp_tensor_device(dp_params_values(params));
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

int dp_sgd_check_finite(dp_sgd_t *s)
{
    if (!s->dev->ops->check_finite) {
        DP_ERROR("%s cannot check gradients for NaN and Inf", s->dev->name);
        return DP_ENOTSUP;
    }
    if (!s->first_nonfinite) {
        s->first_nonfinite = dp__device_alloc(s->dev, sizeof(int64_t));
        if (!s->first_nonfinite)
            return DP_ENOMEM;
    }
    return 0;
}

const int64_t *dp_sgd_first_nonfinite(dp_sgd_t *s)
{
    return s->first_nonfinite;
}

bool dp_sgd_can_check_finite(const dp_sgd_t *s)
{
    return s->dev->ops->check_finite != NULL;
}

int dp_sgd_read_first_nonfinite_async(dp_sgd_t *s, int64_t *dst)
{
    if (!s->first_nonfinite) {
        DP_ERROR("dp_sgd_read_first_nonfinite_async: the check is off (dp_sgd_check_finite)");
        return DP_EINVAL;
    }
    return s->dev->ops->copy_to_host(s->dev, dst, s->first_nonfinite, sizeof *dst);
}

int dp_sgd_step(dp_sgd_t *s, float grad_scale)
{
    dp_tensor_t *values = dp_params_values(s->params), *grads = dp_params_grads(s->params);
    if (s->first_nonfinite) {
        /* Each replica checks its own copy of the summed gradient: the
         * update on its device then needs nothing from another device. */
        dp__check_finite_args c = {.data = grads->data,
                                   .n = dp_params_numel(s->params),
                                   .first_nonfinite = s->first_nonfinite};
        DP_TRY(s->dev->ops->check_finite(s->dev, &c));
    }
    dp__sgd_args a = {.params = values->data,
                      .grads = grads->data,
                      .velocity = s->velocity ? s->velocity->data : NULL,
                      .n = dp_params_numel(s->params),
                      .lr = s->opt.lr,
                      .grad_scale = grad_scale,
                      .momentum = s->opt.momentum,
                      .weight_decay = s->opt.weight_decay,
                      .first_nonfinite = s->first_nonfinite};
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
    if (s->first_nonfinite)
        dp__device_release_later(s->dev, s->first_nonfinite, sizeof(int64_t));
    dp__free(s);
}
