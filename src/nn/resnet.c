/* ResNet-18 as d2l's resnet18(num_classes=10, in_channels=1) for the
 * multi-GPU chapter, on 28x28 Fashion-MNIST:
 *
 *   0: conv 1->64 3x3 pad 1, 1: BatchNorm2d(64), 2: ReLU   (no max pool)
 *   resnet_block1: Residual(64, 64) x 2                        28x28
 *   resnet_block2: Residual(64, 128, 1x1 conv, stride 2), Residual(128, 128)   14x14
 *   resnet_block3: ... 256 ...                                  7x7
 *   resnet_block4: ... 512 ...                                  4x4
 *   global_avg_pool: AdaptiveAvgPool2d((1, 1)), fc: Flatten, Linear(512, 10)
 *
 * Parameter and buffer names are those of that nn.Sequential's state_dict,
 * so PyTorch's load_state_dict accepts a checkpoint of it. */
#include "nn/modules.h"

#include "core/internal.h"

#include <pthread.h>

#define MAX_ENTRIES 160

static struct {
    dp_param_spec params[MAX_ENTRIES], buffers[MAX_ENTRIES];
    char names[3 * MAX_ENTRIES][64];
    const char *bn_names[MAX_ENTRIES];
    dp__spec_builder b;
    dp__conv stem;
    dp__bn stem_bn;
    dp__residual blocks[8];
    int fc_weight, fc_bias;
} net;

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void describe(void)
{
    dp__spec_builder *b = &net.b;
    b->params = net.params;
    b->buffers = net.buffers;
    b->cap = MAX_ENTRIES;
    b->names = net.names;
    b->cap_names = (int)DP_COUNTOF(net.names);
    b->bn_names = net.bn_names;
    /* nn.Sequential(Conv2d, BatchNorm2d, ReLU): entries "0" and "1". */
    net.stem = dp__conv_add(b, "0", 1, 64, 3, 1, 1);
    net.stem_bn = dp__bn_add(b, "1", 64);
    static const int channels[5] = {64, 64, 128, 256, 512};
    for (int stage = 0; stage < 4; stage++) {
        for (int i = 0; i < 2; i++) {
            char prefix[64];
            snprintf(prefix, sizeof prefix, "resnet_block%d.%d", stage + 1, i);
            bool first = i == 0 && stage > 0;
            net.blocks[2 * stage + i] =
                dp__residual_add(b, prefix, first ? channels[stage] : channels[stage + 1],
                                 channels[stage + 1], first, first ? 2 : 1);
        }
    }
    /* fc = nn.Sequential(nn.Flatten(), nn.Linear(512, 10)): entry "fc.1". */
    dp__linear_add(b, "fc.1", 512, 10, &net.fc_weight, &net.fc_bias);
}

static const dp_param_spec *resnet_specs(int *n)
{
    pthread_once(&once, describe);
    *n = net.b.nparams;
    return net.params;
}

static const dp_param_spec *resnet_buffer_specs(int *n)
{
    pthread_once(&once, describe);
    *n = net.b.nbuffers;
    return net.buffers;
}

static const char *const *resnet_bn_names(int *n)
{
    pthread_once(&once, describe);
    *n = net.b.nbn;
    return net.bn_names;
}

static int resnet_forward(dp_model_t *m, dp_tensor_t *x, bool train, dp_tensor_t **logits)
{
    dp_tensor_t *h;
    DP_TRY(dp__conv_forward(&net.stem, m, x, &h));
    DP_TRY(dp__bn_forward(&net.stem_bn, m, h, train, true, &h));
    for (size_t i = 0; i < DP_COUNTOF(net.blocks); i++)
        DP_TRY(dp__residual_forward(&net.blocks[i], m, h, train, &h));
    DP_TRY(dp_adaptive_avg_pool2d(&h, h, 1, 1));
    DP_TRY(dp_flatten(&h, h));
    return dp_linear(logits, h, dp_params_get(m->params, net.fc_weight),
                     dp_params_get(m->params, net.fc_bias), DP_WEIGHT_OUT_IN);
}

const dp__model_ops dp__resnet18_ops = {
    .name = "resnet18",
    .specs = resnet_specs,
    .buffer_specs = resnet_buffer_specs,
    .bn_names = resnet_bn_names,
    .forward = resnet_forward,
};
