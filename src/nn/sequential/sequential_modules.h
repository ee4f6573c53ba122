/* The modules an nn.Sequential file may hold (sequential_modules.c): each
 * line's module bound, checked against the shape the layer before gives and
 * added to the model as a layer, and the forward of one layer. */
#ifndef DP_NN_SEQUENTIAL_MODULES_H
#define DP_NN_SEQUENTIAL_MODULES_H

#include "nn/sequential/sequential_layers.h"
#include "nn/sequential/sequential_parse.h"

/* Adds the layer `call` describes after a layer giving *shape, which
 * becomes this one's output; a one-line error naming the file and line. */
int dp__seq_add_layer(dp__seq *s, const dp__seq_call *call, dp__seq_shape *shape);
int dp__seq_layer_forward(const dp__seq_layer *l, dp_model_t *m, dp_tensor_t *x, bool train,
                          dp_tensor_t **y);

#endif
