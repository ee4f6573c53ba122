/* A DataParallel step as DistributedDataParallel runs it: replica k takes
 * its own torch.chunk of the host batch's rows onto its own device and
 * computes its forward, its loss and its backward there. Nothing is
 * scattered from or gathered on device 0 but two floats per replica (its
 * loss and its right answers), copied once the replica has run its step.
 *
 * The forwards of every replica are issued before any backward, as
 * dp_data_parallel_forward's callers do: SyncBatchNorm's layers exchange
 * statistics between the replicas in the forward and again in the
 * backward, and each waits on its device for the others' share. */
#include "parallel/data_parallel.h"

#include "core/internal.h"

static int make_step_state(dp_data_parallel_t *dp)
{
    if (dp->sums)
        return 0;
    int64_t one = 1;
    for (int k = 0; k < dp->n; k++) {
        DP_TRY(dp_tape_init(&dp->train_tapes[k], true));
        DP_TRY(dp_tape_init(&dp->eval_tapes[k], false));
        DP_TRY(dp_tensor_new(&dp->loss_acc[k], dp->devs[k], DP_F32, 1, &one));
        DP_TRY(dp_tensor_new(&dp->correct_acc[k], dp->devs[k], DP_F32, 1, &one));
    }
    return dp_tape_init(&dp->sums, false);
}

void dp__data_parallel_close_steps(dp_data_parallel_t *dp)
{
    for (int k = 0; k < dp->n; k++) {
        dp_tape_close(dp->train_tapes[k]);
        dp_tape_close(dp->eval_tapes[k]);
        dp_tensor_free(dp->loss_acc[k]);
        dp_tensor_free(dp->correct_acc[k]);
        dp_tensor_free(dp->counts_acc[k]);
    }
    dp_tape_close(dp->sums);
}

/* Replica k's chunk of the batch on its device, and its output. */
typedef struct chunk {
    dp_tensor_t *x, *labels, *logits;
} chunk;

static int upload(dp_data_parallel_t *dp, int k, const dp_host_batch *b, int64_t row0, int64_t rows,
                  chunk *c)
{
    int64_t pixels = b->chw[0] * b->chw[1] * b->chw[2];
    int64_t xs[4] = {rows, b->chw[0], b->chw[1], b->chw[2]};
    DP_TRY(dp_tensor_from_host(&c->x, dp->devs[k], DP_F32, 4, xs, b->x + row0 * pixels));
    return dp_tensor_from_host(&c->labels, dp->devs[k], DP_I32, 1, &rows, b->labels + row0);
}

/* Replica k's forward of its chunk on `tape`, with dropout's key and, for
 * SyncBatchNorm, the `count` replicas that got rows. */
static int forward(dp_data_parallel_t *dp, int k, const dp_host_batch *b, int64_t row0, int count,
                   bool train, chunk *c)
{
    dp_model_t *m = dp->replicas[k];
    dp_model_set_step(m, b->seed, b->step, b->sample_offset + row0);
    if (dp->bn_sync)
        dp__model_set_sync_group(m, dp->bn_sync, k, count);
    return dp_model_forward(m, c->x, train, &c->logits);
}

/* dst (on devs[0]) += each replica's acc[k], k < count. */
static int sum_on_first(dp_data_parallel_t *dp, dp_tensor_t *const *acc, int count,
                        dp_tensor_t *dst)
{
    dp_tape_begin(dp->sums);
    int rc = 0;
    for (int k = 0; rc == 0 && k < count; k++) {
        dp_tensor_t *copy;
        rc = dp_gather(&copy, &acc[k], 1, dp_tensor_device(dst));
        if (rc == 0)
            rc = dp_accumulate(dst, copy);
    }
    dp_tape_end(dp->sums);
    dp_tape_reset(dp->sums); /* released once device 0 has run the sums */
    return rc;
}

static void free_chunks(chunk *c, int count)
{
    /* The memory goes back once the commands that read it have run. */
    for (int k = 0; k < count; k++) {
        dp_tensor_free(c[k].x);
        dp_tensor_free(c[k].labels);
    }
}

static int check_batch(const dp_data_parallel_t *dp, const dp_host_batch *b, dp_tensor_t *loss,
                       dp_tensor_t *correct)
{
    if (b->n < 0 || (b->n > 0 && (!b->x || !b->labels)) || b->chw[0] <= 0 || b->chw[1] <= 0 ||
        b->chw[2] <= 0 || (loss && dp_tensor_device(loss) != dp->devs[0]) ||
        dp_tensor_device(correct) != dp->devs[0]) {
        DP_ERROR("DataParallel: a batch needs n >= 0 samples of a positive shape, and the loss "
                 "and the right answers on the first device");
        return DP_EINVAL;
    }
    return 0;
}

int dp_data_parallel_forward_backward(dp_data_parallel_t *dp, const dp_host_batch *b,
                                      dp_tensor_t *loss, dp_tensor_t *correct)
{
    DP_TRY(check_batch(dp, b, loss, correct));
    DP_TRY(make_step_state(dp));
    int64_t sizes[DP_MAX_DEVICES], row0[DP_MAX_DEVICES];
    /* No rows (a rank's share of a tiny last batch): zero gradients. */
    int count = b->n > 0 ? dp_chunk_sizes(b->n, dp->n, sizes) : 0;
    chunk c[DP_MAX_DEVICES] = {{0}};
    dp_tensor_t *losses[DP_MAX_DEVICES];
    dp_data_parallel_zero_grad(dp);
    int rc = dp_tensor_fill(loss, 0.0f);
    int64_t r = 0;
    for (int k = 0; rc == 0 && k < count; r += sizes[k], k++) {
        row0[k] = r;
        dp_tape_begin(dp->train_tapes[k]);
        rc = upload(dp, k, b, row0[k], sizes[k], &c[k]);
        if (rc == 0)
            rc = forward(dp, k, b, row0[k], count, true, &c[k]);
        if (rc == 0)
            rc = dp_cross_entropy_smoothed(&losses[k], c[k].logits, c[k].labels, DP_REDUCE_SUM,
                                           dp->opt.label_smoothing);
        if (rc == 0)
            rc = dp_tensor_fill(dp->correct_acc[k], 0.0f);
        if (rc == 0)
            rc = dp_accuracy_accumulate(dp->correct_acc[k], c[k].logits, c[k].labels);
        if (rc == 0)
            rc = dp_tensor_fill(dp->loss_acc[k], 0.0f);
        if (rc == 0)
            rc = dp_accumulate(dp->loss_acc[k], losses[k]);
        dp_tape_end(dp->train_tapes[k]);
    }
    for (int k = 0; rc == 0 && k < count; k++) {
        dp_tape_begin(dp->train_tapes[k]);
        rc = dp_backward(losses[k]);
        dp_tape_end(dp->train_tapes[k]);
    }
    if (rc == 0)
        rc = sum_on_first(dp, dp->loss_acc, count, loss);
    if (rc == 0)
        rc = sum_on_first(dp, dp->correct_acc, count, correct);
    for (int k = 0; k < count; k++)
        dp_tape_reset(dp->train_tapes[k]);
    free_chunks(c, count);
    return rc;
}

/* Replica k's evaluation counters, of the size of `counts`. */
static int counts_for(dp_data_parallel_t *dp, int k, const dp_tensor_t *counts)
{
    int64_t n = dp_tensor_numel(counts);
    if (dp->counts_acc[k] && dp_tensor_numel(dp->counts_acc[k]) == n)
        return 0;
    dp_tensor_free(dp->counts_acc[k]);
    dp->counts_acc[k] = NULL;
    return dp_tensor_new(&dp->counts_acc[k], dp->devs[k], DP_F32, 1, &n);
}

int dp_data_parallel_evaluate(dp_data_parallel_t *dp, const dp_host_batch *b, dp_tensor_t *counts,
                              dp_tensor_t *loss)
{
    DP_TRY(check_batch(dp, b, loss, counts));
    DP_TRY(make_step_state(dp));
    int64_t sizes[DP_MAX_DEVICES];
    int count = b->n > 0 ? dp_chunk_sizes(b->n, dp->n, sizes) : 0;
    chunk c[DP_MAX_DEVICES] = {{0}};
    int rc = 0;
    int64_t r = 0;
    for (int k = 0; rc == 0 && k < count; r += sizes[k], k++) {
        dp_tape_begin(dp->eval_tapes[k]);
        rc = upload(dp, k, b, r, sizes[k], &c[k]);
        if (rc == 0)
            rc = forward(dp, k, b, r, count, false, &c[k]);
        if (rc == 0)
            rc = counts_for(dp, k, counts);
        if (rc == 0)
            rc = dp_tensor_fill(dp->counts_acc[k], 0.0f);
        if (rc == 0)
            rc = dp_eval_counts_accumulate(dp->counts_acc[k], c[k].logits, c[k].labels);
        dp_tensor_t *lk;
        if (rc == 0 && loss)
            rc = dp_cross_entropy(&lk, c[k].logits, c[k].labels, DP_REDUCE_SUM);
        if (rc == 0 && loss)
            rc = dp_tensor_fill(dp->loss_acc[k], 0.0f);
        if (rc == 0 && loss)
            rc = dp_accumulate(dp->loss_acc[k], lk);
        dp_tape_end(dp->eval_tapes[k]);
    }
    if (rc == 0)
        rc = sum_on_first(dp, dp->counts_acc, count, counts);
    if (rc == 0 && loss)
        rc = sum_on_first(dp, dp->loss_acc, count, loss);
    for (int k = 0; k < count; k++)
        dp_tape_reset(dp->eval_tapes[k]);
    free_chunks(c, count);
    return rc;
}

dp_tensor_t *dp_data_parallel_replica_loss(dp_data_parallel_t *dp, int k)
{
    return k >= 0 && k < dp->n ? dp->loss_acc[k] : NULL;
}
