/* The training loop. The front end issues every step without waiting and
 * blocks only on the step issued `max_steps_in_flight` before (which keeps
 * memory flat), to read that step's loss for the progress bar, and at the
 * end of an epoch to read the accumulated loss and accuracy. One step ahead
 * is enough: while the devices run step k the front end issues step k + 1,
 * so they never wait for it, and only two steps' tensors are ever alive
 * (ResNet-18 at batch 256: 3.5 GB peak, against 6.6 GB two steps ahead, at
 * the same speed).
 *
 * Under mpirun every rank runs this loop on the same global batches (the
 * same shuffle, from the seed) and takes its own chunk of each
 * (torch.chunk over the ranks, then over its devices); the gradients are
 * summed over every rank's devices (DP_ALLREDUCE_MPI), so all ranks make the
 * same update. Rank 0 alone writes metrics, plots and checkpoints. Ranks
 * agree at every step on whether to stop, so a signal that reaches one rank
 * first still stops all of them after the same step.
 *
 * Non-finite gradients: after the allreduce every replica checks its summed
 * gradient buffer on its device and its SGD kernel drops the update when
 * the buffer holds a NaN or an Inf (dp_sgd_check_finite), so a bad step
 * never reaches the weights. Device 0's result is copied to the host like
 * the step's loss and read when the front end waits for that step anyway:
 * no extra synchronisation. Every replica and rank sees the same summed
 * gradient, so all make the same decision.
 *
 * Determinism: with the same seed, devices and threads per device two runs
 * give the same parameters bit for bit. The batch order comes from the seed
 * (not from the loader thread's timing), the ring allreduce adds the chunks
 * in a fixed order, every OpenMP loop is statically scheduled over a team of
 * fixed size, and oneDNN picks the same kernels for the same shapes, ISA
 * and threads. What changes the sums' order changes the last bits: another
 * device count (the batch is split and summed differently), thread count,
 * allreduce algorithm or CPU ISA.
 *
 * The loop lives in files named for their jobs, sharing train/trainer.h:
 * this one opens and closes a run and drives its epochs; epoch.c runs an
 * epoch, step.c issues a step, evaluate.c measures test accuracy,
 * nonfinite.c acts on the gradient check, checkpoint_policy.c writes and
 * resumes checkpoints, ranks.c and stop.c keep the ranks of mpirun in
 * step. */
#include "train/trainer.h"

#include "core/internal.h"

#include <string.h>

void dp_train_options_default(dp_train_options *o)
{
    memset(o, 0, sizeof *o);
    o->model = "lenet";
    o->devices = "1";
    o->batch_size = 256;
    o->lr = 0.2f;
    o->epochs = 10;
    o->shuffle = true;
    o->allreduce = DP_ALLREDUCE_AUTO;
    o->bucket_mb = 25;
}

const char *dp__train_model_name(const dp_train_options *o)
{
    return o->model_def ? o->model_def->name : o->model;
}

/* --verbose: the gradient buckets, in the order they are summed. */
static void log_buckets(dp__trainer *t)
{
    dp_params_t *p = dp_model_params(t->model);
    int nb = dp_data_parallel_bucket_count(t->dp);
    if (nb == 0) {
        DP_INFO("gradient buckets: none (one device, one rank: nothing to sum)");
        return;
    }
    DP_INFO("gradient buckets: %d, summed in this order as the backward pass finishes them", nb);
    for (int b = 0; b < nb; b++) {
        int first, count;
        int64_t bytes;
        dp_data_parallel_bucket(t->dp, b, &first, &count, &bytes);
        DP_INFO("  bucket %d: %d parameters, %s .. %s, %lld bytes", b, count,
                dp_params_name(p, first + count - 1), dp_params_name(p, first), (long long)bytes);
    }
}

/* --deterministic: the CPU device is reproducible as it is (see the top of
 * this file); other backends have not said so yet. */
static void warn_nondeterministic_devices(const dp__trainer *t)
{
    for (int k = 0; k < t->ndev; k++) {
        if (!dp_device_has(t->devs[k], DP_DEVICE_DETERMINISTIC)) {
            DP_WARN("deterministic mode: %s may still pick kernels whose results vary from run "
                    "to run; only CPU devices are known to repeat bit for bit",
                    dp_device_name(t->devs[k]));
            return;
        }
    }
}

/* Sample shape [channels, rows, cols] of ds, for messages. */
static const char *sample_shape_str(const dp_dataset *ds, char *buf, size_t size)
{
    int64_t shape[3] = {dp_dataset_channels(ds), ds->rows, ds->cols};
    return dp__shape_str(buf, size, 3, shape);
}

int dp__train_open_data(dp__trainer *t, bool train_too)
{
    const dp_train_options *o = t->o;
    if (train_too && (o->train_set == NULL) != (o->test_set == NULL)) {
        DP_ERROR("a program's own data needs both a training and a test set, got only the %s",
                 o->train_set ? "training set" : "test set");
        return DP_EINVAL;
    }
    if (o->test_set) {
        t->train_set = o->train_set;
        t->test_set = o->test_set;
    } else {
        if (train_too) {
            DP_TRY(dp_dataset_load(o->dataset, o->data_dir, true, &t->train));
            t->train_set = &t->train;
        }
        DP_TRY(dp_dataset_load(o->dataset, o->data_dir, false, &t->test));
        t->test_set = &t->test;
    }
    const dp_dataset *ds = train_too ? t->train_set : t->test_set;
    t->in_channels = dp_dataset_channels(ds);
    t->in_rows = ds->rows;
    t->in_cols = ds->cols;
    const dp_dataset *test = t->test_set;
    if (dp_dataset_channels(test) != t->in_channels || test->rows != t->in_rows ||
        test->cols != t->in_cols) {
        char a[64], b[64];
        DP_ERROR("the test samples are %s but the training samples %s: they must agree",
                 sample_shape_str(test, a, sizeof a), sample_shape_str(ds, b, sizeof b));
        return DP_EINVAL;
    }
    return 0;
}

int dp__train_setup(dp__trainer *t)
{
    const dp_train_options *o = t->o;
    t->rank = dp_dist_rank();
    t->ranks = dp_dist_size();
    if (t->ranks > DP_MAX_RANKS) {
        DP_ERROR("%d ranks: at most %d", t->ranks, DP_MAX_RANKS);
        return DP_EINVAL;
    }
    dp_allreduce_algo algo = dp_allreduce_resolve(o->allreduce);
    if (t->ranks > 1 && algo != DP_ALLREDUCE_MPI) {
        DP_ERROR("the allreduce algorithm %s sums within one process; across the %d ranks of "
                 "mpirun use the allreduce algorithm mpi (the default under mpirun)",
                 dp_allreduce_algo_name(algo), t->ranks);
        return DP_EINVAL;
    }
    if (t->ranks > 1)
        DP_TRY(dp__train_check_ranks_agree(t));
    if (t->ranks > 1 && o->sync_bn) {
        /* Each rank would normalise over its own devices only: not what
         * one process computes, so refuse rather than train differently. */
        DP_ERROR("sync batch norm shares batch statistics between the devices of one "
                 "process; across the %d ranks of mpirun it is not supported yet",
                 t->ranks);
        return DP_ENOTSUP;
    }
    if (t->rank == 0)
        DP_TRY(dp__train_check_outputs(o));
    DP_TRY(dp_devices_open(t->devs, &t->ndev, o->devices ? o->devices : "1", o->threads));
    t->dev = t->devs[0];
    DP_TRY(dp__train_setup_precision(t));
    dp_devices_str(t->devs, t->ndev, t->devices, sizeof t->devices);
    if (t->ranks > 1)
        snprintf(t->where, sizeof t->where, "%s x %d ranks", t->devices, t->ranks);
    else
        snprintf(t->where, sizeof t->where, "%s", t->devices);
    if (!o->pipeline && o->batch_size < (int64_t)t->ndev * t->ranks) {
        if (t->ranks > 1)
            DP_ERROR("the batch size %lld is smaller than the %d ranks x %d devices: each device "
                     "needs at least one sample of every batch",
                     (long long)o->batch_size, t->ranks, t->ndev);
        else
            DP_ERROR("the batch size %lld is smaller than the %d devices: each device needs at "
                     "least one sample of every batch",
                     (long long)o->batch_size, t->ndev);
        return DP_EINVAL;
    }
    t->ck = dp__calloc(1, sizeof *t->ck);
    if (!t->ck)
        return DP_ENOMEM;
    t->saved_epochs = -1;
    if (o->deterministic)
        warn_nondeterministic_devices(t);
    t->seed = o->seed;
    /* The data first: the model takes the dataset's samples (C, H, W). */
    DP_TRY(dp__train_open_data(t, true));
    int64_t in_chw[3] = {t->in_channels, t->in_rows, t->in_cols};
    const dp_model_def *def = o->model_def;
    if (!def)
        DP_TRY(dp_model_def_load(&def, o->model, in_chw));
    if (o->weight_init != DP_WEIGHTS_AS_DEFINED) {
        t->init_specs = dp__malloc((size_t)def->nparams * sizeof *t->init_specs);
        if (!t->init_specs)
            return DP_ENOMEM;
        memcpy(t->init_specs, def->params, (size_t)def->nparams * sizeof *t->init_specs);
        dp_param_specs_set_weight_init(t->init_specs, def->nparams, o->weight_init, o->init_std);
        t->init_def = *def;
        t->init_def.params = t->init_specs;
        def = &t->init_def;
    }
    DP_TRY(dp_model_init(&t->model, def, t->dev, o->seed));
    if (o->init_path)
        DP_TRY(dp_checkpoint_load_weights(o->init_path, t->model));
    /* The option as given: DataParallel resolves auto for the devices just
     * opened (nccl across GPUs), which `algo` above could not know. */
    dp_data_parallel_options po = {.allreduce = o->allreduce,
                                   .sgd = {o->lr, o->momentum, o->weight_decay},
                                   .sync_bn = o->sync_bn,
                                   .bucket_mb = o->bucket_mb,
                                   .grad_compress = (dp_grad_compress)o->grad_compress};
    if (o->pipeline)
        DP_TRY(dp__train_setup_pipeline(t, def, in_chw, &po));
    else
        DP_TRY(dp_data_parallel_init(&t->dp, t->model, t->devs, t->ndev, &po));
    if (o->verbose && t->rank == 0)
        log_buckets(t);
    DP_TRY(dp__train_setup_nonfinite_checks(t));
    if (o->resume_path)
        DP_TRY(dp__train_resume(t));
    DP_TRY(dp__train_tune_convolutions(t));
    dp_loader_options lo = {.batch_size = o->batch_size,
                            .shuffle = o->shuffle,
                            .seed = t->seed,
                            .limit = o->limit_train};
    DP_TRY(dp_loader_init(&t->train_loader, t->train_set, &lo));
    lo.shuffle = false;
    lo.limit = o->limit_test;
    DP_TRY(dp_loader_init(&t->test_loader, t->test_set, &lo));
    DP_TRY(dp_tape_init(&t->tape, true));
    DP_TRY(dp_tape_init(&t->eval_tape, false));
    int64_t one = 1;
    DP_TRY(dp_tensor_new(&t->loss_sum, t->dev, DP_F32, 1, &one));
    DP_TRY(dp_tensor_new(&t->correct, t->dev, DP_F32, 1, &one));
    size_t nb = (size_t)dp_loader_num_batches(t->train_loader) + 1;
    t->step_loss = dp__calloc(nb, sizeof(float));
    t->step_rows = dp__calloc(nb, sizeof(int64_t));
    t->step_nonfinite = dp__calloc(nb, sizeof(int64_t));
    if (!t->step_loss || !t->step_rows || !t->step_nonfinite)
        return DP_ENOMEM;
    if (o->metrics_path && t->rank == 0) {
        if (o->resume_path)
            DP_TRY(dp_metrics_open_append(&t->metrics, o->metrics_path));
        else
            DP_TRY(dp_metrics_open(&t->metrics, o->metrics_path));
    }
    DP_TRY(dp_progress_init(&t->progress, o->progress && t->rank == 0));
    return 0;
}

void dp__train_teardown(dp__trainer *t)
{
    dp_waitall();
    dp_progress_close(t->progress);
    dp_metrics_close(t->metrics);
    dp__free(t->ck);
    dp__free(t->step_loss);
    dp__free(t->step_rows);
    dp__free(t->step_nonfinite);
    dp_tensor_free(t->loss_sum);
    dp_tensor_free(t->correct);
    dp_tensor_free(t->pipe_loss);
    dp_tape_close(t->tape);
    dp_tape_close(t->eval_tape);
    if (t->pipe)
        dp_pipeline_close(t->pipe);
    else
        dp_data_parallel_close(t->dp);
    dp_model_close(t->model);
    dp__free(t->init_specs);
    dp_loader_close(t->train_loader);
    dp_loader_close(t->test_loader);
    dp_dataset_close(&t->train);
    dp_dataset_close(&t->test);
    dp_devices_close(t->devs, t->ndev);
    dp__train_restore_precision(t);
}

int dp_train(const dp_train_options *o, dp_train_result *result)
{
    if (o->epochs > DP_MAX_EPOCHS) {
        DP_ERROR("the epoch count %d: at most %d", o->epochs, DP_MAX_EPOCHS);
        return DP_EINVAL;
    }
    if (o->batch_size <= 0 || o->epochs <= 0 || !(o->lr > 0) || o->limit_train < 0 ||
        o->limit_test < 0 || o->threads < 0 || o->on_checkpoint_error < DP_ON_ERROR_STOP ||
        o->on_checkpoint_error > DP_ON_ERROR_CONTINUE) {
        DP_ERROR("dp_train: batch size, epochs and lr must be positive");
        return DP_EINVAL;
    }
    if (o->no_tf32)
        dp_set_tf32(false);
    dp__trainer t;
    memset(&t, 0, sizeof t);
    t.o = o;
    memset(result, 0, sizeof *result);
    int rc = dp__train_setup(&t);
    double total = 0;
    int first = rc == 0 ? t.ck->epochs_done : 0;
    for (int e = first; rc == 0 && e < o->epochs; e++) {
        dp_epoch_stats *s = &t.ck->history[e];
        rc = dp__train_epoch(&t, e, s);
        if (rc < 0)
            break;
        t.ck->nhistory = e + 1;
        total += s->epoch_seconds;
        if (t.metrics)
            rc = dp_metrics_write_epoch(t.metrics, s);
        if (rc == 0 && o->plot_path && t.rank == 0)
            rc = dp_plot_write(o->plot_path, o->epochs, t.ck->history, e + 1);
        if (rc == 0 && o->checkpoint_path)
            rc = dp__train_checkpoint_epoch(&t, e + 1);
        result->epochs_done = e + 1;
        result->test_acc = s->test_acc;
        result->train_loss = s->train_loss;
        result->train_acc = s->train_acc;
        result->sec_per_epoch = total / (e + 1 - first);
    }
    snprintf(result->devices, sizeof result->devices, "%s", t.where);
    if (t.pipe) {
        dp_waitall();
        dp_pipeline_stats ps;
        dp_pipeline_take_stats(t.pipe, &ps);
        result->pipeline_stages = o->pipeline;
        for (int k = 0; k <= o->pipeline; k++)
            result->stage_first[k] = dp_pipeline_stage_first(t.pipe, k);
        for (int k = 0; k < o->pipeline; k++) {
            result->stage_params[k] = ps.stage_params[k];
            result->stage_activation_bytes[k] = ps.peak_activation_bytes[k];
        }
    }
    if (rc == DP_EINTR) {
        snprintf(result->checkpoint, sizeof result->checkpoint, "%s", t.stopped_path);
        result->stopped_epoch = t.stopped_epoch + 1;
        result->stopped_batch = t.stopped_batch;
    }
    if (rc == 0 && t.metrics) {
        rc = dp_metrics_close(t.metrics);
        t.metrics = NULL;
    }
    dp__train_teardown(&t);
    return rc;
}
