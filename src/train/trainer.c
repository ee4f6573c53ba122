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
 * allreduce algorithm or CPU ISA. */
#include "dp/train.h"

#include "dp/autograd.h"
#include "dp/checkpoint.h"
#include "dp/data.h"
#include "dp/dist.h"
#include "dp/nn.h"
#include "dp/optim.h"
#include "dp/parallel.h"

#include "autograd/tape.h"
#include "core/internal.h"
#include "device/device.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop_signal;

void dp_train_request_stop(int signo)
{
    stop_signal = signo ? signo : -1;
}

int dp_train_stop_signal(void)
{
    return stop_signal;
}

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
}

/* A tape-owned tensor holding a copy of host data. */
static int upload(dp_tensor_t **out, dp_device_t *dev, dp_dtype dtype, int ndim,
                  const int64_t *shape, const void *src)
{
    dp_tensor_t *t;
    DP_TRY(dp__tape_alloc(&t, dev, dtype, ndim, shape, 0));
    DP_TRY(dev->ops->upload_fresh(dev, t->data, src, t->bytes));
    *out = t;
    return 0;
}

typedef struct trainer {
    const dp_train_options *o;
    dp_device_t *devs[DP_MAX_DEVICES];
    int ndev;
    dp_device_t *dev; /* devs[0]: the batch, the gathered outputs and the loss */
    dp_model_t *model;
    dp_data_parallel_t *dp;
    dp_tape_t *tape, *eval_tape;
    dp_dataset train, test;
    dp_loader_t *train_loader, *test_loader;
    dp_tensor_t *loss_sum, *correct; /* per-epoch accumulators on the device */
    float *step_loss;                /* host copies of each step's loss (this rank's rows) */
    int64_t *step_rows;              /* this rank's rows of each step */
    int64_t *step_nonfinite;         /* device 0's check of each step (dp_sgd_first_nonfinite) */
    bool checked;                    /* the steps are checked for NaN and Inf */
    int64_t inject_step;             /* DP_INJECT_NAN test hook: the step to poison, 0 = none */
    char inject_param[96];           /* and the parameter whose gradient it poisons */
    int saved_epochs;                /* the last checkpoint this run wrote or resumed: */
    int64_t saved_batch;             /* its epochs and batch; saved_epochs < 0: none */
    int rank, ranks;                 /* MPI: this process's rank of `ranks` */
    dp_metrics_t *metrics;
    dp_progress_t *progress;
    dp_checkpoint_state *ck; /* the epochs so far (ck->history) and what a checkpoint holds */
    uint64_t seed;           /* --seed, or the resumed run's */
    int64_t step;
    char devices[256];      /* "[cpu:0, cpu:1]": this rank's */
    char where[288];        /* devices, and " x 4 ranks" under mpirun */
    char stopped_path[512]; /* set when a stop request ended the run */
    int stopped_epoch;
    int64_t stopped_batch;
} trainer;

/* --resume: the weights, momentum and position of an interrupted run. */
static int resume(trainer *t)
{
    const dp_train_options *o = t->o;
    DP_TRY(dp_checkpoint_load(o->resume_path, t->model, dp_data_parallel_sgd(t->dp, 0), t->ck));
    DP_TRY(dp_data_parallel_sync_from_first(t->dp));
    if (t->ck->epochs_done >= o->epochs) {
        DP_ERROR("%s: already trained %d epochs; ask for more with --epochs", o->resume_path,
                 t->ck->epochs_done);
        return DP_EINVAL;
    }
    if (t->ck->batch_size != o->batch_size || (float)t->ck->lr != o->lr)
        DP_WARN("%s was trained with batch size %lld and lr %g; going on with %lld and %g",
                o->resume_path, (long long)t->ck->batch_size, t->ck->lr, (long long)o->batch_size,
                (double)o->lr);
    t->seed = t->ck->seed;
    t->step = t->ck->step;
    if (o->checkpoint_path && strcmp(o->checkpoint_path, o->resume_path) == 0) {
        t->saved_epochs = t->ck->epochs_done;
        t->saved_batch = t->ck->batch;
    }
    for (int i = 0; i < t->ck->nhistory; i++)
        t->ck->history[i].devices = t->devices;
    return 0;
}

/* This rank's rows of a global batch of n: chunk `rank` of torch.chunk(n,
 * ranks), starting at row *first. */
static int64_t rank_rows(const trainer *t, int64_t n, int64_t *first)
{
    int64_t sizes[DP_MAX_RANKS];
    dp_chunk_sizes(n, t->ranks, sizes);
    *first = 0;
    for (int r = 0; r < t->rank; r++)
        *first += sizes[r];
    return sizes[t->rank];
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 1099511628211ull;
    return h;
}

/* Every rank must train the same model on the same batches: a rank started
 * with other options would silently train something else. */
static int check_ranks_agree(const trainer *t)
{
    const dp_train_options *o = t->o;
    uint64_t h = 14695981039346656037ull;
    h = fnv1a(h, o->model, strlen(o->model) + 1);
    h = fnv1a(h, &o->batch_size, sizeof o->batch_size);
    h = fnv1a(h, &o->lr, sizeof o->lr);
    h = fnv1a(h, &o->momentum, sizeof o->momentum);
    h = fnv1a(h, &o->weight_decay, sizeof o->weight_decay);
    h = fnv1a(h, &o->epochs, sizeof o->epochs);
    h = fnv1a(h, &o->seed, sizeof o->seed);
    h = fnv1a(h, &o->shuffle, sizeof o->shuffle);
    h = fnv1a(h, &o->limit_train, sizeof o->limit_train);
    h = fnv1a(h, &o->limit_test, sizeof o->limit_test);
    h = fnv1a(h, &o->sync_bn, sizeof o->sync_bn);
    uint64_t all[DP_MAX_RANKS];
    DP_TRY(dp_dist_gather_u64(h, all));
    for (int r = 1; r < t->ranks; r++) {
        if (all[r] != all[0]) {
            DP_ERROR("rank %d was started with other training options than rank 0 (model, batch "
                     "size, lr, epochs, seed, limits must be the same on every rank)",
                     r);
            return DP_EINVAL;
        }
    }
    return 0;
}

/* A checkpoint that cannot be written should stop the run before an epoch
 * of work, not after. */
static int check_writable_dir(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    if (access(dir, W_OK | X_OK) != 0) {
        DP_ERROR("%s: cannot write a checkpoint there: %s: %s", path, dir, strerror(errno));
        return DP_EIO;
    }
    return 0;
}

/* --deterministic: the CPU device is reproducible as it is (see the top of
 * this file); other backends have not said so yet. */
static void warn_nondeterministic_devices(const trainer *t)
{
    for (int k = 0; k < t->ndev; k++) {
        if (!dp_device_has(t->devs[k], DP_DEVICE_DETERMINISTIC)) {
            DP_WARN("--deterministic: %s may still pick kernels whose results vary from run "
                    "to run; only CPU devices are known to repeat bit for bit",
                    dp_device_name(t->devs[k]));
            return;
        }
    }
}

/* Turns on the device-side check of every step's gradient, on every replica
 * of every rank or on none: replicas that disagreed on which steps to drop
 * would drift apart. */
static int setup_nonfinite_checks(trainer *t)
{
    bool missing = false;
    for (int k = 0; k < t->ndev; k++)
        missing = missing || !t->devs[k]->ops->check_finite;
    if (t->ranks > 1)
        DP_TRY(dp_dist_any(missing, &missing));
    if (missing) {
        if (t->rank == 0)
            DP_WARN("gradients are not checked for NaN and Inf: a device here has no such check");
        return 0;
    }
    for (int k = 0; k < t->ndev; k++)
        DP_TRY(dp_sgd_check_finite(dp_data_parallel_sgd(t->dp, k)));
    t->checked = true;
    /* Test hook: DP_INJECT_NAN=STEP[:PARAM] makes the gradient of PARAM (a
     * state_dict name; the first parameter if not given) NaN at step STEP
     * (from 1), as an overflow would, to test the check end to end. */
    const char *inject = getenv("DP_INJECT_NAN");
    if (inject) {
        char *end;
        t->inject_step = strtoll(inject, &end, 10);
        const char *first = dp_params_name(dp_model_params(t->model), 0);
        snprintf(t->inject_param, sizeof t->inject_param, "%s", *end == ':' ? end + 1 : first);
        if (dp_params_find(dp_model_params(t->model), t->inject_param) < 0) {
            DP_ERROR("DP_INJECT_NAN=%s: the model has no parameter %s", inject, t->inject_param);
            return DP_EINVAL;
        }
    }
    return 0;
}

static int setup(trainer *t)
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
        DP_ERROR("--allreduce %s sums within one process; across the %d ranks of mpirun use "
                 "--allreduce mpi (the default under mpirun)",
                 dp_allreduce_algo_name(algo), t->ranks);
        return DP_EINVAL;
    }
    if (t->ranks > 1)
        DP_TRY(check_ranks_agree(t));
    if (t->ranks > 1 && o->sync_bn) {
        /* Each rank would normalise over its own devices only: not what
         * one process computes, so refuse rather than train differently. */
        DP_ERROR("--sync-bn shares batch statistics between the devices of one process; across "
                 "the %d ranks of mpirun it is not supported yet",
                 t->ranks);
        return DP_ENOTSUP;
    }
    if (o->checkpoint_path && t->rank == 0)
        DP_TRY(check_writable_dir(o->checkpoint_path));
    DP_TRY(dp_devices_open(t->devs, &t->ndev, o->devices ? o->devices : "1", o->threads));
    t->dev = t->devs[0];
    dp_devices_str(t->devs, t->ndev, t->devices, sizeof t->devices);
    if (t->ranks > 1)
        snprintf(t->where, sizeof t->where, "%s x %d ranks", t->devices, t->ranks);
    else
        snprintf(t->where, sizeof t->where, "%s", t->devices);
    if (o->batch_size < (int64_t)t->ndev * t->ranks) {
        if (t->ranks > 1)
            DP_ERROR("--batch-size %lld is smaller than the %d ranks x %d devices: each device "
                     "needs at least one sample of every batch",
                     (long long)o->batch_size, t->ranks, t->ndev);
        else
            DP_ERROR("--batch-size %lld is smaller than the %d devices: each device needs at "
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
    DP_TRY(dp_fashion_mnist_load(o->data_dir, true, &t->train));
    DP_TRY(dp_fashion_mnist_load(o->data_dir, false, &t->test));
    DP_TRY(dp_model_create(&t->model, o->model, t->dev, o->seed));
    if (o->init_path)
        DP_TRY(dp_checkpoint_load_weights(o->init_path, t->model));
    /* The option as given: DataParallel resolves auto for the devices just
     * opened (nccl across GPUs), which `algo` above could not know. */
    dp_data_parallel_options po = {.allreduce = o->allreduce,
                                   .sgd = {o->lr, o->momentum, o->weight_decay},
                                   .sync_bn = o->sync_bn};
    DP_TRY(dp_data_parallel_init(&t->dp, t->model, t->devs, t->ndev, &po));
    DP_TRY(setup_nonfinite_checks(t));
    if (o->resume_path)
        DP_TRY(resume(t));
    dp_loader_options lo = {.batch_size = o->batch_size,
                            .shuffle = o->shuffle,
                            .seed = t->seed,
                            .limit = o->limit_train};
    DP_TRY(dp_loader_init(&t->train_loader, &t->train, &lo));
    lo.shuffle = false;
    lo.limit = o->limit_test;
    DP_TRY(dp_loader_init(&t->test_loader, &t->test, &lo));
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

static void teardown(trainer *t)
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
    dp_tape_close(t->tape);
    dp_tape_close(t->eval_tape);
    dp_data_parallel_close(t->dp);
    dp_model_close(t->model);
    dp_loader_close(t->train_loader);
    dp_loader_close(t->test_loader);
    dp_dataset_close(&t->train);
    dp_dataset_close(&t->test);
    dp_devices_close(t->devs, t->ndev);
}

/* The DP_INJECT_NAN test hook: replica 0's gradient of the chosen
 * parameter becomes NaN before the allreduce. */
static int inject_nan(trainer *t)
{
    dp_params_t *p = dp_model_params(t->model);
    dp_tensor_t *param = dp_params_get(p, dp_params_find(p, t->inject_param));
    DP_TRY(dp_tensor_fill(dp_tensor_grad(param), NAN));
    dp__grad_set_written(param);
    return 0;
}

/* The allreduce and update of the step of batch b (the gradient check
 * included), and the copy of the check's result to the host. */
static int finish_step(trainer *t, const dp_batch *b)
{
    if (t->inject_step == t->step + 1)
        DP_TRY(inject_nan(t));
    /* The seed's sgd(params, lr, batch_size) after the allreduce: the loss
     * is summed over the whole (global) batch, the update divides by its
     * size. */
    DP_TRY(dp_data_parallel_step(t->dp, 1.0f / (float)b->n));
    if (t->checked) {
        const int64_t *word = dp_sgd_first_nonfinite(dp_data_parallel_sgd(t->dp, 0));
        DP_TRY(
            t->dev->ops->copy_to_host(t->dev, &t->step_nonfinite[b->index], word, sizeof(int64_t)));
    }
    return 0;
}

/* Issues one training step on (this rank's chunk of) batch b; returns
 * without waiting. */
static int train_step(trainer *t, const dp_batch *b)
{
    dp_device_t *dev = t->dev;
    int64_t row0, n = rank_rows(t, b->n, &row0);
    int64_t pixels = t->train.rows * t->train.cols;
    int64_t xs[4] = {n, 1, t->train.rows, t->train.cols}, ys[1] = {n};
    dp_tensor_t *x, *y, *logits, *loss;
    t->step_rows[b->index] = n;
    if (n == 0) {
        /* A last batch smaller than the ranks: this rank adds zero
         * gradients to the sum and makes the same update as the others. */
        t->step_loss[b->index] = 0;
        dp_data_parallel_zero_grad(t->dp);
        int rc = finish_step(t, b);
        t->step++;
        return rc;
    }
    dp_tape_begin(t->tape);
    int rc = upload(&x, dev, DP_F32, 4, xs, b->x + row0 * pixels);
    if (rc == 0)
        rc = upload(&y, dev, DP_I32, 1, ys, b->y + row0);
    if (rc == 0)
        rc = dp_data_parallel_forward(t->dp, x, true, &logits);
    if (rc == 0)
        rc = dp_cross_entropy(&loss, logits, y, DP_REDUCE_SUM);
    if (rc == 0)
        rc = dp_accuracy_accumulate(t->correct, logits, y);
    if (rc == 0)
        rc = dp_accumulate(t->loss_sum, loss);
    if (rc == 0)
        rc = dev->ops->copy_to_host(dev, &t->step_loss[b->index], loss->data, sizeof(float));
    if (rc == 0) {
        dp_data_parallel_zero_grad(t->dp);
        rc = dp_backward(loss);
    }
    if (rc == 0)
        rc = finish_step(t, b);
    dp_tape_end(t->tape);
    dp_tape_reset(t->tape);
    t->step++;
    return rc;
}

static int evaluate(trainer *t, double *acc)
{
    dp_device_t *dev = t->dev;
    DP_TRY(dp_tensor_fill(t->correct, 0.0f));
    DP_TRY(dp_loader_start_epoch(t->test_loader, 0, 0));
    dp_batch b;
    int64_t seen = 0, issued = 0;
    int rc = 0, more;
    while (rc == 0 && (more = dp_loader_next(t->test_loader, &b)) > 0) {
        /* Each rank evaluates its chunk of every batch. */
        int64_t row0, n = rank_rows(t, b.n, &row0);
        seen += b.n;
        if (n == 0)
            continue;
        /* One batch in flight: the previous one has finished everywhere. */
        if (issued++ > 0)
            rc = dp_waitall();
        if (rc < 0)
            break;
        int64_t pixels = t->test.rows * t->test.cols;
        int64_t xs[4] = {n, 1, t->test.rows, t->test.cols}, ys[1] = {n};
        dp_tensor_t *x, *y, *logits;
        dp_tape_begin(t->eval_tape);
        rc = upload(&x, dev, DP_F32, 4, xs, b.x + row0 * pixels);
        if (rc == 0)
            rc = upload(&y, dev, DP_I32, 1, ys, b.y + row0);
        if (rc == 0)
            rc = dp_data_parallel_forward(t->dp, x, false, &logits);
        if (rc == 0)
            rc = dp_accuracy_accumulate(t->correct, logits, y);
        dp_tape_end(t->eval_tape);
        dp_tape_reset(t->eval_tape);
    }
    if (rc == 0 && more < 0)
        rc = more;
    float correct = 0;
    if (rc == 0)
        rc = dp_tensor_to_host(t->correct, &correct, sizeof correct);
    if (rc == 0)
        rc = dp_dist_sum_f32(&correct, 1);
    *acc = seen ? correct / (double)seen : 0.0;
    return rc;
}

/* Writes the checkpoint of `epochs_done` whole epochs and `batch` batches
 * of the next, whose figures so far are loss_sum, correct and seconds
 * (zero at an epoch's end), to `path` (rank 0 only). */
static int save_checkpoint(trainer *t, const char *path, int epochs_done, int64_t batch,
                           double loss_sum, double correct, double seconds)
{
    const dp_train_options *o = t->o;
    dp_checkpoint_state *ck = t->ck;
    snprintf(ck->model, sizeof ck->model, "%s", o->model);
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
    DP_TRY(dp_checkpoint_save(path, t->model, dp_data_parallel_sgd(t->dp, 0), ck));
    if (o->checkpoint_path && strcmp(path, o->checkpoint_path) == 0) {
        t->saved_epochs = epochs_done;
        t->saved_batch = batch;
    }
    return 0;
}

/* "; the last checkpoint (FILE, epoch 4) is intact" for messages about a
 * run that stops or goes on without writing one. */
static const char *last_checkpoint_str(const trainer *t, char *buf, size_t size)
{
    const char *path = t->o->checkpoint_path;
    if (!path)
        snprintf(buf, size, "; no --checkpoint was given");
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

/* Reads the gradient checks of this epoch's steps [*checked, upto), which
 * have finished. A step whose summed gradient held a NaN or an Inf was not
 * applied (the SGD kernel dropped it); without --skip-nonfinite the run
 * stops there, naming the step and the parameter. */
static int check_steps(trainer *t, int epoch, int64_t *checked, int64_t upto, int64_t *skipped)
{
    dp_params_t *p = dp_model_params(t->model);
    int64_t batches = dp_loader_num_batches(t->train_loader);
    for (; t->checked && *checked < upto; (*checked)++) {
        int64_t i = *checked, bad = t->step_nonfinite[i];
        if (bad >= dp_params_numel(p))
            continue;
        /* The element index into the parameter buffer names the tensor. */
        int j = 0;
        for (int64_t end = 0; j < dp_params_count(p); j++) {
            end += dp_tensor_numel(dp_params_get(p, j));
            if (bad < end)
                break;
        }
        const char *name = dp_params_name(p, j);
        long long step = (long long)(epoch * batches + i + 1);
        char loss[64] = "";
        if (t->ranks == 1 && !isfinite(t->step_loss[i]))
            snprintf(loss, sizeof loss, " (the loss is %s)",
                     isnan(t->step_loss[i]) ? "NaN"
                     : t->step_loss[i] > 0  ? "Inf"
                                            : "-Inf");
        if (t->o->skip_nonfinite) {
            (*skipped)++;
            if (t->rank == 0)
                DP_WARN("step %lld (epoch %d, batch %lld): gradient of %s is not finite (NaN or "
                        "Inf)%s; skipped it (--skip-nonfinite)",
                        step, epoch + 1, (long long)i, name ? name : "?", loss);
            continue;
        }
        char last[640];
        DP_ERROR("step %lld (epoch %d, batch %lld): gradient of %s is not finite (NaN or Inf)%s; "
                 "stopped without applying it%s",
                 step, epoch + 1, (long long)i, name ? name : "?", loss,
                 last_checkpoint_str(t, last, sizeof last));
        return DP_ENONFINITE;
    }
    return 0;
}

/* Finishes the steps in flight and writes a checkpoint that resumes epoch
 * `epoch` at batch `next`, with the epoch's figures so far. */
static int save_stopped(trainer *t, int epoch, int64_t next, double seconds)
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
        DP_TRY(save_checkpoint(t, t->stopped_path, epoch, next, sums[0], sums[1], seconds));
    t->stopped_epoch = epoch;
    t->stopped_batch = next;
    return DP_EINTR;
}

static int run_epoch(trainer *t, int epoch, dp_epoch_stats *s)
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
    double start = dp_time_seconds() - before;
    dp_batch b;
    int more, rc = 0;
    int64_t issued = 0, seen = first * o->batch_size, checked = first, skipped = 0;
    while ((more = dp_loader_next(t->train_loader, &b)) > 0) {
        DP_TRY(train_step(t, &b));
        bool stop = stop_signal != 0;
        if (t->ranks > 1)
            DP_TRY(dp_dist_any(stop, &stop));
        if (stop) {
            if (!stop_signal)
                stop_signal = SIGTERM; /* another rank's signal */
            /* A bad step among those in flight stops the run unsaved. */
            DP_TRY(dp_waitall());
            DP_TRY(check_steps(t, epoch, &checked, b.index + 1, &skipped));
            return save_stopped(t, epoch, b.index + 1, dp_time_seconds() - start);
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
            DP_TRY(check_steps(t, epoch, &checked, done + 1, &skipped));
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
    DP_TRY(check_steps(t, epoch, &checked, first + issued, &skipped));
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
    s->batch_size = o->batch_size;
    s->lr = o->lr;
    s->ranks = t->ranks;
    /* Time inside MPI_Allreduce, waiting for the slowest rank included. */
    double comm = dp_dist_comm_seconds(NULL) - comm0;
    s->allreduce_ms = issued ? 1e3 * comm / (double)issued : 0.0;
    s->skipped_steps = skipped;
    rc = evaluate(t, &s->test_acc);
    s->peak_rss_mb = dp_peak_rss_mb();
    s->rss_mb = dp_rss_mb();
    return rc;
}

/* The checkpoint after an epoch. When writing it fails (disk full, EIO)
 * the previous one is still there, whole (dp_safetensors_write writes a
 * temporary file and renames it); --on-checkpoint-error says whether the
 * run stops or trains on and tries again after the next epoch. Every rank
 * learns rank 0's outcome, so all stop or all go on. */
static int checkpoint_epoch(trainer *t, int epochs_done)
{
    const dp_train_options *o = t->o;
    int rc = 0;
    char last[640];
    last_checkpoint_str(t, last, sizeof last);
    if (t->rank == 0)
        rc = save_checkpoint(t, o->checkpoint_path, epochs_done, 0, 0, 0, 0);
    if (rc == DP_EIO || rc == DP_ENOMEM) {
        if (o->on_checkpoint_error == DP_ON_ERROR_CONTINUE) {
            DP_WARN("no checkpoint after epoch %d%s; training goes on and tries again after the "
                    "next epoch (--on-checkpoint-error continue)",
                    epochs_done, last);
            rc = 0;
        } else {
            DP_ERROR("no checkpoint after epoch %d%s; stopped (--on-checkpoint-error stop; "
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

int dp_train(const dp_train_options *o, dp_train_result *result)
{
    if (o->batch_size <= 0 || o->epochs <= 0 || !(o->lr > 0) || o->limit_train < 0 ||
        o->limit_test < 0 || o->threads < 0 || o->on_checkpoint_error < DP_ON_ERROR_STOP ||
        o->on_checkpoint_error > DP_ON_ERROR_CONTINUE) {
        DP_ERROR("dp_train: batch size, epochs and lr must be positive");
        return DP_EINVAL;
    }
    if (o->no_tf32)
        dp_set_tf32(false);
    trainer t;
    memset(&t, 0, sizeof t);
    t.o = o;
    memset(result, 0, sizeof *result);
    int rc = setup(&t);
    double total = 0;
    int first = rc == 0 ? t.ck->epochs_done : 0;
    if (o->epochs > DP_CHECKPOINT_MAX_HISTORY) {
        DP_ERROR("--epochs %d: at most %d", o->epochs, DP_CHECKPOINT_MAX_HISTORY);
        rc = DP_EINVAL;
    }
    for (int e = first; rc == 0 && e < o->epochs; e++) {
        dp_epoch_stats *s = &t.ck->history[e];
        rc = run_epoch(&t, e, s);
        if (rc < 0)
            break;
        t.ck->nhistory = e + 1;
        total += s->epoch_seconds;
        if (t.metrics)
            rc = dp_metrics_write_epoch(t.metrics, s);
        if (rc == 0 && o->plot_path && t.rank == 0)
            rc = dp_plot_write(o->plot_path, o->epochs, t.ck->history, e + 1);
        if (rc == 0 && o->checkpoint_path)
            rc = checkpoint_epoch(&t, e + 1);
        result->epochs_done = e + 1;
        result->test_acc = s->test_acc;
        result->train_loss = s->train_loss;
        result->train_acc = s->train_acc;
        result->sec_per_epoch = total / (e + 1 - first);
    }
    snprintf(result->devices, sizeof result->devices, "%s", t.where);
    if (rc == DP_EINTR) {
        snprintf(result->checkpoint, sizeof result->checkpoint, "%s", t.stopped_path);
        result->stopped_epoch = t.stopped_epoch + 1;
        result->stopped_batch = t.stopped_batch;
    }
    if (rc == 0 && t.metrics) {
        rc = dp_metrics_close(t.metrics);
        t.metrics = NULL;
    }
    teardown(&t);
    return rc;
}

int dp_evaluate(const dp_eval_options *o, double *test_acc, char *devices, size_t devices_size)
{
    char model[32];
    if (!o->checkpoint) {
        DP_ERROR("evaluate: no checkpoint given");
        return DP_EINVAL;
    }
    if (o->model)
        snprintf(model, sizeof model, "%s", o->model);
    else if (dp_checkpoint_model(o->checkpoint, model, sizeof model) < 0) {
        if (dp_last_error()[0] == '\0')
            DP_ERROR("%s does not say which model it holds: give --model", o->checkpoint);
        return DP_EINVAL;
    }
    dp_train_options to;
    dp_train_options_default(&to);
    to.model = model;
    to.devices = o->devices ? o->devices : "1";
    to.threads = o->threads;
    to.batch_size = o->batch_size > 0 ? o->batch_size : 256;
    to.data_dir = o->data_dir;
    to.limit_test = o->limit_test;
    trainer t;
    memset(&t, 0, sizeof t);
    t.o = &to;
    t.rank = dp_dist_rank();
    t.ranks = dp_dist_size();
    int64_t one = 1;
    int rc = dp_devices_open(t.devs, &t.ndev, to.devices, to.threads);
    if (rc == 0) {
        t.dev = t.devs[0];
        dp_devices_str(t.devs, t.ndev, t.devices, sizeof t.devices);
        rc = dp_fashion_mnist_load(o->data_dir, false, &t.test);
    }
    dp_loader_options lo = {.batch_size = to.batch_size, .limit = o->limit_test};
    if (rc == 0)
        rc = dp_loader_init(&t.test_loader, &t.test, &lo);
    if (rc == 0)
        rc = dp_model_create(&t.model, model, t.dev, 0);
    if (rc == 0)
        rc = dp_checkpoint_load_weights(o->checkpoint, t.model);
    dp_data_parallel_options po = {.sgd = {.lr = 1.0f}};
    if (rc == 0)
        rc = dp_data_parallel_init(&t.dp, t.model, t.devs, t.ndev, &po);
    if (rc == 0)
        rc = dp_tape_init(&t.eval_tape, false);
    if (rc == 0)
        rc = dp_tensor_new(&t.correct, t.dev, DP_F32, 1, &one);
    if (rc == 0)
        rc = evaluate(&t, test_acc);
    if (devices)
        snprintf(devices, devices_size, "%s", t.devices);
    teardown(&t);
    return rc;
}
