/* One epoch: the steps issued without waiting, at most
 * max_steps_in_flight of them unfinished, the progress bar and step metrics
 * one step behind, the epoch's figures at its end. */
#include "train/trainer.h"

#include "core/internal.h"
#include "dp/train_util.h"

#include <math.h>

/* Whether the steps' losses are wanted as they become known: the metrics
 * file's step lines, TensorBoard, the on_step callback. The same on every
 * rank (across ranks the losses are summed first, by all of them). */
static bool steps_wanted(const dp_train_options *o)
{
    return (o->output.metrics_path && o->output.log_steps) || o->output.tensorboard_dir ||
           o->on_step;
}

/* The steps [*logged, upto), whose losses are known (rank 0; across ranks
 * a step's loss is known at the end of the epoch only): their metrics,
 * TensorBoard events and on_step callback, which may ask the run to stop.
 * The loss is the mean over the batch's rows, fewer in the epoch's last
 * batch. */
static int log_steps(dp__trainer *t, int epoch, int64_t *logged, int64_t upto)
{
    const dp_train_options *o = t->o;
    dp_metrics_t *m = o->output.log_steps ? dp__book_metrics(t->book) : NULL;
    bool board = dp__board_on(t->board);
    dp_loader_t *loader = dp__data_loader(t->data, true);
    int64_t batches = dp_loader_num_batches(loader), samples = dp_loader_num_samples(loader);
    for (; (m || board || o->on_step) && *logged < upto; (*logged)++) {
        int64_t i = *logged;
        int64_t n =
            i == batches - 1 ? samples - (batches - 1) * o->data.batch_size : o->data.batch_size;
        dp_step_view v = {.step = epoch * batches + i + 1,
                          .epoch = epoch + 1,
                          .batch = i,
                          .loss = dp__steps_loss(t->steps, i) / (double)n,
                          .lr = dp__steps_lr(t->steps, i)};
        bool kept = v.step % o->output.log_every == 0;
        if (m && kept)
            DP_TRY(dp_metrics_write_step(m, v.step, v.epoch, v.loss, v.lr));
        if (kept)
            DP_TRY(dp__board_step(t->board, v.step, v.loss, v.lr));
        if (o->on_step && t->rank == 0 && o->on_step(&v, o->callback_user))
            dp__book_request_stop(t->book);
    }
    return 0;
}

/* The epoch's figures other than its test accuracy. */
static void fill_stats(dp__trainer *t, dp_epoch_stats *s, int epoch, int64_t issued, double seconds,
                       const float sums[2], double comm0, const dp_comm_stats *cs0)
{
    const dp_train_options *o = t->o;
    int64_t samples = dp_loader_num_samples(dp__data_loader(t->data, true));
    s->epoch = epoch + 1;
    s->train_loss = samples ? sums[0] / (double)samples : 0.0;
    s->train_acc = samples ? sums[1] / (double)samples : 0.0;
    s->epoch_seconds = seconds;
    s->samples_per_second = seconds > 0 ? (double)samples / seconds : 0.0;
    s->devices = dp__net_devices_str(t->net);
    s->precision = dp_precision_name(o->numerics.precision);
    /* The kernels go into the first epoch this run trains. */
    s->conv_algos = dp__prec_take_choices(t->prec);
    s->batch_size = o->data.batch_size;
    /* The learning rate of the epoch's last update. */
    s->lr = issued
                ? dp__steps_lr(t->steps, dp_loader_num_batches(dp__data_loader(t->data, true)) - 1)
                : o->optim.lr;
    s->ranks = t->ranks;
    /* Time inside MPI's gradient sums, waiting for the slowest rank included. */
    double comm = dp_dist_comm_seconds(NULL) - comm0;
    s->allreduce_ms = issued ? 1e3 * comm / (double)issued : 0.0;
    /* After dp__net_sync: every step's timestamps are in. */
    dp_comm_stats cs1;
    dp_data_parallel_comm_stats(dp__net_replicas(t->net), &cs1);
    int64_t cs_steps = cs1.steps - cs0->steps;
    s->comm_ms = cs_steps ? 1e3 * (cs1.comm_seconds - cs0->comm_seconds) / (double)cs_steps : 0.0;
    s->exposed_comm_ms =
        cs_steps ? 1e3 * (cs1.exposed_seconds - cs0->exposed_seconds) / (double)cs_steps : 0.0;
    dp_pipeline_t *pipe = dp__net_pipeline(t->net);
    if (pipe) {
        dp_pipeline_stats ps;
        dp_pipeline_take_stats(pipe, &ps);
        s->pipeline_stages = o->parallel.pipeline;
        s->bubble_fraction = ps.bubble_fraction;
    }
}

int dp__train_epoch(dp__trainer *t, int epoch, dp_epoch_stats *s)
{
    const dp_train_options *o = t->o;
    int ndev = dp__net_count(t->net);
    int depth = o->run.max_steps_in_flight > 0 ? o->run.max_steps_in_flight : 1;
    dp_event ring[16][DP_MAX_DEVICES];
    if (depth > 16)
        depth = 16;
    dp_loader_t *loader = dp__data_loader(t->data, true);
    int64_t batches = dp_loader_num_batches(loader);
    /* A run stopped by a signal goes on at the batch it stopped before,
     * with the epoch's figures so far. */
    int64_t first;
    double before, loss0, correct0;
    dp__book_take_resume_point(t, epoch, &first, &before, &loss0, &correct0);
    int64_t logged = first;
    DP_TRY(dp__steps_start_epoch(t->steps, batches, loss0, correct0));
    DP_TRY(dp_loader_start_epoch(loader, epoch, first));
    double comm0 = dp_dist_comm_seconds(NULL);
    dp_comm_stats cs0;
    dp_data_parallel_comm_stats(dp__net_replicas(t->net), &cs0);
    double start = dp_time_seconds() - before;
    dp_batch b;
    int more;
    int64_t issued = 0, seen = first * o->data.batch_size, checked = first, skipped = 0;
    int64_t bad_images = 0;
    while ((more = dp_loader_next(loader, &b)) > 0) {
        DP_TRY(dp__steps_issue(t, &b));
        bool stop;
        DP_TRY(dp__train_should_stop(t, &stop));
        if (stop) {
            /* A bad step among those in flight stops the run unsaved. */
            DP_TRY(dp__net_sync(t->net));
            DP_TRY(dp__steps_check(t, epoch, &checked, b.index + 1, &skipped));
            /* The steps up to the stop are logged: the resumed run goes
             * on after them. */
            if (t->ranks > 1 && steps_wanted(o))
                DP_TRY(dp__steps_sum_losses(t->steps, logged, b.index + 1));
            DP_TRY(log_steps(t, epoch, &logged, b.index + 1));
            return dp__book_save_stopped(t, epoch, b.index + 1, dp_time_seconds() - start);
        }
        for (int k = 0; k < ndev; k++)
            ring[issued % depth][k] = dp_event_record(dp__net_device(t->net, k));
        issued++;
        seen += b.n;
        bad_images += b.skipped;
        if (issued >= depth) {
            /* Bound the steps in flight; step `done` has now finished. */
            int64_t done = issued - depth;
            for (int k = 0; k < ndev; k++)
                DP_TRY(dp_event_wait(ring[done % depth][k]));
            done += first; /* the batch number within the epoch */
            DP_TRY(dp__steps_check(t, epoch, &checked, done + 1, &skipped));
            double el = dp_time_seconds() - start;
            dp_progress_update(
                dp__book_progress(t->book), epoch + 1, o->run.epochs, done + 1, batches,
                dp__steps_loss(t->steps, done) / (double)DP_MAX(dp__steps_rows(t->steps, done), 1),
                seen / el);
            if (t->ranks == 1)
                DP_TRY(log_steps(t, epoch, &logged, done + 1));
        }
    }
    if (more < 0)
        return more;
    DP_TRY(dp__net_sync(t->net));
    double seconds = dp_time_seconds() - start;
    DP_TRY(dp__steps_check(t, epoch, &checked, first + issued, &skipped));
    dp_progress_done(dp__book_progress(t->book));
    if (t->ranks > 1 && steps_wanted(o))
        DP_TRY(dp__steps_sum_losses(t->steps, logged, first + issued));
    DP_TRY(log_steps(t, epoch, &logged, first + issued));
    float sums[2] = {0, 0};
    DP_TRY(dp__steps_read_sums(t->steps, sums));
    DP_TRY(dp_dist_sum_f32(sums, 2));
    fill_stats(t, s, epoch, issued, seconds, sums, comm0, &cs0);
    s->skipped_steps = skipped;
    s->skipped_images = bad_images;
    dp_eval_result er = {0};
    int rc = dp__train_evaluate(t, &er);
    s->test_acc = er.test_acc;
    s->test_loss = er.test_loss;
    s->test_top5 = er.test_top5;
    dp_eval_result_free(&er);
    s->peak_rss_mb = dp_peak_rss_mb();
    s->rss_mb = dp_rss_mb();
    return rc;
}
