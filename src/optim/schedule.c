/* Learning-rate schedules as closed forms of the update index t, as
 * torch.optim.lr_scheduler computes them (in double, as Python's floats):
 * LinearLR's warmup, then StepLR, MultiStepLR, CosineAnnealingLR or
 * OneCycleLR. tests/optim/pytorch_recipe.py compares every step with
 * PyTorch's schedulers. */
#include "dp/optim.h"

#include "core/internal.h"

#include <math.h>
#include <string.h>

static const dp_named_value names[] = {{"constant", DP_LR_CONSTANT},
                                       {"step", DP_LR_STEP},
                                       {"multistep", DP_LR_MULTISTEP},
                                       {"cosine", DP_LR_COSINE},
                                       {"onecycle", DP_LR_ONECYCLE}};
const dp_name_table dp_lr_schedule_names = DP_NAME_TABLE(names);

const char *dp_lr_schedule_name(dp_lr_schedule_kind kind)
{
    const char *name = dp_name_of(&dp_lr_schedule_names, kind);
    return name ? name : "?";
}

void dp_lr_schedule_default(dp_lr_schedule *s, dp_lr_schedule_kind kind, int64_t total_steps)
{
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->total_steps = total_steps;
    s->warmup_start_factor = 1.0 / 3.0;
    s->step_size = 1;
    s->gamma = 0.1;
    s->pct_start = 0.3;
    s->div_factor = 25.0;
    s->final_div_factor = 1e4;
    s->cycle_momentum = true;
    s->base_momentum = 0.85;
    s->max_momentum = 0.95;
}

int dp_lr_schedule_check(const dp_lr_schedule *s)
{
    const char *bad = NULL;
    if (!dp_name_of(&dp_lr_schedule_names, s->kind))
        bad = "the kind is none of constant, step, multistep, cosine, onecycle";
    else if (s->warmup_steps < 0 ||
             (s->warmup_steps > 0 && !(s->warmup_start_factor > 0 && s->warmup_start_factor <= 1)))
        bad = "the warmup needs 0 or more steps and a start factor in (0, 1] (LinearLR)";
    else if (s->kind == DP_LR_ONECYCLE && s->warmup_steps > 0)
        bad = "onecycle has its own warmup (its pct_start): give no other";
    else if (s->kind == DP_LR_STEP && s->step_size < 1)
        bad = "step needs a step size of at least 1";
    else if ((s->kind == DP_LR_STEP || s->kind == DP_LR_MULTISTEP) && !(s->gamma > 0))
        bad = "gamma must be above 0";
    else if (s->kind == DP_LR_MULTISTEP &&
             (s->nmilestones < 1 || s->nmilestones > DP_LR_MAX_MILESTONES))
        bad = "multistep needs 1 to 32 milestones";
    else if ((s->kind == DP_LR_COSINE && s->total_steps - s->warmup_steps < 1) ||
             (s->kind == DP_LR_ONECYCLE && s->total_steps < 2))
        bad = "the run has too few steps for this schedule (cosine needs one after the warmup, "
              "onecycle two)";
    else if (s->kind == DP_LR_COSINE && !(s->eta_min >= 0))
        bad = "the cosine schedule's minimum lr must be 0 or more";
    else if (s->kind == DP_LR_ONECYCLE &&
             !(s->pct_start > 0 && s->pct_start < 1 && s->div_factor > 0 &&
               s->final_div_factor > 0 && s->max_lr >= 0))
        bad = "onecycle needs 0 < pct_start < 1, div factors above 0 and max_lr 0 or more";
    for (int i = 1; !bad && s->kind == DP_LR_MULTISTEP && i < s->nmilestones; i++)
        if (s->milestones[i] <= s->milestones[i - 1])
            bad = "the milestones must increase";
    if (bad) {
        DP_ERROR("learning-rate schedule %s: %s", dp_lr_schedule_name(s->kind), bad);
        return DP_EINVAL;
    }
    return 0;
}

bool dp_lr_schedule_sets_momentum(const dp_lr_schedule *s)
{
    return s->kind == DP_LR_ONECYCLE && s->cycle_momentum;
}

/* OneCycleLR's cosine annealing from start to end at pct in [0, 1]. */
static double anneal(double start, double end, double pct)
{
    return end + (start - end) / 2.0 * (1.0 + cos(M_PI * pct));
}

/* OneCycleLR.get_lr (two phases): lr and momentum of update t. */
static double one_cycle(const dp_lr_schedule *s, double base_lr, int64_t t, double *momentum)
{
    double max_lr = s->max_lr > 0 ? s->max_lr : base_lr;
    double initial = max_lr / s->div_factor, min_lr = initial / s->final_div_factor;
    double ends[2] = {s->pct_start * (double)s->total_steps - 1.0, (double)s->total_steps - 1.0};
    double lrs[2][2] = {{initial, max_lr}, {max_lr, min_lr}};
    double moms[2][2] = {{s->max_momentum, s->base_momentum}, {s->base_momentum, s->max_momentum}};
    double start = 0.0, step = (double)t;
    for (int i = 0; i < 2; i++) {
        if (step <= ends[i] || i == 1) {
            double pct = (step - start) / (ends[i] - start);
            *momentum = anneal(moms[i][0], moms[i][1], pct);
            return anneal(lrs[i][0], lrs[i][1], pct);
        }
        start = ends[i];
    }
    return min_lr; /* not reached */
}

double dp_lr_at(const dp_lr_schedule *s, double base_lr, int64_t t, double *momentum)
{
    if (s->kind == DP_LR_ONECYCLE)
        return one_cycle(s, base_lr, t, momentum);
    int64_t w = s->warmup_steps;
    if (t < w) {
        double f = s->warmup_start_factor;
        return base_lr * (f + (1.0 - f) * (double)t / (double)w);
    }
    t -= w; /* the main schedule's own count */
    switch (s->kind) {
    case DP_LR_STEP:
        return base_lr * pow(s->gamma, (double)(t / s->step_size));
    case DP_LR_MULTISTEP: {
        int passed = 0;
        while (passed < s->nmilestones && s->milestones[passed] <= t)
            passed++;
        return base_lr * pow(s->gamma, passed);
    }
    case DP_LR_COSINE: {
        double tmax = (double)(s->total_steps - w);
        return s->eta_min + (base_lr - s->eta_min) * (1.0 + cos(M_PI * (double)t / tmax)) / 2.0;
    }
    default:
        return base_lr;
    }
}
