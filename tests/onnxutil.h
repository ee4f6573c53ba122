/* Helpers of the ONNX tests (test_onnx.c, test_onnx_bad.c): ONNX files made
 * with protobuf-c's own messages (the code generated from libonnx-dev's
 * onnx.proto), node by node, and the group fixture. */
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

/* torchvision's resnet18(num_classes=classes) with a chw[0]-channel stem,
 * as torch.onnx.export writes it in training mode (opset 17): conv1 7x7
 * stride 2, bn1, relu, maxpool 3/2 (padding 1), layer1..layer4 of two
 * BasicBlocks each (1x1 downsample convs in the first of layer2..4),
 * avgpool (GlobalAveragePool), Flatten, fc (Gemm); initializers named by
 * the state_dict ("layer2.0.downsample.0.weight"), nodes as the exporter
 * names them ("/layer1/layer1.0/conv1/Conv"), on chw inputs of any batch.
 * Convolutions He-uniform from `seed`, batch norm as PyTorch starts it. */
void ou_resnet18(ou_model *m, uint64_t seed, const int64_t *chw, int64_t classes);

/* The errors the library logs, counted, the last kept whole. */
extern char ou_last_error[1024];
extern int ou_errors;
void ou_capture(void);

#endif
