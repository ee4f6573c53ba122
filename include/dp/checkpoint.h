/* dp/checkpoint.h - a model's weights and the training state in one
 * safetensors file.
 *
 * Tensor names and shapes are those of PyTorch's state_dict() of the same
 * model as the seeds build it (LeNet's W1..b4; ResNet-18's "0.weight",
 * "1.running_mean", "resnet_block1.0.conv1.weight", ..., "fc.1.bias", and
 * each batch norm's "num_batches_tracked" as an I64 scalar), so
 * model.load_state_dict(safetensors.torch.load_file(path)) accepts the file
 * once the "_state." entries are dropped. The training state is in
 * "__metadata__" (dptrain.* keys: the optimizer's name and step count among
 * them) and in "_state.<optimizer>.<name>" tensors, torch.optim's names
 * for its state: _state.sgd.momentum_buffer, _state.adamw.exp_avg, ... */
#ifndef DP_CHECKPOINT_H
#define DP_CHECKPOINT_H

#include "dp/nn.h"
#include "dp/optim.h"
#include "dp/train.h"
#include "dp/train_util.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DP_CHECKPOINT_MAX_HISTORY DP_MAX_EPOCHS

typedef struct dp_checkpoint_state {
    char model[4096]; /* a built-in name or a model file's path */
    int epochs_done;  /* training goes on with this epoch (from 0) */
    int64_t batch;    /* ... at this batch of it: 0, or where a signal stopped it */
    /* the stopped epoch's figures so far: summed loss, correct count, seconds */
    double partial_loss, partial_correct, partial_seconds;
    int64_t step;  /* optimizer steps so far */
    uint64_t seed; /* weights and the shuffle of every epoch derive from it */
    /* The run's options. Saving writes those that the option list marks
     * DP_OPTION_RECORD (dp/train_option_list.h: the batch size, lr,
     * momentum, weight decay, precision, augmentation, normalisation) as
     * metadata "dptrain.<name>", in dp_option_format's text ("256",
     * "0.2"). Loading reads them over the defaults, each checked as its
     * option's range says, and sets recorded[i] for option i of
     * dp_train_option_list when the file has it (older files lack some).
     * Options that are strings are not recorded. */
    dp_train_options options;
    bool recorded[DP_TRAIN_OPTION_COUNT];
    int nhistory; /* the epochs' figures, for metrics and the plot */
    dp_epoch_stats history[DP_CHECKPOINT_MAX_HISTORY];
    char devices[256];    /* of each history entry (they share one string) */
    char lr_schedule[96]; /* the run's learning-rate schedule, for the record ("" none) */
    double best_acc;      /* the best test accuracy so far and its epoch (0: none) */
    int best_epoch;
    /* dp_conv_choices_save's lines when convolutions were measured
     * (DP_CONV_ALGO_AUTO), so that a resumed run runs the same kernels;
     * "" when none. */
    char conv_algos[16384];
    /* What the run's data say, for `dptrain predict`: the samples' shape
     * (C, H, W) as "dptrain.input" ("1,28,28"; zeros: not written) and the
     * class names as "dptrain.classes", a JSON array (["dark","light"];
     * NULL: not written). Loading leaves them zero. */
    int64_t input_chw[3];
    const char *classes;
} dp_checkpoint_state;

/* Writes the model (parameters, buffers), the optimizer state (optim may be NULL)
 * and `st` (may be NULL) to `path`, atomically. */
int dp_checkpoint_save(const char *path, dp_model_t *m, dp_optimizer_t *optim,
                       const dp_checkpoint_state *st);

/* Loads the model's parameters and buffers from `path` (a dptrain checkpoint
 * or a plain state dict): every tensor the model has must be there with its
 * shape; extra tensors are an error unless they are "_state." ones. */
int dp_checkpoint_load_weights(const char *path, dp_model_t *m);

/* For --resume: the weights, the optimizer state (optim may be NULL) and the
 * state. Fails if the file has no dptrain state. */
int dp_checkpoint_load(const char *path, dp_model_t *m, dp_optimizer_t *optim,
                       dp_checkpoint_state *st);

/* The model a dptrain checkpoint was written for, into buf; DP_ENOENT when
 * the file has no such metadata (a plain state dict). */
int dp_checkpoint_model(const char *path, char *buf, size_t size);

/* The model a run over checkpoint `path` builds, into model[0..size): `given`
 * (a built-in name or a model file, NULL for none) where the checkpoint is
 * of it (the same name, or a model file of the SHA-256 it recorded), else
 * the built-in model the checkpoint names. A model file the checkpoint
 * names is never taken on its word: a checkpoint is data from elsewhere,
 * and does not choose which files are read. DP_EINVAL with one line naming
 * the checkpoint otherwise. Reads the header alone. */
int dp_checkpoint_model_for(const char *path, const char *given, char *model, size_t size);

/* The metadata value of `key` ("dptrain.classes") in a checkpoint, as a
 * string *value to free(); DP_ENOENT, with no message, when the file has
 * no such key. */
int dp_checkpoint_meta(const char *path, const char *key, char **value);

#ifdef __cplusplus
}
#endif
#endif
