/* global_max_pool2d: y (N, C, 1, 1) = the max over (H, W) of each channel of
 * x (N, C, H, W), ONNX's GlobalMaxPool and nn.AdaptiveMaxPool2d(1): the max
 * pooling op with one window of H x W, recorded as max_pool2d; its backward
 * passes each output's gradient to its argmax (the first of equal maxima),
 * as dp_max_pool2d's does. Global average pooling is
 * dp_adaptive_avg_pool2d(y, x, 1, 1), whose windows tile x, so the pooling
 * kernel runs it too. */
#include "ops/op.h"

int dp_global_max_pool2d(dp_tensor_t **y, dp_tensor_t *x)
{
    DP_TRY(dp__check_rank("global_max_pool2d", "input", x, 4));
    if (x->shape[2] < 1 || x->shape[3] < 1 || x->shape[2] > 1 << 30 || x->shape[3] > 1 << 30) {
        char xs[64];
        DP_ERROR("global_max_pool2d: input %s has no pixels to pool",
                 dp_tensor_shape_str(x, xs, sizeof xs));
        return DP_ESHAPE;
    }
    dp_pool2d_params p = {.kernel_h = (int)x->shape[2], .kernel_w = (int)x->shape[3]};
    return dp_max_pool2d(y, x, &p);
}
