/* The optimizers and learning-rate schedules of dp/optim.h against their
 * formulas, written out here in double as torch.optim writes them (the
 * step-by-step comparison with PyTorch itself is tests/optim/pytorch_recipe.py,
 * in make test-interop): SGD with Nesterov momentum and weight decay, Adam,
 * AdamW, the clipping factor, a non-finite step that changes nothing, and
 * every schedule's value at the steps where PyTorch's change shape. Then a
 * whole run: AdamW with warmup, cosine, clipping and label smoothing on 2
 * devices equals 1 device within 1e-5, and a run stopped mid-epoch and
 * resumed ends with the same bytes as one that was not. */
#include "testutil.h"

#include "dp/dp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 6, STEPS = 3 };

/* torch.optim's update of one element, in double. */
static double reference_step(const dp_optimizer_options *o, int64_t t, double g, double *p,
                             double *m, double *v)
{
    if (o->kind == DP_OPTIMIZER_SGD) {
        double d = g + o->weight_decay * *p;
        *m = t == 1 ? d : o->momentum * *m + d;
        *p -= o->lr * (o->nesterov ? d + o->momentum * *m : *m);
        return *p;
    }
    if (o->kind == DP_OPTIMIZER_ADAMW)
        *p *= 1.0 - (double)o->lr * o->weight_decay;
    else
        g += o->weight_decay * *p;
    *m += (1.0 - o->beta1) * (g - *m);
    *v = o->beta2 * *v + (1.0 - o->beta2) * g * g;
    double bias1 = 1.0 - pow(o->beta1, (double)t), bias2 = 1.0 - pow(o->beta2, (double)t);
    *p -= o->lr / bias1 * *m / (sqrt(*v) / sqrt(bias2) + o->eps);
    return *p;
}

/* STEPS updates of N parameters with fixed gradients (scaled by 1/4 and
 * clipped to 0.5 where asked) against reference_step. */
static void check_kind(dp_device_t *dev, const dp_optimizer_options *o)
{
    dp_param_spec spec = {.name = "w", .ndim = 1, .shape = {N}};
    dp_params_t *params;
    assert_int_equal(dp_params_init(&params, dev, &spec, 1, true), 0);
    float p0[N] = {0.5f, -1.0f, 0.25f, 2.0f, -0.75f, 0.1f}, grad[N] = {4, -2, 0.5f, 1, -8, 0};
    double p[N], m[N] = {0}, v[N] = {0};
    assert_int_equal(dp_params_set(params, p0), 0);
    dp_optimizer_t *opt;
    assert_int_equal(dp_optimizer_init(&opt, params, o), 0);
    for (int i = 0; i < N; i++)
        p[i] = p0[i];
    double norm = 0;
    for (int i = 0; i < N; i++)
        norm += (grad[i] / 4.0) * (grad[i] / 4.0);
    double clip = o->clip_grad_norm > 0 ? fmin(1.0, o->clip_grad_norm / (sqrt(norm) + 1e-6)) : 1;
    for (int64_t t = 1; t <= STEPS; t++) {
        dp_params_zero_grad(params);
        assert_int_equal(dp_tensor_copy_from_host(dp_params_grads(params), grad, sizeof grad), 0);
        assert_int_equal(dp_optimizer_step(opt, 0.25f), 0);
        for (int i = 0; i < N; i++)
            reference_step(o, t, grad[i] / 4.0 * clip, &p[i], &m[i], &v[i]);
    }
    float got[N];
    assert_int_equal(dp_tensor_to_host(dp_params_values(params), got, sizeof got), 0);
    /* Every element, the last one's gradient 0 included (Adam's step is
     * then 0 / (0 + eps) for it, NaN without eps): within 1e-5 of the
     * formula, finite (the helpers fail on NaN), and moved from its start
     * by the formula's step within 1% (weight decay moves even the
     * element whose gradient is 0). */
    double worst = 0;
    for (int i = 0; i < N; i++) {
        worst = tu_worst_rel(worst, got[i], p[i], fmax(fabs(p[i]), 1e-3), "parameter", i);
        double step = p[i] - p0[i];
        if (!(fabs(step) > 0) || !tu_close((double)got[i] - p0[i], step, 1e-2, 0))
            fail_msg("parameter %d moved by %.3g from %g, the formula by %.3g", i,
                     (double)got[i] - p0[i], (double)p0[i], step);
    }
    printf("%s%s%s: %d updates of %d parameters, largest relative difference to the formula "
           "%.1e\n",
           dp_optimizer_kind_name(o->kind), o->nesterov ? " (nesterov)" : "",
           o->clip_grad_norm > 0 ? " clipped" : "", STEPS, N, worst);
    assert_true(worst < 1e-5);
    if (o->clip_grad_norm > 0) {
        float figures[2];
        assert_int_equal(dp_waitall(), 0);
        memcpy(figures, dp_optimizer_clip_figures(opt), sizeof figures); /* CPU memory */
        tu_assert_close(figures[1], sqrt(norm), 1e-5, 0);
        tu_assert_close(figures[0], clip, 0, 1e-6);
    }
    dp_optimizer_close(opt);
    dp_params_close(params);
}

static void optimizers_follow_their_formulas(void **state)
{
    (void)state;
    dp_device_t *dev;
    assert_int_equal(dp_device_open(&dev, "cpu:0", 1), 0);
    dp_optimizer_options o;
    dp_optimizer_options_default(&o, DP_OPTIMIZER_SGD, 0.1f);
    o.momentum = 0.9f;
    o.weight_decay = 0.01f;
    check_kind(dev, &o);
    o.nesterov = true;
    check_kind(dev, &o);
    o.clip_grad_norm = 0.5f;
    check_kind(dev, &o);
    dp_optimizer_options_default(&o, DP_OPTIMIZER_ADAM, 0.01f);
    o.weight_decay = 0.1f;
    check_kind(dev, &o);
    dp_optimizer_options_default(&o, DP_OPTIMIZER_ADAMW, 0.01f);
    o.beta1 = 0.8f;
    check_kind(dev, &o);
    o.clip_grad_norm = 0.5f;
    check_kind(dev, &o);
    /* PyTorch's refusals. */
    o.nesterov = false;
    o.beta2 = 1.0f;
    dp_optimizer_t *bad;
    dp_params_t *params;
    dp_param_spec spec = {.name = "w", .ndim = 1, .shape = {N}};
    assert_int_equal(dp_params_init(&params, dev, &spec, 1, true), 0);
    assert_int_equal(dp_optimizer_init(&bad, params, &o), DP_EINVAL);
    tu_assert_error_mentions("the betas 0.8,1");
    dp_optimizer_options_default(&o, DP_OPTIMIZER_SGD, 0.1f);
    o.nesterov = true;
    assert_int_equal(dp_optimizer_init(&bad, params, &o), DP_EINVAL);
    tu_assert_error_mentions("Nesterov momentum requires a momentum above 0");
    dp_params_close(params);
    dp_device_close(dev);
}

/* A gradient with a NaN: Adam's parameters and both moments stay. */
static void nonfinite_step_changes_nothing(void **state)
{
    (void)state;
    dp_device_t *dev;
    assert_int_equal(dp_device_open(&dev, "cpu:0", 1), 0);
    dp_param_spec spec = {.name = "w", .ndim = 1, .shape = {N}};
    dp_params_t *params;
    assert_int_equal(dp_params_init(&params, dev, &spec, 1, true), 0);
    float p0[N] = {1, 2, 3, 4, 5, 6}, g[N] = {1, 1, 1, 1, 1, 1};
    assert_int_equal(dp_params_set(params, p0), 0);
    dp_optimizer_options o;
    dp_optimizer_options_default(&o, DP_OPTIMIZER_ADAMW, 0.1f);
    dp_optimizer_t *opt;
    assert_int_equal(dp_optimizer_init(&opt, params, &o), 0);
    assert_int_equal(dp_optimizer_check_finite(opt), 0);
    dp_params_zero_grad(params);
    assert_int_equal(dp_tensor_copy_from_host(dp_params_grads(params), g, sizeof g), 0);
    assert_int_equal(dp_optimizer_step(opt, 1.0f), 0);
    float before[3][N], after[3][N];
    const char *name;
    assert_int_equal(dp_tensor_to_host(dp_params_values(params), before[0], sizeof before[0]), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(
            dp_tensor_to_host(dp_optimizer_state(opt, i, &name), before[i + 1], sizeof before[0]),
            0);
    g[3] = NAN;
    assert_int_equal(dp_tensor_copy_from_host(dp_params_grads(params), g, sizeof g), 0);
    assert_int_equal(dp_optimizer_step(opt, 1.0f), 0);
    assert_int_equal(dp_tensor_to_host(dp_params_values(params), after[0], sizeof after[0]), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(
            dp_tensor_to_host(dp_optimizer_state(opt, i, &name), after[i + 1], sizeof after[0]), 0);
    assert_memory_equal(before, after, sizeof before);
    assert_string_equal(name, "exp_avg_sq");
    dp_optimizer_close(opt);
    dp_params_close(params);
    dp_device_close(dev);
}

static void schedules_match_pytorch_forms(void **state)
{
    (void)state;
    dp_lr_schedule s;
    double mom = -1;
    dp_lr_schedule_default(&s, DP_LR_STEP, 100);
    s.step_size = 10;
    tu_assert_close(dp_lr_at(&s, 1.0, 9, &mom), 1.0, 0, 1e-15);
    tu_assert_close(dp_lr_at(&s, 1.0, 10, &mom), 0.1, 0, 1e-15);
    dp_lr_schedule_default(&s, DP_LR_MULTISTEP, 100);
    s.nmilestones = 2;
    s.milestones[0] = 30;
    s.milestones[1] = 60;
    tu_assert_close(dp_lr_at(&s, 1.0, 29, &mom), 1.0, 0, 1e-15);
    tu_assert_close(dp_lr_at(&s, 1.0, 30, &mom), 0.1, 0, 1e-15);
    tu_assert_close(dp_lr_at(&s, 1.0, 60, &mom), 0.01, 0, 1e-15);
    /* LinearLR (1/3 to 1 over 4 updates), then CosineAnnealingLR over 16. */
    dp_lr_schedule_default(&s, DP_LR_COSINE, 20);
    s.warmup_steps = 4;
    s.eta_min = 0.1;
    tu_assert_close(dp_lr_at(&s, 1.0, 0, &mom), 1.0 / 3.0, 0, 1e-15);
    tu_assert_close(dp_lr_at(&s, 1.0, 2, &mom), 2.0 / 3.0, 0, 1e-15);
    tu_assert_close(dp_lr_at(&s, 1.0, 4, &mom), 1.0, 0, 1e-15);
    tu_assert_close(dp_lr_at(&s, 1.0, 12, &mom), 0.55, 0, 1e-15);
    assert_int_equal(dp_lr_schedule_check(&s), 0);
    /* OneCycleLR: max_lr / 25 up to max_lr at pct_start * total - 1, then
     * down to max_lr / 25 / 1e4; momentum 0.95 -> 0.85 -> 0.95. */
    dp_lr_schedule_default(&s, DP_LR_ONECYCLE, 100);
    s.max_lr = 1.0;
    tu_assert_close(dp_lr_at(&s, 0.5, 0, &mom), 0.04, 0, 1e-15);
    tu_assert_close(mom, 0.95, 0, 1e-15);
    tu_assert_close(dp_lr_at(&s, 0.5, 29, &mom), 1.0, 0, 1e-15);
    tu_assert_close(mom, 0.85, 0, 1e-15);
    tu_assert_close(dp_lr_at(&s, 0.5, 99, &mom), 4e-6, 0, 1e-18);
    tu_assert_close(mom, 0.95, 0, 1e-15);
    assert_true(dp_lr_schedule_sets_momentum(&s));
    s.warmup_steps = 3;
    assert_int_equal(dp_lr_schedule_check(&s), DP_EINVAL);
    tu_assert_error_mentions("onecycle has its own warmup");
}

/* AdamW, warmup and cosine, clipping, label smoothing: a whole run. */
static void run(const char *devices, int epochs, dp_lr_schedule_kind kind, const char *ckpt,
                const char *resume, dp_train_result *r)
{
    dp_train_options o;
    dp_train_options_default(&o);
    o.parallel.devices = devices;
    o.parallel.threads = 1;
    o.data.batch_size = 64;
    o.data.limit_train = 640;
    o.data.limit_test = 64;
    o.run.epochs = epochs;
    o.optim.lr = 0.002f;
    o.optim.optimizer = DP_OPTIMIZER_ADAMW;
    o.optim.weight_decay = 0.01f;
    o.optim.clip_grad_norm = 0.5f;
    o.optim.label_smoothing = 0.1f;
    o.schedule.lr_schedule = kind;
    o.schedule.warmup_steps = 4;
    /* multistep: epoch 2 at a tenth */
    o.schedule.lr_milestones = (dp_lr_milestones){.n = 1, .epochs = {1}};
    o.checkpoint.checkpoint_path = ckpt;
    o.checkpoint.resume_path = resume;
    o.numerics.conv_algo = DP_CONV_ALGO_DIRECT;
    assert_int_equal(dp_train(&o, r), 0);
}

static void adamw_runs_alike(void **state)
{
    (void)state;
    if (!tu_have_fashion_mnist())
        tu_skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
    char one[512], two[512], part[512];
    snprintf(one, sizeof one, "%s", tu_tmp_path("one.safetensors"));
    snprintf(two, sizeof two, "%s", tu_tmp_path("two.safetensors"));
    snprintf(part, sizeof part, "%s", tu_tmp_path("part.safetensors"));
    dp_train_result r;
    run("1", 2, DP_LR_COSINE, one, NULL, &r);
    run("2", 2, DP_LR_COSINE, two, NULL, &r);
    /* The weights as one vector: Adam divides each element's step by its
     * running RMS, so an element whose gradients cancel over the steps
     * (m near 0) turns the summation order's rounding into a relative
     * error far above float's; the worst single element of LeNet's W1
     * ends about 1e-4 off, the vector 1e-6. */
    double diff = tu_l2_rel_diff(two, one), worst = tu_max_rel_diff(two, one);
    printf("AdamW, warmup + cosine, clipping, label smoothing: 2 devices vs 1 after 20 updates: "
           "||difference|| / ||weights|| %.2e (limit 1e-5); the worst element's %.2e\n",
           diff, worst);
    assert_true(diff <= 1e-5);
    assert_true(worst > 0); /* two summation orders, not one run twice */
    /* One epoch, then the second from its checkpoint: the same bytes. The
     * cosine's length is the run's, which asking for more epochs changes,
     * so this takes warmup and MultiStepLR, whose steps count epochs. */
    run("1", 2, DP_LR_MULTISTEP, one, NULL, &r);
    run("1", 1, DP_LR_MULTISTEP, part, NULL, &r);
    run("1", 2, DP_LR_MULTISTEP, part, part, &r);
    tu_assert_same_tensors(part, one);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(optimizers_follow_their_formulas),
        cmocka_unit_test(nonfinite_step_changes_nothing),
        cmocka_unit_test(schedules_match_pytorch_forms),
        cmocka_unit_test_setup_teardown(adamw_runs_alike, tu_setup_tmp, tu_teardown_tmp),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
