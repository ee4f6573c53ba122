/* ResNet-18 as d2l's resnet18(num_classes=10, in_channels) for the
 * multi-GPU chapter, on 28x28 Fashion-MNIST (in_channels 1) or 32x32
 * CIFAR-10 (3):
 *
 *   0: conv C->64 3x3 pad 1, 1: BatchNorm2d(64), 2: ReLU   (no max pool)
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

#define MAX_ENTRIES 160

/* One definition's description: its specs and its modules' indices. */
typedef struct resnet {
    dp_param_spec params[MAX_ENTRIES], buffers[MAX_ENTRIES];
    char names[3 * MAX_ENTRIES][64];
    const char *bn_names[MAX_ENTRIES];
    dp__spec_builder b;
    dp__conv stem;
    dp__bn stem_bn;
    dp__residual blocks[8];
    int fc_weight, fc_bias;
} resnet;

static void describe(resnet *net, int in_channels)
{
    dp__spec_builder *b = &net->b;
    b->params = net->params;
    b->buffers = net->buffers;
    b->cap = MAX_ENTRIES;
    b->names = net->names;
    b->cap_names = (int)DP_COUNTOF(net->names);
    b->bn_names = net->bn_names;
    /* nn.Sequential(Conv2d, BatchNorm2d, ReLU): entries "0" and "1". */
    net->stem = dp__conv_add(b, "0", in_channels, 64, 3, 1, 1);
    net->stem_bn = dp__bn_add(b, "1", 64);
    static const int channels[5] = {64, 64, 128, 256, 512};
    for (int stage = 0; stage < 4; stage++) {
        for (int i = 0; i < 2; i++) {
            char prefix[64];
            snprintf(prefix, sizeof prefix, "resnet_block%d.%d", stage + 1, i);
            bool first = i == 0 && stage > 0;
            net->blocks[2 * stage + i] =
                dp__residual_add(b, prefix, first ? channels[stage] : channels[stage + 1],
                                 channels[stage + 1], first, first ? 2 : 1);
        }
    }
    /* fc = nn.Sequential(nn.Flatten(), nn.Linear(512, 10)): entry "fc.1". */
    dp__linear_add(b, "fc.1", 512, 10, &net->fc_weight, &net->fc_bias);
}

static int resnet_forward(dp_model_t *m, dp_tensor_t *x, bool train, dp_tensor_t **logits)
{
    const resnet *net = dp_model_user(m);
    dp_tensor_t *h;
    DP_TRY(dp__conv_forward(&net->stem, m, x, &h));
    DP_TRY(dp__bn_forward(&net->stem_bn, m, h, train, true, &h));
    for (size_t i = 0; i < DP_COUNTOF(net->blocks); i++)
        DP_TRY(dp__residual_forward(&net->blocks[i], m, h, train, &h));
    DP_TRY(dp_adaptive_avg_pool2d(&h, h, 1, 1));
    DP_TRY(dp_flatten(&h, h));
    dp_params_t *P = dp_model_params(m);
    return dp_linear(logits, h, dp_params_get(P, net->fc_weight), dp_params_get(P, net->fc_bias),
                     DP_WEIGHT_OUT_IN);
}

int dp__resnet18_def(dp_model_def *def, const int64_t *in_chw)
{
    if (in_chw[0] < 1 || in_chw[1] < 1 || in_chw[2] < 1) {
        DP_ERROR("resnet18: needs images of at least one channel and pixel");
        return DP_ESHAPE;
    }
    resnet *net = dp__calloc(1, sizeof *net);
    if (!net)
        return DP_ENOMEM;
    describe(net, (int)in_chw[0]);
    *def = (dp_model_def){.name = "resnet18",
                          .params = net->params,
                          .nparams = net->b.nparams,
                          .buffers = net->buffers,
                          .nbuffers = net->b.nbuffers,
                          .bn_names = net->bn_names,
                          .nbn = net->b.nbn,
                          .forward = resnet_forward,
                          .user = net};
    return 0;
}
