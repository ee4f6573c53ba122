/* dp/optim.h - stochastic gradient descent over a parameter buffer:
 *   g = grad * grad_scale + weight_decay * p
 *   v = momentum * v + g; g = v      (momentum != 0; PyTorch's form)
 *   p -= lr * g
 * With grad_scale = 1 / batch_size this is the seed's
 * `param -= lr * param.grad / batch_size`. */
#ifndef DP_OPTIM_H
#define DP_OPTIM_H

#include "dp/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dp_sgd_options {
    float lr;
    float momentum;
    float weight_decay;
} dp_sgd_options;

typedef struct dp_sgd dp_sgd_t;

int dp_sgd_init(dp_sgd_t **out, dp_params_t *params, const dp_sgd_options *opt);
/* Enqueues one update of every parameter. */
int dp_sgd_step(dp_sgd_t *s, float grad_scale);
/* Makes every later dp_sgd_step first check the gradient buffer on the
 * device: a step whose gradient holds a NaN or an Inf changes nothing
 * (parameters and momentum stay as they were). DP_ENOTSUP where the device
 * has no such check. */
int dp_sgd_check_finite(dp_sgd_t *s);
/* With the check on: the device address of one int64 that each step sets,
 * in stream order, to the index into the parameter buffer of the first
 * non-finite gradient element, or to dp_params_numel when all were finite
 * (read it with an enqueued copy to the host). NULL without the check. */
const int64_t *dp_sgd_first_nonfinite(dp_sgd_t *s);
/* Whether the device of s has the check (dp_sgd_check_finite would
 * succeed), so that replicas can agree to turn it on everywhere or nowhere. */
bool dp_sgd_can_check_finite(const dp_sgd_t *s);
/* With the check on: enqueues a copy of that word, as the step just issued
 * leaves it, into *dst and returns at once; *dst is written once the
 * device has run it (dp_tensor_read_async's rule, on the device of the
 * parameters). DP_EINVAL without the check. */
int dp_sgd_read_first_nonfinite_async(dp_sgd_t *s, int64_t *dst);
/* The momentum buffer (NULL without momentum), for checkpoints. */
dp_tensor_t *dp_sgd_velocity(dp_sgd_t *s);
void dp_sgd_set_lr(dp_sgd_t *s, float lr);
void dp_sgd_close(dp_sgd_t *s);

#ifdef __cplusplus
}
#endif
#endif
