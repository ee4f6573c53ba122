/* What the files of src/train/ that make up dp_train and dp_evaluate share.
 * The loop itself is described at the top of trainer.c.
 *
 * A run is made of parts, each an opaque struct whose fields only the file
 * that defines it reads and writes; every other file goes through the
 * functions below:
 *
 *   data.c       dp__train_data   the datasets, their loaders, the samples' shape
 *   net.c        dp__train_net    the devices, the model and its executor
 *                                 (dp/executor.h: data parallel or pipeline)
 *   precision.c  dp__train_prec   the run's precision and convolution kernels
 *   step.c       dp__train_steps  the steps issued: their losses, rows and
 *                                 gradient checks, the epoch's sums
 *   book.c       dp__train_book   the run's record: its epochs, checkpoints,
 *                                 metrics file, progress bar, where it stopped
 *   board.c      dp__train_board  the TensorBoard event file (--tensorboard)
 *
 * dp__trainer holds the options, the rank and the parts; trainer.c sets
 * its fields once, before the first step, and the others only read them. */
#ifndef DP_TRAIN_TRAINER_H
#define DP_TRAIN_TRAINER_H

#include "dp/autograd.h"
#include "dp/checkpoint.h"
#include "dp/data.h"
#include "dp/dist.h"
#include "dp/executor.h"
#include "dp/nn.h"
#include "dp/optim.h"
#include "dp/train.h"
#include "train/checkpoint_header.h"

typedef struct dp__train_data dp__train_data;
typedef struct dp__train_net dp__train_net;
typedef struct dp__train_prec dp__train_prec;
typedef struct dp__train_steps dp__train_steps;
typedef struct dp__train_book dp__train_book;
typedef struct dp__train_board dp__train_board;

typedef struct dp__trainer {
    const dp_train_options *o;
    int rank, ranks; /* MPI: this process's rank of `ranks` */
    dp__train_data *data;
    dp__train_net *net;
    dp__train_prec *prec;
    dp__train_steps *steps;
    dp__train_book *book;
    dp__train_board *board;
} dp__trainer;

/* The name of the model a run trains: its definition's, or the option's. */
const char *dp__train_model_name(const dp_train_options *o);

/* ---- trainer.c, epoch.c, evaluate.c: the loop ------------------------------ */

/* epoch.c: one epoch of training and its test accuracy into *s. */
int dp__train_epoch(dp__trainer *t, int epoch, dp_epoch_stats *s);
/* evaluate.c: the model as it is over the test loader: accuracy, loss,
 * top-5 accuracy, the confusion matrix (r->devices is left as it was). */
int dp__train_evaluate(dp__trainer *t, dp_eval_result *r);

/* predict.c: dp_predict's inputs as the checkpoint's samples (x: [n, chw]
 * floats, dp__malloc'd; chw from the checkpoint's header h, else the first
 * image), normalised as h says, the names into out and h's class names
 * (taken from h); then the softmax of every input's logits, each rank
 * computing its chunk in batches of `batch`. */
int dp__predict_inputs(const dp_predict_options *o, dp__checkpoint_header *h, dp_predictions *out,
                       float **x, int64_t chw[3]);
int dp__train_predict(dp__trainer *t, const float *x, const int64_t *chw, int64_t batch,
                      dp_predictions *out);

/* ---- data.c ------------------------------------------------------------------ */

/* The training samples' (C, H, W) and count from the files' headers, before
 * loading (the options' own sets: theirs): 0; 1 (nothing logged) where
 * only loading tells (a folder); or a negative DP_E* code. */
int dp__data_peek(const dp_train_options *o, int64_t chw[3], int64_t *n);
/* The test set (and with `train_too` the training set too): the options'
 * own, or loaded from the dataset's files. */
int dp__data_open(dp__train_data **out, const dp_train_options *o, bool train_too);
/* The loaders: batches of the options' size, the training set's shuffled
 * from `seed` (with `train_too`). */
int dp__data_open_loaders(dp__train_data *d, const dp_train_options *o, uint64_t seed,
                          bool train_too);
void dp__data_close(dp__train_data *d);
/* (channels, rows, cols) of every sample. */
const int64_t *dp__data_chw(const dp__train_data *d);
const dp_dataset *dp__data_train_set(const dp__train_data *d);
const dp_dataset *dp__data_test_set(const dp__train_data *d);
/* The labels are below this (0: not known; d may be NULL). */
int dp__data_classes(const dp__train_data *d);
/* What a checkpoint records of the data: the samples' shape, the class
 * names. */
void dp__data_record(const dp__trainer *t, dp_checkpoint_state *ck);
dp_loader_t *dp__data_loader(const dp__train_data *d, bool train);
/* This rank's rows of loader batch b as the executor takes them, with
 * dropout's key (seed, step). */
void dp__data_host_batch(const dp__trainer *t, const dp_batch *b, uint64_t seed, uint64_t step,
                         dp_host_batch *out);

/* ---- net.c ------------------------------------------------------------------- */

/* The devices of --devices (and the options' checks that need them). */
int dp__net_open(dp__train_net **out, const dp__trainer *t);
/* The model of the options for samples of shape chw on the first device,
 * its weights (--init), and its executor over every device. */
int dp__net_build(dp__train_net *n, const dp__trainer *t, const int64_t *chw);
void dp__net_close(dp__train_net *n);
int dp__net_count(const dp__train_net *n);
dp_device_t *dp__net_device(const dp__train_net *n, int k);
/* Waits for the run's own devices (never dp_waitall: a device that other
 * code of the process opened, with an error of its own, is not the run's);
 * returns the first error they hit. NULL: 0. */
int dp__net_sync(const dp__train_net *n);
/* "[cpu:0, cpu:1]": this rank's devices; `where` adds " x 4 ranks". */
const char *dp__net_devices_str(const dp__train_net *n);
const char *dp__net_where(const dp__train_net *n);
dp_model_t *dp__net_model(const dp__train_net *n);
dp_executor_t *dp__net_executor(const dp__train_net *n);
dp_data_parallel_t *dp__net_replicas(const dp__train_net *n);
/* --pipeline's pipeline, or NULL. */
dp_pipeline_t *dp__net_pipeline(const dp__train_net *n);
/* The classes the model tells apart: its output's size per sample. */
int64_t dp__net_classes(const dp__train_net *n);

/* Before the data are loaded where their headers tell the samples' shape
 * (else right after): the options' model for samples chw (its definition,
 * kept for dp__net_build), its pipeline stages, --init's checkpoint against
 * it, and a step's memory (memory.c). */
int dp__net_plan(dp__train_net *n, const dp__trainer *t, const int64_t *chw);
/* The definition dp__net_plan loaded. */
const dp_model_def *dp__net_definition(const dp__train_net *n);

/* stages.c: --pipeline's checks (each bad combination a one-line error
 * naming the options; first[0..K] gets the stages' first layers) and its
 * pipeline over the devices. */
int dp__train_check_pipeline(const dp__trainer *t, const dp_model_def *def, const int64_t *in_chw,
                             int *first);
int dp__train_open_pipeline(const dp__trainer *t, dp_model_t *model, const dp_model_def *def,
                            const int64_t *chw, const dp_data_parallel_options *update,
                            dp_pipeline_t **out);

/* ---- precision.c ------------------------------------------------------------- */

/* The run's precision and convolution algorithm, checked against the
 * devices and set for this thread and process; close puts back what was
 * there. */
int dp__prec_open(dp__train_prec **out, const dp__trainer *t);
void dp__prec_close(dp__train_prec *p);
/* Whether a batch of `rows` is cut into shares that are each a whole
 * subtree of the split-invariant sums' tree (false without them). */
bool dp__prec_split_whole(const dp__trainer *t, int64_t rows);
/* Under DP_CONV_ALGO_AUTO: the convolution kernels measured by rank 0 on
 * a batch of the training set before the first step, loaded on every rank. */
int dp__prec_tune(dp__train_prec *p, const dp__trainer *t);
/* The kernels chosen, the first time it is asked (for the first epoch's
 * metrics); NULL after, or when none were measured. */
const char *dp__prec_take_choices(dp__train_prec *p);
/* What a checkpoint records of them. */
void dp__prec_record(const dp__trainer *t, dp_checkpoint_state *ck);

/* ---- step.c ------------------------------------------------------------------ */

/* The steps' state; turns on the device-side check of every step's
 * gradient on every replica of every rank, or on none. */
int dp__steps_open(dp__train_steps **out, const dp__trainer *t);
void dp__steps_close(dp__train_steps *s);
/* The run's seed and the steps issued so far (a resumed run's). */
void dp__steps_resume(dp__train_steps *s, uint64_t seed, int64_t steps);
uint64_t dp__steps_seed(const dp__train_steps *s);
int64_t dp__steps_done(const dp__train_steps *s);
/* The learning-rate schedule of the options (o.schedule) for a run of
 * their epochs of `batches` batches: its steps, milestones and warmup
 * counted in updates. */
void dp__steps_schedule(const dp_train_options *o, int64_t batches, dp_lr_schedule *p);
/* The run's schedule, for `batches` batches an epoch (DP_EINVAL, with the
 * reason, for one PyTorch would refuse). */
int dp__steps_plan(dp__train_steps *s, const dp_train_options *o, int64_t batches);
/* "cosine total=2350 warmup=235", for checkpoints. */
void dp__steps_schedule_str(const dp__train_steps *s, char *buf, size_t size);
/* An epoch of `batches` batches whose sums so far are loss0 and correct0. */
int dp__steps_start_epoch(dp__train_steps *s, int64_t batches, double loss0, double correct0);
/* Issues one training step on (this rank's chunk of) batch b; returns
 * without waiting. */
int dp__steps_issue(dp__trainer *t, const dp_batch *b);
/* Batch i's summed loss and rows on this rank, once its step has run. */
float dp__steps_loss(const dp__train_steps *s, int64_t i);
/* The learning rate of batch i's update. */
double dp__steps_lr(const dp__train_steps *s, int64_t i);
int64_t dp__steps_rows(const dp__train_steps *s, int64_t i);
/* Sums batches [from, to)'s losses over the ranks, in place. */
int dp__steps_sum_losses(dp__train_steps *s, int64_t from, int64_t to);
/* The epoch's summed loss and right answers on this rank (waits). */
int dp__steps_read_sums(const dp__train_steps *s, float sums[2]);
/* Reads the gradient checks of this epoch's steps [*checked, upto), which
 * have finished: a step whose summed gradient held a NaN or an Inf was not
 * applied; without skip_nonfinite the run stops there, naming the step and
 * the parameter (DP_ENONFINITE). */
int dp__steps_check(dp__trainer *t, int epoch, int64_t *checked, int64_t upto, int64_t *skipped);

/* ---- book.c ------------------------------------------------------------------ */

int dp__book_open(dp__train_book **out, const dp__trainer *t);
/* The metrics file (rank 0's), opened last of the run's setup: a run
 * stopped before creates nothing. */
int dp__book_open_files(dp__train_book *b, const dp__trainer *t);
void dp__book_close(dp__train_book *b);
/* --resume's checkpoint from its header, before anything is loaded: the
 * model def, its tensors, its training state, epochs left to train. */
int dp__book_check_resume(const dp__trainer *t, const dp_model_def *def);
/* --resume: the weights, optimizer state and position of an interrupted
 * run, into the replicas and the steps. */
int dp__book_resume(dp__trainer *t);
/* Epochs finished, and the history of every epoch (room for
 * DP_MAX_EPOCHS): stats[e] is epoch e + 1's. */
int dp__book_epochs_done(const dp__train_book *b);
dp_epoch_stats *dp__book_history(dp__train_book *b);
/* Where epoch `epoch` starts: a resumed mid-epoch run goes on at batch
 * *first with the epoch's figures so far (used once); else all zero. */
void dp__book_take_resume_point(dp__trainer *t, int epoch, int64_t *first, double *seconds,
                                double *loss, double *correct);
/* Epoch `epochs_done` has ended: its history entry is complete; writes
 * metrics, plot and checkpoint as the options ask. */
int dp__book_end_epoch(dp__trainer *t, int epochs_done);
/* A callback of the options asked the run to stop after its current step. */
void dp__book_request_stop(dp__train_book *b);
bool dp__book_stop_requested(const dp__train_book *b);
/* Whether the run should end for want of a better test accuracy
 * (early_stop), and the best so far with its epoch (0: none). */
bool dp__book_early_stopped(const dp__train_book *b, double *best_acc, int *best_epoch);
dp_metrics_t *dp__book_metrics(const dp__train_book *b);
dp_progress_t *dp__book_progress(const dp__train_book *b);
/* Closes the metrics file, reporting a failed write. */
int dp__book_finish(dp__train_book *b);
/* "; the last checkpoint (FILE, epoch 4) is intact" for messages about a
 * run that stops or goes on without writing one. */
const char *dp__book_last_checkpoint_str(const dp__trainer *t, char *buf, size_t size);
/* A stop was requested after batch next - 1 of epoch `epoch`: finishes the
 * steps in flight, writes the checkpoint that resumes there; DP_EINTR. */
int dp__book_save_stopped(dp__trainer *t, int epoch, int64_t next, double seconds);
/* Where a stopped run's checkpoint went, and its epoch and next batch. */
const char *dp__book_stopped(const dp__train_book *b, int *epoch, int64_t *batch);

/* ---- board.c ----------------------------------------------------------------- */

/* Rank 0's TensorBoard event file in the options' directory (nothing on
 * other ranks or without one); opened once the run knows its first step,
 * so that a resumed run tells TensorBoard to forget the steps after its
 * checkpoint (dp__tb_start). */
int dp__board_open(dp__train_board **out, const dp__trainer *t);
/* Syncs and closes, reporting a failed write; NULL is fine. */
int dp__board_close(dp__train_board *b);
/* Whether this rank writes events. */
bool dp__board_on(const dp__train_board *b);
/* Step `step`'s mean loss and learning rate. */
int dp__board_step(dp__train_board *b, int64_t step, double loss, double lr);
/* The epoch's figures at its last step, `step`; syncs the file. */
int dp__board_epoch(dp__train_board *b, int64_t step, const dp_epoch_stats *s);

/* ---- ranks.c, stop.c, outputs.c: no state of their own -------------------- */

/* Under mpirun, which rows of n are this rank's: [*first, *first + return). */
int64_t dp__train_rank_rows(const dp__trainer *t, int64_t n, int64_t *first);
/* Every rank was started with the same options. */
int dp__train_check_ranks_agree(const dp__trainer *t);
/* Whether a stop request is served between steps from now on: set just
 * before a run opens its output files, cleared when it returns. */
void dp__train_set_between_steps(bool on);
/* A run's start and return (stop.c): a stop request a run returned with
 * was served by it, and the next run starts without it; one made after
 * that return (or before any run) is the next run's. */
void dp__train_stop_begin_run(void);
void dp__train_stop_end_run(void);
/* Whether to stop after the step just issued: a stop was requested in this
 * process or, under mpirun, in any rank's. */
int dp__train_should_stop(const dp__trainer *t, bool *stop);
/* The checkpoint (and its temporary file), the metrics file, the plot and
 * the TensorBoard directory can be written, checked before the first step. */
int dp__train_check_outputs(const dp_train_options *o);
/* memory.c: a step's memory for the model def on samples chw, estimated
 * from its trace on the meta device (activations kept for backward,
 * parameters, gradients, optimizer state, per device, and the loader's
 * batches), against what this machine has (MemAvailable, the cgroup's
 * limit) or `max_memory`: DP_ENOMEM with the estimate and what is
 * available, before anything is allocated. */
int dp__train_check_memory(const dp__trainer *t, const dp_model_def *def, const int64_t *chw);

#endif
