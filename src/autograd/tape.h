/* The tape of one step: every tensor an op makes while the tape is active
 * belongs to it (dp__tape_alloc), and, when gradients are recorded, every op
 * leaves a node whose backward function enqueues that op's gradient kernels.
 *
 * Tensors themselves are memory only. What autograd knows about a tensor
 * lives in a dp__autograd_state that autograd attaches to it (t->ag): the
 * tensor requires a gradient exactly when it has one. */
#ifndef DP_AUTOGRAD_TAPE_H
#define DP_AUTOGRAD_TAPE_H

#include "dp/autograd.h"
#include "device/device.h"

#define DP__NODE_INPUTS 4
#define DP__NODE_PARAMS 96

typedef struct dp__node dp__node;
typedef struct dp__tape dp__tape;
typedef struct dp__autograd_state dp__autograd_state;
/* Enqueues the gradients of the node's inputs from node->output->ag->grad. */
typedef int (*dp__backward_fn)(dp__node *node);

/* The per-tensor state of a tensor that requires a gradient: a parameter
 * (dp_tensor_set_requires_grad: on the heap, freed with the tensor) or the
 * output of a recorded op (in the recording tape's pool, gone at
 * dp_tape_reset). */
struct dp__autograd_state {
    dp_tensor_t *grad;
    dp__tape *tape;    /* the tape that recorded the tensor; NULL for a leaf */
    uint64_t grad_gen; /* the dp_backward call that last gave it a gradient */
    int grad_written;  /* the step's first gradient contribution is issued */
    int relu_output;   /* made by an op ending in a fused ReLU */
    int grad_masked;   /* every contribution to grad already passed that ReLU */
};

struct dp__node {
    dp__op op; /* its line in the op list (device/op_list.h) */
    dp__backward_fn backward;
    dp_tensor_t *inputs[DP__NODE_INPUTS];
    int ninputs;
    dp_tensor_t *output;
    dp_tensor_t *saved; /* an extra tensor kept for backward (a workspace), or NULL */
    _Alignas(16) unsigned char params[DP__NODE_PARAMS];
};

/* States live in chunks that never move, so t->ag stays valid as the pool
 * grows; dp_tape_reset keeps the chunks for the next step. */
#define DP__STATE_CHUNK 64

struct dp__tape {
    int record; /* nodes are recorded (gradients wanted) */
    dp__node *nodes;
    size_t nnodes, cap_nodes;
    dp_tensor_t **tensors; /* owned tensors */
    size_t ntensors, cap_tensors;
    dp__autograd_state **state_chunks; /* each DP__STATE_CHUNK states */
    size_t nstates, nchunks;
    dp__tape *prev; /* the tape active before this one */
};

/* The tape active on this thread, or NULL. */
dp__tape *dp__tape_current(void);
/* A new tensor (dp__tensor_alloc) owned by the active tape, which releases
 * it at dp_tape_reset; without an active tape the caller owns it
 * (dp_tensor_free). */
int dp__tape_alloc(dp_tensor_t **out, dp_device_t *dev, dp_dtype dtype, int ndim,
                   const int64_t *shape, int nhwc);
/* A tensor owned by the active tape (as dp__tape_alloc) that is a view of
 * `of`'s memory: same shape, dtype, layout, device; releasing it leaves the
 * memory to `of`. */
int dp__tape_view(dp_tensor_t **out, const dp_tensor_t *of);
/* dp__tape_alloc of the shape, layout and device of `like`. */
int dp__tape_alloc_like(dp_tensor_t **out, const dp_tensor_t *like);
/* Whether an op on these inputs must record a node. */
int dp__tape_needs_grad(dp_tensor_t *const *inputs, int n);
/* Records a node for `output` (call only when dp__tape_needs_grad). The
 * params blob is copied. */
int dp__tape_record(dp__op op, dp__backward_fn backward, dp_tensor_t *const *inputs, int ninputs,
                    dp_tensor_t *output, const void *params, size_t params_size);
/* What an op keeps for its backward pass beyond inputs, output and params. */
typedef struct dp__saved {
    dp_tensor_t *tensor; /* a tensor of the tape (a workspace, statistics), or NULL */
    int relu_output;     /* the output passed through a fused ReLU */
} dp__saved;
/* dp__tape_record for an op that saves more (saved may be NULL). */
int dp__tape_record_saved(dp__op op, dp__backward_fn backward, dp_tensor_t *const *inputs,
                          int ninputs, dp_tensor_t *output, const dp__saved *saved,
                          const void *params, size_t params_size);

/* Gradient plumbing for backward functions. dp__grad_begin returns the
 * tensor into which the contribution to x's gradient must be written (=):
 * x's own gradient the first time in a step, a temporary after that, which
 * dp__grad_end then adds into x's gradient. *out is NULL when x needs none. */
int dp__grad_begin(dp_tensor_t *x, dp_tensor_t **out);
int dp__grad_end(dp_tensor_t *x, dp_tensor_t *contribution);
/* Makes g (a gradient buffer nothing reads after the calling backward
 * function) x's gradient, when x is a recorded output whose gradient this
 * step has not been written yet: the copy that dp__grad_begin/end would
 * make is spared; later contributions add into g. Returns whether it did. */
bool dp__grad_adopt(dp_tensor_t *x, dp_tensor_t *g);
/* Marks x's gradient as updated by the running dp_backward, for a backward
 * function that adds into it in place. */
void dp__grad_touch(dp_tensor_t *x);
/* The number of the running (or last) dp_backward call on this thread. */
uint64_t dp__backward_gen(void);

/* For code that finishes a step's gradients by hand (a parameter that got
 * no contribution, a test hook): whether t's gradient was written since
 * dp_zero_grad, and marking it written after setting its value. */
bool dp__grad_written(const dp_tensor_t *t);
void dp__grad_set_written(dp_tensor_t *t);

/* A new state for a leaf (on the heap) or a recorded output (in `tape`'s
 * pool), zeroed. */
dp__autograd_state *dp__state_new(dp__tape *tape);
/* Frees t's state if it is a leaf's (with the gradient it was given); a
 * recorded output's state belongs to its tape. Called by dp_tensor_free. */
void dp__state_release(dp_tensor_t *t);

#endif
