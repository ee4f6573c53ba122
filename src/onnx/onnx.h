/* ONNX model files: a ModelProto decoded by protobuf-c (the code protoc-c
 * makes at build time from the onnx.proto of Debian's libonnx-dev), read
 * within bounds and checked before anyone looks at the graph; tensors'
 * data as floats or integers; a ModelProto written back. */
#ifndef DP_ONNX_ONNX_H
#define DP_ONNX_ONNX_H

#include "onnx.pb-c.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ONNX files are protobuf messages, which protobuf itself caps at 2 GiB;
 * bigger models keep their weights in external files, which dptrain
 * refuses. */
#define DP__ONNX_MAX_BYTES ((size_t)INT32_MAX)
/* How deep messages may nest in a file: a message inside a message
 * inside ... (a graph in a node's attribute, as If and Loop bodies; a
 * type in a type), counting the ModelProto as 1. protobuf-c decodes each
 * level by recursion with no bound of its own; 100 is protobuf's default
 * (C++ and Python), and a model dptrain runs nests 7 deep. */
enum { DP__ONNX_MAX_DEPTH = 100 };
/* The opsets of the default domain whose operators the loader knows. */
enum { DP__ONNX_MIN_OPSET = 6, DP__ONNX_MAX_OPSET = 17, DP__ONNX_MAX_RANK = 8 };

/* Reads `path` into *out (free with dp__onnx_free): refused with one line
 * naming the file if it is empty, over DP__ONNX_MAX_BYTES, not protobuf,
 * cut short, nested deeper than DP__ONNX_MAX_DEPTH (checked on the bytes,
 * before protobuf-c recurses into them), not a ModelProto with a graph,
 * of an opset outside
 * DP__ONNX_MIN_OPSET..DP__ONNX_MAX_OPSET, or holds a tensor (initializer or
 * Constant) whose data live in an external file, are of a type other than
 * float, int32 or int64, or are not as many as its dims claim (a claim is
 * checked against the bytes present before anything is sized by it). */
int dp__onnx_read(Onnx__ModelProto **out, const char *path);
/* The same from bytes in memory; `name` starts the error. */
int dp__onnx_decode(Onnx__ModelProto **out, const uint8_t *data, size_t size, const char *name);
void dp__onnx_free(Onnx__ModelProto *m);

/* The default domain's opset the model imports. */
int64_t dp__onnx_opset(const Onnx__ModelProto *m);

/* A checked tensor's element count (its dims' product). */
int64_t dp__onnx_numel(const Onnx__TensorProto *t);
bool dp__onnx_is_float(const Onnx__TensorProto *t);
/* Its values converted, dp__onnx_numel of them, into out. */
void dp__onnx_to_floats(const Onnx__TensorProto *t, float *out);
void dp__onnx_to_int64s(const Onnx__TensorProto *t, int64_t *out);

/* Writes m to `path` atomically (a temporary file renamed over it). */
int dp__onnx_write(const Onnx__ModelProto *m, const char *path);

#endif
