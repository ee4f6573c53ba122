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
 * the buffer holds a NaN or an Inf (dp_optimizer_check_finite), so a bad step
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
 * this one opens and closes a run's parts (data.c, net.c, precision.c,
 * step.c, book.c, board.c) and drives its epochs; epoch.c runs an epoch,
 * evaluate.c measures test accuracy, ranks.c and stop.c keep the ranks of
 * mpirun in step. */
#include "train/trainer.h"

#include "core/internal.h"
#include "dp/safetensors.h"

#include <string.h>

const char *dp__train_model_name(const dp_train_options *o)
{
    return o->model_def ? o->model_def->name : o->net.model;
}

/* What needs only the options and the ranks, before anything is opened. */
static int check_ranks(const dp__trainer *t)
{
    const dp_train_options *o = t->o;
    if (t->ranks > DP_MAX_RANKS) {
        DP_ERROR("%d ranks: at most %d", t->ranks, DP_MAX_RANKS);
        return DP_EINVAL;
    }
    dp_allreduce_algo algo = dp_allreduce_resolve(o->parallel.allreduce);
    if (t->ranks > 1 && algo != DP_ALLREDUCE_MPI) {
        DP_ERROR("`allreduce` %s sums within one process; across the %d ranks of mpirun use "
                 "`allreduce` mpi (the default under mpirun)",
                 dp_allreduce_algo_name(algo), t->ranks);
        return DP_EINVAL;
    }
    if (t->ranks > 1)
        DP_TRY(dp__train_check_ranks_agree(t));
    return 0;
}

/* Each device needs a sample of every batch (a pipeline splits its own). */
static int check_batch_size(const dp__trainer *t)
{
    const dp_train_options *o = t->o;
    int ndev = dp__net_count(t->net);
    if (o->parallel.pipeline || o->data.batch_size >= (int64_t)ndev * t->ranks)
        return 0;
    if (t->ranks > 1)
        DP_ERROR("`batch_size` %lld is smaller than the %d ranks x %d devices: each device "
                 "needs at least one sample of every batch",
                 (long long)o->data.batch_size, t->ranks, ndev);
    else
        DP_ERROR("`batch_size` %lld is smaller than the %d devices: each device needs at "
                 "least one sample of every batch",
                 (long long)o->data.batch_size, ndev);
    return DP_EINVAL;
}

/* The last batch of an epoch, when short. SyncBatchNorm across ranks:
 * every rank joins every layer's exchange, so each must get rows of it.
 * Split-invariant sums: a last batch that is not cut into whole subtrees
 * is summed the same way every time, but not as another split sums it. */
static int check_last_batch(const dp__trainer *t)
{
    const dp_train_options *o = t->o;
    /* The loader's count, not the set's: a tar set's epoch holds only whole
     * batches (its remainder dropped), so it has no short last batch. */
    int64_t n = dp_loader_num_samples(dp__data_loader(t->data, true));
    int64_t last = n % o->data.batch_size, sizes[DP_MAX_RANKS];
    if (last == 0)
        return 0;
    if (o->numerics.split_invariant && !dp__prec_split_whole(t, last) && t->rank == 0)
        DP_WARN("`split_invariant`: the last batch of each epoch holds %lld of the %lld "
                "training samples, not a power-of-two count of whole blocks in each part: its "
                "step differs from another split's (choose `batch_size` or `limit_train` so "
                "that it divides them)",
                (long long)last, (long long)n);
    int nbn = 0;
    if (t->ranks == 1 || !o->parallel.sync_bn)
        return 0;
    dp_model_bn_names(dp__net_model(t->net), &nbn);
    if (nbn == 0 || dp_chunk_sizes(last, t->ranks, sizes) == t->ranks)
        return 0;
    DP_ERROR("`sync_bn` across %d ranks: the last batch of each epoch holds %lld of the %lld "
             "training samples, which leaves a rank without any; every rank takes part in every "
             "layer's statistics (choose `batch_size` or `limit_train` so that it does not)",
             t->ranks, (long long)last, (long long)n);
    return DP_EINVAL;
}

/* A batch larger than the training set is the whole set, as PyTorch's
 * DataLoader gives it (its one batch holds every sample): the loader, the
 * kernels' measurement and the memory estimate take that size, not the
 * option's. */
static void cap_batch(dp_train_options *run, int64_t samples)
{
    if (run->data.limit_train > 0 && run->data.limit_train < samples)
        samples = run->data.limit_train;
    if (samples >= 1 && run->data.batch_size > samples)
        run->data.batch_size = samples;
}

/* What the options name, checked before the data are loaded (or right
 * after, where only loading tells the samples' shape): the batch against
 * the data and the devices, the model, its stages, the checkpoints the run
 * starts from, and a step's memory; each a line in a fraction of a second,
 * not after the loading. */
static int plan(dp__trainer *t, dp_train_options *run, const int64_t *chw, int64_t samples)
{
    cap_batch(run, samples);
    DP_TRY(check_batch_size(t));
    DP_TRY(dp__net_plan(t->net, t, chw));
    if (run->checkpoint.resume_path)
        DP_TRY(dp__book_check_resume(t, dp__net_definition(t->net)));
    return 0;
}

/* Opens a run's parts in the order they need each other: the devices and
 * the precision they run, the plan (the model for the samples' shape that
 * the data's headers tell), the data, the model and its executor, the
 * steps' state, the record (resuming from a checkpoint), the kernels'
 * choice, and the loaders (shuffled from the resumed run's seed). `run` is
 * t->o, which the plan may change (the batch's cap). */
static int setup(dp__trainer *t, dp_train_options *run)
{
    const dp_train_options *o = t->o;
    DP_TRY(check_ranks(t));
    if (t->rank == 0)
        DP_TRY(dp__train_check_outputs(o));
    DP_TRY(dp__net_open(&t->net, t));
    DP_TRY(dp__prec_open(&t->prec, t));
    int64_t chw[3], samples = 0;
    int unknown = dp__data_peek(o, chw, &samples);
    DP_TRY(unknown);
    if (!unknown)
        DP_TRY(plan(t, run, chw, samples));
    DP_TRY(dp__data_open(&t->data, o, true));
    if (unknown)
        DP_TRY(plan(t, run, dp__data_chw(t->data), dp__data_train_set(t->data)->n));
    DP_TRY(dp__net_build(t->net, t, dp__data_chw(t->data)));
    DP_TRY(dp__steps_open(&t->steps, t));
    DP_TRY(dp__book_open(&t->book, t));
    if (o->checkpoint.resume_path)
        DP_TRY(dp__book_resume(t));
    DP_TRY(dp__prec_tune(t->prec, t));
    DP_TRY(dp__data_open_loaders(t->data, o, dp__steps_seed(t->steps), true));
    DP_TRY(check_last_batch(t));
    DP_TRY(dp__steps_plan(t->steps, o, dp_loader_num_batches(dp__data_loader(t->data, true))));
    /* From here a stop waits for a step and saves the run; before, the
     * process may end at once (dp_train_stops_between_steps): the output
     * files are opened only now. */
    dp__train_set_between_steps(true);
    DP_TRY(dp__book_open_files(t->book, t));
    return dp__board_open(&t->board, t);
}

static void teardown(dp__trainer *t)
{
    dp__net_sync(t->net);
    dp__board_close(t->board);
    dp__book_close(t->book);
    dp__steps_close(t->steps);
    dp__data_close(t->data);
    dp__net_close(t->net);
    dp__prec_close(t->prec);
}

/* The pipeline's stages as the run ended: layers, parameters, activations. */
static void pipeline_result(const dp__trainer *t, dp_train_result *result)
{
    dp_pipeline_t *pipe = dp__net_pipeline(t->net);
    if (!pipe)
        return;
    dp__net_sync(t->net);
    dp_pipeline_stats ps;
    dp_pipeline_take_stats(pipe, &ps);
    result->pipeline_stages = t->o->parallel.pipeline;
    for (int k = 0; k <= t->o->parallel.pipeline; k++)
        result->stage_first[k] = dp_pipeline_stage_first(pipe, k);
    for (int k = 0; k < t->o->parallel.pipeline; k++) {
        result->stage_params[k] = ps.stage_params[k];
        result->stage_activation_bytes[k] = ps.peak_activation_bytes[k];
    }
}

int dp_train(const dp_train_options *given, dp_train_result *result)
{
    DP_TRY(dp_train_options_check(given));
    dp__train_stop_begin_run();
    if (!given->numerics.tf32)
        dp_set_tf32(false);
    dp_train_options run = *given;
    const dp_train_options *o = &run;
    dp__trainer t = {.o = o, .rank = dp_dist_rank(), .ranks = dp_dist_size()};
    memset(result, 0, sizeof *result);
    int rc = setup(&t, &run);
    /* Said once the run is set to go, so that a refusal stays one line. */
    if (rc == 0 && run.data.batch_size < given->data.batch_size && t.rank == 0)
        DP_WARN("`batch_size` %lld is more than the %lld training samples: each batch holds all "
                "%lld, as PyTorch's DataLoader gives them",
                (long long)given->data.batch_size, (long long)run.data.batch_size,
                (long long)run.data.batch_size);
    double total = 0;
    int first = rc == 0 ? dp__book_epochs_done(t.book) : 0;
    for (int e = first; rc == 0 && e < o->run.epochs; e++) {
        dp_epoch_stats *s = &dp__book_history(t.book)[e];
        rc = dp__train_epoch(&t, e, s);
        if (rc < 0)
            break;
        total += s->epoch_seconds;
        rc = dp__board_epoch(t.board, dp__steps_done(t.steps), s);
        if (rc == 0)
            rc = dp__book_end_epoch(&t, e + 1);
        result->epochs_done = e + 1;
        result->test_acc = s->test_acc;
        result->train_loss = s->train_loss;
        result->train_acc = s->train_acc;
        result->sec_per_epoch = total / (e + 1 - first);
        result->early_stopped =
            dp__book_early_stopped(t.book, &result->best_test_acc, &result->best_epoch);
        if (rc == 0 && o->on_epoch && o->on_epoch(s, o->callback_user))
            rc = dp__book_save_stopped(&t, e + 1, 0, 0);
        if (result->early_stopped)
            break;
    }
    if (t.net) {
        snprintf(result->devices, sizeof result->devices, "%s", dp__net_where(t.net));
        pipeline_result(&t, result);
    }
    if (rc == DP_EINTR) {
        int epoch;
        int64_t batch;
        const char *path = dp__book_stopped(t.book, &epoch, &batch);
        snprintf(result->checkpoint, sizeof result->checkpoint, "%s", path);
        result->stopped_epoch = epoch + 1;
        result->stopped_batch = batch;
    }
    if (rc == 0)
        rc = dp__book_finish(t.book);
    int board_rc = dp__board_close(t.board);
    t.board = NULL;
    if (rc == 0)
        rc = board_rc;
    teardown(&t);
    dp__train_set_between_steps(false);
    dp__train_stop_end_run();
    return rc;
}

/* The options of a run over a checkpoint's weights (evaluation,
 * prediction): its header first (the model, checked against the
 * checkpoint's, and what it records of its data: one line before anything
 * is loaded or built), then the model, devices and threads, the weights
 * loaded before the replicas copy them. */
static int checkpoint_run(const char *what, const char *checkpoint, const dp_model_def *def,
                          const char *given, const char *devices, int threads,
                          dp__checkpoint_header *h, dp_train_options *to)
{
    if (!checkpoint) {
        DP_ERROR("%s: no checkpoint given", what);
        return DP_EINVAL;
    }
    DP_TRY(dp__checkpoint_header_read(checkpoint, def ? def->name : given, h));
    dp_train_options_default(to);
    to->net.model = h->model;
    to->model_def = def;
    to->parallel.devices = devices ? devices : "1";
    to->parallel.threads = threads;
    to->net.init_path = checkpoint;
    return 0;
}

int dp_evaluate_detailed(const dp_eval_options *o, dp_eval_result *r)
{
    dp__checkpoint_header h;
    dp_train_options to;
    memset(r, 0, sizeof *r);
    DP_TRY(checkpoint_run("evaluate", o->checkpoint, o->model_def, o->model, o->devices, o->threads,
                          &h, &to));
    to.data.batch_size = o->batch_size > 0 ? o->batch_size : 256;
    to.data.dataset = o->dataset;
    to.data.data_dir = o->data_dir;
    to.test_set = o->test_set;
    to.data.limit_test = o->limit_test;
    to.numerics.precision = o->precision;
    to.data.normalize = h.normalize;
    /* A folder of any sizes is seen as the run's test loader saw it. */
    to.data.test_transform = h.test_transform;
    to.data.jpeg_scale = h.jpeg_scale;
    dp__checkpoint_header_free(&h);
    DP_TRY(dp_train_options_check(&to));
    dp__trainer t = {.o = &to, .rank = dp_dist_rank(), .ranks = dp_dist_size()};
    int rc = dp__net_open(&t.net, &t);
    if (rc == 0)
        rc = dp__prec_open(&t.prec, &t);
    if (rc == 0)
        rc = dp__data_open(&t.data, &to, false);
    if (rc == 0)
        rc = dp__data_open_loaders(t.data, &to, 0, false);
    /* The model takes the dataset's samples (C, H, W). */
    if (rc == 0)
        rc = dp__net_build(t.net, &t, dp__data_chw(t.data));
    if (rc == 0)
        rc = dp__train_evaluate(&t, r);
    snprintf(r->devices, sizeof r->devices, "%s", t.net ? dp__net_devices_str(t.net) : "");
    teardown(&t);
    return rc;
}

int dp_evaluate(const dp_eval_options *o, double *test_acc, char *devices, size_t devices_size)
{
    dp_eval_result r;
    int rc = dp_evaluate_detailed(o, &r);
    *test_acc = r.test_acc;
    if (devices)
        snprintf(devices, devices_size, "%s", r.devices);
    dp_eval_result_free(&r);
    return rc;
}

int dp_predict(const dp_predict_options *o, dp_predictions *out)
{
    dp__checkpoint_header h;
    dp_train_options to;
    memset(out, 0, sizeof *out);
    DP_TRY(checkpoint_run("predict", o->checkpoint, o->model_def, o->model, o->devices, o->threads,
                          &h, &to));
    dp__trainer t = {.o = &to, .rank = dp_dist_rank(), .ranks = dp_dist_size()};
    float *x = NULL;
    int64_t chw[3];
    int rc = dp__predict_inputs(o, &h, out, &x, chw);
    if (rc == 0)
        rc = dp__net_open(&t.net, &t);
    if (rc == 0)
        rc = dp__prec_open(&t.prec, &t);
    if (rc == 0)
        rc = dp__net_build(t.net, &t, chw);
    if (rc == 0)
        rc = dp__train_predict(&t, x, chw, o->batch_size > 0 ? o->batch_size : 256, out);
    dp__net_sync(t.net);
    dp__free(x);
    dp__checkpoint_header_free(&h);
    teardown(&t);
    if (rc < 0)
        dp_predictions_close(out);
    return rc;
}
