/* Which convolution algorithms and precisions oneDNN implements on this CPU,
 * for the convolution shapes dptrain trains (batch 256): for each shape and
 * each of direct/Winograd in f32/bf16, the forward-training implementation
 * oneDNN picks ("jit:avx2", "brgconv:avx512_core", ...) or "unimplemented".
 * Winograd needs AVX-512 in oneDNN 2.6, bf16 AVX512-BF16 or AMX (or
 * AVX-512 for its emulation); a CPU without them offers neither.
 *
 *   build/bench_conv_algos   (cmake --build build --target bench_conv_algos)
 */
#include <dnnl.h>

#include <stdio.h>

typedef struct conv_shape {
    const char *name;
    int64_t c, h, k, r, pad;
} conv_shape;

static const char *implementation(dnnl_engine_t engine, const conv_shape *s, dnnl_alg_kind_t alg,
                                  dnnl_data_type_t type)
{
    int64_t out = s->h + 2 * s->pad - s->r + 1;
    dnnl_dims_t src_dims = {256, s->c, s->h, s->h}, wei_dims = {s->k, s->c, s->r, s->r};
    dnnl_dims_t dst_dims = {256, s->k, out, out}, strides = {1, 1}, pad = {s->pad, s->pad};
    dnnl_memory_desc_t src, wei, dst;
    dnnl_memory_desc_init_by_tag(&src, 4, src_dims, type, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&wei, 4, wei_dims, type, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&dst, 4, dst_dims, type, dnnl_format_tag_any);
    dnnl_convolution_desc_t desc;
    if (dnnl_convolution_forward_desc_init(&desc, dnnl_forward_training, alg, &src, &wei, NULL,
                                           &dst, strides, pad, pad) != dnnl_success)
        return "bad descriptor";
    dnnl_primitive_desc_t pd;
    if (dnnl_primitive_desc_create(&pd, &desc, NULL, engine, NULL) != dnnl_success)
        return "unimplemented";
    static char name[64];
    const char *info = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &info);
    snprintf(name, sizeof name, "%s", info ? info : "?");
    dnnl_primitive_desc_destroy(pd);
    return name;
}

int main(void)
{
    static const conv_shape shapes[] = {
        {"ResNet 64->64 3x3 on 28x28", 64, 28, 64, 3, 1},
        {"ResNet 128->128 3x3 on 14x14", 128, 14, 128, 3, 1},
        {"ResNet 256->256 3x3 on 7x7", 256, 7, 256, 3, 1},
        {"ResNet 512->512 3x3 on 4x4", 512, 4, 512, 3, 1},
        {"LeNet conv2 20->50 5x5 on 12x12", 20, 12, 50, 5, 0},
    };
    dnnl_engine_t engine;
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success) {
        fprintf(stderr, "bench_conv_algos: no oneDNN CPU engine\n");
        return 1;
    }
    const dnnl_version_t *v = dnnl_version();
    printf("oneDNN %d.%d.%d, forward-training implementations for batch 256:\n", v->major,
           v->minor, v->patch);
    printf("%-34s %-22s %-22s %-22s %s\n", "conv", "f32 direct", "f32 winograd", "bf16 direct",
           "bf16 winograd");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        printf("%-34s", shapes[i].name);
        printf(" %-22s", implementation(engine, &shapes[i], dnnl_convolution_direct, dnnl_f32));
        printf(" %-22s", implementation(engine, &shapes[i], dnnl_convolution_winograd, dnnl_f32));
        printf(" %-22s", implementation(engine, &shapes[i], dnnl_convolution_direct, dnnl_bf16));
        printf(" %s\n", implementation(engine, &shapes[i], dnnl_convolution_winograd, dnnl_bf16));
    }
    dnnl_engine_destroy(engine);
    return 0;
}
