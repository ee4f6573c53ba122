/* The PyTorch DataParallel tutorial's model: one nn.Linear(5, 2),
 * y (N, 2) = x (N, 5) fc.weight^T + fc.bias. */
#include "nn/builtins.h"

#include "core/internal.h"

static const dp_param_spec tutorial_specs[] = {
    {"fc.weight", 2, {2, 5}, DP_INIT_UNIFORM, 0.4472136f}, /* nn.Linear: 1/sqrt(5) */
    {"fc.bias", 1, {2}, DP_INIT_UNIFORM, 0.4472136f},
};

static int tutorial_forward(dp_model_t *m, dp_tensor_t *x, bool train, dp_tensor_t **out)
{
    (void)train;
    dp_params_t *P = dp_model_params(m);
    return dp_linear(out, x, dp_params_get(P, 0), dp_params_get(P, 1), DP_WEIGHT_OUT_IN);
}

int dp__tutorial_def(dp_model_def *def, const int64_t *in_chw)
{
    (void)in_chw; /* (N, 5) whatever the images would be */
    *def = (dp_model_def){.name = "tutorial",
                          .params = tutorial_specs,
                          .nparams = (int)DP_COUNTOF(tutorial_specs),
                          .forward = tutorial_forward};
    return 0;
}
