/* When a run writes and reads checkpoints: the resumed position, a
 * checkpoint after every epoch and one when a stop is requested, and what
 * happens when writing one fails (outputs.c checks the path up front). */
#include "train/trainer.h"

#include "core/internal.h"

#include <string.h>

/* --resume: the weights, momentum and position of an interrupted run. */
int dp__train_resume(dp__trainer *t)
{
    const dp_train_options *o = t->o;
    DP_TRY(dp_checkpoint_load(o->resume_path, t->model, dp_data_parallel_sgd(t->dp, 0), t->ck));
    DP_TRY(dp_data_parallel_sync_from_first(t->dp));
    if (t->ck->epochs_done >= o->epochs) {
        DP_ERROR("%s: already trained %d epochs; ask for more with the epoch count", o->resume_path,
                 t->ck->epochs_done);
        return DP_EINVAL;
    }
    if (t->ck->batch_size != o->batch_size || (float)t->ck->lr != o->lr)
        DP_WARN("%s was trained with batch size %lld and lr %g; going on with %lld and %g",
                o->resume_path, (long long)t->ck->batch_size, t->ck->lr, (long long)o->batch_size,
                (double)o->lr);
    t->seed = t->ck->seed;
    t->step = t->ck->step;
    /* The kernels the interrupted run measured, so that this one runs the
     * same (a --deterministic run resumes bit for bit). */
    if (o->conv_algo == DP_CONV_ALGO_AUTO && t->ck->conv_algos[0])
        DP_TRY(dp_conv_choices_load(t->ck->conv_algos));
    if (o->checkpoint_path && strcmp(o->checkpoint_path, o->resume_path) == 0) {
        t->saved_epochs = t->ck->epochs_done;
        t->saved_batch = t->ck->batch;
    }
    for (int i = 0; i < t->ck->nhistory; i++)
        t->ck->history[i].devices = t->devices;
    return 0;
}

/* Writes the checkpoint of `epochs_done` whole epochs and `batch` batches
 * of the next, whose figures so far are loss_sum, correct and seconds
 * (zero at an epoch's end), to `path` (rank 0 only). */
int dp__train_save_checkpoint(dp__trainer *t, const char *path, int epochs_done, int64_t batch,
                              double loss_sum, double correct, double seconds)
{
    const dp_train_options *o = t->o;
    dp_checkpoint_state *ck = t->ck;
    snprintf(ck->model, sizeof ck->model, "%s", dp__train_model_name(o));
    ck->epochs_done = epochs_done;
    ck->batch = batch;
    ck->partial_loss = loss_sum;
    ck->partial_correct = correct;
    ck->partial_seconds = seconds;
    ck->nhistory = epochs_done;
    ck->step = t->step;
    ck->seed = t->seed;
    ck->batch_size = o->batch_size;
    ck->lr = o->lr;
    ck->momentum = o->momentum;
    ck->weight_decay = o->weight_decay;
    snprintf(ck->devices, sizeof ck->devices, "%s", t->devices);
    dp__train_record_precision(t, ck);
    DP_TRY(dp_checkpoint_save(path, t->model, dp_data_parallel_sgd(t->dp, 0), ck));
    if (o->checkpoint_path && strcmp(path, o->checkpoint_path) == 0) {
        t->saved_epochs = epochs_done;
        t->saved_batch = batch;
    }
    return 0;
}

/* "; the last checkpoint (FILE, epoch 4) is intact" for messages about a
 * run that stops or goes on without writing one. */
const char *dp__train_last_checkpoint_str(const dp__trainer *t, char *buf, size_t size)
{
    const char *path = t->o->checkpoint_path;
    if (!path)
        snprintf(buf, size, "; no checkpoint path was given");
    else if (t->saved_epochs < 0)
        snprintf(buf, size, "; this run has not written %s yet", path);
    else if (t->saved_batch > 0)
        snprintf(buf, size, "; the last checkpoint (%s, epoch %d batch %lld) is intact", path,
                 t->saved_epochs + 1, (long long)t->saved_batch);
    else
        snprintf(buf, size, "; the last checkpoint (%s, epoch %d) is intact", path,
                 t->saved_epochs);
    return buf;
}

/* Finishes the steps in flight and writes a checkpoint that resumes epoch
 * `epoch` at batch `next`, with the epoch's figures so far. */
int dp__train_save_stopped(dp__trainer *t, int epoch, int64_t next, double seconds)
{
    const dp_train_options *o = t->o;
    DP_TRY(dp_waitall());
    float sums[2] = {0, 0};
    DP_TRY(dp_tensor_to_host(t->loss_sum, &sums[0], sizeof(float)));
    DP_TRY(dp_tensor_to_host(t->correct, &sums[1], sizeof(float)));
    DP_TRY(dp_dist_sum_f32(sums, 2));
    snprintf(t->stopped_path, sizeof t->stopped_path, "%s",
             o->checkpoint_path ? o->checkpoint_path : DP_INTERRUPT_CHECKPOINT);
    if (t->rank == 0)
        DP_TRY(
            dp__train_save_checkpoint(t, t->stopped_path, epoch, next, sums[0], sums[1], seconds));
    t->stopped_epoch = epoch;
    t->stopped_batch = next;
    return DP_EINTR;
}

/* The checkpoint after an epoch. When writing it fails (disk full, EIO)
 * the previous one is still there, whole (dp_safetensors_write writes a
 * temporary file and renames it); --on-checkpoint-error says whether the
 * run stops or trains on and tries again after the next epoch. Every rank
 * learns rank 0's outcome, so all stop or all go on. */
int dp__train_checkpoint_epoch(dp__trainer *t, int epochs_done)
{
    const dp_train_options *o = t->o;
    int rc = 0;
    char last[640];
    dp__train_last_checkpoint_str(t, last, sizeof last);
    if (t->rank == 0)
        rc = dp__train_save_checkpoint(t, o->checkpoint_path, epochs_done, 0, 0, 0, 0);
    if (rc == DP_EIO || rc == DP_ENOMEM) {
        if (o->on_checkpoint_error == DP_ON_ERROR_CONTINUE) {
            DP_WARN("no checkpoint after epoch %d%s; training goes on and tries again after the "
                    "next epoch (the checkpoint error policy continue)",
                    epochs_done, last);
            rc = 0;
        } else {
            DP_ERROR("no checkpoint after epoch %d%s; stopped (the checkpoint error policy stop; "
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
