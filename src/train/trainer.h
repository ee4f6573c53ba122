/* What the files of src/train/ that make up dp_train and dp_evaluate share:
 * the state of one run, and each file's entry points. The loop itself is
 * described at the top of trainer.c. */
#ifndef DP_TRAIN_TRAINER_H
#define DP_TRAIN_TRAINER_H

#include "dp/autograd.h"
#include "dp/checkpoint.h"
#include "dp/data.h"
#include "dp/dist.h"
#include "dp/nn.h"
#include "dp/optim.h"
#include "dp/parallel.h"
#include "dp/pipeline.h"
#include "dp/train.h"

typedef struct trainer {
    const dp_train_options *o;
    dp_device_t *devs[DP_MAX_DEVICES];
    int ndev;
    dp_device_t *dev; /* devs[0]: the batch, the gathered outputs and the loss */
    dp_model_t *model;
    /* The definition with the run's weight init, and its specs, when the
     * options change the weights' init (the model points at them). */
    dp_model_def init_def;
    dp_param_spec *init_specs;
    dp_data_parallel_t *dp; /* with --pipeline, the pipeline's */
    dp_pipeline_t *pipe;    /* --pipeline; NULL: data parallel only */
    dp_tensor_t *pipe_loss; /* --pipeline: each step's loss, on devs[0] */
    dp_tape_t *tape, *eval_tape;
    dp_dataset train, test;                 /* loaded from files (empty when given) */
    const dp_dataset *train_set, *test_set; /* what the run uses: those, or the options' */
    /* The model's input: (channels, rows, cols) of every sample of the
     * dataset, known before the model is built. */
    int in_channels, in_rows, in_cols;
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
    uint64_t seed;           /* the options' seed, or the resumed run's */
    int64_t step;
    char devices[256];      /* "[cpu:0, cpu:1]": this rank's */
    char where[288];        /* devices, and " x 4 ranks" under mpirun */
    char stopped_path[512]; /* set when a stop request ended the run */
    int stopped_epoch;
    int64_t stopped_batch;
    /* The thread's precision and the process's convolution algorithm
     * before the run set its own (precision.c), put back after it. */
    bool precision_set;
    dp_precision saved_precision;
    dp_conv_algo saved_conv_algo;
    char *conv_algos; /* the kernels chosen before the first step (auto), or NULL */
    bool conv_algos_listed; /* in an epoch's metrics already */
} dp__trainer;

/* The name of the model a run trains: its definition's, or the option's. */
const char *dp__train_model_name(const dp_train_options *o);

/* trainer.c: opens what a run needs (devices, data, model, loaders,
 * checks, metrics), and closes it. */
int dp__train_setup(dp__trainer *t);
/* The test set (and with `train_too` the training set too): the options'
 * own, or loaded from the dataset's files; sets the input shape. */
int dp__train_open_data(dp__trainer *t, bool train_too);
void dp__train_teardown(dp__trainer *t);

/* pipeline.c: --pipeline's checks and its executor (t->pipe, t->dp). */
int dp__train_setup_pipeline(dp__trainer *t, const dp_model_def *def, const int64_t *in_chw,
                             const dp_data_parallel_options *update);

/* epoch.c: one epoch of training and its test accuracy into *s. */
int dp__train_epoch(dp__trainer *t, int epoch, dp_epoch_stats *s);

/* step.c: issues one training step on (this rank's chunk of) batch b;
 * returns without waiting. */
int dp__train_step(dp__trainer *t, const dp_batch *b);

/* evaluate.c: test accuracy of the model as it is, over the test loader. */
int dp__train_evaluate(dp__trainer *t, double *acc);

/* nonfinite.c: the gradient check of every step, and what the run does
 * about a step that failed it. */
int dp__train_setup_nonfinite_checks(dp__trainer *t);
int dp__train_inject_nan(dp__trainer *t);
int dp__train_check_steps(dp__trainer *t, int epoch, int64_t *checked, int64_t upto,
                          int64_t *skipped);

/* ranks.c: under mpirun, which rows are this rank's, and that every rank
 * was started with the same options. */
int64_t dp__train_rank_rows(const dp__trainer *t, int64_t n, int64_t *first);
int dp__train_check_ranks_agree(const dp__trainer *t);

/* stop.c: whether to stop after the step just issued: a stop was requested
 * in this process or, under mpirun, in any rank's. */
int dp__train_should_stop(const dp__trainer *t, bool *stop);

/* precision.c: the run's precision and convolution algorithm, checked
 * against the devices and set (restore puts back what was there); under
 * DP_CONV_ALGO_AUTO the choices measured by rank 0 before the first step
 * and loaded on every rank; what a checkpoint records of them. */
int dp__train_setup_precision(dp__trainer *t);
void dp__train_restore_precision(dp__trainer *t);
int dp__train_tune_convolutions(dp__trainer *t);
void dp__train_record_precision(const dp__trainer *t, dp_checkpoint_state *ck);

/* outputs.c: the checkpoint (and its temporary file), the metrics file and
 * the plot can be written, checked before the first step. */
int dp__train_check_outputs(const dp_train_options *o);

/* checkpoint_policy.c: when checkpoints are written and read, and what a
 * run says about them. */
int dp__train_resume(dp__trainer *t);
int dp__train_save_checkpoint(dp__trainer *t, const char *path, int epochs_done, int64_t batch,
                              double loss_sum, double correct, double seconds);
const char *dp__train_last_checkpoint_str(const dp__trainer *t, char *buf, size_t size);
int dp__train_save_stopped(dp__trainer *t, int epoch, int64_t next, double seconds);
int dp__train_checkpoint_epoch(dp__trainer *t, int epochs_done);

#endif
