/* What a checkpoint says of itself, from its header alone
 * (checkpoint_header.c): the model it holds, checked against a run's, and
 * what it records of its data. */
#ifndef DP_TRAIN_CHECKPOINT_HEADER_H
#define DP_TRAIN_CHECKPOINT_HEADER_H

#include "dp/checkpoint.h"
#include "dp/data.h"
#include "dp/nn.h"
#include "dp/safetensors.h"

/* More class names than a classifier's outputs (net.c's bound) are not
 * a checkpoint's. */
#define DP_CHECKPOINT_MAX_CLASSES 65536

typedef struct dp__checkpoint_header {
    char model[4096];     /* the model to build: the run's, or the checkpoint's built-in */
    int64_t input_chw[3]; /* dptrain.input; zeros: not recorded */
    char **class_names;   /* dptrain.classes, `classes` of them; NULL: not recorded */
    int classes;
    dp_augment_options normalize; /* dptrain.normalize; zeros: none */
    /* What the run did to a test image of any size: dptrain.test_transform
     * (or dptrain.transform imagenet's test list; n 0: none), decoded as
     * dptrain.jpeg_scale says. With the imagenet recipe and no recorded
     * normalisation, `normalize` is ImageNet's, as the run's was. */
    dp_transform_list test_transform;
    int jpeg_scale;
} dp__checkpoint_header;

/* Reads the header of checkpoint `path` into *h: the model a run over it
 * builds (`given`, the run's model, checked against the checkpoint's;
 * NULL: the built-in model the checkpoint names, never a file), and the
 * metadata above, each checked. One line naming the checkpoint on any
 * failure. Free with dp__checkpoint_header_free. */
int dp__checkpoint_header_read(const char *path, const char *given, dp__checkpoint_header *h);
void dp__checkpoint_header_free(dp__checkpoint_header *h);

/* 0 if the open checkpoint f (at `path`) holds model `model` as far as its
 * metadata says: the same name, or a model file whose SHA-256 it recorded
 * (moved or copied since), or no "dptrain.model" at all (a state dict);
 * else DP_EINVAL with one line naming both. */
int dp__checkpoint_check_model(const dp_safetensors_t *f, const char *path, const char *model);

/* checkpoint_state.c: the training state of checkpoint f's metadata into
 * *st (zeroed first; st->model is left empty), every value checked; and
 * one of its counts, in [lo, hi]. */
int dp__checkpoint_read_state(const dp_safetensors_t *f, const char *path, dp_checkpoint_state *st);
int dp__checkpoint_meta_i64(const dp_safetensors_t *f, const char *path, const char *key,
                            int64_t lo, int64_t hi, int64_t *out);

/* A run's starting checkpoint (--init's or --resume's), from its header
 * before anything is loaded or built: it holds def's model (its name, or
 * the SHA-256 of its file), every parameter and buffer of def as F32 of
 * its shape, and no tensor def does not have ("_state." optimizer entries
 * and num_batches_tracked aside); with st (--resume), its training state
 * read into *st. One line naming the checkpoint otherwise. */
int dp__checkpoint_check_start(const char *path, const dp_model_def *def, dp_checkpoint_state *st);

#endif
