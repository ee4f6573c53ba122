/* The PyTorch DataParallel tutorial's model: one nn.Linear(5, 2),
 * y (N, 2) = x (N, 5) fc.weight^T + fc.bias. */
#include "nn/model.h"

#include "core/internal.h"

static const dp_param_spec tutorial_specs[] = {
    {"fc.weight", 2, {2, 5}, DP_INIT_UNIFORM, 0.4472136f}, /* nn.Linear: 1/sqrt(5) */
    {"fc.bias", 1, {2}, DP_INIT_UNIFORM, 0.4472136f},
};

static const dp_param_spec *tutorial_param_specs(int *n)
{
    *n = (int)DP_COUNTOF(tutorial_specs);
    return tutorial_specs;
}

static int tutorial_forward(dp_model_t *m, dp_tensor_t *x, bool train, dp_tensor_t **out)
{
    (void)train;
    return dp_linear(out, x, dp_params_get(m->params, 0), dp_params_get(m->params, 1),
                     DP_WEIGHT_OUT_IN);
}

const dp__model_ops dp__tutorial_ops = {
    .name = "tutorial",
    .specs = tutorial_param_specs,
    .forward = tutorial_forward,
};
