/* An ONNX graph under construction, for dp_model_export_onnx
 * (onnx_export.c, onnx_export_ops.c): every allocation in one list,
 * nodes and initializers appended, value names made fresh ("t12"); the
 * first failure is kept in rc and later calls do nothing. */
#ifndef DP_ONNX_ONNX_BUILD_H
#define DP_ONNX_ONNX_BUILD_H

#include "dp/nn.h"
#include "onnx.pb-c.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct dp__ob_builder {
    void **mem;
    size_t nmem, capmem;
    Onnx__NodeProto **nodes;
    size_t nnodes;
    Onnx__TensorProto **inits;
    size_t ninits;
    int next; /* for fresh value names */
    int rc;
} dp__ob_builder;

/* Zeroed memory freed by dp__ob_free; NULL (and b->rc set) when out of it. */
void *dp__ob_alloc(dp__ob_builder *b, size_t bytes);
void dp__ob_free(dp__ob_builder *b);
char *dp__ob_str(dp__ob_builder *b, const char *s);
void dp__ob_push(dp__ob_builder *b, void ***arr, size_t *n, void *item);
void dp__ob_attr_ints(dp__ob_builder *b, Onnx__NodeProto *n, const char *name, int count,
                      const int64_t *v, bool scalar);
void dp__ob_attr_float(dp__ob_builder *b, Onnx__NodeProto *n, const char *name, float v);
/* A node of `op` reading ins[0..nin); *out its output's fresh name. */
Onnx__NodeProto *dp__ob_node(dp__ob_builder *b, const char *op, const char *const *ins, int nin,
                             const char **out);
/* A float initializer `name` of shape[0..ndim) holding v. */
void dp__ob_init(dp__ob_builder *b, const char *name, int ndim, const int64_t *shape,
                 const float *v);
/* A float scalar initializer of a fresh name. */
const char *dp__ob_scalar(dp__ob_builder *b, float v);
/* kernel_shape, strides (0 means 1) and pads [top, left, bottom, right]. */
void dp__ob_window(dp__ob_builder *b, Onnx__NodeProto *n, int kh, int kw, int sh, int sw,
                   const int64_t *pads);
/* An int64 initializer of n values (Unsqueeze's axes); its fresh name. */
const char *dp__ob_init_i64(dp__ob_builder *b, int n, const int64_t *v);
/* One node of op on x, or on x1 and x2; its output's name. */
const char *dp__ob_unary(dp__ob_builder *b, const char *op, const char *x);
const char *dp__ob_binary(dp__ob_builder *b, const char *op, const char *x1, const char *x2);
/* A float tensor's type: dims[d] < 0 is the symbolic batch "N". */
Onnx__ValueInfoProto *dp__ob_value_info(dp__ob_builder *b, const char *name, int ndim,
                                        const int64_t *dims);

#endif
