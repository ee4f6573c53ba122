/* The optimizers (dp/optim.h): the built-in ones run one kernel over the
 * whole parameter buffer per step (device/kernels.h gives the formulas),
 * after the clipping factor and the non-finite check where they are on;
 * a program's own runs its step function. */
#include "dp/optim.h"

#include "core/internal.h"
#include "device/device.h"

#include <math.h>
#include <string.h>

struct dp_optimizer {
    dp_params_t *params;
    dp_optimizer_options opt;
    dp_tensor_t *state[2]; /* SGD: momentum (or none); Adam: exp_avg, exp_avg_sq */
    int64_t steps;         /* updates issued so far */
    dp_device_t *dev;
    int64_t *first_nonfinite;    /* device word of dp_optimizer_check_finite; NULL: off */
    float *clip;                 /* two device floats with clipping on: factor, norm */
    const dp_optimizer_ops *ops; /* one's own, or NULL */
    void *self;
};

static const dp_named_value kind_names[] = {
    {"sgd", DP_OPTIMIZER_SGD}, {"adam", DP_OPTIMIZER_ADAM}, {"adamw", DP_OPTIMIZER_ADAMW}};
const dp_name_table dp_optimizer_kind_names = DP_NAME_TABLE(kind_names);

const char *dp_optimizer_kind_name(dp_optimizer_kind kind)
{
    const char *name = dp_name_of(&dp_optimizer_kind_names, kind);
    return name ? name : "?";
}

void dp_optimizer_options_default(dp_optimizer_options *o, dp_optimizer_kind kind, float lr)
{
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->lr = lr;
    o->beta1 = 0.9f;
    o->beta2 = 0.999f;
    o->eps = 1e-8f;
    o->weight_decay = kind == DP_OPTIMIZER_ADAMW ? 0.01f : 0.0f;
}

/* PyTorch's argument checks (torch/optim/sgd.py, adam.py), one line each. */
static int check_options(const dp_optimizer_options *o)
{
    const char *bad = NULL;
    char buf[160];
    if (!dp_name_of(&dp_optimizer_kind_names, o->kind))
        bad = "the optimizer kind is none of sgd, adam, adamw";
    else if (!(o->lr > 0) || !isfinite(o->lr))
        snprintf(buf, sizeof buf, "the learning rate %g: give a positive number", (double)o->lr),
            bad = buf;
    else if (!(o->weight_decay >= 0) || !isfinite(o->weight_decay))
        snprintf(buf, sizeof buf, "the weight decay %g: give 0 or more", (double)o->weight_decay),
            bad = buf;
    else if (!(o->clip_grad_norm >= 0) || !isfinite(o->clip_grad_norm))
        snprintf(buf, sizeof buf, "the gradient clipping norm %g: give 0 (off) or more",
                 (double)o->clip_grad_norm),
            bad = buf;
    else if (o->kind == DP_OPTIMIZER_SGD && !(o->momentum >= 0 && o->momentum < 1))
        snprintf(buf, sizeof buf, "the momentum %g: give 0 <= momentum < 1", (double)o->momentum),
            bad = buf;
    else if (o->kind == DP_OPTIMIZER_SGD && o->nesterov && !(o->momentum > 0))
        bad = "Nesterov momentum requires a momentum above 0 (as torch.optim.SGD)";
    else if (o->kind != DP_OPTIMIZER_SGD &&
             !(o->beta1 >= 0 && o->beta1 < 1 && o->beta2 >= 0 && o->beta2 < 1))
        snprintf(buf, sizeof buf, "the betas %g,%g: give each in [0, 1)", (double)o->beta1,
                 (double)o->beta2),
            bad = buf;
    else if (o->kind != DP_OPTIMIZER_SGD && (!(o->eps >= 0) || !isfinite(o->eps)))
        snprintf(buf, sizeof buf, "eps %g: give 0 or more", (double)o->eps), bad = buf;
    if (bad) {
        DP_ERROR("%s: %s",
                 dp_name_of(&dp_optimizer_kind_names, o->kind) ? dp_optimizer_kind_name(o->kind)
                                                               : "optimizer",
                 bad);
        return DP_EINVAL;
    }
    return 0;
}

static int new_state(dp_optimizer_t *o, int i)
{
    dp_tensor_t *values = dp_params_values(o->params);
    int64_t n = dp_params_numel(o->params);
    DP_TRY(dp_tensor_new(&o->state[i], dp_tensor_device(values), DP_F32, 1, &n));
    return dp_tensor_fill(o->state[i], 0.0f);
}

int dp_optimizer_init(dp_optimizer_t **out, dp_params_t *params, const dp_optimizer_options *opt)
{
    DP_TRY(check_options(opt));
    dp_optimizer_t *o = dp__calloc(1, sizeof *o);
    if (!o)
        return DP_ENOMEM;
    o->params = params;
    o->opt = *opt;
    o->dev = dp_tensor_device(dp_params_values(params));
    int rc = 0;
    if (opt->kind == DP_OPTIMIZER_SGD && opt->momentum > 0)
        rc = new_state(o, 0);
    else if (opt->kind != DP_OPTIMIZER_SGD)
        rc = new_state(o, 0) == 0 ? new_state(o, 1) : DP_ENOMEM;
    if (rc == 0 && opt->clip_grad_norm > 0) {
        o->clip = dp__device_alloc(o->dev, 2 * sizeof(float));
        if (!o->clip)
            rc = DP_ENOMEM;
    }
    if (rc < 0) {
        dp_optimizer_close(o);
        return rc;
    }
    *out = o;
    return 0;
}

int dp_optimizer_init_custom(dp_optimizer_t **out, dp_params_t *params, const dp_optimizer_ops *ops,
                             void *self, float lr)
{
    if (!ops || !ops->step || !(lr > 0)) {
        DP_ERROR("optimizer: one's own needs a step function and a learning rate above 0");
        return DP_EINVAL;
    }
    dp_optimizer_t *o = dp__calloc(1, sizeof *o);
    if (!o)
        return DP_ENOMEM;
    o->params = params;
    o->opt.lr = lr;
    o->dev = dp_tensor_device(dp_params_values(params));
    o->ops = ops;
    o->self = self;
    *out = o;
    return 0;
}

void dp_optimizer_close(dp_optimizer_t *o)
{
    if (!o)
        return;
    if (o->ops && o->ops->close)
        o->ops->close(o->self);
    dp_tensor_free(o->state[0]);
    dp_tensor_free(o->state[1]);
    if (o->first_nonfinite)
        dp__device_release_later(o->dev, o->first_nonfinite, sizeof(int64_t));
    if (o->clip)
        dp__device_release_later(o->dev, o->clip, 2 * sizeof(float));
    dp__free(o);
}

int dp_optimizer_check_finite(dp_optimizer_t *o)
{
    if (o->ops) {
        DP_ERROR("the optimizer %s (a program's own) cannot skip a non-finite step", o->ops->name);
        return DP_ENOTSUP;
    }
    if (!o->dev->ops->check_finite) {
        DP_ERROR("%s cannot check gradients for NaN and Inf", o->dev->name);
        return DP_ENOTSUP;
    }
    if (!o->first_nonfinite) {
        o->first_nonfinite = dp__device_alloc(o->dev, sizeof(int64_t));
        if (!o->first_nonfinite)
            return DP_ENOMEM;
    }
    return 0;
}

const int64_t *dp_optimizer_first_nonfinite(dp_optimizer_t *o)
{
    return o->first_nonfinite;
}

bool dp_optimizer_can_check_finite(const dp_optimizer_t *o)
{
    return !o->ops && o->dev->ops->check_finite != NULL;
}

int dp_optimizer_read_first_nonfinite_async(dp_optimizer_t *o, int64_t *dst)
{
    if (!o->first_nonfinite) {
        DP_ERROR("dp_optimizer_read_first_nonfinite_async: the check is off "
                 "(dp_optimizer_check_finite)");
        return DP_EINVAL;
    }
    return o->dev->ops->copy_to_host(o->dev, dst, o->first_nonfinite, sizeof *dst);
}

int dp_optimizer_step(dp_optimizer_t *o, float grad_scale)
{
    dp_tensor_t *values = dp_params_values(o->params), *grads = dp_params_grads(o->params);
    int64_t n = dp_params_numel(o->params);
    o->steps++;
    if (o->ops) {
        DP_TRY(o->ops->step(o->self, o->params, o->opt.lr, grad_scale, o->steps));
        dp__tensor_written(values);
        return 0;
    }
    if (o->first_nonfinite) {
        /* Each replica checks its own copy of the summed gradient: the
         * update on its device then needs nothing from another device. */
        dp__check_finite_args c = {
            .data = grads->data, .n = n, .first_nonfinite = o->first_nonfinite};
        DP_TRY(o->dev->ops->check_finite(o->dev, &c));
    }
    if (o->clip) {
        dp__grad_clip_args c = {.grads = grads->data,
                                .n = n,
                                .grad_scale = grad_scale,
                                .max_norm = o->opt.clip_grad_norm,
                                .out = o->clip};
        DP_TRY(o->dev->ops->grad_clip(o->dev, &c));
    }
    /* torch computes the bias corrections in double (Python floats). */
    double t = (double)o->steps;
    dp__optimizer_args a = {.params = values->data,
                            .grads = grads->data,
                            .state0 = o->state[0] ? o->state[0]->data : NULL,
                            .state1 = o->state[1] ? o->state[1]->data : NULL,
                            .n = n,
                            .kind = (dp__optimizer_kind)o->opt.kind,
                            .nesterov = o->opt.nesterov,
                            .lr = o->opt.lr,
                            .grad_scale = grad_scale,
                            .momentum = o->opt.momentum,
                            .weight_decay = o->opt.weight_decay,
                            .beta1 = o->opt.beta1,
                            .beta2 = o->opt.beta2,
                            .eps = o->opt.eps,
                            .bias1 = (float)(1.0 - pow(o->opt.beta1, t)),
                            .sqrt_bias2 = (float)sqrt(1.0 - pow(o->opt.beta2, t)),
                            .clip = o->clip,
                            .first_nonfinite = o->first_nonfinite};
    DP_TRY(o->dev->ops->optimizer_step(o->dev, &a));
    dp__tensor_written(values);
    return 0;
}

dp_tensor_t *dp_optimizer_state(dp_optimizer_t *o, int i, const char **name)
{
    static const char *const sgd_names[] = {"momentum_buffer"};
    static const char *const adam_names[] = {"exp_avg", "exp_avg_sq"};
    if (o->ops || i < 0 || i > 1 || !o->state[i])
        return NULL;
    *name = o->opt.kind == DP_OPTIMIZER_SGD ? sgd_names[0] : adam_names[i];
    return o->state[i];
}

const float *dp_optimizer_clip_figures(const dp_optimizer_t *o)
{
    return o->clip;
}

void dp_optimizer_set_lr(dp_optimizer_t *o, float lr)
{
    o->opt.lr = lr;
}

float dp_optimizer_lr(const dp_optimizer_t *o)
{
    return o->opt.lr;
}

void dp_optimizer_set_momentum(dp_optimizer_t *o, float momentum)
{
    if (o->opt.kind == DP_OPTIMIZER_SGD)
        o->opt.momentum = momentum;
    else
        o->opt.beta1 = momentum;
}

const dp_optimizer_options *dp_optimizer_options_of(const dp_optimizer_t *o)
{
    return &o->opt;
}

int64_t dp_optimizer_steps(const dp_optimizer_t *o)
{
    return o->steps;
}

void dp_optimizer_set_steps(dp_optimizer_t *o, int64_t steps)
{
    o->steps = steps;
}
