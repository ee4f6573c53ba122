/* dptrain train's recipe flags: the optimizer, its options, gradient
 * clipping, label smoothing and the learning-rate schedule, with
 * torch.optim's names and defaults. */
#include "cli.h"

#include "dp/dp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cli_train_recipe_help[] =
    "  --optimizer O        sgd, adam or adamw, as torch.optim's [sgd]\n"
    "  --nesterov           SGD with Nesterov momentum (needs --momentum) [off]\n"
    "  --betas B1,B2        Adam's and AdamW's betas [0.9,0.999]\n"
    "  --eps EPS            Adam's and AdamW's eps [1e-8]\n"
    "  --clip-grad-norm N   clip the gradient's global norm to N, as\n"
    "                       clip_grad_norm_ (after the allreduce) [off]\n"
    "  --label-smoothing E  CrossEntropyLoss(label_smoothing=E), 0 to 1 [0]\n"
    "  --lr-schedule S      constant, step, multistep, cosine or onecycle,\n"
    "                       stepped every update [constant]\n"
    "  --lr-step E          step: StepLR's step_size, in epochs [1]\n"
    "  --lr-milestones LIST multistep: MultiStepLR's milestones, in epochs,\n"
    "                       e.g. 30,60 [none]\n"
    "  --lr-gamma G         step, multistep: the factor at each step [0.1]\n"
    "  --lr-min LR          cosine: CosineAnnealingLR's eta_min [0]\n"
    "  --warmup-steps N     LinearLR for the first N updates, before the\n"
    "                       schedule (SequentialLR) [0]\n"
    "  --warmup-epochs E    the same, for E epochs' updates [0]\n"
    "  --warmup-start-factor F\n"
    "                       LinearLR's start_factor, in (0, 1] [0.333333]\n"
    "  --max-lr LR          onecycle: OneCycleLR's max_lr [--lr]\n"
    "  --pct-start P        onecycle: the share of updates rising to max_lr\n"
    "                       [0.3]\n";

const char *const cli_train_recipe_flags[] = {"--optimizer",
                                              "--betas",
                                              "--eps",
                                              "--clip-grad-norm",
                                              "--label-smoothing",
                                              "--lr-schedule",
                                              "--lr-step",
                                              "--lr-milestones",
                                              "--lr-gamma",
                                              "--lr-min",
                                              "--warmup-steps",
                                              "--warmup-epochs",
                                              "--warmup-start-factor",
                                              "--max-lr",
                                              "--pct-start",
                                              NULL};

/* "E1,E2,...": increasing positive epochs. */
static int parse_milestones(const char *f, const char *v, dp_lr_schedule *s)
{
    const char *p = v;
    s->nmilestones = 0;
    while (*p) {
        char *end;
        long long e = strtoll(p, &end, 10);
        if (end == p || (*end != ',' && *end != '\0') || e < 1 || e > DP_MAX_EPOCHS ||
            s->nmilestones == DP_LR_MAX_MILESTONES ||
            (s->nmilestones > 0 && e <= s->milestones[s->nmilestones - 1]))
            return cli_bad_value(f, v, "expected up to 32 increasing epochs, e.g. 30,60");
        s->milestones[s->nmilestones++] = e;
        p = *end == ',' ? end + 1 : end;
    }
    return s->nmilestones ? 0 : cli_bad_value(f, v, "expected at least one epoch");
}

static int parse_double(const char *f, const char *v, double lo, double hi, bool lo_open,
                        double *out)
{
    float x;
    if (cli_parse_float(f, v, lo, hi, lo_open, &x))
        return 2;
    *out = strtod(v, NULL); /* the value as given, not its float rounding */
    return 0;
}

int cli_train_recipe_flag(const char *f, const char *v, dp_train_options *o)
{
    dp_lr_schedule *s = &o->lr_schedule;
    int64_t n;
    if (strcmp(f, "--optimizer") == 0) {
        return cli_parse_name(f, v, &dp_optimizer_kind_names, &o->optimizer);
    }
    if (strcmp(f, "--betas") == 0) {
        char *end;
        double b1 = strtod(v, &end), b2 = *end == ',' ? strtod(end + 1, &end) : NAN;
        if (*end != '\0' || !(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1))
            return cli_bad_value(f, v, "expected B1,B2 each in [0, 1), e.g. 0.9,0.999");
        o->beta1 = (float)b1;
        o->beta2 = (float)b2;
        return 0;
    }
    if (strcmp(f, "--eps") == 0)
        return cli_parse_float(f, v, 0, 1, false, &o->eps);
    if (strcmp(f, "--clip-grad-norm") == 0)
        return cli_parse_float(f, v, 0, 1e9, true, &o->clip_grad_norm);
    if (strcmp(f, "--label-smoothing") == 0)
        return cli_parse_float(f, v, 0, 1, false, &o->label_smoothing);
    if (strcmp(f, "--lr-schedule") == 0) {
        int k;
        if (cli_parse_name(f, v, &dp_lr_schedule_names, &k))
            return 2;
        s->kind = (dp_lr_schedule_kind)k;
        return 0;
    }
    if (strcmp(f, "--lr-step") == 0) {
        if (cli_parse_i64(f, v, 1, DP_MAX_EPOCHS, &n))
            return 2;
        s->step_size = n;
        return 0;
    }
    if (strcmp(f, "--lr-milestones") == 0)
        return parse_milestones(f, v, s);
    if (strcmp(f, "--lr-gamma") == 0)
        return parse_double(f, v, 0, 1e6, true, &s->gamma);
    if (strcmp(f, "--lr-min") == 0)
        return parse_double(f, v, 0, 1e6, false, &s->eta_min);
    if (strcmp(f, "--warmup-steps") == 0) {
        if (cli_parse_i64(f, v, 0, INT64_MAX, &n))
            return 2;
        s->warmup_steps = n;
        return 0;
    }
    if (strcmp(f, "--warmup-epochs") == 0)
        return parse_double(f, v, 0, DP_MAX_EPOCHS, false, &o->warmup_epochs);
    if (strcmp(f, "--warmup-start-factor") == 0)
        return parse_double(f, v, 0, 1, true, &s->warmup_start_factor);
    if (strcmp(f, "--max-lr") == 0)
        return parse_double(f, v, 0, 1e6, true, &s->max_lr);
    if (strcmp(f, "--pct-start") == 0) {
        if (parse_double(f, v, 0, 1, true, &s->pct_start))
            return 2;
        if (s->pct_start >= 1)
            return cli_bad_value(f, v, "expected a number > 0 and < 1");
        return 0;
    }
    return -1;
}

/* What only the flags together can tell, one line each. */
int cli_train_recipe_check(dp_train_options *o, bool wd_given)
{
    const dp_lr_schedule *s = &o->lr_schedule;
    /* AdamW's weight decay default is PyTorch's, 0.01. */
    if (o->optimizer == DP_OPTIMIZER_ADAMW && !wd_given)
        o->weight_decay = 0.01f;
    if (o->nesterov && (o->optimizer != DP_OPTIMIZER_SGD || !(o->momentum > 0))) {
        fprintf(stderr, "dptrain: error: --nesterov needs --optimizer sgd and --momentum above "
                        "0 (as torch.optim.SGD)\n");
        return 2;
    }
    if (o->warmup_epochs > 0 && s->warmup_steps > 0) {
        fprintf(stderr, "dptrain: error: --warmup-steps and --warmup-epochs exclude each other\n");
        return 2;
    }
    if (s->kind == DP_LR_ONECYCLE && (o->warmup_epochs > 0 || s->warmup_steps > 0)) {
        fprintf(stderr, "dptrain: error: --lr-schedule onecycle warms up by itself (--pct-start); "
                        "give no --warmup-steps or --warmup-epochs\n");
        return 2;
    }
    if (s->kind == DP_LR_MULTISTEP && s->nmilestones == 0) {
        fprintf(stderr, "dptrain: error: --lr-schedule multistep needs --lr-milestones\n");
        return 2;
    }
    return 0;
}
