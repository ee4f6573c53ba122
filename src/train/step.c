/* The steps of a run: each issued without waiting (the executor's forward
 * and backward on this rank's rows of the batch, then the allreduce and
 * the update), and what the front end reads of them a step late: the
 * step's loss, and whether its summed gradient was finite.
 *
 * Non-finite gradients: every replica checks its summed gradient on its
 * device and its SGD kernel drops a step that holds a NaN or an Inf; the
 * front end reads device 0's result with the step's loss and stops the run
 * there, or counts the step as skipped. */
#include "train/trainer.h"

#include "core/internal.h"

#include <math.h>
#include <stdlib.h>

struct dp__train_steps {
    uint64_t seed;                   /* the options' seed, or the resumed run's */
    int64_t done;                    /* steps issued in the whole run */
    dp_tensor_t *loss;               /* the step's summed loss, on the first device */
    dp_tensor_t *loss_sum, *correct; /* the epoch's sums, on the first device */
    int64_t cap;                     /* batches the arrays below hold */
    float *step_loss;                /* host copies of each step's loss (this rank's rows) */
    int64_t *step_rows;              /* this rank's rows of each step */
    int64_t *step_nonfinite; /* device 0's check of each step (dp_optimizer_first_nonfinite) */
    double *step_lr;         /* the learning rate of each step's update */
    dp_lr_schedule schedule; /* the run's, in updates (dp__steps_plan) */
    bool checked;            /* the steps are checked for NaN and Inf */
    int64_t inject_step;     /* DP_INJECT_NAN test hook: the step to poison, 0 = none */
    char inject_param[96];   /* and the parameter whose gradient it poisons */
};

/* Turns on the device-side check of every step's gradient, on every replica
 * of every rank or on none: replicas that disagreed on which steps to drop
 * would drift apart. */
static int setup_checks(dp__train_steps *s, const dp__trainer *t)
{
    dp_data_parallel_t *dp = dp__net_replicas(t->net);
    int ndev = dp__net_count(t->net);
    bool missing = false;
    for (int k = 0; k < ndev; k++)
        missing = missing || !dp_optimizer_can_check_finite(dp_data_parallel_optimizer(dp, k));
    if (t->ranks > 1)
        DP_TRY(dp_dist_any(missing, &missing));
    if (missing) {
        if (t->rank == 0)
            DP_WARN("gradients are not checked for NaN and Inf: a device here has no such check");
        return 0;
    }
    for (int k = 0; k < ndev; k++)
        DP_TRY(dp_optimizer_check_finite(dp_data_parallel_optimizer(dp, k)));
    s->checked = true;
    /* Test hook: DP_INJECT_NAN=STEP[:PARAM] makes the gradient of PARAM (a
     * state_dict name; the first parameter if not given) NaN at step STEP
     * (from 1), as an overflow would, to test the check end to end. */
    const char *inject = getenv("DP_INJECT_NAN");
    if (inject) {
        dp_params_t *params = dp_model_params(dp__net_model(t->net));
        char *end;
        s->inject_step = strtoll(inject, &end, 10);
        const char *first = dp_params_name(params, 0);
        snprintf(s->inject_param, sizeof s->inject_param, "%s", *end == ':' ? end + 1 : first);
        if (dp_params_find(params, s->inject_param) < 0) {
            DP_ERROR("DP_INJECT_NAN=%s: the model has no parameter %s", inject, s->inject_param);
            return DP_EINVAL;
        }
    }
    return 0;
}

int dp__steps_open(dp__train_steps **out, const dp__trainer *t)
{
    dp__train_steps *s = dp__calloc(1, sizeof *s);
    if (!s)
        return DP_ENOMEM;
    *out = s;
    s->seed = t->o->run.seed;
    dp_device_t *dev = dp__net_device(t->net, 0);
    int64_t one = 1;
    DP_TRY(dp_tensor_new(&s->loss, dev, DP_F32, 1, &one));
    DP_TRY(dp_tensor_new(&s->loss_sum, dev, DP_F32, 1, &one));
    DP_TRY(dp_tensor_new(&s->correct, dev, DP_F32, 1, &one));
    return setup_checks(s, t);
}

void dp__steps_close(dp__train_steps *s)
{
    if (!s)
        return;
    dp_tensor_free(s->loss);
    dp_tensor_free(s->loss_sum);
    dp_tensor_free(s->correct);
    dp__free(s->step_loss);
    dp__free(s->step_rows);
    dp__free(s->step_nonfinite);
    dp__free(s->step_lr);
    dp__free(s);
}

void dp__steps_schedule(const dp_train_options *o, int64_t batches, dp_lr_schedule *p)
{
    const dp_train_schedule_options *s = &o->schedule;
    dp_lr_schedule_default(p, s->lr_schedule, (int64_t)o->run.epochs * batches);
    p->step_size = s->lr_step * batches;
    p->nmilestones = s->lr_milestones.n;
    for (int i = 0; i < s->lr_milestones.n && i < DP_LR_MAX_MILESTONES; i++)
        p->milestones[i] = s->lr_milestones.epochs[i] * batches;
    p->gamma = s->lr_gamma;
    p->eta_min = s->lr_min;
    p->warmup_steps = s->warmup_steps;
    p->warmup_start_factor = s->warmup_start_factor;
    p->max_lr = s->max_lr;
    p->pct_start = s->pct_start;
    if (s->warmup_epochs > 0)
        p->warmup_steps = (int64_t)llround(s->warmup_epochs * (double)batches);
}

int dp__steps_plan(dp__train_steps *s, const dp_train_options *o, int64_t batches)
{
    dp__steps_schedule(o, batches, &s->schedule);
    return dp_lr_schedule_check(&s->schedule);
}

void dp__steps_schedule_str(const dp__train_steps *s, char *buf, size_t size)
{
    const dp_lr_schedule *p = &s->schedule;
    snprintf(buf, size, "%s total=%lld warmup=%lld", dp_lr_schedule_name(p->kind),
             (long long)p->total_steps, (long long)p->warmup_steps);
}

double dp__steps_lr(const dp__train_steps *s, int64_t i)
{
    return s->step_lr[i];
}

void dp__steps_resume(dp__train_steps *s, uint64_t seed, int64_t steps)
{
    s->seed = seed;
    s->done = steps;
}

uint64_t dp__steps_seed(const dp__train_steps *s)
{
    return s->seed;
}

int64_t dp__steps_done(const dp__train_steps *s)
{
    return s->done;
}

int dp__steps_start_epoch(dp__train_steps *s, int64_t batches, double loss0, double correct0)
{
    if (batches + 1 > s->cap) {
        dp__free(s->step_loss);
        dp__free(s->step_rows);
        dp__free(s->step_nonfinite);
        dp__free(s->step_lr);
        s->cap = batches + 1;
        s->step_loss = dp__calloc((size_t)s->cap, sizeof(float));
        s->step_rows = dp__calloc((size_t)s->cap, sizeof(int64_t));
        s->step_nonfinite = dp__calloc((size_t)s->cap, sizeof(int64_t));
        s->step_lr = dp__calloc((size_t)s->cap, sizeof(double));
        if (!s->step_loss || !s->step_rows || !s->step_nonfinite || !s->step_lr) {
            s->cap = 0;
            return DP_ENOMEM;
        }
    }
    DP_TRY(dp_tensor_fill(s->loss_sum, (float)loss0));
    return dp_tensor_fill(s->correct, (float)correct0);
}

/* The DP_INJECT_NAN test hook: replica 0's gradient of the chosen
 * parameter becomes NaN before the allreduce. */
static int inject_nan(const dp__train_steps *s, dp_model_t *model)
{
    dp_params_t *p = dp_model_params(model);
    dp_tensor_t *param = dp_params_get(p, dp_params_find(p, s->inject_param));
    /* Zeroes the gradients the backward did not write (the step would), so
     * that the NaN below is not overwritten by them. */
    DP_TRY(dp_params_finish_grad(p));
    return dp_tensor_fill(dp_tensor_grad(param), NAN);
}

int dp__steps_issue(dp__trainer *t, const dp_batch *b)
{
    dp__train_steps *s = t->steps;
    dp_executor_t *ex = dp__net_executor(t->net);
    dp_host_batch hb;
    dp__data_host_batch(t, b, s->seed, (uint64_t)s->done, &hb);
    s->step_rows[b->index] = hb.n;
    s->done++;
    DP_TRY(dp_executor_forward_backward(ex, &hb, s->loss, s->correct));
    DP_TRY(dp_accumulate(s->loss_sum, s->loss));
    DP_TRY(dp_tensor_read_async(s->loss, &s->step_loss[b->index], sizeof(float)));
    if (s->inject_step == s->done)
        DP_TRY(inject_nan(s, dp__net_model(t->net)));
    /* The schedule's learning rate (and momentum) for this update, the
     * (s->done)-th; then the seed's sgd(params, lr, batch_size) after the
     * allreduce: the loss is summed over the whole (global) batch, the
     * update divides by its size. */
    double momentum = -1;
    double lr = dp_lr_at(&s->schedule, t->o->optim.lr, s->done - 1, &momentum);
    s->step_lr[b->index] = lr;
    dp_data_parallel_set_lr(dp_executor_replicas(ex), (float)lr,
                            dp_lr_schedule_sets_momentum(&s->schedule) ? (float)momentum : -1.0f);
    DP_TRY(dp_executor_step(ex, 1.0f / (float)b->n));
    if (s->checked)
        DP_TRY(dp_optimizer_read_first_nonfinite_async(
            dp_data_parallel_optimizer(dp_executor_replicas(ex), 0), &s->step_nonfinite[b->index]));
    return 0;
}

float dp__steps_loss(const dp__train_steps *s, int64_t i)
{
    return s->step_loss[i];
}

int64_t dp__steps_rows(const dp__train_steps *s, int64_t i)
{
    return s->step_rows[i];
}

int dp__steps_sum_losses(dp__train_steps *s, int64_t from, int64_t to)
{
    return dp_dist_sum_f32(s->step_loss + from, (int)(to - from));
}

int dp__steps_read_sums(const dp__train_steps *s, float sums[2])
{
    DP_TRY(dp_tensor_to_host(s->loss_sum, &sums[0], sizeof(float)));
    return dp_tensor_to_host(s->correct, &sums[1], sizeof(float));
}

int dp__steps_check(dp__trainer *t, int epoch, int64_t *checked, int64_t upto, int64_t *skipped)
{
    const dp__train_steps *s = t->steps;
    dp_params_t *p = dp_model_params(dp__net_model(t->net));
    int64_t batches = dp_loader_num_batches(dp__data_loader(t->data, true));
    for (; s->checked && *checked < upto; (*checked)++) {
        int64_t i = *checked, bad = s->step_nonfinite[i];
        if (bad >= dp_params_numel(p))
            continue;
        /* The element index into the parameter buffer names the tensor. */
        int j = 0;
        for (int64_t end = 0; j < dp_params_count(p); j++) {
            end += dp_tensor_numel(dp_params_get(p, j));
            if (bad < end)
                break;
        }
        const char *name = dp_params_name(p, j);
        long long step = (long long)(epoch * batches + i + 1);
        char loss[64] = "";
        if (t->ranks == 1 && !isfinite(s->step_loss[i]))
            snprintf(loss, sizeof loss, " (the loss is %s)",
                     isnan(s->step_loss[i]) ? "NaN"
                     : s->step_loss[i] > 0  ? "Inf"
                                            : "-Inf");
        if (t->o->run.skip_nonfinite) {
            (*skipped)++;
            if (t->rank == 0)
                DP_WARN("step %lld (epoch %d, batch %lld): gradient of %s is not finite (NaN or "
                        "Inf)%s; skipped it (`skip_nonfinite`)",
                        step, epoch + 1, (long long)i, name ? name : "?", loss);
            continue;
        }
        char last[640];
        DP_ERROR("step %lld (epoch %d, batch %lld): gradient of %s is not finite (NaN or Inf)%s; "
                 "stopped without applying it%s",
                 step, epoch + 1, (long long)i, name ? name : "?", loss,
                 dp__book_last_checkpoint_str(t, last, sizeof last));
        return DP_ENONFINITE;
    }
    return 0;
}
