/* LeakyReLU on the CPU (src/ops/leaky_relu.c): oneDNN's eltwise ReLU with
 * alpha = negative_slope, dst = src > 0 ? src : alpha src, and its
 * backward from src, diff_src = src > 0 ? diff_dst : alpha diff_dst, over
 * the tensor seen as a vector of n f32 values (any shape and layout: the
 * op is elementwise), one primitive per pass, length and slope. */
#include "device/cpu/cpu.h"

#include <string.h>

typedef struct leaky_key {
    int backward;
    int64_t n;
    float negative_slope;
} leaky_key;

/* The memory objects: forward X = src, OUT = dst; backward X = src, DY =
 * diff_dst, OUT = diff_src. */
enum { X, DY, OUT };

static int leaky_pd(dp__cpu *cpu, const void *key, dnnl_primitive_desc_t *pd,
                    dnnl_memory_desc_t *mds, int *n)
{
    const leaky_key *k = key;
    dnnl_dims_t dims = {k->n};
    dnnl_memory_desc_init_by_tag(&mds[X], 1, dims, dnnl_f32, dnnl_a);
    mds[DY] = mds[OUT] = mds[X];
    *n = 3;
    dnnl_eltwise_desc_t fdesc, bdesc;
    DP_DNNL_CHECK(dnnl_eltwise_forward_desc_init(&fdesc, dnnl_forward_training, dnnl_eltwise_relu,
                                                 &mds[X], k->negative_slope, 0));
    if (k->backward)
        DP_DNNL_CHECK(dnnl_eltwise_backward_desc_init(&bdesc, dnnl_eltwise_relu, &mds[DY], &mds[X],
                                                      k->negative_slope, 0));
    return dp__cpu_pass_pd(cpu, &fdesc, k->backward ? &bdesc : NULL, NULL, dnnl_f32, "leaky_relu",
                           pd);
}

static int run(const dp__eltwise_args *a, dp_device_t *dev, int backward)
{
    dp__cpu *cpu = dev->impl;
    if (a->n == 0)
        return 0;
    leaky_key k;
    memset(&k, 0, sizeof k);
    k.backward = backward;
    k.n = a->n;
    k.negative_slope = a->alpha;
    dp__cpu_primitive *c;
    DP_TRY(dp__cpu_primitive_get(cpu, &k, sizeof k, leaky_pd, &c));
    DP_ASSERT(c); /* f32 always has a primitive */
    const dp__cpu_arg fwd[] = {{DNNL_ARG_SRC, X, a->a}, {DNNL_ARG_DST, OUT, a->out}};
    const dp__cpu_arg bwd[] = {
        {DNNL_ARG_SRC, X, a->b}, {DNNL_ARG_DIFF_DST, DY, a->a}, {DNNL_ARG_DIFF_SRC, OUT, a->out}};
    return backward ? dp__cpu_primitive_run(cpu, c, bwd, 3) : dp__cpu_primitive_run(cpu, c, fwd, 2);
}

DP__CPU_PASSES(leaky_relu, dp__eltwise_args, run)
