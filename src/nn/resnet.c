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
#include "nn/builtins.h"
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
    char block_names[8][24]; /* "resnet_block1.0", for messages */
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
            char *prefix = net->block_names[2 * stage + i];
            snprintf(prefix, sizeof net->block_names[0], "resnet_block%d.%d", stage + 1, i);
            bool first = i == 0 && stage > 0;
            net->blocks[2 * stage + i] =
                dp__residual_add(b, prefix, first ? channels[stage] : channels[stage + 1],
                                 channels[stage + 1], first, first ? 2 : 1);
        }
    }
    /* fc = nn.Sequential(nn.Flatten(), nn.Linear(512, 10)): entry "fc.1". */
    dp__linear_add(b, "fc.1", 512, 10, &net->fc_weight, &net->fc_bias);
}

/* The rows of its summary: the stem's conv and batch norm (ReLU fused),
 * each residual block's 6 or 7 ops, then adaptive pool, flatten, linear. */
enum { STEM_LAYERS = 2, HEAD_LAYERS = 3 };

static int layer_count(const resnet *net)
{
    int n = STEM_LAYERS + HEAD_LAYERS;
    for (size_t i = 0; i < DP_COUNTOF(net->blocks); i++)
        n += dp__residual_ops(&net->blocks[i]);
    return n;
}

/* A range may begin at a block's first op or at its final ReLU, and end
 * just before that ReLU or at it: the ops up to the block's sum read its
 * input, so they run in one range. */
static int check_range(const resnet *net, int first, int last)
{
    int n = layer_count(net);
    if (first < 0 || first > last || last >= n) {
        DP_ERROR("resnet18: layers %d-%d: the model has layers 0-%d", first, last, n - 1);
        return DP_EINVAL;
    }
    for (int i = 0, start = STEM_LAYERS; i < (int)DP_COUNTOF(net->blocks); i++) {
        int relu = start + dp__residual_ops(&net->blocks[i]) - 1;
        int bad = -1;
        if (first > start && first < relu)
            bad = first; /* after conv1, up to the add */
        else if (last >= start && last < relu - 1)
            bad = last; /* before the add */
        if (bad >= 0) {
            DP_ERROR("resnet18: layer %d is inside residual block %s (layers %d-%d)", bad,
                     net->block_names[i], start, relu);
            return DP_EINVAL;
        }
        start = relu + 1;
    }
    return 0;
}

static int resnet_forward_layers(dp_model_t *m, dp_tensor_t *x, int first, int last, bool train,
                                 dp_tensor_t **y)
{
    const resnet *net = dp_model_user(m);
    DP_TRY(check_range(net, first, last));
    dp_tensor_t *h = x;
    /* Each piece runs when its rows a..b lie in the range (check_range
     * leaves none half in it). */
#define RUNS(a, b) ((a) >= first && (b) <= last)
    if (RUNS(0, 0))
        DP_TRY(dp__conv_forward(&net->stem, m, h, &h));
    if (RUNS(1, 1))
        DP_TRY(dp__bn_forward(&net->stem_bn, m, h, train, true, &h));
    int row = STEM_LAYERS;
    for (size_t i = 0; i < DP_COUNTOF(net->blocks); i++) {
        int relu = row + dp__residual_ops(&net->blocks[i]) - 1;
        /* The sum and its ReLU in one sweep when both run here. */
        if (RUNS(row, relu))
            DP_TRY(dp__residual_sum(&net->blocks[i], m, h, train, true, &h));
        else if (RUNS(row, relu - 1))
            DP_TRY(dp__residual_sum(&net->blocks[i], m, h, train, false, &h));
        else if (RUNS(relu, relu))
            DP_TRY(dp_relu(&h, h));
        row = relu + 1;
    }
    if (RUNS(row, row))
        DP_TRY(dp_adaptive_avg_pool2d(&h, h, 1, 1));
    if (RUNS(row + 1, row + 1))
        DP_TRY(dp_flatten(&h, h));
    if (RUNS(row + 2, row + 2)) {
        dp_params_t *P = dp_model_params(m);
        DP_TRY(dp_linear(&h, h, dp_params_get(P, net->fc_weight), dp_params_get(P, net->fc_bias),
                         DP_WEIGHT_OUT_IN));
    }
#undef RUNS
    *y = h;
    return 0;
}

static int resnet_forward(dp_model_t *m, dp_tensor_t *x, bool train, dp_tensor_t **logits)
{
    const resnet *net = dp_model_user(m);
    return resnet_forward_layers(m, x, 0, layer_count(net) - 1, train, logits);
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
                          .forward_layers = resnet_forward_layers,
                          .user = net};
    return 0;
}
