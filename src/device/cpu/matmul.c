/* oneDNN's matrix product, one cached primitive per shape, strides and
 * types: the bf16 linear layers (linear.c) and im2col convolutions
 * (conv2d_gemm.c) run on it. */
#include "device/cpu/cpu.h"

#include <string.h>

typedef struct matmul_prim {
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c, bias;
} matmul_prim;

static void matmul_prim_destroy(void *p)
{
    matmul_prim *c = p;
    if (c->prim)
        dnnl_primitive_destroy(c->prim);
    dnnl_memory_t mems[] = {c->a, c->b, c->c, c->bias};
    for (size_t i = 0; i < DP_COUNTOF(mems); i++)
        if (mems[i])
            dnnl_memory_destroy(mems[i]);
    dp__free(c);
}

static int build(dp__cpu *cpu, const dp__cpu_matmul *k, matmul_prim **out)
{
    dnnl_memory_desc_t A, B, C, bias;
    dnnl_dims_t ad = {k->m, k->k}, bd = {k->k, k->n}, cd = {k->m, k->n}, biasd = {1, k->n};
    dnnl_dims_t as = {k->a_strides[0], k->a_strides[1]}, bs = {k->b_strides[0], k->b_strides[1]};
    dnnl_dims_t cs = {k->c_strides[0], k->c_strides[1]};
    dnnl_memory_desc_init_by_strides(&A, 2, ad, k->a_type, as);
    dnnl_memory_desc_init_by_strides(&B, 2, bd, k->b_type, bs);
    dnnl_memory_desc_init_by_strides(&C, 2, cd, k->c_type, cs);
    dnnl_memory_desc_init_by_tag(&bias, 2, biasd, dnnl_f32, dnnl_ab);
    dnnl_matmul_desc_t desc;
    DP_DNNL_CHECK(dnnl_matmul_desc_init(&desc, &A, &B, k->bias ? &bias : NULL, &C));
    dnnl_primitive_attr_t attr;
    dnnl_post_ops_t ops;
    DP_DNNL_CHECK(dnnl_primitive_attr_create(&attr));
    if (dnnl_post_ops_create(&ops) != dnnl_success) {
        dnnl_primitive_attr_destroy(attr);
        return DP_ENOMEM;
    }
    if (k->alpha != 1.0f)
        dnnl_primitive_attr_set_output_scales(attr, 1, 0, &k->alpha);
    if (k->beta != 0.0f) /* C = alpha A B + beta C: the sum post-op */
        dnnl_post_ops_append_sum(ops, k->beta);
    if (k->relu)
        dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f);
    dnnl_primitive_attr_set_post_ops(attr, ops);
    dnnl_post_ops_destroy(ops);
    dnnl_primitive_desc_t pd;
    dnnl_status_t st = dnnl_primitive_desc_create(&pd, &desc, attr, cpu->engine, NULL);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success) {
        DP_ERROR("oneDNN: no matrix product of %lld x %lld x %lld in these types: status %d",
                 (long long)k->m, (long long)k->n, (long long)k->k, (int)st);
        return DP_EDEVICE;
    }
    matmul_prim *c = dp__calloc(1, sizeof *c);
    int rc = c ? 0 : DP_ENOMEM;
    if (rc == 0 &&
        (dnnl_memory_create(&c->a, &A, cpu->engine, DNNL_MEMORY_NONE) != dnnl_success ||
         dnnl_memory_create(&c->b, &B, cpu->engine, DNNL_MEMORY_NONE) != dnnl_success ||
         dnnl_memory_create(&c->c, &C, cpu->engine, DNNL_MEMORY_NONE) != dnnl_success ||
         dnnl_memory_create(&c->bias, &bias, cpu->engine, DNNL_MEMORY_NONE) != dnnl_success ||
         dnnl_primitive_create(&c->prim, pd) != dnnl_success)) {
        DP_ERROR("oneDNN: cannot create matrix product primitive");
        rc = DP_EDEVICE;
    }
    dnnl_primitive_desc_destroy(pd);
    if (rc < 0) {
        if (c)
            matmul_prim_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}

int dp__cpu_matmul_run(dp__cpu *cpu, const dp__cpu_matmul *k, const void *a, const void *b, void *c,
                       const float *bias)
{
    matmul_prim *p = dp__cpu_prim_find(cpu, k, sizeof *k);
    if (!p) {
        DP_TRY(build(cpu, k, &p));
        DP_TRY(dp__cpu_prim_put(cpu, k, sizeof *k, p, matmul_prim_destroy));
    }
    dnnl_memory_set_data_handle(p->a, (void *)a);
    dnnl_memory_set_data_handle(p->b, (void *)b);
    dnnl_memory_set_data_handle(p->c, c);
    dnnl_exec_arg_t args[4] = {
        {DNNL_ARG_SRC, p->a}, {DNNL_ARG_WEIGHTS, p->b}, {DNNL_ARG_DST, p->c}};
    int nargs = 3;
    if (k->bias) {
        dnnl_memory_set_data_handle(p->bias, (void *)bias);
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, p->bias};
    }
    DP_DNNL_CHECK(dnnl_primitive_execute(p->prim, cpu->stream, nargs, args));
    return 0;
}
