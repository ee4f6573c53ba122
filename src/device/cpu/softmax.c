/* Softmax and log-softmax (src/ops/softmax.c) on the CPU. Softmax is
 * oneDNN's softmax_v2 primitive (softmax_accurate) over axis 1 of x seen
 * as (N, C, rest) with the strides of its layout, forward from the source
 * and backward from the destination. Log-softmax is a loop over rows of
 * device/softmax_math.h, the CUDA kernels' formulas: oneDNN 2.6's
 * softmax_log is 20 to 30 float ulps off where its output nears 0 (a
 * confident class), 1e-4 of the value at -0.016. */
#include "device/cpu/cpu.h"
#include "device/softmax_math.h"

#include <string.h>

typedef dp__cpu_channel_key softmax_key;

/* The memory objects: forward X = src, Y = dst; backward Y = dst, DY =
 * diff_dst, DX = diff_src. */
enum { X, Y, DY, DX };

static int softmax_pd(dp__cpu *cpu, const void *key, dnnl_primitive_desc_t *pd,
                      dnnl_memory_desc_t *mds, int *n)
{
    const softmax_key *k = key;
    DP_TRY(dp__cpu_channel_md(&mds[X], k));
    mds[Y] = mds[DY] = mds[DX] = mds[X];
    *n = 4;
    dnnl_alg_kind_t alg = dnnl_softmax_accurate;
    dnnl_softmax_v2_desc_t fdesc, bdesc;
    DP_DNNL_CHECK(
        dnnl_softmax_v2_forward_desc_init(&fdesc, dnnl_forward_training, alg, &mds[X], &mds[Y], 1));
    if (k->backward)
        DP_DNNL_CHECK(
            dnnl_softmax_v2_backward_desc_init(&bdesc, alg, &mds[DX], &mds[DY], &mds[Y], 1));
    return dp__cpu_pass_pd(cpu, &fdesc, k->backward ? &bdesc : NULL, NULL, dnnl_f32, "softmax", pd);
}

static void log_softmax_loop(const dp__softmax_args *a, const softmax_key *k, int backward)
{
    int64_t rows = k->N * k->HW, C = k->C, HW = k->HW, stride = k->nhwc ? 1 : HW;
    const float *x = a->x.data;
#pragma omp parallel for if (rows * C > 32768)
    for (int64_t r = 0; r < rows; r++) {
        int64_t base = k->nhwc ? r * C : r / HW * C * HW + r % HW;
        if (backward)
            dp__softmax_row_backward(a->y_in + base, a->dy + base, a->dx + base, C, stride, true);
        else
            dp__softmax_row(x + base, a->y + base, C, stride, true);
    }
}

static int run(const dp__softmax_args *a, dp_device_t *dev, int backward)
{
    dp__cpu *cpu = dev->impl;
    softmax_key k;
    dp__cpu_channel_key_init(&k, &a->x, backward);
    if (a->log) {
        log_softmax_loop(a, &k, backward);
        return 0;
    }
    dp__cpu_primitive *c;
    DP_TRY(dp__cpu_primitive_get(cpu, &k, sizeof k, softmax_pd, &c));
    DP_ASSERT(c); /* f32 always has a primitive */
    const dp__cpu_arg fwd[] = {{DNNL_ARG_SRC, X, a->x.data}, {DNNL_ARG_DST, Y, a->y}};
    const dp__cpu_arg bwd[] = {
        {DNNL_ARG_DST, Y, a->y_in}, {DNNL_ARG_DIFF_DST, DY, a->dy}, {DNNL_ARG_DIFF_SRC, DX, a->dx}};
    return backward ? dp__cpu_primitive_run(cpu, c, bwd, 3) : dp__cpu_primitive_run(cpu, c, fwd, 2);
}

DP__CPU_PASSES(softmax, dp__softmax_args, run)
