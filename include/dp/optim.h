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
/* The momentum buffer (NULL without momentum), for checkpoints. */
dp_tensor_t *dp_sgd_velocity(dp_sgd_t *s);
void dp_sgd_set_lr(dp_sgd_t *s, float lr);
void dp_sgd_close(dp_sgd_t *s);

#ifdef __cplusplus
}
#endif
#endif
