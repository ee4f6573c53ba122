/* One epoch: the steps issued without waiting, at most
 * max_steps_in_flight of them unfinished, the progress bar and step metrics
 * one step behind, the epoch's figures at its end. */
#include "train/trainer.h"

#include "core/internal.h"

#include <math.h>

int dp__train_epoch(dp__trainer *t, int epoch, dp_epoch_stats *s)
{
    const dp_train_options *o = t->o;
    int depth = o->max_steps_in_flight > 0 ? o->max_steps_in_flight : 1;
    dp_event ring[16][DP_MAX_DEVICES];
    if (depth > 16)
        depth = 16;
    int64_t batches = dp_loader_num_batches(t->train_loader);
    int64_t samples = dp_loader_num_samples(t->train_loader);
    /* A run stopped by a signal goes on at the batch it stopped before,
     * with the epoch's figures so far. */
    int64_t first = 0;
    double before = 0, loss0 = 0, correct0 = 0;
    if (t->o->resume_path && epoch == t->ck->epochs_done && t->ck->batch > 0) {
        first = t->ck->batch;
        before = t->ck->partial_seconds;
        loss0 = t->ck->partial_loss;
        correct0 = t->ck->partial_correct;
        t->ck->batch = 0; /* used once: the next epoch starts at its first batch */
        if (t->rank != 0)
            loss0 = correct0 = 0; /* the totals so far are added once, on rank 0 */
    }
    int64_t logged = first;
    DP_TRY(dp_tensor_fill(t->loss_sum, (float)loss0));
    DP_TRY(dp_tensor_fill(t->correct, (float)correct0));
    DP_TRY(dp_loader_start_epoch(t->train_loader, epoch, first));
    double comm0 = dp_dist_comm_seconds(NULL);
    dp_comm_stats cs0, cs1;
    dp_data_parallel_comm_stats(t->dp, &cs0);
    double start = dp_time_seconds() - before;
    dp_batch b;
    int more, rc = 0;
    int64_t issued = 0, seen = first * o->batch_size, checked = first, skipped = 0;
    while ((more = dp_loader_next(t->train_loader, &b)) > 0) {
        DP_TRY(dp__train_step(t, &b));
        bool stop;
        DP_TRY(dp__train_should_stop(t, &stop));
        if (stop) {
            /* A bad step among those in flight stops the run unsaved. */
            DP_TRY(dp_waitall());
            DP_TRY(dp__train_check_steps(t, epoch, &checked, b.index + 1, &skipped));
            return dp__train_save_stopped(t, epoch, b.index + 1, dp_time_seconds() - start);
        }
        for (int k = 0; k < t->ndev; k++)
            ring[issued % depth][k] = dp_event_record(t->devs[k]);
        issued++;
        seen += b.n;
        if (issued >= depth) {
            /* Bound the steps in flight; step `done` has now finished. */
            int64_t done = issued - depth;
            for (int k = 0; k < t->ndev; k++)
                DP_TRY(dp_event_wait(ring[done % depth][k]));
            done += first; /* the batch number within the epoch */
            DP_TRY(dp__train_check_steps(t, epoch, &checked, done + 1, &skipped));
            double el = dp_time_seconds() - start;
            dp_progress_update(t->progress, epoch + 1, o->epochs, done + 1, batches,
                               t->step_loss[done] / (double)DP_MAX(t->step_rows[done], 1),
                               seen / el);
            /* Across ranks a step's loss is known at the end of the epoch. */
            for (; t->metrics && o->log_steps && t->ranks == 1 && logged <= done; logged++)
                DP_TRY(dp_metrics_write_step(t->metrics, epoch * batches + logged + 1, epoch + 1,
                                             t->step_loss[logged] / (double)o->batch_size));
        }
    }
    if (more < 0)
        return more;
    DP_TRY(dp_waitall());
    double seconds = dp_time_seconds() - start;
    DP_TRY(dp__train_check_steps(t, epoch, &checked, first + issued, &skipped));
    dp_progress_done(t->progress);
    if (t->ranks > 1 && o->log_steps)
        DP_TRY(dp_dist_sum_f32(t->step_loss + logged, (int)(first + issued - logged)));
    for (; t->metrics && o->log_steps && logged < first + issued; logged++) {
        int64_t n = logged == batches - 1 ? samples - (batches - 1) * o->batch_size : o->batch_size;
        DP_TRY(dp_metrics_write_step(t->metrics, epoch * batches + logged + 1, epoch + 1,
                                     t->step_loss[logged] / (double)n));
    }
    float sums[2] = {0, 0};
    DP_TRY(dp_tensor_to_host(t->loss_sum, &sums[0], sizeof(float)));
    DP_TRY(dp_tensor_to_host(t->correct, &sums[1], sizeof(float)));
    DP_TRY(dp_dist_sum_f32(sums, 2));
    float loss_sum = sums[0], correct = sums[1];
    s->epoch = epoch + 1;
    s->train_loss = samples ? loss_sum / (double)samples : 0.0;
    s->train_acc = samples ? correct / (double)samples : 0.0;
    s->epoch_seconds = seconds;
    s->samples_per_second = seconds > 0 ? (double)samples / seconds : 0.0;
    s->devices = t->devices;
    s->precision = dp_precision_name(o->precision);
    /* The kernels go into the first epoch this run trains. */
    s->conv_algos = t->conv_algos_listed ? NULL : t->conv_algos;
    t->conv_algos_listed = true;
    s->batch_size = o->batch_size;
    s->lr = o->lr;
    s->ranks = t->ranks;
    /* Time inside MPI's gradient sums, waiting for the slowest rank included. */
    double comm = dp_dist_comm_seconds(NULL) - comm0;
    s->allreduce_ms = issued ? 1e3 * comm / (double)issued : 0.0;
    s->skipped_steps = skipped;
    /* After dp_waitall above: every step's timestamps are in. */
    dp_data_parallel_comm_stats(t->dp, &cs1);
    int64_t cs_steps = cs1.steps - cs0.steps;
    s->comm_ms = cs_steps ? 1e3 * (cs1.comm_seconds - cs0.comm_seconds) / (double)cs_steps : 0.0;
    s->exposed_comm_ms =
        cs_steps ? 1e3 * (cs1.exposed_seconds - cs0.exposed_seconds) / (double)cs_steps : 0.0;
    if (t->pipe) {
        dp_pipeline_stats ps;
        dp_pipeline_take_stats(t->pipe, &ps);
        s->pipeline_stages = t->o->pipeline;
        s->bubble_fraction = ps.bubble_fraction;
    }
    rc = dp__train_evaluate(t, &s->test_acc);
    s->peak_rss_mb = dp_peak_rss_mb();
    s->rss_mb = dp_rss_mb();
    return rc;
}
