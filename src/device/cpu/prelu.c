/* PReLU (src/ops/prelu.c) on the CPU: oneDNN's prelu primitive, forward
 * and backward (dx and the slopes' gradient together), over x seen as
 * (N, C, rest) with the strides of its layout and the slopes as (1, C, 1),
 * or (1, 1, 1) for one slope, which oneDNN broadcasts. */
#include "device/cpu/cpu.h"

#include <string.h>

typedef struct prelu_key {
    dp__cpu_channel_key x;
    int64_t nw;
} prelu_key;

/* The memory objects: X = src, W = weights, Y = dst (forward) or diff_dst
 * (backward), DX = diff_src, DW = diff_weights. */
enum { X, W, Y, DX, DW };

static int prelu_pd(dp__cpu *cpu, const void *key, dnnl_primitive_desc_t *pd,
                    dnnl_memory_desc_t *mds, int *n)
{
    const prelu_key *k = key;
    dnnl_dims_t wdims = {1, k->nw, 1};
    DP_TRY(dp__cpu_channel_md(&mds[X], &k->x));
    DP_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&mds[W], 3, wdims, dnnl_f32, dnnl_abc));
    mds[Y] = mds[DX] = mds[X];
    mds[DW] = mds[W];
    *n = 5;
    dnnl_prelu_desc_t fdesc, bdesc;
    DP_DNNL_CHECK(dnnl_prelu_forward_desc_init(&fdesc, dnnl_forward_training, &mds[X], &mds[W]));
    if (k->x.backward)
        DP_DNNL_CHECK(dnnl_prelu_backward_desc_init(&bdesc, &mds[X], &mds[W], &mds[DX], &mds[DW]));
    return dp__cpu_pass_pd(cpu, &fdesc, k->x.backward ? &bdesc : NULL, NULL, dnnl_f32, "prelu", pd);
}

static int run(const dp__prelu_args *a, dp_device_t *dev, int backward)
{
    dp__cpu *cpu = dev->impl;
    prelu_key k;
    memset(&k, 0, sizeof k);
    dp__cpu_channel_key_init(&k.x, &a->x, backward);
    k.nw = a->nw;
    if (k.x.N * k.x.C * k.x.HW == 0) { /* nothing to sum: the slopes' gradient is 0 */
        if (backward)
            memset(a->dw, 0, (size_t)a->nw * sizeof *a->dw);
        return 0;
    }
    dp__cpu_primitive *c;
    DP_TRY(dp__cpu_primitive_get(cpu, &k, sizeof k, prelu_pd, &c));
    DP_ASSERT(c); /* f32 always has a primitive */
    const dp__cpu_arg fwd[] = {
        {DNNL_ARG_SRC, X, a->x.data}, {DNNL_ARG_WEIGHTS, W, a->w}, {DNNL_ARG_DST, Y, a->y}};
    const dp__cpu_arg bwd[] = {{DNNL_ARG_SRC, X, a->x.data},
                               {DNNL_ARG_WEIGHTS, W, a->w},
                               {DNNL_ARG_DIFF_DST, Y, a->dy},
                               {DNNL_ARG_DIFF_SRC, DX, a->dx},
                               {DNNL_ARG_DIFF_WEIGHTS, DW, a->dw}};
    return backward ? dp__cpu_primitive_run(cpu, c, bwd, 5) : dp__cpu_primitive_run(cpu, c, fwd, 3);
}

DP__CPU_PASSES(prelu, dp__prelu_args, run)
