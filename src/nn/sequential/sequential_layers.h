/* The layers of one nn.Sequential model: each module of the file as its
 * line of the module list, its parameters' and buffers' indices and its
 * settings, and the model they make (dp__seq, the definition's user). */
#ifndef DP_NN_SEQUENTIAL_LAYERS_H
#define DP_NN_SEQUENTIAL_LAYERS_H

#include "dp/nn.h"
#include "nn/sequential/module_list.h"

/* The kind of a layer: its line in the module list. */
/* clang-format off */
typedef enum dp__seq_kind {
#define DP__SEQ_KIND(name, required, args, ...) DP__SEQ_##name,
    DP__MODULE_LIST(DP__SEQ_KIND)
#undef DP__SEQ_KIND
    DP__SEQ_COUNT
} dp__seq_kind;
/* clang-format on */

/* One layer: indices into the model's parameters (-1: none) and buffers,
 * its batch norm or dropout number, and its settings. */
typedef struct dp__seq_layer {
    dp__seq_kind kind;
    int line; /* its line in the file, for the errors of its forward */
    int weight, bias, running_mean, running_var;
    int bn;      /* place among the batch norm layers (dp_model_bn_params) */
    int dropout; /* place among the dropout layers (the mask's key) */
    dp_conv2d_params conv;
    dp_conv_transpose2d_params conv_transpose;
    dp_pool2d_params pool;
    int out_h, out_w;    /* AdaptiveAvgPool2d */
    float number;        /* its number argument: Dropout's p, an op_number's */
    float eps, momentum; /* batch norm */
} dp__seq_layer;

/* A sample's shape between layers: (c, h, w) images or (c) features. */
typedef struct dp__seq_shape {
    int rank; /* 3 or 1 */
    int64_t c, h, w;
} dp__seq_shape;

typedef struct dp__seq {
    dp_model_def def; /* what dp_model_def_parse gives; its user is this */
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

#endif
