/* dp/nn.h - parameters and models.
 *
 * A model's parameters live in one contiguous buffer on its device and their
 * gradients in another, so that an optimizer step or an allreduce is one
 * call over one buffer; each named parameter is a view into both. */
#ifndef DP_NN_H
#define DP_NN_H

#include "dp/ops.h"
#include "dp/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dp_params dp_params_t;

typedef enum dp_init {
    DP_INIT_ZEROS = 0,
    DP_INIT_NORMAL = 1,  /* N(0, scale^2): the seeds' weights, scale 0.01 */
    DP_INIT_UNIFORM = 2, /* U(-scale, scale): PyTorch's default biases, 1/sqrt(fan_in) */
    DP_INIT_ONES = 3,    /* batch norm's weight and running_var */
} dp_init;

typedef struct dp_param_spec {
    const char *name; /* PyTorch state_dict name, e.g. "W1" or "0.weight" */
    int ndim;
    int64_t shape[DP_MAX_DIMS];
    dp_init init;
    float scale;
} dp_param_spec;

/* `with_grads` false makes buffers that are not trained (batch norm's
 * running statistics): no gradient buffer. */
int dp_params_init(dp_params_t **out, dp_device_t *dev, const dp_param_spec *specs, int n,
                   bool with_grads);
void dp_params_close(dp_params_t *p);
int dp_params_count(const dp_params_t *p);
dp_tensor_t *dp_params_get(const dp_params_t *p, int i);
const char *dp_params_name(const dp_params_t *p, int i);
/* Index of the tensor called `name`, or -1. */
int dp_params_find(const dp_params_t *p, const char *name);
/* The whole value and gradient buffers as 1-D tensors (grads: NULL for
 * buffers made without gradients). */
dp_tensor_t *dp_params_values(const dp_params_t *p);
dp_tensor_t *dp_params_grads(const dp_params_t *p);
int64_t dp_params_numel(const dp_params_t *p);
/* Draws every parameter from its spec with the counter-based RNG: the same
 * seed gives the same weights on every device and every rank. */
int dp_params_init_random(dp_params_t *p, uint64_t seed);
/* Copies all values in / out (dp_params_numel floats, spec order). */
int dp_params_set(dp_params_t *p, const float *values);
int dp_params_get_all(const dp_params_t *p, float *values);
/* Starts a step: the first gradient contribution of each parameter writes. */
void dp_params_zero_grad(dp_params_t *p);
/* Ends a backward pass: zeroes the gradient of parameters that got none. */
int dp_params_finish_grad(dp_params_t *p);

/* ---- models ----------------------------------------------------------------- */
typedef struct dp_model dp_model_t;

/* Names of the models dp_model_create knows, NULL-terminated: "lenet" (the
 * seeds' LeNet on 28x28 images), "tutorial" (the DataParallel tutorial's
 * Linear(5, 2)). */
const char *const *dp_model_names(void);
/* Builds `name` on `dev` with weights drawn from `seed`. */
int dp_model_create(dp_model_t **out, const char *name, dp_device_t *dev, uint64_t seed);
void dp_model_close(dp_model_t *m);
const char *dp_model_name(const dp_model_t *m);
dp_params_t *dp_model_params(dp_model_t *m);
/* The model's buffers (batch norm's running statistics), or NULL. */
dp_params_t *dp_model_buffers(dp_model_t *m);
/* Training forwards so far: batch norm's num_batches_tracked. */
int64_t dp_model_batches_tracked(const dp_model_t *m);
void dp_model_set_batches_tracked(dp_model_t *m, int64_t n);
/* The names of the batch norm layers ("1", "resnet_block1.0.bn1", ...), for
 * their num_batches_tracked entries; *n receives the count. */
const char *const *dp_model_bn_names(const dp_model_t *m, int *n);
dp_device_t *dp_model_device(const dp_model_t *m);
/* The output (N, classes) from x: images (N, 1, 28, 28) for lenet, (N, 5)
 * for tutorial; `train` selects training behaviour (batch statistics) where
 * a model has any. */
int dp_model_forward(dp_model_t *m, dp_tensor_t *x, bool train, dp_tensor_t **logits);

/* Called after every forward with its input and output, like PyTorch's
 * register_forward_hook (the DataParallel tutorial prints sizes here).
 * Replicas made by dp_replicate inherit it. */
typedef void (*dp_forward_hook)(const dp_model_t *m, const dp_tensor_t *input,
                                const dp_tensor_t *output, void *user);
void dp_model_set_forward_hook(dp_model_t *m, dp_forward_hook hook, void *user);

#ifdef __cplusplus
}
#endif
#endif
