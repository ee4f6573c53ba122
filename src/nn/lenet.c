/* LeNet as the seeds write it from scratch (d2l "Multiple GPUs"):
 *
 *   conv 1->20 3x3, relu, avgpool 2     (N, 1, 28, 28) -> (N, 20, 13, 13)
 *   conv 20->50 5x5, relu, avgpool 2    -> (N, 50, 4, 4)
 *   flatten, fc 800->128 (torch.mm), relu, fc 128->10
 *
 * For other inputs (C, H, W): W1 takes C channels and W3 the flattened
 * 50 x h x w, h = ((H - 2) / 2 - 4) / 2 (so H, W >= 14).
 *
 * Weights N(0, 0.01^2), biases 0; parameter names and shapes are the seed's
 * W1..b4, so W3 is (800, 128) and used as torch.mm(h, W3) + b3. The ReLUs
 * after the convolutions are fused into them, and the first convolution
 * with its ReLU and pool runs as one kernel (dp_conv2d_avg_pool2d, dp/ops.h). */
#include "nn/builtins.h"

#include "core/internal.h"
#include "dp/ops.h"

#include <string.h>

enum { LENET_LAYERS = 8 };

/* Rows 0-7 of its summary: conv (ReLU fused), avgpool, conv (ReLU fused),
 * avgpool, flatten, linear, relu, linear. Any row but 1 may start a range:
 * the first convolution and its pool run as one kernel, whose float sums
 * are in another order than the two ops' apart, and a pipeline cut
 * between them would not give the whole forward's bits. */
static int lenet_forward_layers(dp_model_t *m, dp_tensor_t *x, int first, int last, bool train,
                                dp_tensor_t **y)
{
    (void)train;
    if (first < 0 || first > last || last >= LENET_LAYERS) {
        DP_ERROR("lenet: layers %d-%d: the model has layers 0-%d", first, last, LENET_LAYERS - 1);
        return DP_EINVAL;
    }
    if (first == 1 || last == 0) {
        DP_ERROR("lenet: layers %d-%d: layers 0 and 1 (the first convolution and its pool) run "
                 "as one kernel, so no range starts at layer 1",
                 first, last);
        return DP_EINVAL;
    }
    dp_params_t *P = dp_model_params(m);
    const dp_conv2d_params conv_relu = {.relu = true};
    const dp_pool2d_params pool2 = {.kernel_h = 2, .kernel_w = 2};
    dp_tensor_t *h = x;
    for (int i = first; i <= last; i++) {
        switch (i) {
        case 0:
        case 2:
            if (i + 1 <= last) {
                /* with its pool, in one kernel where that runs */
                DP_TRY(dp_conv2d_avg_pool2d(&h, h, dp_params_get(P, i), dp_params_get(P, i + 1),
                                            &conv_relu, &pool2));
                i++;
            } else {
                DP_TRY(dp_conv2d(&h, h, dp_params_get(P, i), dp_params_get(P, i + 1), &conv_relu));
            }
            break;
        case 1:
        case 3:
            DP_TRY(dp_avg_pool2d(&h, h, &pool2));
            break;
        case 4:
            DP_TRY(dp_flatten(&h, h));
            break;
        case 5:
            DP_TRY(dp_linear(&h, h, dp_params_get(P, 4), dp_params_get(P, 5), DP_WEIGHT_IN_OUT));
            break;
        case 6:
            DP_TRY(dp_relu(&h, h));
            break;
        default:
            DP_TRY(dp_linear(&h, h, dp_params_get(P, 6), dp_params_get(P, 7), DP_WEIGHT_IN_OUT));
            break;
        }
    }
    *y = h;
    return 0;
}

static int lenet_forward(dp_model_t *m, dp_tensor_t *x, bool train, dp_tensor_t **logits)
{
    return lenet_forward_layers(m, x, 0, LENET_LAYERS - 1, train, logits);
}

static void lenet_stage_starts(const dp_model_def *def, dp_layer_summary *rows, int n)
{
    (void)def;
    if (n > 1)
        rows[1].can_start = false; /* see lenet_forward_layers */
}

static int64_t pooled(int64_t n)
{
    return ((n - 2) / 2 - 4) / 2;
}

int dp__lenet_def(dp_model_def *def, const int64_t *in_chw)
{
    int64_t c = in_chw[0], h = pooled(in_chw[1]), w = pooled(in_chw[2]);
    if (c < 1 || in_chw[1] < 14 || in_chw[2] < 14) {
        DP_ERROR("lenet: needs images of at least 1x14x14, not %lldx%lldx%lld", (long long)c,
                 (long long)in_chw[1], (long long)in_chw[2]);
        return DP_ESHAPE;
    }
    dp_param_spec *s = dp__calloc(8, sizeof *s);
    if (!s)
        return DP_ENOMEM;
    const dp_param_spec specs[8] = {
        {"W1", 4, {20, c, 3, 3}, DP_INIT_NORMAL, 0.01f},     {"b1", 1, {20}, DP_INIT_ZEROS, 0},
        {"W2", 4, {50, 20, 5, 5}, DP_INIT_NORMAL, 0.01f},    {"b2", 1, {50}, DP_INIT_ZEROS, 0},
        {"W3", 2, {50 * h * w, 128}, DP_INIT_NORMAL, 0.01f}, {"b3", 1, {128}, DP_INIT_ZEROS, 0},
        {"W4", 2, {128, 10}, DP_INIT_NORMAL, 0.01f},         {"b4", 1, {10}, DP_INIT_ZEROS, 0},
    };
    memcpy(s, specs, sizeof specs);
    *def = (dp_model_def){.name = "lenet",
                          .params = s,
                          .nparams = 8,
                          .forward = lenet_forward,
                          .forward_layers = lenet_forward_layers,
                          .stage_starts = lenet_stage_starts};
    return 0;
}
