/* Gradient buckets: ranges of each replica's one gradient buffer, summed
 * across devices (and ranks) while the backward pass is still running.
 *
 * The gradients are views into one buffer in parameter order, and the
 * backward pass writes them roughly in reverse; so a bucket is a contiguous
 * range of the buffer, made of the last parameters first (DDP's
 * gradient_as_bucket_view: no copies). Each bucket's allreduce runs on the
 * devices' communication paths (dp__comm_path), after an event at
 * the last write of its gradients on each device's stream. The front end
 * issues the whole step before the devices run it, so the collective is
 * queued before its gradients exist, and starts the moment they do. The
 * ring cuts the whole buffer into its chunks (dp__allreduce_how), so every
 * element is summed in the same order as by one allreduce after the
 * backward pass: bucketed and unbucketed training give the same bits. */
#include "comm/comm.h"

#include "dp/dist.h"

#include "comm/allreduce.h"
#include "core/internal.h"
#include "device/device.h"

#include <pthread.h>

typedef struct bucket {
    int first, count; /* parameters [first, first + count) */
    int64_t off, len; /* floats [off, off + len) of the gradient buffer */
} bucket;

struct dp__buckets {
    int n, nb;
    bucket *b;
    dp_device_t *devs[DP_MAX_DEVICES], *paths[DP_MAX_DEVICES];
    dp_tensor_t **views; /* [b * n + k]: bucket b of replica k, on path k */
    dp_tensor_t **grads; /* [k * np + i]: replica k's gradient of parameter i */
    int np;
    int64_t total;
    dp_allreduce_algo algo;
    bool bf16;
    /* Written by the workers of device 0 and its path (timestamps), read by
     * the front end: under mu. */
    pthread_mutex_t mu;
    double bucket_start, backward_end; /* each written and read by one worker */
    dp_comm_stats stats;
};

void dp__buckets_close(dp__buckets *bk)
{
    if (!bk)
        return;
    for (int i = 0; bk->views && i < bk->nb * bk->n; i++)
        dp_tensor_free(bk->views[i]);
    dp__free(bk->views);
    dp__free(bk->grads);
    dp__free(bk->b);
    pthread_mutex_destroy(&bk->mu);
    dp__free(bk);
}

/* Walks the parameters from the last: a bucket closes once it holds `cap`
 * bytes (the first one `first_cap`); the rest of the walk is the last
 * bucket. Returns the count; fills b when non-NULL. */
static int plan(dp_params_t *p, int64_t first_cap, int64_t cap, bucket *b)
{
    int np = dp_params_count(p), nb = 0;
    int64_t end = dp_params_numel(p), bytes = 0;
    int last = np; /* the open bucket is parameters [i, last) */
    for (int i = np - 1; i >= 0; i--) {
        int64_t numel = dp_tensor_numel(dp_params_get(p, i));
        bytes += numel * (int64_t)sizeof(float);
        bool full = cap > 0 && bytes >= (nb == 0 ? first_cap : cap);
        if (full || i == 0) {
            int64_t off = end - bytes / (int64_t)sizeof(float);
            if (b)
                b[nb] = (bucket){i, last - i, off, end - off};
            nb++;
            end = off;
            bytes = 0;
            last = i;
        }
    }
    return nb;
}

int dp__buckets_init(dp__buckets **out, dp_params_t *const *params, int n, double cap_mb,
                     dp_allreduce_algo algo, dp_grad_compress compress)
{
    if (!(cap_mb >= 0 && cap_mb <= 1e6)) {
        DP_ERROR("the bucket size must be 0 (one allreduce after the backward pass) or a "
                 "size in MiB up to 1e6, got %g",
                 cap_mb);
        return DP_EINVAL;
    }
    if (dp_params_count(params[0]) == 0) {
        DP_ERROR("DataParallel: the model has no parameters to sum");
        return DP_EINVAL;
    }
    dp__buckets *bk = dp__calloc(1, sizeof *bk);
    if (!bk)
        return DP_ENOMEM;
    pthread_mutex_init(&bk->mu, NULL);
    bk->n = n;
    bk->algo = algo;
    bk->bf16 = compress == DP_GRAD_COMPRESS_BF16;
    bk->total = dp_params_numel(params[0]);
    int64_t cap = (int64_t)(cap_mb * 1048576.0), first_cap = DP_MIN(cap, (int64_t)1 << 20);
    bk->nb = plan(params[0], first_cap, cap, NULL);
    bk->b = dp__calloc((size_t)bk->nb, sizeof *bk->b);
    bk->views = dp__calloc((size_t)(bk->nb * n), sizeof *bk->views);
    bk->np = dp_params_count(params[0]);
    bk->grads = dp__calloc((size_t)(bk->np * n), sizeof *bk->grads);
    if (!bk->b || !bk->views || !bk->grads) {
        dp__buckets_close(bk);
        return DP_ENOMEM;
    }
    plan(params[0], first_cap, cap, bk->b);
    int rc = 0;
    for (int k = 0; k < n; k++) {
        bk->devs[k] = dp_tensor_device(dp_params_grads(params[k]));
        bk->paths[k] = dp__comm_path(bk->devs[k]);
        for (int i = 0; i < bk->np; i++)
            bk->grads[k * bk->np + i] = dp_tensor_grad(dp_params_get(params[k], i));
        for (int j = 0; rc == 0 && j < bk->nb; j++)
            rc = dp__range_view(&bk->views[j * n + k], dp_params_grads(params[k]), bk->b[j].off,
                                bk->b[j].len, bk->paths[k]);
    }
    if (rc < 0) {
        dp__buckets_close(bk);
        return rc;
    }
    *out = bk;
    return 0;
}

/* ---- timestamps, taken on the workers ----------------------------------- */

static void stamp_bucket_start(void *p)
{
    dp__buckets *bk = p;
    bk->bucket_start = dp_time_seconds();
}

static void stamp_bucket_end(void *p)
{
    dp__buckets *bk = p;
    double dt = dp_time_seconds() - bk->bucket_start;
    pthread_mutex_lock(&bk->mu);
    bk->stats.comm_seconds += dt;
    pthread_mutex_unlock(&bk->mu);
}

static void stamp_backward_end(void *p)
{
    dp__buckets *bk = p;
    bk->backward_end = dp_time_seconds();
}

static void stamp_step_ready(void *p)
{
    dp__buckets *bk = p;
    double dt = dp_time_seconds() - bk->backward_end;
    pthread_mutex_lock(&bk->mu);
    bk->stats.exposed_seconds += dt;
    bk->stats.steps++;
    pthread_mutex_unlock(&bk->mu);
}

int dp__buckets_allreduce(dp__buckets *bk)
{
    int n = bk->n;
    for (int j = 0; j < bk->nb; j++) {
        const bucket *b = &bk->b[j];
        /* Each path waits for its device's last write of these gradients
         * (after dp_params_finish_grad, which zero-fills the unwritten). */
        for (int k = 0; k < n; k++)
            DP_TRY(dp_stream_wait_event(
                bk->paths[k], dp__written_event(&bk->grads[k * bk->np + b->first], b->count)));
        dp__enqueue_host_call(bk->paths[0], stamp_bucket_start, bk, "bucket_start");
        dp__allreduce_how how = {b->off, bk->total, bk->bf16};
        DP_TRY(dp__allreduce_sum_how(&bk->views[j * n], n, bk->algo, &how));
        dp__enqueue_host_call(bk->paths[0], stamp_bucket_end, bk, "bucket_end");
    }
    /* The update waits for the last bucket (and its neighbours' reads of
     * this device's buffer, which the algorithms order on the paths). */
    dp__enqueue_host_call(bk->devs[0], stamp_backward_end, bk, "backward_end");
    for (int k = 0; k < n; k++)
        DP_TRY(dp_stream_wait_event(bk->devs[k], dp_event_record(bk->paths[k])));
    dp__enqueue_host_call(bk->devs[0], stamp_step_ready, bk, "step_ready");
    return 0;
}

int dp__buckets_count(const dp__buckets *bk)
{
    return bk->nb;
}

void dp__buckets_get(const dp__buckets *bk, int b, int *first, int *count, int64_t *bytes)
{
    *first = bk->b[b].first;
    *count = bk->b[b].count;
    *bytes = bk->b[b].len * (int64_t)sizeof(float);
}

void dp__buckets_stats(dp__buckets *bk, dp_comm_stats *s)
{
    pthread_mutex_lock(&bk->mu);
    *s = bk->stats;
    pthread_mutex_unlock(&bk->mu);
}
