/* The exporter of traced forwards (onnx_export.c): a model's forward run
 * once on the meta device with its input requiring a gradient, so that
 * every op it runs leaves a node on the tape, and each node written as
 * ONNX nodes by its op's export rule (onnx_export_ops.c). The rules are a
 * table indexed by op id and made from the op list (device/op_list.h):
 * an op without its export_<name> function does not compile, and an op
 * with no ONNX form has a rule that refuses it by name. */
#ifndef DP_ONNX_ONNX_EXPORT_H
#define DP_ONNX_ONNX_EXPORT_H

#include "autograd/tape.h"
#include "onnx/onnx_build.h"

/* A graph being written from a tape: the builder and the ONNX value
 * names of the tensors seen so far (the input "input", the parameters and
 * buffers by their spec names, each written op's output). */
typedef struct dp__export {
    dp__ob_builder b;
    const dp__tape *tape;
    size_t node;               /* the node being written: its index in the tape */
    size_t next;               /* the node the next rule starts at (a rule may take several) */
    const dp_tensor_t **known; /* tensors with a value name, newest last */
    const char **names;
    size_t nknown, capknown;
} dp__export;

/* One op's rule: writes tape node `n` (e->tape->nodes[e->node]) as ONNX
 * nodes reading its inputs' names, and names its output (dp__export_bind).
 * 0, or a negative code with one line logged naming the op. */
typedef int (*dp__export_rule)(dp__export *e, const dp__node *n);

/* The rule of every op of the op list, by op id. */
extern const dp__export_rule dp__export_rules[DP__OP_COUNT];

/* The value name of tensor t, or NULL (logged, naming op n) when it is
 * none that the graph has: not the input, a parameter, a buffer or an
 * earlier op's output. */
const char *dp__export_name(dp__export *e, const dp__node *n, const dp_tensor_t *t);
/* Names t `name` in the graph (a copy is kept). */
void dp__export_bind(dp__export *e, const dp_tensor_t *t, const char *name);

#endif
