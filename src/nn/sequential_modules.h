/* The modules an nn.Sequential file may hold, as layers of one model
 * (sequential_modules.c), and the model they make (sequential.c). */
#ifndef DP_NN_SEQUENTIAL_MODULES_H
#define DP_NN_SEQUENTIAL_MODULES_H

#include "nn/sequential.h"

typedef enum dp__seq_kind {
    DP__SEQ_CONV2D,
    DP__SEQ_LINEAR,
    DP__SEQ_RELU,
    DP__SEQ_SIGMOID,
    DP__SEQ_TANH,
    DP__SEQ_MAX_POOL2D,
    DP__SEQ_AVG_POOL2D,
    DP__SEQ_ADAPTIVE_AVG_POOL2D,
    DP__SEQ_BATCH_NORM2D,
    DP__SEQ_BATCH_NORM1D,
    DP__SEQ_FLATTEN,
    DP__SEQ_DROPOUT,
} dp__seq_kind;

/* One layer: indices into the model's parameters (-1: none) and buffers,
 * its batch norm or dropout number, and its settings. */
typedef struct dp__seq_layer {
    dp__seq_kind kind;
    int weight, bias, running_mean, running_var;
    int bn;      /* place among the batch norm layers (dp_model_bn_params) */
    int dropout; /* place among the dropout layers (the mask's key) */
    dp_conv2d_params conv;
    dp_pool2d_params pool;
    int out_h, out_w;    /* AdaptiveAvgPool2d */
    float prob;          /* Dropout */
    float eps, momentum; /* batch norm */
} dp__seq_layer;

/* A sample's shape between layers: (c, h, w) images or (c) features. */
typedef struct dp__seq_shape {
    int rank; /* 3 or 1 */
    int64_t c, h, w;
} dp__seq_shape;

typedef struct dp__seq {
    dp_model_def def; /* first: dp_model_def_free finds the rest from it */
    dp__seq_layer *layers;
    int nlayers;
    dp_param_spec *params, *buffers;
    int nparams, nbuffers;
    char (*names)[32]; /* "12.running_mean" */
    int nnames;
    const char **bn_names;
    int nbn, ndropout;
    char *name;
} dp__seq;

/* Adds the layer `call` describes after a layer giving *shape, which
 * becomes this one's output; a one-line error naming the file and line. */
int dp__seq_add_layer(dp__seq *s, const dp__seq_call *call, dp__seq_shape *shape);
int dp__seq_layer_forward(const dp__seq_layer *l, dp_model_t *m, dp_tensor_t *x, bool train,
                          dp_tensor_t **y);

#endif
