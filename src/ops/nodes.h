/* What each op keeps in its tape node (dp__node.params), beside its inputs
 * and output: the settings its backward pass needs, which are also what a
 * reader of a recorded forward needs to know what ran (the ONNX exporter
 * writes each recorded op from them). One struct per op family; ops that
 * keep nothing beyond the op id (relu, sigmoid, tanh, add, reshape,
 * transpose, prelu) have none here. */
#ifndef DP_OPS_NODES_H
#define DP_OPS_NODES_H

#include "ops/op.h"

/* conv2d: the geometry with defaults filled in, the fused ReLU, and the
 * precision and algorithm the forward ran with (the backward's too). */
typedef struct dp__conv_node {
    dp__conv_geom geom;
    bool relu;
    dp_precision precision;
    dp_conv_algo algo;
} dp__conv_node;

/* conv2d_pool (dp_conv2d_avg_pool2d, dp/ops.h): the convolution's node and the average
 * pool's window (and stride). */
typedef struct dp__conv_pool_node {
    dp__conv_node conv;
    int pool;
} dp__conv_pool_node;

/* conv_transpose2d: its geometry (the output padding follows from the
 * input's and output's shapes). */
typedef struct dp__conv_transpose_node {
    dp__conv_geom geom;
} dp__conv_transpose_node;

/* max_pool2d, avg_pool2d: the kernel's kind (an average that excludes
 * padding or overhang is DP__POOL_AVG_EXCLUDE) and the parameters with
 * stride and dilation filled in. */
typedef struct dp__pool_node {
    dp__pool_kind kind;
    dp_pool2d_params p;
} dp__pool_node;

/* batch_norm2d, batch_norm1d: the parameters with eps and momentum filled
 * in, and the running statistics (C) the forward read or updated: not
 * differentiable inputs, so not among the node's inputs. */
typedef struct dp__batch_norm_node {
    dp_batch_norm_params p;
    dp_tensor_t *running_mean, *running_var;
} dp__batch_norm_node;

/* linear: the weight's layout, and the precision of the forward. */
typedef struct dp__linear_node {
    dp_weight_layout layout;
    dp_precision precision;
} dp__linear_node;

/* activation: dp_activation's kind and parameters. */
typedef struct dp__activation_node {
    dp_activation_kind kind;
    float alpha, beta;
} dp__activation_node;

typedef struct dp__leaky_relu_node {
    float negative_slope;
} dp__leaky_relu_node;

/* binary: the operation and how each operand broadcasts. */
typedef struct dp__binary_node {
    dp__binary_op op;
    dp__broadcast a_bcast, b_bcast;
} dp__binary_node;

/* concat: each input's first channel in y (a concat of more inputs than a
 * node holds records several nodes of one output). */
typedef struct dp__concat_node {
    int64_t offset[DP__NODE_INPUTS];
} dp__concat_node;

/* split: the piece's first channel in x. */
typedef struct dp__split_node {
    int64_t offset;
} dp__split_node;

/* sum, mean: x seen as (outer, len, inner) in logical order, len the
 * reduced axis, and the backward's factor (1, or 1 / len for mean). */
typedef struct dp__reduce_node {
    int64_t outer, len, inner;
    double scale;
} dp__reduce_node;

/* narrow: the first row of x that y holds. */
typedef struct dp__narrow_node {
    int64_t start;
} dp__narrow_node;

_Static_assert(sizeof(dp__conv_node) <= DP__NODE_PARAMS &&
                   sizeof(dp__conv_pool_node) <= DP__NODE_PARAMS &&
                   sizeof(dp__reduce_node) <= DP__NODE_PARAMS &&
                   sizeof(dp__conv_transpose_node) <= DP__NODE_PARAMS &&
                   sizeof(dp__pool_node) <= DP__NODE_PARAMS &&
                   sizeof(dp__batch_norm_node) <= DP__NODE_PARAMS &&
                   sizeof(dp__linear_node) <= DP__NODE_PARAMS &&
                   sizeof(dp__activation_node) <= DP__NODE_PARAMS &&
                   sizeof(dp__binary_node) <= DP__NODE_PARAMS &&
                   sizeof(dp__concat_node) <= DP__NODE_PARAMS,
               "every op's node fits a tape node");

#endif
