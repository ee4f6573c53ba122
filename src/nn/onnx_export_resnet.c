/* The built-in resnet18 (resnet.c) as ONNX nodes for dp_model_export_onnx,
 * batch norm in inference mode, each parameter and buffer named as the
 * checkpoint names it (d2l's nn.Sequential state_dict):
 *
 *   Conv -> BatchNormalization -> Relu, then per residual block
 *   Conv -> BN -> Relu -> Conv -> BN, the shortcut (x, or a 1x1 Conv),
 *   Add -> Relu; then GlobalAveragePool -> Flatten -> Gemm (transB). */
#include "nn/modules.h"
#include "nn/onnx_build.h"

#include "core/internal.h"

static const char *conv(dp__ob_builder *b, const dp__conv *c, const dp__ob_weights *P, bool *pa,
                        const char *x)
{
    const char *ins[3] = {x, dp__ob_use(b, P, c->weight, pa), dp__ob_use(b, P, c->bias, pa)},
               *y = x;
    const int64_t *ws = P->specs[c->weight].shape;
    const int64_t pads[4] = {c->p.pad_h, c->p.pad_w, c->p.pad_h, c->p.pad_w};
    dp__ob_window(b, dp__ob_node(b, "Conv", ins, 3, &y), (int)ws[2], (int)ws[3], c->p.stride_h,
                  c->p.stride_w, pads);
    return y;
}

/* dp__bn_forward's eps 1e-5 and momentum 0.1 (ONNX's 0.9). */
static const char *bn(dp__ob_builder *b, const dp__bn *n, const dp__ob_weights *P,
                      const dp__ob_weights *B, bool *pa, bool *ba, const char *x)
{
    const char *ins[5] = {x, dp__ob_use(b, P, n->weight, pa), dp__ob_use(b, P, n->bias, pa),
                          dp__ob_use(b, B, n->running_mean, ba),
                          dp__ob_use(b, B, n->running_var, ba)},
               *y = x;
    Onnx__NodeProto *node = dp__ob_node(b, "BatchNormalization", ins, 5, &y);
    if (node) {
        dp__ob_attr_float(b, node, "epsilon", 1e-5f);
        dp__ob_attr_float(b, node, "momentum", 0.9f);
    }
    return y;
}

const char *dp__ob_resnet18(dp__ob_builder *b, dp_model_t *m, const dp__ob_weights *P,
                            const dp__ob_weights *B, bool *pa, bool *ba, const char *x)
{
    dp__resnet18_parts r;
    dp__resnet18_parts_of(m, &r);
    const char *h =
        dp__ob_unary(b, "Relu", bn(b, r.stem_bn, P, B, pa, ba, conv(b, r.stem, P, pa, x)));
    for (int i = 0; i < r.nblocks; i++) {
        const dp__residual *blk = &r.blocks[i];
        const char *y = conv(b, &blk->conv1, P, pa, h);
        y = dp__ob_unary(b, "Relu", bn(b, &blk->bn1, P, B, pa, ba, y));
        y = bn(b, &blk->bn2, P, B, pa, ba, conv(b, &blk->conv2, P, pa, y));
        const char *shortcut = blk->use_1x1conv ? conv(b, &blk->conv3, P, pa, h) : h;
        h = dp__ob_unary(b, "Relu", dp__ob_binary(b, "Add", y, shortcut));
    }
    h = dp__ob_unary(b, "GlobalAveragePool", h);
    Onnx__NodeProto *n = dp__ob_node(b, "Flatten", &h, 1, &h);
    if (n)
        dp__ob_attr_ints(b, n, "axis", 1, (const int64_t[]){1}, true);
    const char *ins[3] = {h, dp__ob_use(b, P, r.fc_weight, pa), dp__ob_use(b, P, r.fc_bias, pa)};
    n = dp__ob_node(b, "Gemm", ins, 3, &h);
    if (n)
        dp__ob_attr_ints(b, n, "transB", 1, (const int64_t[]){1}, true);
    return h;
}
