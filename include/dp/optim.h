/* dp/optim.h - optimizers over a parameter buffer, as torch.optim defines
 * them, one kernel over the whole buffer per step:
 *
 *   SGD    g = grad * grad_scale + weight_decay * p
 *          v = momentum * v + g     (momentum != 0; PyTorch's form, dampening 0)
 *          g = nesterov ? g + momentum * v : v
 *          p -= lr * g
 *   Adam   torch.optim.Adam (weight decay added to the gradient, L2)
 *   AdamW  torch.optim.AdamW (decoupled: p *= 1 - lr * weight_decay)
 *
 * With grad_scale = 1 / batch_size, SGD is the seed's
 * `param -= lr * param.grad / batch_size`. With clip_grad_norm > 0 the
 * gradient (grad * grad_scale) is first scaled as
 * torch.nn.utils.clip_grad_norm_(max_norm=clip_grad_norm) scales it. The
 * state (momentum, Adam's moments) is float32, on the parameters' device.
 * A program adds its own optimizer through dp_optimizer_ops. */
#ifndef DP_OPTIM_H
#define DP_OPTIM_H

#include "dp/nn.h"
#include "dp/option.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dp_optimizer_kind {
    DP_OPTIMIZER_SGD = 0,
    DP_OPTIMIZER_ADAM = 1,
    DP_OPTIMIZER_ADAMW = 2,
} dp_optimizer_kind;

/* "sgd", "adam", "adamw" (dp_name_parse reads them); the name is "?"
 * for another value. */
extern const dp_name_table dp_optimizer_kind_names;
const char *dp_optimizer_kind_name(dp_optimizer_kind kind);

typedef struct dp_optimizer_options {
    dp_optimizer_kind kind; /* SGD when zeroed */
    float lr;
    float momentum; /* SGD: 0 <= momentum < 1 */
    bool nesterov;  /* SGD: needs momentum > 0 */
    float weight_decay;
    /* Adam, AdamW: PyTorch's betas and eps; dp_optimizer_options_default
     * sets (0.9, 0.999) and 1e-8, and AdamW's weight decay 0.01. */
    float beta1, beta2, eps;
    float clip_grad_norm; /* > 0: the gradient's global norm is clipped to it */
} dp_optimizer_options;

/* PyTorch's defaults for `kind` at learning rate lr. */
void dp_optimizer_options_default(dp_optimizer_options *o, dp_optimizer_kind kind, float lr);

typedef struct dp_optimizer dp_optimizer_t;

/* ---- one's own optimizer ------------------------------------------------------ */

/* What a program's optimizer does at each step: enqueue its update of
 * `params` (dp_params_values) from dp_params_grads, scaled by grad_scale,
 * with the public ops. `self` is the pointer given to
 * dp_optimizer_init_custom; `step` counts from 1. */
typedef struct dp_optimizer_ops {
    const char *name;
    int (*step)(void *self, dp_params_t *params, float lr, float grad_scale, int64_t step);
    void (*close)(void *self); /* may be NULL */
} dp_optimizer_ops;

int dp_optimizer_init_custom(dp_optimizer_t **out, dp_params_t *params, const dp_optimizer_ops *ops,
                             void *self, float lr);

/* ---- the built-in ones ---------------------------------------------------------- */

/* DP_EINVAL, with the option named, for a value out of PyTorch's range. */
int dp_optimizer_init(dp_optimizer_t **out, dp_params_t *params, const dp_optimizer_options *opt);
void dp_optimizer_close(dp_optimizer_t *o);
/* Enqueues one update of every parameter. */
int dp_optimizer_step(dp_optimizer_t *o, float grad_scale);
/* The learning rate of the next steps (a schedule sets it before each). */
void dp_optimizer_set_lr(dp_optimizer_t *o, float lr);
float dp_optimizer_lr(const dp_optimizer_t *o);
/* SGD's momentum or Adam's beta1 for the next steps (OneCycle cycles it). */
void dp_optimizer_set_momentum(dp_optimizer_t *o, float momentum);
const dp_optimizer_options *dp_optimizer_options_of(const dp_optimizer_t *o);
/* The updates issued so far (Adam's bias correction counts them), and the
 * count a resumed run starts from. */
int64_t dp_optimizer_steps(const dp_optimizer_t *o);
void dp_optimizer_set_steps(dp_optimizer_t *o, int64_t steps);

/* The state tensors, for checkpoints: i = 0, 1, ... until NULL; *name is
 * PyTorch's name for it ("momentum_buffer", "exp_avg", "exp_avg_sq"). */
dp_tensor_t *dp_optimizer_state(dp_optimizer_t *o, int i, const char **name);
/* With clipping on: the device address of two floats each step sets, the
 * factor applied and the gradient's global norm (read with an enqueued
 * copy); NULL with clipping off. */
const float *dp_optimizer_clip_figures(const dp_optimizer_t *o);

/* Makes every later dp_optimizer_step first check the gradient buffer on
 * the device: a step whose gradient holds a NaN or an Inf changes nothing
 * (parameters and state stay as they were; Adam's step count still
 * advances). DP_ENOTSUP where the device or the optimizer has no such
 * check (one's own). */
int dp_optimizer_check_finite(dp_optimizer_t *o);
/* With the check on: the device address of one int64 that each step sets,
 * in stream order, to the index into the parameter buffer of the first
 * non-finite gradient element, or to dp_params_numel when all were finite
 * (read it with an enqueued copy to the host). NULL without the check. */
const int64_t *dp_optimizer_first_nonfinite(dp_optimizer_t *o);
/* Whether dp_optimizer_check_finite would succeed, so that replicas can
 * agree to turn it on everywhere or nowhere. */
bool dp_optimizer_can_check_finite(const dp_optimizer_t *o);
/* With the check on: enqueues a copy of that word, as the step just issued
 * leaves it, into *dst and returns at once; *dst is written once the
 * device has run it (dp_tensor_read_async's rule, on the device of the
 * parameters). DP_EINVAL without the check. */
int dp_optimizer_read_first_nonfinite_async(dp_optimizer_t *o, int64_t *dst);

/* ---- learning-rate schedules ------------------------------------------------------ */

/* torch.optim.lr_scheduler's schedules, stepped once per optimizer step:
 * the learning rate (and, for OneCycle, the momentum) of update t (t = 0,
 * 1, ...) is a function of t alone, so a resumed run goes on where it
 * stopped. With warmup_steps W > 0 the first W updates follow LinearLR
 * (start_factor to 1) and the main schedule starts at update W, as
 * SequentialLR([LinearLR(..., total_iters=W), main], milestones=[W]). */
typedef enum dp_lr_schedule_kind {
    DP_LR_CONSTANT = 0,  /* the base lr */
    DP_LR_STEP = 1,      /* StepLR(step_size, gamma) */
    DP_LR_MULTISTEP = 2, /* MultiStepLR(milestones, gamma) */
    DP_LR_COSINE = 3,    /* CosineAnnealingLR(T_max = total - W, eta_min) */
    DP_LR_ONECYCLE = 4,  /* OneCycleLR(max_lr, total_steps, pct_start, ...), no warmup */
} dp_lr_schedule_kind;

enum { DP_LR_MAX_MILESTONES = 32 };

typedef struct dp_lr_schedule {
    dp_lr_schedule_kind kind;
    int64_t total_steps;                      /* updates in the whole run (cosine, onecycle) */
    int64_t warmup_steps;                     /* W: LinearLR's total_iters (0: no warmup) */
    double warmup_start_factor;               /* LinearLR's start_factor (PyTorch's 1/3) */
    int64_t step_size;                        /* StepLR */
    int64_t milestones[DP_LR_MAX_MILESTONES]; /* MultiStepLR, increasing */
    int nmilestones;
    double gamma;   /* StepLR, MultiStepLR (0.1) */
    double eta_min; /* CosineAnnealingLR */
    /* OneCycleLR: max_lr (0: the base lr), pct_start (0.3), div_factor
     * (25), final_div_factor (1e4), and the momentum it cycles from
     * max_momentum (0.95) down to base_momentum (0.85) and back
     * (cycle_momentum; SGD's momentum or Adam's beta1). */
    double max_lr, pct_start, div_factor, final_div_factor;
    bool cycle_momentum;
    double base_momentum, max_momentum;
} dp_lr_schedule;

/* "constant", "step", "multistep", "cosine", "onecycle". */
extern const dp_name_table dp_lr_schedule_names;
const char *dp_lr_schedule_name(dp_lr_schedule_kind kind);
/* PyTorch's defaults for `kind` over a run of total_steps updates. */
void dp_lr_schedule_default(dp_lr_schedule *s, dp_lr_schedule_kind kind, int64_t total_steps);
/* DP_EINVAL, with the field named, for a schedule PyTorch would refuse. */
int dp_lr_schedule_check(const dp_lr_schedule *s);
/* The learning rate of update t for base learning rate base_lr; where the
 * schedule sets the momentum too (OneCycle with cycle_momentum), *momentum
 * receives it and the return of dp_lr_schedule_sets_momentum is true. */
double dp_lr_at(const dp_lr_schedule *s, double base_lr, int64_t t, double *momentum);
bool dp_lr_schedule_sets_momentum(const dp_lr_schedule *s);

#ifdef __cplusplus
}
#endif
#endif
