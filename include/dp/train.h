/* dp/train.h - the training loop of the seeds' train(): epochs over
 * Fashion-MNIST (or MNIST, CIFAR-10, a program's own data), evaluation on
 * the test set after each, the Timer that counts training time only,
 * metrics, progress and the Animator's plot. */
#ifndef DP_TRAIN_H
#define DP_TRAIN_H

#include "dp/data.h"
#include "dp/optim.h"
#include "dp/train_util.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Messages of dp_train and dp_evaluate name these options by meaning, so
 * that a program can add its own way of setting them: "the model name",
 * "the device list", "the batch size", "the epoch count", "the allreduce
 * algorithm", "sync batch norm", "checkpoint path", "skipping non-finite
 * steps", "the checkpoint error policy", "deterministic mode", "the
 * dataset", "the data directory", "the augmentation", "the normalisation". */
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

typedef struct dp_train_options {
    const char *model;   /* "lenet" */
    const char *devices; /* "2", "cpu:0,cpu:1", "auto" (dp_devices_open) */
    int threads;         /* kernel threads per device; 0 = cores / devices */
    int64_t batch_size;  /* global batch */
    float lr, momentum, weight_decay;
    /* The training recipe, as PyTorch's (dp/optim.h): the optimizer
     * (dp_optimizer_kind: SGD, the default, Adam, AdamW) with lr, momentum
     * and weight_decay above, SGD's Nesterov momentum, Adam's betas and eps
     * (dp_train_options_default: PyTorch's 0.9, 0.999, 1e-8); the
     * gradient's global norm clipped to clip_grad_norm (0: off); the loss's
     * label smoothing (0: none). */
    int optimizer;
    bool nesterov;
    float beta1, beta2, eps;
    float clip_grad_norm;
    float label_smoothing;
    /* The learning-rate schedule, stepped once per update: its kind and
     * fields as dp_lr_schedule has them, except that total_steps is the
     * run's own (epochs x batches per epoch) and step_size and milestones
     * count epochs (StepLR and MultiStepLR as a per-epoch loop steps them);
     * warmup_epochs > 0 sets warmup_steps to that many epochs' batches. */
    dp_lr_schedule lr_schedule;
    double warmup_epochs;
    /* The checkpoint of the best test accuracy so far, written (atomically,
     * as checkpoint_path) after each epoch that beats it; NULL: none. With
     * early_stop N > 0 the run ends after N epochs without a better test
     * accuracy (dp_train_result.early_stopped). */
    const char *save_best_path;
    int early_stop;
    /* Called on the thread that calls dp_train: on_step once a step's loss
     * is known (a step or so after it was issued; under mpirun, on rank 0's
     * loss at the end of the epoch), on_epoch after each epoch's figures.
     * Either may return true to stop the run after the current step, as a
     * stop request does (a checkpoint is written; dp_train returns
     * DP_EINTR). NULL: none. */
    bool (*on_step)(const dp_step_view *step, void *user);
    bool (*on_epoch)(const dp_epoch_stats *epoch, void *user);
    void *callback_user;
    int epochs; /* 1 to DP_MAX_EPOCHS */
    uint64_t seed;
    const char *dataset;  /* "fashion-mnist" (also NULL), "mnist", "cifar10" */
    const char *data_dir; /* the dataset's files; NULL: Debian's Fashion-MNIST */
    /* A program's own data (dp_dataset_from_memory), both or neither: when
     * set they are trained and tested on instead of loading `dataset`. The
     * run only reads them; they must outlive it. */
    const struct dp_dataset *train_set, *test_set;
    /* A program's own model (dp/nn.h, examples/custom_model.c): when set it
     * is trained instead of `model`, and checkpoints carry its name. It must
     * outlive the run. */
    const struct dp_model_def *model_def;
    const char *metrics_path; /* NULL: none */
    const char *plot_path;    /* NULL: none */
    bool log_steps;
    bool shuffle;
    int64_t limit_train, limit_test; /* 0 = all */
    bool progress;                   /* draw the progress bar on stderr */
    int max_steps_in_flight;         /* finished steps the front end may run ahead of; 0 = 1 */
    int allreduce;                   /* dp_allreduce_algo: auto (default: nccl across GPUs), ring,
                                        naive, ... */
    const char *checkpoint_path;     /* written after every epoch, atomically; NULL: none */
    const char *resume_path;         /* go on from this checkpoint; NULL: start afresh */
    const char *init_path;           /* start from these weights; NULL: the seed's init */
    bool sync_bn;                    /* batch statistics over all devices (SyncBatchNorm) */
    /* Gradient buckets in MiB (dp_data_parallel_options.bucket_mb): 0 = one
     * allreduce after the backward pass; the default is DDP's 25. */
    double bucket_mb;
    int grad_compress; /* dp_grad_compress: across ranks; default none */
    bool verbose;      /* log the bucket layout once (DP_LOG_INFO, rank 0) */
    /* Every step's summed gradient is checked for NaN and Inf on the device
     * before the update; a bad step is never applied. false: the run stops
     * (DP_ENONFINITE) naming the step and the parameter; true: the step is
     * skipped with a warning and counted (dp_epoch_stats.skipped_steps). */
    bool skip_nonfinite;
    int on_checkpoint_error; /* dp_on_error: after a failed checkpoint write */
    /* Pins what could make two runs with the same seed, devices and threads
     * differ (the size of each OpenMP team); see dp_train's notes. */
    bool deterministic;
    /* Split-invariant sums (dp_set_split_invariant): 0 for none, else the
     * rows of a block; batch_size must be that times a power of two. */
    int64_t split_invariant;
    /* GPU convolutions in full float32: TF32 off (dp_set_tf32). */
    bool no_tf32;
    /* The weights' initialisation (dp_weight_init) and, for
     * DP_WEIGHTS_NORMAL, its standard deviation. */
    int weight_init;
    float init_std;
    /* Pipeline parallelism (dp/pipeline.h): 0 for none; K >= 2 splits the
     * model into K stages over K devices (the devices a multiple of K: D
     * pipelines, data parallel among them), `stages` ("0-3,4-9", NULL:
     * balanced by FLOPs) the layers of each, each batch in `micro_batches`
     * pieces (0 = 1) issued by `schedule` (dp_pipeline_schedule). */
    int pipeline;
    const char *stages;
    int micro_batches;
    int schedule;
    /* Mixed precision (dp_precision, dp/ops.h): DP_PRECISION_FP32 (0),
     * DP_PRECISION_BF16 (native bf16 kernels: DP_ENOTSUP, with a message,
     * on a device without them) or DP_PRECISION_BF16_REFERENCE. Weights,
     * optimizer state and checkpoints are float32 in every precision, so a
     * run resumes in another. */
    int precision;
    /* How convolutions pick their kernels (dp_conv_algo): DP_CONV_ALGO_DIRECT
     * (0), DP_CONV_ALGO_AUTO (measured once per shape before the first step,
     * by rank 0 under mpirun, and recorded in checkpoints, which a resumed
     * run follows) or DP_CONV_ALGO_WINOGRAD. */
    int conv_algo;
    /* TensorBoard (SummaryWriter(log_dir)): rank 0 writes an event file
     * into this directory, made if missing: "train/loss" and "train/lr" at
     * every step, "train/epoch_loss", "train/epoch_accuracy",
     * "train/samples_per_second" and "test/accuracy" at each epoch's last
     * step (steps counted from 1 over the run, as --log-steps counts
     * them). Each record is written as it is made, and synced to the disk
     * at each epoch's end. NULL: none. */
    const char *tensorboard_dir;
    /* Your own data: dataset "folder" (dp_image_folder_load) reads its
     * images with `channels` 1 (grayscale) or 3 (RGB), converted as PIL's
     * convert does; 0 takes the first training image's. Checkpoints record
     * the samples' shape and the class names (the folder's class
     * directories; the built-in datasets' names) for dp_predict. */
    int channels;
    /* Augmentation and normalisation (dp/data.h): the training loader
     * crops, flips and normalises every sample on its thread, before a
     * batch is split over ranks and devices, each sample's draws from the
     * run's seed, the epoch and its index; the test set is only normalised.
     * Checkpoints record both (dptrain.augment, dptrain.normalize), and
     * dp_evaluate normalises as its checkpoint says. Zero: the pixels as
     * the dataset has them. */
    dp_augment_options augment;
} dp_train_options;

/* What a run does when writing its checkpoint fails (disk full, EIO): the
 * previous checkpoint is left as it was either way. */
typedef enum dp_on_error {
    DP_ON_ERROR_STOP = 0,    /* stop with the error */
    DP_ON_ERROR_CONTINUE = 1 /* warn, train on, try again after the next epoch */
} dp_on_error;

/* Fills the defaults: lenet, 1 device, batch 256, lr 0.2, 10 epochs, seed 0,
 * shuffle on, 25 MiB gradient buckets. */
void dp_train_options_default(dp_train_options *o);

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
 * `signo` (async-signal-safe): a SIGINT or SIGTERM handler may call it. */
void dp_train_request_stop(int signo);
/* The signal number given to dp_train_request_stop, or 0. */
int dp_train_stop_signal(void);

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
    const char *dataset; /* as dp_train_options.dataset */
    const char *data_dir;
    const struct dp_dataset *test_set; /* a program's own test set, else NULL */
    int64_t limit_test;
    int precision; /* dp_precision, as dp_train_options.precision */
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

#ifdef __cplusplus
}
#endif
#endif
