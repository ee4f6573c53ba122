/* Helpers of the ONNX tests (test_onnx*.c): ONNX files made with
 * protobuf-c's own messages (the code generated from libonnx-dev's
 * onnx.proto), node by node, the group fixture, and graphs loaded, run
 * and checked by finite differences. */
#ifndef DP_TESTS_ONNXUTIL_H
#define DP_TESTS_ONNXUTIL_H

#include "testutil.h"

#include "dp/dp.h"
#include "onnx.pb-c.h"

/* A model being made; every allocation is freed by ou_free. */
typedef struct ou_model {
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset, *opsets[1];
    void **mem;
    size_t nmem;
} ou_model;

void ou_begin(ou_model *m, int opset);
/* A float input or output of shape dims[0..ndim) (-1: the symbolic "N"). */
void ou_input(ou_model *m, const char *name, int ndim, const int64_t *dims);
void ou_output(ou_model *m, const char *name);
/* A float initializer holding v (raw data); returned for corruption. */
Onnx__TensorProto *ou_init(ou_model *m, const char *name, int ndim, const int64_t *dims,
                           const float *v);
/* An int64 initializer holding v (int64_data). */
Onnx__TensorProto *ou_init_i64(ou_model *m, const char *name, int n, const int64_t *v);
/* A node: ins and outs are comma-separated names ("x,0.weight,0.bias"). */
Onnx__NodeProto *ou_node(ou_model *m, const char *op, const char *name, const char *ins,
                         const char *outs);
void ou_attr_ints(ou_model *m, Onnx__NodeProto *n, const char *name, int count, const int64_t *v);
void ou_attr_int(ou_model *m, Onnx__NodeProto *n, const char *name, int64_t v);
void ou_attr_float(ou_model *m, Onnx__NodeProto *n, const char *name, float v);
/* The packed bytes (malloc'd), and written to path. */
uint8_t *ou_pack(ou_model *m, size_t *size);
void ou_write(ou_model *m, const char *path);
void ou_free(ou_model *m);

/* The test net, PyTorch's nn.Sequential(Conv2d(1, 4, 3, padding=1),
 * BatchNorm2d(4), ReLU(), MaxPool2d(2), Flatten(), Linear(64, 3)) as
 * torch.onnx.export writes it in training mode (initializers named by the
 * state_dict: "0.weight", ..., "5.bias"), on 1x8x8 inputs of any batch;
 * weights drawn from `seed`. flatten_as_shape_chain: the Flatten written
 * as x.view(x.size(0), -1) is (Shape, Gather, Unsqueeze, Concat, Reshape). */
void ou_test_net(ou_model *m, uint64_t seed, bool flatten_as_shape_chain);
/* Its nn.Sequential text. */
extern const char ou_test_net_text[];

/* v[0..n) = offset + scale * u, u drawn in [-1, 1] from `seed`. */
void ou_fill(uint64_t seed, float *v, int64_t n, float scale, float offset);
/* A float Constant node `out` of shape dims[0..ndim) holding v. */
Onnx__NodeProto *ou_constant(ou_model *m, const char *out, int ndim, const int64_t *dims,
                             const float *v);
/* An int64 Constant node `out` (1-D, n values). */
Onnx__NodeProto *ou_constant_i64(ou_model *m, const char *out, int n, const int64_t *v);
void ou_attr_string(ou_model *m, Onnx__NodeProto *n, const char *name, const char *v);

/* torchvision's resnet18(num_classes=classes) with a chw[0]-channel stem,
 * as torch.onnx.export writes it in training mode (opset 17): conv1 7x7
 * stride 2, bn1, relu, maxpool 3/2 (padding 1), layer1..layer4 of two
 * BasicBlocks each (1x1 downsample convs in the first of layer2..4),
 * avgpool (GlobalAveragePool), Flatten, fc (Gemm); initializers named by
 * the state_dict ("layer2.0.downsample.0.weight"), nodes as the exporter
 * names them ("/layer1/layer1.0/conv1/Conv"), on chw inputs of any batch.
 * Convolutions He-uniform from `seed`, batch norm as PyTorch starts it
 * (onnxnets.c). */
void ou_resnet18(ou_model *m, uint64_t seed, const int64_t *chw, int64_t classes);

/* The errors the library logs, counted, the last kept whole. */
extern char ou_last_error[1024];
extern int ou_errors;
void ou_capture(void);

struct dp__onnx_graph;
/* m's graph loaded (m freed), as a model file of that name would be;
 * fails the test when it is refused. */
struct dp__onnx_graph *ou_load(ou_model *m, const char *name);
/* m refused at load (m freed): one error line, starting with the name and
 * holding each of words[0..] (NULL-ended); it is printed. */
void ou_refused(ou_model *m, const char *name, const char *const *words);
/* The graph's parameters and buffers as tensors on dev holding their
 * starting values (spec order), freed by ou_free_tensors. */
void ou_tensors(const struct dp__onnx_graph *g, dp_device_t *dev, dp_tensor_t **params,
                dp_tensor_t **buffers);
void ou_free_tensors(dp_tensor_t **t, int n);
/* Runs g in eval mode (no tape recording) on inputs xs[0..g->ninputs) and
 * returns output 0's values (malloc'd, logical order), its element count
 * in *n and its shape in shape[0..4) (may be NULL). With `error`, the run
 * must fail instead, logging one line that holds it; NULL is returned. */
float *ou_run(const struct dp__onnx_graph *g, dp_device_t *dev, dp_tensor_t *const *xs, int64_t *n,
              int64_t *shape, const char *error);
/* Finite differences through the graph: input 0 of shape xs[0..ndim)
 * drawn from seed, and every parameter from its initializer, each
 * perturbed (gradcheck.c's gc_run on gc_dev, which must be open). kink:
 * the graph is piecewise linear (ReLU, max, clamp). */
void ou_gradcheck(const struct dp__onnx_graph *g, const char *name, int ndim, const int64_t *xs,
                  uint64_t seed, bool kink);

#define WORDS(...) ((const char *const[]){__VA_ARGS__, NULL})

#endif
