/* torchvision's ResNet-18 written as torch.onnx.export writes it, for the
 * ONNX tests that train and split a real network (onnxutil.h). */
#include "onnxutil.h"

#include "core/rng_mix.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- torchvision's ResNet-18 ------------------------------------------------ */

/* A float initializer `name` of shape dims, U(offset +- scale) from seed. */
static void rn_init(ou_model *m, uint64_t seed, const char *name, int ndim, const int64_t *dims,
                    float scale, float offset)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= dims[d];
    float *v = malloc((size_t)n * sizeof *v);
    assert_non_null(v);
    /* Each tensor its own stream: fill's seed * 1000 + i would repeat a
     * neighbour's values in tensors of more than 1000. */
    for (int64_t i = 0; i < n; i++)
        v[i] = offset +
               scale * (float)(2.0 * (double)(dp__mix64(seed << 32 ^ (uint64_t)i) >> 11) * 0x1p-53 -
                               1.0);
    ou_init(m, name, ndim, dims, v);
    free(v);
}

/* Conv2d(cin, cout, k, stride, padding=k / 2, bias=False) named `module`
 * (its weight "module.weight", He-uniform: U(+-sqrt(6 / fan_in))), as node
 * `node` from `in` to `out`. */
static void rn_conv(ou_model *m, uint64_t *seed, const char *module, const char *node,
                    const char *in, const char *out, int64_t cin, int64_t cout, int64_t k,
                    int64_t stride)
{
    char w[128], ins[512];
    snprintf(w, sizeof w, "%s.weight", module);
    rn_init(m, ++*seed, w, 4, (const int64_t[]){cout, cin, k, k},
            sqrtf(6.0f / (float)(cin * k * k)), 0);
    snprintf(ins, sizeof ins, "%s,%s", in, w);
    Onnx__NodeProto *n = ou_node(m, "Conv", node, ins, out);
    ou_attr_ints(m, n, "kernel_shape", 2, (const int64_t[]){k, k});
    ou_attr_ints(m, n, "strides", 2, (const int64_t[]){stride, stride});
    ou_attr_ints(m, n, "pads", 4, (const int64_t[]){k / 2, k / 2, k / 2, k / 2});
}

/* BatchNorm2d(c) named `module` in training mode, as torch.onnx.export
 * writes it (the running statistics' outputs unread): weight 1, bias 0,
 * running mean 0, running variance 1, as PyTorch starts them. */
static void rn_bn(ou_model *m, const char *module, const char *node, const char *in,
                  const char *out, int64_t c)
{
    static const char *const suffix[4] = {"weight", "bias", "running_mean", "running_var"};
    char names[4][128], ins[640], outs[384];
    for (int i = 0; i < 4; i++) {
        snprintf(names[i], sizeof names[i], "%s.%s", module, suffix[i]);
        rn_init(m, 0, names[i], 1, &c, 0, i == 0 || i == 3 ? 1.0f : 0.0f);
    }
    snprintf(ins, sizeof ins, "%s,%s,%s,%s,%s", in, names[0], names[1], names[2], names[3]);
    snprintf(outs, sizeof outs, "%s,%s_mean,%s_var", out, out, out);
    Onnx__NodeProto *n = ou_node(m, "BatchNormalization", node, ins, outs);
    ou_attr_float(m, n, "epsilon", 1e-5f);
    ou_attr_float(m, n, "momentum", 0.9f);
    ou_attr_int(m, n, "training_mode", 1);
}

/* BasicBlock layerL.B from `in` (cin channels) to `out`: conv1 (stride s),
 * bn1, relu, conv2, bn2, downsample (a 1x1 conv of stride s and a batch
 * norm) where the shape changes, Add, relu_1; node and value names as
 * torch.onnx.export gives them ("/layer2/layer2.0/conv1/Conv"). */
static void rn_block(ou_model *m, uint64_t *seed, int layer, int block, const char *in,
                     const char *out, int64_t cin, int64_t cout, int64_t stride)
{
    char mod[32], path[80], a[8][160], node[160];
    snprintf(mod, sizeof mod, "layer%d.%d", layer, block);
    snprintf(path, sizeof path, "/layer%d/%s", layer, mod);
    static const char *const part[8] = {"conv1/Conv",
                                        "bn1/BatchNormalization",
                                        "relu/Relu",
                                        "conv2/Conv",
                                        "bn2/BatchNormalization",
                                        "downsample/downsample.0/Conv",
                                        "downsample/downsample.1/BatchNormalization",
                                        "Add"};
    for (int i = 0; i < 8; i++)
        snprintf(a[i], sizeof a[i], "%s/%s_output_0", path, part[i]);
    char w[96];
#define NODE(i) (snprintf(node, sizeof node, "%s/%s", path, part[i]), node)
    snprintf(w, sizeof w, "%s.conv1", mod);
    rn_conv(m, seed, w, NODE(0), in, a[0], cin, cout, 3, stride);
    snprintf(w, sizeof w, "%s.bn1", mod);
    rn_bn(m, w, NODE(1), a[0], a[1], cout);
    ou_node(m, "Relu", NODE(2), a[1], a[2]);
    snprintf(w, sizeof w, "%s.conv2", mod);
    rn_conv(m, seed, w, NODE(3), a[2], a[3], cout, cout, 3, 1);
    snprintf(w, sizeof w, "%s.bn2", mod);
    rn_bn(m, w, NODE(4), a[3], a[4], cout);
    const char *shortcut = in;
    if (stride != 1 || cin != cout) {
        snprintf(w, sizeof w, "%s.downsample.0", mod);
        rn_conv(m, seed, w, NODE(5), in, a[5], cin, cout, 1, stride);
        snprintf(w, sizeof w, "%s.downsample.1", mod);
        rn_bn(m, w, NODE(6), a[5], a[6], cout);
        shortcut = a[6];
    }
    char ins[400];
    snprintf(ins, sizeof ins, "%s,%s", a[4], shortcut);
    ou_node(m, "Add", NODE(7), ins, a[7]);
#undef NODE
    snprintf(node, sizeof node, "%s/relu_1/Relu", path);
    ou_node(m, "Relu", node, a[7], out);
}

void ou_resnet18(ou_model *m, uint64_t seed, const int64_t *chw, int64_t classes)
{
    ou_begin(m, 17);
    ou_input(m, "input", 4, (const int64_t[]){-1, chw[0], chw[1], chw[2]});
    rn_conv(m, &seed, "conv1", "/conv1/Conv", "input", "/conv1/Conv_output_0", chw[0], 64, 7, 2);
    rn_bn(m, "bn1", "/bn1/BatchNormalization", "/conv1/Conv_output_0",
          "/bn1/BatchNormalization_output_0", 64);
    ou_node(m, "Relu", "/relu/Relu", "/bn1/BatchNormalization_output_0", "/relu/Relu_output_0");
    Onnx__NodeProto *n = ou_node(m, "MaxPool", "/maxpool/MaxPool", "/relu/Relu_output_0",
                                 "/maxpool/MaxPool_output_0");
    ou_attr_ints(m, n, "kernel_shape", 2, (const int64_t[]){3, 3});
    ou_attr_ints(m, n, "strides", 2, (const int64_t[]){2, 2});
    ou_attr_ints(m, n, "pads", 4, (const int64_t[]){1, 1, 1, 1});
    char in[96] = "/maxpool/MaxPool_output_0", out[96];
    int64_t c = 64;
    for (int layer = 1; layer <= 4; layer++)
        for (int block = 0; block < 2; block++) {
            int64_t cout = 64 << (layer - 1);
            snprintf(out, sizeof out, "/layer%d/layer%d.%d/relu_1/Relu_output_0", layer, layer,
                     block);
            rn_block(m, &seed, layer, block, in, out, c, cout, layer > 1 && block == 0 ? 2 : 1);
            snprintf(in, sizeof in, "%s", out);
            c = cout;
        }
    ou_node(m, "GlobalAveragePool", "/avgpool/GlobalAveragePool", in,
            "/avgpool/GlobalAveragePool_output_0");
    n = ou_node(m, "Flatten", "/Flatten", "/avgpool/GlobalAveragePool_output_0",
                "/Flatten_output_0");
    ou_attr_int(m, n, "axis", 1);
    float bound = 1.0f / sqrtf(512.0f);
    rn_init(m, ++seed, "fc.weight", 2, (const int64_t[]){classes, 512}, bound, 0);
    rn_init(m, ++seed, "fc.bias", 1, &classes, bound, 0);
    n = ou_node(m, "Gemm", "/fc/Gemm", "/Flatten_output_0,fc.weight,fc.bias", "logits");
    ou_attr_int(m, n, "transB", 1);
    ou_output(m, "logits");
}
