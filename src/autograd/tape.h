/* The tape of one step: every tensor an op makes while the tape is active
 * belongs to it (dp__tape_alloc), and, when gradients are recorded, every op leaves a node
 * whose backward function enqueues that op's gradient kernels. */
#ifndef DP_AUTOGRAD_TAPE_H
#define DP_AUTOGRAD_TAPE_H

#include "dp/autograd.h"
#include "device/device.h"

#define DP__NODE_INPUTS 4
#define DP__NODE_PARAMS 96

typedef struct dp__node dp__node;
typedef struct dp__tape dp__tape;
/* Enqueues the gradients of the node's inputs from node->output->grad. */
typedef int (*dp__backward_fn)(dp__node *node);

struct dp__node {
    const char *op;
    dp__backward_fn backward;
    dp_tensor_t *inputs[DP__NODE_INPUTS];
    int ninputs;
    dp_tensor_t *output;
    dp_tensor_t *saved; /* an extra tensor kept for backward (a workspace), or NULL */
    _Alignas(16) unsigned char params[DP__NODE_PARAMS];
};

struct dp__tape {
    int record; /* nodes are recorded (gradients wanted) */
    dp__node *nodes;
    size_t nnodes, cap_nodes;
    dp_tensor_t **tensors; /* owned tensors */
    size_t ntensors, cap_tensors;
    dp__tape *prev; /* the tape active before this one */
};

/* The tape active on this thread, or NULL. */
dp__tape *dp__tape_current(void);
/* A new tensor (dp__tensor_alloc) owned by the active tape, which releases
 * it at dp_tape_reset; without an active tape the caller owns it
 * (dp_tensor_free). */
int dp__tape_alloc(dp_tensor_t **out, dp_device_t *dev, dp_dtype dtype, int ndim,
                   const int64_t *shape, int nhwc);
/* dp__tape_alloc of the shape, layout and device of `like`. */
int dp__tape_alloc_like(dp_tensor_t **out, const dp_tensor_t *like);
/* Whether an op on these inputs must record a node. */
int dp__tape_needs_grad(dp_tensor_t *const *inputs, int n);
/* Records a node for `output` (call only when dp__tape_needs_grad). The
 * params blob is copied. */
int dp__tape_record(const char *op, dp__backward_fn backward, dp_tensor_t *const *inputs,
                    int ninputs, dp_tensor_t *output, const void *params, size_t params_size);
/* What an op keeps for its backward pass beyond inputs, output and params. */
typedef struct dp__saved {
    dp_tensor_t *tensor; /* a tensor of the tape (a workspace, statistics), or NULL */
    int relu_output;     /* the output passed through a fused ReLU */
} dp__saved;
/* dp__tape_record for an op that saves more (saved may be NULL). */
int dp__tape_record_saved(const char *op, dp__backward_fn backward, dp_tensor_t *const *inputs,
                          int ninputs, dp_tensor_t *output, const dp__saved *saved,
                          const void *params, size_t params_size);

/* Gradient plumbing for backward functions. dp__grad_begin returns the
 * tensor into which the contribution to x's gradient must be written (=):
 * x's own gradient the first time in a step, a temporary after that, which
 * dp__grad_end then adds into x's gradient. *out is NULL when x needs none. */
int dp__grad_begin(dp_tensor_t *x, dp_tensor_t **out);
int dp__grad_end(dp_tensor_t *x, dp_tensor_t *contribution);
/* Marks x's gradient as updated by the running dp_backward, for a backward
 * function that adds into it in place. */
void dp__grad_touch(dp_tensor_t *x);

#endif
