/* --pipeline: the run's checks (each bad combination a one-line error
 * naming the options) and its pipeline, whose replicas are the run's
 * (dp_executor_init_pipeline): updates, checkpoints, evaluation and
 * resuming stay those of data parallelism. */
#include "train/trainer.h"

#include "core/internal.h"

#include <stdlib.h>

/* The stage list of --stages, read against the model's layers. */
static int read_stages(const dp__trainer *t, const dp_model_def *def, const int64_t *in_chw,
                       int *first)
{
    const dp_train_options *o = t->o;
    dp_layer_summary *rows;
    int n, stages = 0;
    DP_TRY(dp_model_summary(def, in_chw, &rows, &n));
    bool *can_start = dp__calloc((size_t)n, sizeof *can_start);
    if (!can_start) {
        free(rows);
        return DP_ENOMEM;
    }
    for (int i = 0; i < n; i++)
        can_start[i] = rows[i].can_start;
    /* A stage starts after a cut where one tensor crosses: K stages need
     * K - 1 such cuts (an ONNX graph may have none: onnx_stages.c). */
    int cuts = -1;
    for (int i = 0; i < n; i++)
        cuts += can_start[i];
    int rc = 0;
    if (o->parallel.pipeline > n) {
        DP_ERROR("`pipeline` %d is larger than %s's %d layers", o->parallel.pipeline, def->name, n);
        rc = DP_EINVAL;
    } else if (o->parallel.pipeline - 1 > cuts) {
        DP_ERROR("%s: the model has %d point%s where one tensor crosses between its layers, "
                 "`pipeline` %d needs %d",
                 def->name, cuts, cuts == 1 ? "" : "s", o->parallel.pipeline,
                 o->parallel.pipeline - 1);
        rc = DP_EINVAL;
    } else if (o->parallel.stages) {
        rc = dp_pipeline_parse_stages(o->parallel.stages, can_start, n, first, &stages);
        if (rc == 0 && stages != o->parallel.pipeline) {
            DP_ERROR("`stages` %s has %d stages, `pipeline` is %d", o->parallel.stages, stages,
                     o->parallel.pipeline);
            rc = DP_EINVAL;
        }
    }
    free(rows);
    dp__free(can_start);
    return rc;
}

int dp__train_check_pipeline(const dp__trainer *t, const dp_model_def *def, const int64_t *in_chw,
                             int *first)
{
    const dp_train_options *o = t->o;
    const dp__train_net *net = t->net;
    int ndev = dp__net_count(net);
    int K = o->parallel.pipeline, M = o->parallel.micro_batches > 0 ? o->parallel.micro_batches : 1;
    if (K < 1 || K > DP_PIPELINE_MAX_STAGES) {
        DP_ERROR("`pipeline` %d: give 1 to %d", K, DP_PIPELINE_MAX_STAGES);
        return DP_EINVAL;
    }
    if (!def->forward_layers) {
        DP_ERROR("the model %s cannot be split into pipeline stages: its definition has no "
                 "forward_layers",
                 def->name);
        return DP_ENOTSUP;
    }
    DP_TRY(read_stages(t, def, in_chw, first));
    if (ndev % K != 0) {
        DP_ERROR("`pipeline` %d does not divide the %d devices %s: give K or a "
                 "multiple of K devices",
                 K, ndev, dp__net_devices_str(net));
        return DP_EINVAL;
    }
    if (o->parallel.sync_bn) {
        DP_ERROR("`sync_bn` with `pipeline` %d: a stage's batch norm layers "
                 "normalise each micro-batch on their own device, there is nothing to share",
                 K);
        return DP_EINVAL;
    }
    int D = ndev / K;
    if (o->data.batch_size < (int64_t)M * D * t->ranks) {
        DP_ERROR("`micro_batches` %d is larger than `batch_size` %lld allows: %d "
                 "pipeline(s)%s x %d micro-batches need batches of at least %lld",
                 M, (long long)o->data.batch_size, D * t->ranks,
                 t->ranks > 1 ? " of all ranks" : "", M, (long long)M * D * t->ranks);
        return DP_EINVAL;
    }
    return 0;
}

int dp__train_open_pipeline(const dp__trainer *t, dp_model_t *model, const dp_model_def *def,
                            const int64_t *in_chw, const dp_data_parallel_options *update,
                            dp_pipeline_t **out)
{
    const dp_train_options *o = t->o;
    const dp__train_net *net = t->net;
    int ndev = dp__net_count(net);
    int K = o->parallel.pipeline, M = o->parallel.micro_batches > 0 ? o->parallel.micro_batches : 1;
    int first[DP_PIPELINE_MAX_STAGES + 1];
    DP_TRY(dp__train_check_pipeline(t, def, in_chw, first));
    dp_pipeline_options po = {.stages = K,
                              .first = o->parallel.stages ? first : NULL,
                              .micro_batches = M,
                              .schedule = o->parallel.pipeline_schedule,
                              .update = *update};
    dp_device_t *devs[DP_MAX_DEVICES];
    for (int k = 0; k < ndev; k++)
        devs[k] = dp__net_device(net, k);
    DP_TRY(dp_pipeline_init(out, model, devs, ndev, in_chw, &po));
    if (o->output.verbose && t->rank == 0) {
        dp_pipeline_stats s;
        dp_pipeline_take_stats(*out, &s);
        for (int k = 0; k < K; k++)
            DP_INFO("pipeline stage %d: layers %d-%d on %s, %lld parameters", k,
                    dp_pipeline_stage_first(*out, k), dp_pipeline_stage_first(*out, k + 1) - 1,
                    dp_device_name(devs[k]), (long long)s.stage_params[k]);
    }
    return 0;
}
