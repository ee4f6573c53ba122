/* Modules: the pieces models are built from, each naming its parameters
 * the way PyTorch's state_dict does. A module holds indices into its model's
 * parameter and buffer lists; its forward reads them from the model. */
#ifndef DP_NN_MODULES_H
#define DP_NN_MODULES_H

#include "nn/model.h"

/* Builds a model's parameter and buffer lists with PyTorch's names. */
typedef struct dp__spec_builder {
    dp_param_spec *params, *buffers;
    int nparams, nbuffers, cap;
    char (*names)[64];
    int nnames, cap_names;
    const char **bn_names;
    int nbn;
} dp__spec_builder;

/* nn.Conv2d(c_in, c_out, kernel, stride, padding) with bias, weights
 * N(0, 0.01^2) as d2l's init_weights, bias PyTorch's U(+-1/sqrt(fan_in)). */
typedef struct dp__conv {
    int weight, bias;
    dp_conv2d_params p;
} dp__conv;

/* nn.BatchNorm2d(c): weight 1, bias 0, running_mean 0, running_var 1. */
typedef struct dp__bn {
    int weight, bias, running_mean, running_var;
    int layer; /* its place among the model's batch norms */
} dp__bn;

/* d2l's Residual: relu(bn2(conv2(relu(bn1(conv1(x))))) + (conv3(x) or x)),
 * conv3 the 1x1 shortcut when the block changes shape. */
typedef struct dp__residual {
    dp__conv conv1, conv2, conv3;
    dp__bn bn1, bn2;
    bool use_1x1conv;
} dp__residual;

/* Each adds the module's entries under `prefix` ("resnet_block1.0"). */
dp__conv dp__conv_add(dp__spec_builder *b, const char *prefix, int c_in, int c_out, int kernel,
                      int stride, int pad);
dp__bn dp__bn_add(dp__spec_builder *b, const char *prefix, int c);
dp__residual dp__residual_add(dp__spec_builder *b, const char *prefix, int c_in, int c_out,
                              bool use_1x1conv, int stride);
/* nn.Linear(d_in, d_out): weight N(0, 0.01^2), bias U(+-1/sqrt(d_in)). */
void dp__linear_add(dp__spec_builder *b, const char *prefix, int d_in, int d_out, int *weight,
                    int *bias);

int dp__conv_forward(const dp__conv *c, dp_model_t *m, dp_tensor_t *x, dp_tensor_t **y);
int dp__bn_forward(const dp__bn *bn, dp_model_t *m, dp_tensor_t *x, bool train, bool relu,
                   dp_tensor_t **y);
/* The ops a residual block records, in order: conv1, bn1 (ReLU fused),
 * conv2, conv3 (with the 1x1 shortcut), bn2, add, relu; 6 or 7. */
int dp__residual_ops(const dp__residual *r);
/* All of them but the final ReLU: the sum, whose dp_relu is the block's
 * output; with relu, that ReLU too. bn2, the sum and the ReLU run in one
 * sweep (dp__batch_norm2d_add), which needs the shortcut first. A
 * pipeline stage may start at that ReLU, which reads the sum alone, but
 * not between conv1 and the add, which reads the block's input. */
int dp__residual_sum(const dp__residual *r, dp_model_t *m, dp_tensor_t *x, bool train, bool relu,
                     dp_tensor_t **sum);

#endif
