/* The pipeline executor's setup (dp/pipeline.h): the split, the replicas
 * and their update, and the state of the steps (pipeline_step.c). */
#include "parallel/pipeline.h"

#include "core/internal.h"

#include <stdlib.h>
#include <string.h>

void dp_pipeline_close(dp_pipeline_t *p)
{
    if (!p)
        return;
    size_t ntapes = (size_t)p->D * (size_t)p->K * (size_t)p->M;
    for (size_t i = 0; p->tapes && i < ntapes; i++) {
        if (p->tapes[i]) {
            dp_tape_reset(p->tapes[i]);
            dp_tape_close(p->tapes[i]);
        }
    }
    for (int d = 0; d < p->D; d++) {
        dp_tensor_free(p->loss_acc[d]);
        dp_tensor_free(p->correct_acc[d]);
    }
    dp_data_parallel_close(p->dp);
    dp__free(p->tapes);
    dp__free(p->in);
    dp__free(p->out);
    dp__free(p->loss);
    dp__free(p->xs);
    dp__free(p->labels);
    dp__free(p->times[0]);
    dp__free(p->times[1]);
    dp__free(p->last_start);
    dp__free(p->last_end);
    dp__free(p->order);
    dp__free(p->issue);
    dp__free(p->sim_start);
    dp__pipeline_tree_close(p);
    dp__free(p->bn_stage);
    dp__free(p->bn_replicas);
    dp__free(p);
}

/* The split: the given one, checked, or the FLOP-balanced one; the stage of
 * each batch norm layer (the j-th batch_norm row is layer j) and the
 * parameters each stage trains. */
static int plan(dp_pipeline_t *p, const dp_model_def *def, const int64_t *in_chw, const int *first)
{
    dp_layer_summary *rows;
    int n;
    DP_TRY(dp_model_summary(def, in_chw, &rows, &n));
    int rc = 0;
    double *cost = dp__calloc((size_t)n, sizeof *cost);
    bool *can_start = dp__calloc((size_t)n, sizeof *can_start);
    p->bn_stage = dp__calloc((size_t)(def->nbn ? def->nbn : 1), sizeof *p->bn_stage);
    if (!cost || !can_start || !p->bn_stage)
        rc = DP_ENOMEM;
    for (int i = 0; rc == 0 && i < n; i++) {
        cost[i] = (double)rows[i].flops;
        can_start[i] = rows[i].can_start;
    }
    if (rc == 0 && first) {
        bool ok = first[0] == 0 && first[p->K] == n;
        for (int k = 0; ok && k < p->K; k++)
            ok = first[k] < first[k + 1] && can_start[first[k]];
        if (!ok) {
            DP_ERROR("pipeline: the stages must split layers 0-%d into %d ranges, each starting "
                     "where a stage may start",
                     n - 1, p->K);
            rc = DP_EINVAL;
        } else {
            memcpy(p->first, first, (size_t)(p->K + 1) * sizeof *first);
        }
    } else if (rc == 0) {
        rc = dp_pipeline_balance(cost, can_start, n, p->K, p->first);
    }
    int nbn = 0;
    for (int k = 0; rc == 0 && k < p->K; k++) {
        for (int i = p->first[k]; i < p->first[k + 1]; i++) {
            p->stage_params[k] += rows[i].params;
            if (strncmp(rows[i].op, "batch_norm", 10) == 0 && nbn < def->nbn)
                p->bn_stage[nbn++] = k;
        }
    }
    if (rc == 0 && nbn != def->nbn) {
        DP_ERROR("pipeline: %s has %d batch norm layers, its forward ran %d", def->name, def->nbn,
                 nbn);
        rc = DP_EINVAL;
    }
    free(rows);
    dp__free(cost);
    dp__free(can_start);
    return rc;
}

static int alloc_state(dp_pipeline_t *p)
{
    size_t ntapes = (size_t)p->D * (size_t)p->K * (size_t)p->M;
    size_t ntasks = (size_t)p->K * 2 * (size_t)p->M;
    p->tapes = dp__calloc(ntapes, sizeof *p->tapes);
    p->in = dp__calloc(ntapes, sizeof *p->in);
    p->out = dp__calloc(ntapes, sizeof *p->out);
    p->loss = dp__calloc((size_t)p->D * (size_t)p->M, sizeof *p->loss);
    p->xs = dp__calloc((size_t)p->D * (size_t)p->M, sizeof *p->xs);
    p->labels = dp__calloc((size_t)p->D * (size_t)p->M, sizeof *p->labels);
    for (int i = 0; i < 2; i++)
        p->times[i] = dp__calloc((size_t)p->D * ntasks * 2, sizeof(double));
    p->last_start = dp__calloc(ntasks, sizeof(double));
    p->last_end = dp__calloc(ntasks, sizeof(double));
    p->order = dp__calloc(ntasks, sizeof *p->order);
    p->issue = dp__calloc(ntasks * 2, sizeof *p->issue);
    p->sim_start = dp__calloc(ntasks, sizeof(double));
    p->tree = dp__calloc((size_t)p->D * (size_t)p->K, sizeof *p->tree);
    if (!p->tapes || !p->in || !p->out || !p->loss || !p->xs || !p->labels || !p->times[0] ||
        !p->times[1] || !p->last_start || !p->last_end || !p->order || !p->issue || !p->sim_start ||
        !p->tree)
        return DP_ENOMEM;
    for (size_t i = 0; i < ntapes; i++)
        DP_TRY(dp_tape_init(&p->tapes[i], true));
    int64_t one = 1;
    for (int d = 0; d < p->D; d++) {
        dp_device_t *last = stage_device(p, d, p->K - 1);
        DP_TRY(dp_tensor_new(&p->loss_acc[d], last, DP_F32, 1, &one));
        DP_TRY(dp_tensor_new(&p->correct_acc[d], last, DP_F32, 1, &one));
    }
    return 0;
}

int dp_pipeline_init(dp_pipeline_t **out, dp_model_t *model, dp_device_t *const *devs, int n,
                     const int64_t *in_chw, const dp_pipeline_options *opt)
{
    const dp_model_def *def = dp_model_definition(model);
    int K = opt->stages, M = opt->micro_batches;
    if (K < 1 || K > DP_PIPELINE_MAX_STAGES || n < K || n % K != 0 || n > DP_MAX_DEVICES) {
        DP_ERROR("pipeline: %d stages need a multiple of %d devices, at most %d (got %d)", K, K,
                 DP_MAX_DEVICES, n);
        return DP_EINVAL;
    }
    if (M < 1 || M > DP_PIPELINE_MAX_MICRO_BATCHES) {
        DP_ERROR("pipeline: %d micro-batches: give 1 to %d", M, DP_PIPELINE_MAX_MICRO_BATCHES);
        return DP_EINVAL;
    }
    if (opt->update.sync_bn) {
        DP_ERROR("pipeline: `sync_bn` shares statistics between data-parallel replicas of "
                 "one layer; a pipeline's stages hold different layers");
        return DP_EINVAL;
    }
    if (!def->forward_layers) {
        DP_ERROR("pipeline: model %s cannot be split into stages: its definition has no "
                 "forward_layers",
                 def->name);
        return DP_ENOTSUP;
    }
    dp_pipeline_t *p = dp__calloc(1, sizeof *p);
    if (!p)
        return DP_ENOMEM;
    p->K = K;
    p->D = n / K;
    p->M = M;
    p->schedule = opt->schedule;
    p->label_smoothing = opt->update.label_smoothing;
    memcpy(p->in_chw, in_chw, sizeof p->in_chw);
    for (int i = 0; i < n; i++)
        p->devs[i] = devs[i];
    int rc = plan(p, def, in_chw, opt->first);
    if (rc == 0) {
        /* Replica d K + k runs stage k's batch norm layers. */
        dp_data_parallel_options o = opt->update;
        if (def->nbn > 0) {
            p->bn_replicas = dp__calloc((size_t)def->nbn * (size_t)n, sizeof *p->bn_replicas);
            if (!p->bn_replicas)
                rc = DP_ENOMEM;
            for (int j = 0; rc == 0 && j < def->nbn; j++)
                for (int r = 0; r < n; r++)
                    p->bn_replicas[j * n + r] = p->bn_stage[j] == r % K;
            o.bn_replicas = p->bn_replicas;
        }
        if (rc == 0)
            rc = dp_data_parallel_init(&p->dp, model, devs, n, &o);
    }
    if (rc == 0)
        rc = alloc_state(p);
    if (rc < 0) {
        dp_pipeline_close(p);
        return rc;
    }
    *out = p;
    return 0;
}

dp_data_parallel_t *dp_pipeline_data_parallel(dp_pipeline_t *p)
{
    return p->dp;
}

int dp_pipeline_stage_first(const dp_pipeline_t *p, int stage)
{
    return stage >= 0 && stage <= p->K ? p->first[stage] : -1;
}
