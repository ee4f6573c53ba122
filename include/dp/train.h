/* dp/train.h - the training loop of the seeds' train(): epochs over
 * Fashion-MNIST (or MNIST, CIFAR-10, a program's own data), evaluation on
 * the test set after each, the Timer that counts training time only,
 * metrics, progress and the Animator's plot. */
#ifndef DP_TRAIN_H
#define DP_TRAIN_H

#include "dp/data.h"
#include "dp/nn.h"
#include "dp/optim.h"
#include "dp/option.h"
#include "dp/parallel.h"
#include "dp/pipeline.h"
#include "dp/train_util.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct dp_dataset;
struct dp_model_def;

/* What on_step sees of a step (read-only). */
typedef struct dp_step_view {
    int64_t step;  /* the run's update count, from 1 */
    int epoch;     /* from 1 */
    int64_t batch; /* within the epoch, from 0 */
    double loss;   /* mean loss of the step's batch */
    double lr;     /* the learning rate its update used */
} dp_step_view;

/* What a run does when writing its checkpoint fails (disk full, EIO): the
 * previous checkpoint is left as it was either way. */
typedef enum dp_on_error {
    DP_ON_ERROR_STOP = 0,    /* stop with the error */
    DP_ON_ERROR_CONTINUE = 1 /* warn, train on, try again after the next epoch */
} dp_on_error;
/* "stop", "continue". */
extern const dp_name_table dp_on_error_names;

/* When rank 0 draws the progress bar on stderr. */
typedef enum dp_progress_mode {
    DP_PROGRESS_AUTO = 0, /* when stderr is a terminal */
    DP_PROGRESS_ALWAYS = 1,
    DP_PROGRESS_NEVER = 2,
} dp_progress_mode;
/* "auto", "always", "never". */
extern const dp_name_table dp_progress_mode_names;

/* Adam's and AdamW's (beta1, beta2), each in [0, 1). */
typedef struct dp_adam_betas {
    float beta1, beta2;
} dp_adam_betas;

/* MultiStepLR's milestones, increasing epochs; n = 0: none. */
typedef struct dp_lr_milestones {
    int n;
    int64_t epochs[DP_LR_MAX_MILESTONES];
} dp_lr_milestones;

/* The options of a run, one sub-struct per group of the option list
 * (dp/train_option_list.h, which documents each field):
 *   o.net       the model and its weights' init
 *   o.data      the dataset, batches, limits, augmentation, normalisation
 *   o.optim     the optimizer, its hyperparameters, the loss's smoothing
 *   o.schedule  the learning-rate schedule, stepped once per update
 *               (lr_step and lr_milestones count epochs, as a per-epoch
 *               loop steps StepLR and MultiStepLR; warmup_epochs > 0
 *               warms up for that many epochs' batches)
 *   o.run       epochs, seed, non-finite steps, steps in flight
 *   o.parallel  devices, threads, allreduce, buckets, SyncBatchNorm,
 *               pipeline stages
 *   o.numerics  precision, convolution kernels, TF32, determinism and
 *               split-invariant sums (dp_set_split_invariant)
 *   o.checkpoint  checkpoint, resume, best checkpoint, early stop
 *   o.output    progress bar, notes, metrics, plot, TensorBoard
 * dp_train_options_default fills the list's defaults. */
#include "dp/train_option_list.h"

#define DP__OPTION_FIELD(group, name, type, ...) type name;
#define DP__OPTION_GROUP_STRUCT(group, heading)                                                    \
    typedef struct dp_train_##group##_options {                                                    \
        DP_TRAIN_OPTIONS_##group(DP__OPTION_FIELD)                                                 \
    } dp_train_##group##_options;
DP_TRAIN_OPTION_GROUPS(DP__OPTION_GROUP_STRUCT)
#undef DP__OPTION_GROUP_STRUCT

typedef struct dp_train_options {
#define DP__OPTION_GROUP_FIELD(group, heading) dp_train_##group##_options group;
    DP_TRAIN_OPTION_GROUPS(DP__OPTION_GROUP_FIELD)
#undef DP__OPTION_GROUP_FIELD
    /* A program's own data (dp_dataset_from_memory), both or neither: when
     * set they are trained and tested on instead of loading data.dataset.
     * The run only reads them; they must outlive it. */
    const struct dp_dataset *train_set, *test_set;
    /* A program's own model (dp/nn.h, examples/custom_model.c): when set it
     * is trained instead of net.model, and checkpoints carry its name. It
     * must outlive the run. */
    const struct dp_model_def *model_def;
    /* Called on the thread that calls dp_train: on_step once a step's loss
     * is known (a step or so after it was issued; under mpirun, on rank 0's
     * loss at the end of the epoch), on_epoch after each epoch's figures.
     * Either may return true to stop the run after the current step, as a
     * stop request does (a checkpoint is written; dp_train returns
     * DP_EINTR). NULL: none. */
    bool (*on_step)(const dp_step_view *step, void *user);
    bool (*on_epoch)(const dp_epoch_stats *epoch, void *user);
    void *callback_user;
} dp_train_options;

/* How many options the list holds. */
#define DP__OPTION_ONE(...) +1
#define DP__OPTION_GROUP_COUNT(group, heading) DP_TRAIN_OPTIONS_##group(DP__OPTION_ONE)
enum { DP_TRAIN_OPTION_COUNT = 0 DP_TRAIN_OPTION_GROUPS(DP__OPTION_GROUP_COUNT) };
#undef DP__OPTION_GROUP_COUNT

/* Fills the option list's defaults: lenet, 1 device, batch 256, lr 0.2,
 * 10 epochs, seed 0, shuffle on, 25 MiB gradient buckets, ...; no data,
 * model or callbacks of a program's own. */
void dp_train_options_default(dp_train_options *o);

/* The options as data, in the list's order (dp/option.h: name, flag,
 * help, type, offset into dp_train_options, range): *count of them. */
const dp_option *dp_train_option_list(int *count);
/* The option named `name` ("batch_size"), or NULL. */
const dp_option *dp_train_option_find(const char *name);
/* Sets option `name` of *o from text as the command line gives it ("64",
 * "adamw", "crop:4,flip"): 0, or DP_EINVAL logged as "`name` TEXT:
 * expected ..." (an unknown name too). */
int dp_train_option_set(dp_train_options *o, const char *name, const char *text);
/* Whether the options make a run: each value in its range (a default is
 * always taken), and the options that depend on each other agreeing
 * (`nesterov` needs `momentum`, `resume_path` excludes `init_path`, ...).
 * 0, or DP_EINVAL logged naming the options. dp_train checks this first;
 * a program that reads options from its users may check them sooner. */
int dp_train_options_check(const dp_train_options *o);

typedef struct dp_train_result {
    double test_acc;      /* after the last epoch */
    double sec_per_epoch; /* mean training time per epoch, evaluation excluded */
    double train_loss, train_acc;
    char devices[320];    /* "[cpu:0]", "[cpu:0] x 2 ranks" */
    char checkpoint[512]; /* the checkpoint written when stopped (DP_EINTR) */
    int stopped_epoch;    /* the epoch (from 1) and batch (from 0) it stopped before */
    int64_t stopped_batch;
    int epochs_done;
    /* With --pipeline: each stage's parameters and the most activation
     * bytes its tapes held at once (dp_pipeline_stats). */
    int pipeline_stages;
    int stage_first[65]; /* stage k: layers stage_first[k] .. stage_first[k + 1] - 1 */
    int64_t stage_params[64], stage_activation_bytes[64];
    /* save_best_path: the best test accuracy and its epoch (from 1); with
     * early_stop, whether the run ended for want of a better one. */
    double best_test_acc;
    int best_epoch;
    bool early_stopped;
} dp_train_result;

/* Trains; returns 0, a negative DP_E* code, or DP_EINTR after
 * dp_train_request_stop: then the step in progress was finished and a
 * checkpoint written (result->checkpoint) from which resume_path goes on
 * at the next batch, with the same result as an uninterrupted run. */
int dp_train(const dp_train_options *o, dp_train_result *result);

/* Asks a running dp_train to stop after its current step. Only stores
 * `signo` (async-signal-safe): a SIGINT or SIGTERM handler may call it.
 * A request made before a run starts is served at its first step; one a
 * run returned with (served) is dropped when the next dp_train starts, so
 * a run after a Ctrl-C trains (dp_train_stop_signal still reads it until
 * then). */
void dp_train_request_stop(int signo);
/* The signal number given to dp_train_request_stop, or 0. */
int dp_train_stop_signal(void);
/* Whether a dp_train of this process is where a stop request is served
 * after its current step, its files open: from just before its first step
 * to its return. Before (loading the data, building the model, measuring
 * kernels, allocating) a request waits for the first step, and nothing of
 * the run is written yet: a SIGINT or SIGTERM handler may end the process
 * there instead (dptrain does). Async-signal-safe. */
bool dp_train_stops_between_steps(void);

/* Where an interrupted run without --checkpoint saves itself. */
#define DP_INTERRUPT_CHECKPOINT "dptrain-interrupted.safetensors"

/* Test accuracy of a checkpoint's weights (dptrain's or a plain state
 * dict); model NULL takes the model named in the checkpoint. */
typedef struct dp_eval_options {
    const char *model;
    const struct dp_model_def *model_def; /* a program's own model, instead of `model` */
    const char *checkpoint;
    const char *devices;
    int threads;
    int64_t batch_size;  /* 0 = 256 */
    const char *dataset; /* as dp_train_options.data.dataset */
    const char *data_dir;
    const struct dp_dataset *test_set; /* a program's own test set, else NULL */
    int64_t limit_test;
    dp_precision precision; /* as dp_train_options.numerics.precision */
} dp_eval_options;

int dp_evaluate(const dp_eval_options *o, double *test_acc, char *devices, size_t devices_size);

/* Everything an evaluation counts. */
typedef struct dp_eval_result {
    double test_acc;  /* fraction with the argmax on the label */
    double test_loss; /* mean cross-entropy per sample (no label smoothing) */
    double test_top5; /* fraction with the label among the 5 largest logits; 0 with 5
                         classes or fewer */
    int64_t samples;
    int classes;
    /* classes x classes counts, [label * classes + predicted] (malloc'd;
     * dp_eval_result_free frees it). */
    int64_t *confusion;
    char devices[320];
} dp_eval_result;

/* dp_evaluate with every figure. */
int dp_evaluate_detailed(const dp_eval_options *o, dp_eval_result *r);
void dp_eval_result_free(dp_eval_result *r);
/* Classifies images with a checkpoint's model: the inputs are PNG or JPEG
 * files (decoded as the checkpoint's samples, dptrain.input: its channels,
 * and its size, or else refused naming the file and both sizes), or one
 * .npy file of a batch (N, H, W) or (N, C, H, W), uint8 (scaled by 1/255)
 * or float32. Without dptrain.input in the checkpoint (a plain state
 * dict) the first image's shape is taken. Data parallel over the devices,
 * each rank of mpirun taking its chunk; every rank gets every
 * probability. */
typedef struct dp_predict_options {
    const char *checkpoint;
    const char *model; /* NULL: the model the checkpoint names */
    const struct dp_model_def *model_def;
    const char *devices; /* NULL: "1" */
    int threads;
    const char *const *inputs; /* ninputs image files, or one .npy */
    int ninputs;
    int64_t batch_size; /* 0 = 256 */
} dp_predict_options;

typedef struct dp_predictions {
    int64_t n;    /* images */
    int outputs;  /* the model's outputs (classes) per image */
    float *probs; /* [n, outputs]: softmax of each image's logits */
    char **names; /* [n]: each image's file, or "FILE.npy[i]" */
    /* The checkpoint's class names (dptrain.classes): class_names[k] names
     * output k for k < classes; 0 and NULL when it has none. */
    int classes;
    char **class_names;
    /* [n, outputs]: each image's raw outputs (the logits, eval mode) that
     * probs is the softmax of: dptrain predict --logits writes them. */
    float *logits;
} dp_predictions;

int dp_predict(const dp_predict_options *o, dp_predictions *out);
void dp_predictions_close(dp_predictions *p);
/* The k most probable outputs of image i, most probable first (ties: the
 * lower output first), into idx[0..k); k is cut to the outputs. Returns k. */
int dp_predictions_topk(const dp_predictions *p, int64_t i, int k, int *idx);

/* The first `count` samples of epoch `epoch` (from 0) of the options'
 * training set (the test set with `test`) exactly as the loader hands
 * them to a run's step: shuffled from run.seed, transformed, augmented
 * and normalised; fewer where the set (or its limit) has fewer. For
 * looking at what the model sees (`dptrain data`). */
typedef struct dp_data_samples {
    int64_t n, cap;     /* samples taken; asked (at most the set's) */
    int64_t chw[3];     /* each sample's shape */
    float *x;           /* [n, C, H, W] */
    int32_t *labels;    /* [n] */
    int64_t skipped;    /* bad images left out (bad_images skip) */
    int classes;        /* class_names[0..classes) */
    char **class_names;
} dp_data_samples;
int dp_train_data_samples(const dp_train_options *o, bool test, int64_t epoch, int64_t count,
                          dp_data_samples *out);
/* As dp_train_data_samples, keeping no sample: x and labels stay NULL, the
 * samples are read, transformed and counted (n, skipped), so any count
 * runs in the memory of a few batches (`dptrain data --bench`). */
int dp_train_data_stream(const dp_train_options *o, bool test, int64_t epoch, int64_t count,
                         dp_data_samples *out);
void dp_data_samples_free(dp_data_samples *s);

#ifdef __cplusplus
}
#endif
#endif
