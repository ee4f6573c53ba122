/* dp/autograd.h - the tape of one step and dp_backward.
 *
 *   dp_tape_t *tape;
 *   dp_tape_init(&tape, true);        // true: record for backward
 *   dp_tape_begin(tape);              // ops now record on this tape
 *   ... forward: dp_conv2d(&h, x, w, b, &p); ...
 *   dp_backward(loss);                // enqueues every gradient kernel
 *   dp_tape_end(tape);
 *   dp_tape_reset(tape);              // releases the step's tensors
 *
 * Parameters (dp_tensor_set_requires_grad) accumulate their gradient (+=
 * across uses within a step); dp_zero_grad starts a new step. */
#ifndef DP_AUTOGRAD_H
#define DP_AUTOGRAD_H

#include "dp/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dp__tape dp_tape_t;

int dp_tape_init(dp_tape_t **out, bool record);
/* Makes the tape the active one on this thread (tapes nest). */
void dp_tape_begin(dp_tape_t *tape);
void dp_tape_end(dp_tape_t *tape);
/* Releases every tensor the tape owns (after the commands using them have
 * run) and forgets its nodes. */
void dp_tape_reset(dp_tape_t *tape);
void dp_tape_close(dp_tape_t *tape);

/* Marks a leaf tensor as a parameter, with `grad` (same shape, same device)
 * as the place its gradient accumulates; grad may be NULL to allocate one. */
int dp_tensor_set_requires_grad(dp_tensor_t *t, dp_tensor_t *grad);

/* Backpropagates from a scalar (1-element) loss: d loss / d loss = 1. */
int dp_backward(dp_tensor_t *loss);
/* Backpropagates through y's tape from y, whose gradient an op of another
 * tape has already written (a pipeline stage's output, whose gradient the
 * next stage's backward copied back): the part of a backward pass that one
 * stage runs. */
int dp_backward_from(dp_tensor_t *y);

/* Marks the gradients of these parameters as "not yet written this step":
 * the first contribution writes, later ones add. Parameters that receive
 * no gradient in the step must be zeroed by the caller (dp_model does). */
void dp_zero_grad(dp_tensor_t *const *params, int n);

#ifdef __cplusplus
}
#endif
#endif
