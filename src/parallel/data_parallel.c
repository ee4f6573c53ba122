/* DataParallel: replicas of one model, a batch scattered over them, outputs
 * gathered on device 0, gradients summed by an allreduce over the replicas'
 * gradient buffers, and the same optimizer update on every replica. */
#include "parallel/data_parallel.h"

#include "dp/dist.h"

#include "core/internal.h"

#include <string.h>

/* The ranks the gradients are summed across. */
static int grad_ranks(const dp_data_parallel_t *dp)
{
    return dp->opt.allreduce == DP_ALLREDUCE_MPI ? dp_dist_size() : 1;
}

static int make_buckets(dp_data_parallel_t *dp)
{
    if (dp->n * grad_ranks(dp) == 1)
        return 0;
    dp_params_t *params[DP_MAX_DEVICES];
    for (int k = 0; k < dp->n; k++)
        params[k] = dp_model_params(dp->replicas[k]);
    return dp__buckets_init(&dp->buckets, params, dp->n, dp->opt.bucket_mb, dp->opt.allreduce,
                            dp->opt.grad_compress);
}

static void close_sync(dp_data_parallel_t *dp)
{
    for (int j = 0; dp->bn_sync && j < dp->nbn; j++)
        dp_bn_sync_close(dp->bn_sync[j]);
    dp__free(dp->bn_sync);
    dp->bn_sync = NULL;
}

/* One SyncBatchNorm group per batch norm layer, its channel count read off
 * the layer's running_mean. */
static int make_sync(dp_data_parallel_t *dp)
{
    dp_model_t *m = dp->replicas[0];
    dp_params_t *buffers = dp_model_buffers(m);
    const char *const *names = dp_model_bn_names(m, &dp->nbn);
    if (dp->nbn == 0)
        return 0;
    dp->bn_sync = dp__calloc((size_t)dp->nbn, sizeof *dp->bn_sync);
    if (!dp->bn_sync)
        return DP_ENOMEM;
    for (int j = 0; j < dp->nbn; j++) {
        char name[96];
        snprintf(name, sizeof name, "%s.running_mean", names[j]);
        int idx = dp_params_find(buffers, name);
        DP_ASSERT(idx >= 0);
        DP_TRY(
            dp_bn_sync_init(&dp->bn_sync[j], dp_tensor_dim(dp_params_get(buffers, idx), 0), dp->n));
    }
    /* How many replicas take part is set by each forward. */
    for (int k = 0; k < dp->n; k++)
        dp__model_set_sync_group(dp->replicas[k], dp->bn_sync, k, 0);
    return 0;
}

/* How many replicas run each batch norm layer: the same count for every
 * layer (a layer's sum is then divided by it), or DP_EINVAL. */
static int count_bn_runs(const dp_data_parallel_t *dp, int *runs)
{
    int nbn;
    dp_model_bn_names(dp->replicas[0], &nbn);
    *runs = dp->n;
    for (int j = 0; dp->opt.bn_replicas && j < nbn; j++) {
        int count = 0;
        for (int k = 0; k < dp->n; k++)
            count += dp->opt.bn_replicas[j * dp->n + k];
        if (count == 0 || (j > 0 && count != *runs)) {
            DP_ERROR("DataParallel: batch norm layer %d runs on %d replicas, layer 0 on %d: each "
                     "layer needs the same number of replicas, at least one",
                     j, count, *runs);
            return DP_EINVAL;
        }
        *runs = count;
    }
    return 0;
}

void dp_data_parallel_close(dp_data_parallel_t *dp)
{
    if (!dp)
        return;
    dp__data_parallel_close_steps(dp);
    dp__buckets_close(dp->buckets);
    for (int k = 0; k < dp->n; k++) {
        dp_optimizer_close(dp->optim[k]);
        if (k > 0)
            dp_model_close(dp->replicas[k]);
    }
    if (dp->bn_sync)
        dp__model_set_sync_group(dp->replicas[0], NULL, 0, 0);
    close_sync(dp);
    dp__free(dp);
}

int dp_data_parallel_init(dp_data_parallel_t **out, dp_model_t *model, dp_device_t *const *devs,
                          int n, const dp_data_parallel_options *opt)
{
    if (n < 1 || n > DP_MAX_DEVICES || dp_model_device(model) != devs[0]) {
        DP_ERROR("DataParallel: need 1..%d devices, the model on the first", DP_MAX_DEVICES);
        return DP_EINVAL;
    }
    dp_data_parallel_t *dp = dp__calloc(1, sizeof *dp);
    if (!dp)
        return DP_ENOMEM;
    dp->n = n;
    dp->opt = *opt;
    dp->opt.allreduce = dp__allreduce_for(opt->allreduce, devs, n);
    for (int k = 0; k < n; k++)
        dp->devs[k] = devs[k];
    dp->replicas[0] = model;
    int rc = n > 1 ? dp_replicate(dp->replicas + 1, model, devs + 1, n - 1) : 0;
    for (int k = 0; rc == 0 && k < n; k++)
        rc = dp_optimizer_init(&dp->optim[k], dp_model_params(dp->replicas[k]), &opt->optimizer);
    if (rc == 0)
        rc = count_bn_runs(dp, &dp->bn_runs);
    if (rc == 0 && opt->bn_replicas && opt->sync_bn) {
        DP_ERROR("DataParallel: `sync_bn` needs every replica to run every batch norm "
                 "layer");
        rc = DP_EINVAL;
    }
    /* One device per rank still exchanges with the other ranks. */
    if (rc == 0 && opt->sync_bn && (n > 1 || grad_ranks(dp) > 1))
        rc = make_sync(dp);
    if (rc == 0 && opt->grad_compress != DP_GRAD_COMPRESS_NONE &&
        opt->grad_compress != DP_GRAD_COMPRESS_BF16) {
        DP_ERROR("DataParallel: unknown gradient compression %d", (int)opt->grad_compress);
        rc = DP_EINVAL;
    }
    if (rc == 0)
        rc = make_buckets(dp);
    if (rc < 0) {
        dp__buckets_close(dp->buckets);
        dp__model_set_sync_group(model, NULL, 0, 0);
        close_sync(dp);
        dp->n = 0;
        for (int k = 0; k < n; k++) {
            dp_optimizer_close(dp->optim[k]);
            if (k > 0)
                dp_model_close(dp->replicas[k]);
        }
        dp__free(dp);
        return rc;
    }
    *out = dp;
    return 0;
}

int dp_data_parallel_forward(dp_data_parallel_t *dp, dp_tensor_t *x, bool train, dp_tensor_t **out)
{
    if (dp->n == 1) {
        if (dp->bn_sync)
            dp__model_set_sync_group(dp->replicas[0], dp->bn_sync, 0, 1);
        return dp_model_forward(dp->replicas[0], x, train, out);
    }
    dp_tensor_t *chunks[DP_MAX_DEVICES], *outs[DP_MAX_DEVICES];
    int count;
    DP_TRY(dp_scatter(chunks, &count, x, dp->devs, dp->n));
    /* Dropout's masks follow each sample's place in the whole batch: replica
     * k's first sample is chunk k's first row. */
    const dp_model_t *first = dp->replicas[0];
    int64_t offset = first->sample_offset;
    for (int k = 0; k < count; k++) {
        if (k > 0)
            dp_model_set_step(dp->replicas[k], first->seed, first->step, offset);
        offset += dp_tensor_dim(chunks[k], 0);
    }
    /* Each replica's ops go to its own device's stream: issuing them one
     * replica after another still runs the replicas at the same time. */
    for (int k = 0; k < count; k++) {
        if (dp->bn_sync) /* the replicas that got a chunk exchange statistics */
            dp__model_set_sync_group(dp->replicas[k], dp->bn_sync, k, count);
        DP_TRY(dp_model_forward(dp->replicas[k], chunks[k], train, &outs[k]));
    }
    return dp_gather(out, outs, count, dp->devs[0]);
}

void dp_data_parallel_zero_grad(dp_data_parallel_t *dp)
{
    for (int k = 0; k < dp->n; k++)
        dp_params_zero_grad(dp_model_params(dp->replicas[k]));
}

int dp_data_parallel_step(dp_data_parallel_t *dp, float grad_scale)
{
    /* A replica that got no chunk has no gradient: it adds zeros. */
    for (int k = 0; k < dp->n; k++)
        DP_TRY(dp_params_finish_grad(dp_model_params(dp->replicas[k])));
    if (dp->buckets)
        DP_TRY(dp__buckets_allreduce(dp->buckets));
    for (int k = 0; k < dp->n; k++)
        DP_TRY(dp_optimizer_step(dp->optim[k], grad_scale));
    return dp_data_parallel_sync_buffers(dp);
}

/* The running statistics of batch norm layer j, two buffers of each
 * replica: "NAME.running_mean" and "NAME.running_var". */
static dp_tensor_t *bn_buffer(dp_data_parallel_t *dp, int k, const char *layer, int i)
{
    static const char *const stats[2] = {"running_mean", "running_var"};
    dp_params_t *B = dp_model_buffers(dp->replicas[k]);
    char name[128];
    snprintf(name, sizeof name, "%s.%s", layer, stats[i]);
    int idx = dp_params_find(B, name);
    DP_ASSERT(idx >= 0);
    return dp_params_get(B, idx);
}

/* bn_replicas: zeroes, in each replica, the running statistics of the
 * layers it does not run (it did not update them), so that the sum over
 * all replicas is the sum over those that ran each layer. */
static int zero_unrun_layers(dp_data_parallel_t *dp)
{
    int nbn;
    const char *const *names = dp_model_bn_names(dp->replicas[0], &nbn);
    for (int j = 0; j < nbn; j++)
        for (int k = 0; k < dp->n; k++)
            for (int i = 0; i < 2 && !dp->opt.bn_replicas[j * dp->n + k]; i++)
                DP_TRY(dp_tensor_fill(bn_buffer(dp, k, names[j], i), 0.0f));
    return 0;
}

int dp_data_parallel_sync_buffers(dp_data_parallel_t *dp)
{
    /* Each replica updated its running statistics from its own shard; their
     * mean is what one device would hold (PyTorch's DataParallel keeps only
     * device 0's and drops the rest). Under mpirun: the mean over every
     * rank's replicas. */
    int ranks = grad_ranks(dp);
    if (dp->n * ranks == 1 || !dp_model_buffers(dp->replicas[0]))
        return 0;
    if (dp->opt.bn_replicas)
        DP_TRY(zero_unrun_layers(dp));
    dp_tensor_t *bufs[DP_MAX_DEVICES];
    for (int k = 0; k < dp->n; k++)
        bufs[k] = dp_params_values(dp_model_buffers(dp->replicas[k]));
    DP_TRY(dp_allreduce_sum(bufs, dp->n, dp->opt.allreduce));
    for (int k = 0; k < dp->n; k++)
        DP_TRY(dp_tensor_scale(bufs[k], 1.0f / (float)(dp->bn_runs * ranks)));
    return 0;
}

int dp_data_parallel_sync_from_first(dp_data_parallel_t *dp)
{
    dp_model_t *first = dp->replicas[0];
    for (int k = 1; k < dp->n; k++) {
        dp_tensor_t *dst = dp_params_values(dp_model_params(dp->replicas[k]));
        DP_TRY(dp_broadcast(&dst, 1, dp_params_values(dp_model_params(first))));
        if (dp_model_buffers(first)) {
            dst = dp_params_values(dp_model_buffers(dp->replicas[k]));
            DP_TRY(dp_broadcast(&dst, 1, dp_params_values(dp_model_buffers(first))));
        }
        const char *name;
        for (int i = 0; dp_optimizer_state(dp->optim[0], i, &name); i++) {
            dst = dp_optimizer_state(dp->optim[k], i, &name);
            DP_TRY(dp_broadcast(&dst, 1, dp_optimizer_state(dp->optim[0], i, &name)));
        }
        dp_optimizer_set_steps(dp->optim[k], dp_optimizer_steps(dp->optim[0]));
        dp_model_set_batches_tracked(dp->replicas[k], dp_model_batches_tracked(first));
    }
    return 0;
}

dp_optimizer_t *dp_data_parallel_optimizer(dp_data_parallel_t *dp, int k)
{
    return k >= 0 && k < dp->n ? dp->optim[k] : NULL;
}

void dp_data_parallel_set_lr(dp_data_parallel_t *dp, float lr, float momentum)
{
    for (int k = 0; k < dp->n; k++) {
        dp_optimizer_set_lr(dp->optim[k], lr);
        if (momentum >= 0)
            dp_optimizer_set_momentum(dp->optim[k], momentum);
    }
}

int dp_data_parallel_size(const dp_data_parallel_t *dp)
{
    return dp->n;
}

dp_model_t *dp_data_parallel_replica(dp_data_parallel_t *dp, int k)
{
    return k >= 0 && k < dp->n ? dp->replicas[k] : NULL;
}

void dp_data_parallel_comm_stats(dp_data_parallel_t *dp, dp_comm_stats *s)
{
    memset(s, 0, sizeof *s);
    if (dp->buckets)
        dp__buckets_stats(dp->buckets, s);
}

int dp_data_parallel_bucket_count(const dp_data_parallel_t *dp)
{
    return dp->buckets ? dp__buckets_count(dp->buckets) : 0;
}

void dp_data_parallel_bucket(const dp_data_parallel_t *dp, int b, int *first, int *count,
                             int64_t *bytes)
{
    dp__buckets_get(dp->buckets, b, first, count, bytes);
}

static const dp_named_value compress_names[] = {{"none", DP_GRAD_COMPRESS_NONE},
                                                {"bf16", DP_GRAD_COMPRESS_BF16}};
const dp_name_table dp_grad_compress_names = DP_NAME_TABLE(compress_names);

const char *dp_grad_compress_name(dp_grad_compress c)
{
    const char *name = dp_name_of(&dp_grad_compress_names, c);
    return name ? name : "?";
}
