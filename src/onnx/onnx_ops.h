/* What the operator files share (onnx_ops.c and onnx_ops_<family>.c):
 * reading a node's inputs and attributes, putting its outputs, and each
 * family's prep and run functions, which the one table of operators in
 * onnx_ops.c names. prep reads a node's attributes at load and refuses,
 * in one line naming the node, a setting dptrain cannot run; run makes
 * the node's outputs from its inputs' slots, and names the node in its
 * error when the shapes it meets do not fit. */
#ifndef DP_ONNX_ONNX_OPS_H
#define DP_ONNX_ONNX_OPS_H

#include "onnx/onnx_model.h"

/* Input k of n as a device tensor, or NULL (left out, or a host value). */
dp_tensor_t *dp__onnx_in_t(const dp__onnx_run *r, const dp__onnx_node *n, int k);
/* Input k of n as a host value, or NULL. */
const dp__onnx_host *dp__onnx_in_h(const dp__onnx_run *r, const dp__onnx_node *n, int k);
/* Output k of n is y (dropped when the graph does not name it). */
int dp__onnx_put(dp__onnx_run *r, const dp__onnx_node *n, int k, dp_tensor_t *y);
/* x must have lo to hi dimensions; else one line naming the node. */
int dp__onnx_want_rank(const dp__onnx_run *r, const dp__onnx_node *n, const dp_tensor_t *x, int lo,
                       int hi);
/* Output k must not be read by any node nor be a graph output (by the
 * readers dp__onnx_count_readers counted): the
 * optional outputs dptrain does not make (MaxPool's indices, Dropout's
 * mask, batch norm's running statistics in training mode). */
int dp__onnx_unused_output(const dp__onnx_graph *g, const dp__onnx_node *n, int k,
                           const char *what);
/* The ints attribute `name` into out[0..count): absent gives dflt in each;
 * another length is refused ("dptrain runs 2-D ops only" when count is a
 * pair's or pads' length). */
int dp__onnx_ints_attr(const dp__onnx_graph *g, const dp__onnx_node *n, const char *name, int count,
                       int64_t dflt, int64_t *out);
/* The float attribute `name` (dflt when absent) into *out; a NaN or an
 * infinity is refused naming the node and the attribute. */
int dp__onnx_finite_attr(const dp__onnx_graph *g, const dp__onnx_node *n, const char *name,
                         float dflt, float *out);
/* Whether the string attribute `name` is s; `absent` when there is none. */
bool dp__onnx_attr_is(const dp__onnx_node *n, const char *name, const char *s, bool absent);
/* A scalar host input k (Clip's bounds, Dropout's ratio), or dflt when
 * it is left out; more than one value is refused naming the node. */
int dp__onnx_scalar_input(dp__onnx_run *r, const dp__onnx_node *n, int k, float dflt, float *out);
/* The axis attribute (dflt when absent) of a tensor of `rank` dimensions,
 * negative ones counted from the end; out of range is refused. */
int dp__onnx_axis(const dp__onnx_run *r, const dp__onnx_node *n, int64_t axis, int rank, int *out);

/* onnx_ops_conv.c: convolutions, pooling, batch norm. */
int dp__onnx_prep_conv(const dp__onnx_graph *g, dp__onnx_node *n);
int dp__onnx_run_conv(dp__onnx_run *r, const dp__onnx_node *n);
int dp__onnx_prep_pool(const dp__onnx_graph *g, dp__onnx_node *n);
int dp__onnx_run_pool(dp__onnx_run *r, const dp__onnx_node *n);
int dp__onnx_run_global_pool(dp__onnx_run *r, const dp__onnx_node *n);
int dp__onnx_prep_conv_transpose(const dp__onnx_graph *g, dp__onnx_node *n);
int dp__onnx_run_conv_transpose(dp__onnx_run *r, const dp__onnx_node *n);
int dp__onnx_prep_bn(const dp__onnx_graph *g, dp__onnx_node *n);
int dp__onnx_run_bn(dp__onnx_run *r, const dp__onnx_node *n);

/* onnx_ops_eltwise.c: activations, sums and products, dropout. */
int dp__onnx_run_relu(dp__onnx_run *r, const dp__onnx_node *n);
int dp__onnx_run_sigmoid(dp__onnx_run *r, const dp__onnx_node *n);
int dp__onnx_run_tanh(dp__onnx_run *r, const dp__onnx_node *n);
int dp__onnx_prep_leaky(const dp__onnx_graph *g, dp__onnx_node *n);
int dp__onnx_run_leaky(dp__onnx_run *r, const dp__onnx_node *n);
int dp__onnx_prep_act(const dp__onnx_graph *g, dp__onnx_node *n);
int dp__onnx_run_act(dp__onnx_run *r, const dp__onnx_node *n);
int dp__onnx_prep_dropout(const dp__onnx_graph *g, dp__onnx_node *n);
int dp__onnx_run_dropout(dp__onnx_run *r, const dp__onnx_node *n);

/* onnx_ops_graph.c: PRelu, softmax, broadcasting arithmetic, Split,
 * GlobalMaxPool, Transpose, MatMul, Gelu. */
int dp__onnx_run_prelu(dp__onnx_run *r, const dp__onnx_node *n);
int dp__onnx_prep_softmax(const dp__onnx_graph *g, dp__onnx_node *n);
int dp__onnx_run_softmax(dp__onnx_run *r, const dp__onnx_node *n);
int dp__onnx_run_binary(dp__onnx_run *r, const dp__onnx_node *n);
/* *z = a + b for node n (Gemm's C), broadcast as Add's. */
int dp__onnx_binary_add(dp__onnx_run *r, const dp__onnx_node *n, dp_tensor_t *a, dp_tensor_t *b,
                        dp_tensor_t **z);
int dp__onnx_prep_split(const dp__onnx_graph *g, dp__onnx_node *n);
int dp__onnx_run_split(dp__onnx_run *r, const dp__onnx_node *n);
int dp__onnx_run_global_max_pool(dp__onnx_run *r, const dp__onnx_node *n);
int dp__onnx_prep_transpose(const dp__onnx_graph *g, dp__onnx_node *n);
int dp__onnx_run_transpose(dp__onnx_run *r, const dp__onnx_node *n);
int dp__onnx_run_matmul(dp__onnx_run *r, const dp__onnx_node *n);
int dp__onnx_prep_gelu(const dp__onnx_graph *g, dp__onnx_node *n);

/* onnx_ops_shape.c: reshapes, concatenation, matrix products. */
int dp__onnx_prep_flatten(const dp__onnx_graph *g, dp__onnx_node *n);
int dp__onnx_run_flatten(dp__onnx_run *r, const dp__onnx_node *n);
int dp__onnx_prep_reshape(const dp__onnx_graph *g, dp__onnx_node *n);
int dp__onnx_run_reshape(dp__onnx_run *r, const dp__onnx_node *n);
int dp__onnx_run_concat_any(dp__onnx_run *r, const dp__onnx_node *n);
int dp__onnx_prep_gemm(const dp__onnx_graph *g, dp__onnx_node *n);
int dp__onnx_run_gemm(dp__onnx_run *r, const dp__onnx_node *n);
int dp__onnx_prep_pad(const dp__onnx_graph *g, dp__onnx_node *n);
int dp__onnx_run_pad(dp__onnx_run *r, const dp__onnx_node *n);

#endif
