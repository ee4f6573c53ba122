/* The run's record: the epochs so far (what a checkpoint holds), the
 * checkpoints it writes and reads, the metrics file and the progress bar
 * (rank 0's), and where a stop request ended it.
 *
 * When checkpoints are written and read: the resumed position, a
 * checkpoint after every epoch and one when a stop is requested, and what
 * happens when writing one fails (outputs.c checks the path up front). */
#include "train/trainer.h"

#include "core/internal.h"
#include "dp/train_util.h"

#include <string.h>
#include <unistd.h>

struct dp__train_book {
    dp_checkpoint_state *ck; /* the epochs so far (ck->history) and what a checkpoint holds */
    int saved_epochs;        /* the last checkpoint this run wrote or resumed: */
    int64_t saved_batch;     /* its epochs and batch; saved_epochs < 0: none */
    dp_metrics_t *metrics;
    dp_progress_t *progress;
    char stopped_path[512]; /* set when a stop request ended the run */
    int stopped_epoch;
    int64_t stopped_batch;
    bool early_stopped;  /* early_stop epochs passed without a better test accuracy */
    bool stop_requested; /* by a callback of the options */
};

void dp__book_request_stop(dp__train_book *b)
{
    b->stop_requested = true;
}

bool dp__book_stop_requested(const dp__train_book *b)
{
    return b->stop_requested;
}

int dp__book_open(dp__train_book **out, const dp__trainer *t)
{
    const dp_train_options *o = t->o;
    dp__train_book *b = dp__calloc(1, sizeof *b);
    if (!b)
        return DP_ENOMEM;
    *out = b;
    b->saved_epochs = -1;
    b->ck = dp__calloc(1, sizeof *b->ck);
    if (!b->ck)
        return DP_ENOMEM;
    /* Rank 0 speaks for all ranks. */
    bool bar = o->output.progress == DP_PROGRESS_ALWAYS ||
               (o->output.progress == DP_PROGRESS_AUTO && isatty(STDERR_FILENO));
    return dp_progress_init(&b->progress, bar && t->rank == 0);
}

int dp__book_open_files(dp__train_book *b, const dp__trainer *t)
{
    const dp_train_options *o = t->o;
    if (!o->output.metrics_path || t->rank != 0)
        return 0;
    if (o->checkpoint.resume_path)
        return dp_metrics_open_append(&b->metrics, o->output.metrics_path);
    return dp_metrics_open(&b->metrics, o->output.metrics_path);
}

void dp__book_close(dp__train_book *b)
{
    if (!b)
        return;
    dp_progress_close(b->progress);
    dp_metrics_close(b->metrics);
    dp__free(b->ck);
    dp__free(b);
}

int dp__book_finish(dp__train_book *b)
{
    int rc = dp_metrics_close(b->metrics);
    b->metrics = NULL;
    return rc;
}

int dp__book_epochs_done(const dp__train_book *b)
{
    return b->ck->epochs_done;
}

dp_epoch_stats *dp__book_history(dp__train_book *b)
{
    return b->ck->history;
}

dp_metrics_t *dp__book_metrics(const dp__train_book *b)
{
    return b->metrics;
}

dp_progress_t *dp__book_progress(const dp__train_book *b)
{
    return b->progress;
}

const char *dp__book_stopped(const dp__train_book *b, int *epoch, int64_t *batch)
{
    *epoch = b->stopped_epoch;
    *batch = b->stopped_batch;
    return b->stopped_path;
}

/* The recorded options that a resumed run may change but is told about
 * (the list's DP_OPTION_RESUME_WARN: the batch size, the lr). */
static void warn_changed_options(const dp_train_options *o, const dp_checkpoint_state *ck)
{
    int count;
    const dp_option *opts = dp_train_option_list(&count);
    for (int i = 0; i < count; i++) {
        char was[256], now[256];
        if (!(opts[i].traits & DP_OPTION_RESUME_WARN) || !ck->recorded[i] ||
            dp_option_equal(&opts[i], &ck->options, o))
            continue;
        DP_WARN("%s was trained with `%s` %s; going on with %s", o->checkpoint.resume_path,
                opts[i].name, dp_option_format(&opts[i], &ck->options, was, sizeof was),
                dp_option_format(&opts[i], o, now, sizeof now));
    }
}

/* How many epochs the checkpoint has done, against those asked for. */
static int check_epochs_left(const dp_train_options *o, int epochs_done)
{
    if (epochs_done < o->run.epochs)
        return 0;
    DP_ERROR("%s: already trained %d epochs; ask for more with `epochs`", o->checkpoint.resume_path,
             epochs_done);
    return DP_EINVAL;
}

int dp__book_check_resume(const dp__trainer *t, const dp_model_def *def)
{
    dp_checkpoint_state *st = dp__calloc(1, sizeof *st);
    if (!st)
        return DP_ENOMEM;
    int rc = dp__checkpoint_check_start(t->o->checkpoint.resume_path, def, st);
    if (rc == 0)
        rc = check_epochs_left(t->o, st->epochs_done);
    dp__free(st);
    return rc;
}

int dp__book_resume(dp__trainer *t)
{
    const dp_train_options *o = t->o;
    dp__train_book *b = t->book;
    dp_checkpoint_state *ck = b->ck;
    dp_data_parallel_t *dp = dp__net_replicas(t->net);
    DP_TRY(dp_checkpoint_load(o->checkpoint.resume_path, dp__net_model(t->net),
                              dp_data_parallel_optimizer(dp, 0), ck));
    DP_TRY(dp_data_parallel_sync_from_first(dp));
    DP_TRY(check_epochs_left(o, ck->epochs_done));
    warn_changed_options(o, ck);
    dp__steps_resume(t->steps, ck->seed, ck->step);
    /* The kernels the interrupted run measured, so that this one runs the
     * same (a --deterministic run resumes bit for bit). */
    if (o->numerics.conv_algo == DP_CONV_ALGO_AUTO && ck->conv_algos[0])
        DP_TRY(dp_conv_choices_load(ck->conv_algos));
    if (o->checkpoint.checkpoint_path &&
        strcmp(o->checkpoint.checkpoint_path, o->checkpoint.resume_path) == 0) {
        b->saved_epochs = ck->epochs_done;
        b->saved_batch = ck->batch;
    }
    for (int i = 0; i < ck->nhistory; i++)
        ck->history[i].devices = dp__net_devices_str(t->net);
    return 0;
}

void dp__book_take_resume_point(dp__trainer *t, int epoch, int64_t *first, double *seconds,
                                double *loss, double *correct)
{
    dp_checkpoint_state *ck = t->book->ck;
    *first = 0;
    *seconds = *loss = *correct = 0;
    if (!t->o->checkpoint.resume_path || epoch != ck->epochs_done || ck->batch <= 0)
        return;
    *first = ck->batch;
    *seconds = ck->partial_seconds;
    /* The totals so far are added once, on rank 0. */
    *loss = t->rank == 0 ? ck->partial_loss : 0;
    *correct = t->rank == 0 ? ck->partial_correct : 0;
    ck->batch = 0; /* used once: the next epoch starts at its first batch */
}

/* Writes the checkpoint of `epochs_done` whole epochs and `batch` batches
 * of the next, whose figures so far are loss_sum, correct and seconds
 * (zero at an epoch's end), to `path` (rank 0 only). */
static int save_checkpoint(dp__trainer *t, const char *path, int epochs_done, int64_t batch,
                           double loss_sum, double correct, double seconds)
{
    const dp_train_options *o = t->o;
    dp__train_book *b = t->book;
    dp_checkpoint_state *ck = b->ck;
    snprintf(ck->model, sizeof ck->model, "%s", dp__train_model_name(o));
    ck->epochs_done = epochs_done;
    ck->batch = batch;
    ck->partial_loss = loss_sum;
    ck->partial_correct = correct;
    ck->partial_seconds = seconds;
    ck->nhistory = epochs_done;
    ck->step = dp__steps_done(t->steps);
    ck->seed = dp__steps_seed(t->steps);
    ck->options = *o;
    snprintf(ck->devices, sizeof ck->devices, "%s", dp__net_devices_str(t->net));
    dp__prec_record(t, ck);
    dp__data_record(t, ck);
    dp__steps_schedule_str(t->steps, ck->lr_schedule, sizeof ck->lr_schedule);
    DP_TRY(dp_checkpoint_save(path, dp__net_model(t->net),
                              dp_data_parallel_optimizer(dp__net_replicas(t->net), 0), ck));
    if (o->checkpoint.checkpoint_path && strcmp(path, o->checkpoint.checkpoint_path) == 0) {
        b->saved_epochs = epochs_done;
        b->saved_batch = batch;
    }
    return 0;
}

const char *dp__book_last_checkpoint_str(const dp__trainer *t, char *buf, size_t size)
{
    const dp__train_book *b = t->book;
    const char *path = t->o->checkpoint.checkpoint_path;
    if (!path)
        snprintf(buf, size, "; no `checkpoint_path` was given");
    else if (b->saved_epochs < 0)
        snprintf(buf, size, "; this run has not written %s yet", path);
    else if (b->saved_batch > 0)
        snprintf(buf, size, "; the last checkpoint (%s, epoch %d batch %lld) is intact", path,
                 b->saved_epochs + 1, (long long)b->saved_batch);
    else
        snprintf(buf, size, "; the last checkpoint (%s, epoch %d) is intact", path,
                 b->saved_epochs);
    return buf;
}

int dp__book_save_stopped(dp__trainer *t, int epoch, int64_t next, double seconds)
{
    const dp_train_options *o = t->o;
    dp__train_book *b = t->book;
    DP_TRY(dp__net_sync(t->net));
    float sums[2] = {0, 0};
    DP_TRY(dp__steps_read_sums(t->steps, sums));
    DP_TRY(dp_dist_sum_f32(sums, 2));
    snprintf(b->stopped_path, sizeof b->stopped_path, "%s",
             o->checkpoint.checkpoint_path ? o->checkpoint.checkpoint_path
                                           : DP_INTERRUPT_CHECKPOINT);
    if (t->rank == 0)
        DP_TRY(save_checkpoint(t, b->stopped_path, epoch, next, sums[0], sums[1], seconds));
    b->stopped_epoch = epoch;
    b->stopped_batch = next;
    return DP_EINTR;
}

/* The checkpoint after an epoch. When writing it fails (disk full, EIO)
 * the previous one is still there, whole (dp_safetensors_write writes a
 * temporary file and renames it); --on-checkpoint-error says whether the
 * run stops or trains on and tries again after the next epoch. Every rank
 * learns rank 0's outcome, so all stop or all go on. */
static int checkpoint_epoch(dp__trainer *t, int epochs_done)
{
    const dp_train_options *o = t->o;
    int rc = 0;
    char last[640];
    dp__book_last_checkpoint_str(t, last, sizeof last);
    if (t->rank == 0)
        rc = save_checkpoint(t, o->checkpoint.checkpoint_path, epochs_done, 0, 0, 0, 0);
    if (rc == DP_EIO || rc == DP_ENOMEM) {
        if (o->checkpoint.on_checkpoint_error == DP_ON_ERROR_CONTINUE) {
            DP_WARN("no checkpoint after epoch %d%s; training goes on and tries again after the "
                    "next epoch (`on_checkpoint_error` continue)",
                    epochs_done, last);
            rc = 0;
        } else {
            DP_ERROR("no checkpoint after epoch %d%s; stopped (`on_checkpoint_error` stop; "
                     "'continue' trains on)",
                     epochs_done, last);
        }
    }
    if (t->ranks > 1) {
        bool failed = rc < 0;
        DP_TRY(dp_dist_any(failed, &failed));
        if (failed && rc == 0)
            rc = DP_EIO;
    }
    return rc;
}

/* save_best_path: the checkpoint of a better test accuracy; early_stop:
 * whether enough epochs have passed without one. */
static int keep_best(dp__trainer *t, int epochs_done)
{
    const dp_train_options *o = t->o;
    dp__train_book *b = t->book;
    dp_checkpoint_state *ck = b->ck;
    double acc = ck->history[epochs_done - 1].test_acc;
    if (ck->best_epoch == 0 || acc > ck->best_acc) {
        ck->best_acc = acc;
        ck->best_epoch = epochs_done;
        if (o->checkpoint.save_best_path && t->rank == 0)
            DP_TRY(save_checkpoint(t, o->checkpoint.save_best_path, epochs_done, 0, 0, 0, 0));
    }
    if (o->checkpoint.early_stop > 0 && epochs_done - ck->best_epoch >= o->checkpoint.early_stop &&
        t->rank == 0)
        DP_INFO("early stop after epoch %d: no better test accuracy for %d epochs (the best, "
                "%.4f, after epoch %d)",
                epochs_done, o->checkpoint.early_stop, ck->best_acc, ck->best_epoch);
    b->early_stopped =
        o->checkpoint.early_stop > 0 && epochs_done - ck->best_epoch >= o->checkpoint.early_stop;
    return 0;
}

bool dp__book_early_stopped(const dp__train_book *b, double *best_acc, int *best_epoch)
{
    *best_acc = b->ck->best_acc;
    *best_epoch = b->ck->best_epoch;
    return b->early_stopped;
}

int dp__book_end_epoch(dp__trainer *t, int epochs_done)
{
    const dp_train_options *o = t->o;
    dp__train_book *b = t->book;
    b->ck->nhistory = epochs_done;
    /* Before the checkpoint, which records the best so far. */
    DP_TRY(keep_best(t, epochs_done));
    if (b->metrics)
        DP_TRY(dp_metrics_write_epoch(b->metrics, &b->ck->history[epochs_done - 1]));
    if (o->output.plot_path && t->rank == 0)
        DP_TRY(dp_plot_write(o->output.plot_path, o->run.epochs, b->ck->history, epochs_done));
    if (o->checkpoint.checkpoint_path)
        DP_TRY(checkpoint_epoch(t, epochs_done));
    return 0;
}
