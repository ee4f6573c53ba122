/* Non-finite gradients: every replica checks its summed gradient on its
 * device and its SGD kernel drops a step that holds a NaN or an Inf; the
 * front end reads device 0's result with the step's loss and stops the run
 * there, or counts the step as skipped. */
#include "train/trainer.h"

#include "core/internal.h"

#include <math.h>
#include <stdlib.h>

/* Turns on the device-side check of every step's gradient, on every replica
 * of every rank or on none: replicas that disagreed on which steps to drop
 * would drift apart. */
int dp__train_setup_nonfinite_checks(dp__trainer *t)
{
    bool missing = false;
    for (int k = 0; k < t->ndev; k++)
        missing = missing || !dp_sgd_can_check_finite(dp_data_parallel_sgd(t->dp, k));
    if (t->ranks > 1)
        DP_TRY(dp_dist_any(missing, &missing));
    if (missing) {
        if (t->rank == 0)
            DP_WARN("gradients are not checked for NaN and Inf: a device here has no such check");
        return 0;
    }
    for (int k = 0; k < t->ndev; k++)
        DP_TRY(dp_sgd_check_finite(dp_data_parallel_sgd(t->dp, k)));
    t->checked = true;
    /* Test hook: DP_INJECT_NAN=STEP[:PARAM] makes the gradient of PARAM (a
     * state_dict name; the first parameter if not given) NaN at step STEP
     * (from 1), as an overflow would, to test the check end to end. */
    const char *inject = getenv("DP_INJECT_NAN");
    if (inject) {
        char *end;
        t->inject_step = strtoll(inject, &end, 10);
        const char *first = dp_params_name(dp_model_params(t->model), 0);
        snprintf(t->inject_param, sizeof t->inject_param, "%s", *end == ':' ? end + 1 : first);
        if (dp_params_find(dp_model_params(t->model), t->inject_param) < 0) {
            DP_ERROR("DP_INJECT_NAN=%s: the model has no parameter %s", inject, t->inject_param);
            return DP_EINVAL;
        }
    }
    return 0;
}

/* The DP_INJECT_NAN test hook: replica 0's gradient of the chosen
 * parameter becomes NaN before the allreduce. */
int dp__train_inject_nan(dp__trainer *t)
{
    dp_params_t *p = dp_model_params(t->model);
    dp_tensor_t *param = dp_params_get(p, dp_params_find(p, t->inject_param));
    /* Zeroes the gradients the backward did not write (the step would), so
     * that the NaN below is not overwritten by them. */
    DP_TRY(dp_params_finish_grad(p));
    return dp_tensor_fill(dp_tensor_grad(param), NAN);
}

/* Reads the gradient checks of this epoch's steps [*checked, upto), which
 * have finished. A step whose summed gradient held a NaN or an Inf was not
 * applied (the SGD kernel dropped it); without --skip-nonfinite the run
 * stops there, naming the step and the parameter. */
int dp__train_check_steps(dp__trainer *t, int epoch, int64_t *checked, int64_t upto,
                          int64_t *skipped)
{
    dp_params_t *p = dp_model_params(t->model);
    int64_t batches = dp_loader_num_batches(t->train_loader);
    for (; t->checked && *checked < upto; (*checked)++) {
        int64_t i = *checked, bad = t->step_nonfinite[i];
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
        if (t->ranks == 1 && !isfinite(t->step_loss[i]))
            snprintf(loss, sizeof loss, " (the loss is %s)",
                     isnan(t->step_loss[i]) ? "NaN"
                     : t->step_loss[i] > 0  ? "Inf"
                                            : "-Inf");
        if (t->o->skip_nonfinite) {
            (*skipped)++;
            if (t->rank == 0)
                DP_WARN("step %lld (epoch %d, batch %lld): gradient of %s is not finite (NaN or "
                        "Inf)%s; skipped it (skipping non-finite steps)",
                        step, epoch + 1, (long long)i, name ? name : "?", loss);
            continue;
        }
        char last[640];
        DP_ERROR("step %lld (epoch %d, batch %lld): gradient of %s is not finite (NaN or Inf)%s; "
                 "stopped without applying it%s",
                 step, epoch + 1, (long long)i, name ? name : "?", loss,
                 dp__train_last_checkpoint_str(t, last, sizeof last));
        return DP_ENONFINITE;
    }
    return 0;
}
