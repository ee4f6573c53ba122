/* The activations (src/ops/activation.c) on the CPU: oneDNN's eltwise
 * primitives where oneDNN 2.6 has the function (clip_v2 for hardtanh,
 * whose backward passes the gradient strictly inside the bounds as
 * PyTorch's does; hardswish, elu, gelu_erf, gelu_tanh, swish), forward from
 * and backward from the source, over the tensor as a vector of n f32
 * values; hardsigmoid and selu, which it lacks, are loops over
 * device/activation_math.h, the CUDA kernels' formulas. */
#include "device/activation_math.h"
#include "device/cpu/cpu.h"

#include <string.h>

typedef struct act_key {
    int backward, kind;
    int64_t n;
    float alpha, beta;
} act_key;

/* oneDNN's algorithm and parameters for `kind`, or 0 where it has none. */
static dnnl_alg_kind_t algorithm(int kind, float *alpha, float *beta)
{
    (void)beta; /* as given, for every algorithm here */
    switch (kind) {
    case DP__ACT_HARDTANH:
        return dnnl_eltwise_clip_v2; /* alpha = min, beta = max */
    case DP__ACT_HARDSWISH:
        return dnnl_eltwise_hardswish;
    case DP__ACT_ELU:
        return dnnl_eltwise_elu; /* alpha */
    case DP__ACT_GELU:
        return dnnl_eltwise_gelu_erf;
    case DP__ACT_GELU_TANH:
        return dnnl_eltwise_gelu_tanh;
    case DP__ACT_SILU:
        *alpha = 1.0f; /* x sigmoid(alpha x) */
        return dnnl_eltwise_swish;
    case DP__ACT_LINEAR:
        return dnnl_eltwise_linear; /* alpha x + beta */
    default:
        return (dnnl_alg_kind_t)0;
    }
}

/* The memory objects: forward X = src, OUT = dst; backward X = src, DY =
 * diff_dst, OUT = diff_src. */
enum { X, DY, OUT };

static int act_pd(dp__cpu *cpu, const void *key, dnnl_primitive_desc_t *pd, dnnl_memory_desc_t *mds,
                  int *n)
{
    const act_key *k = key;
    float alpha = k->alpha, beta = k->beta;
    dnnl_alg_kind_t alg = algorithm(k->kind, &alpha, &beta);
    dnnl_dims_t dims = {k->n};
    dnnl_memory_desc_init_by_tag(&mds[X], 1, dims, dnnl_f32, dnnl_a);
    mds[DY] = mds[OUT] = mds[X];
    *n = 3;
    dnnl_eltwise_desc_t fdesc, bdesc;
    DP_DNNL_CHECK(
        dnnl_eltwise_forward_desc_init(&fdesc, dnnl_forward_training, alg, &mds[X], alpha, beta));
    if (k->backward)
        DP_DNNL_CHECK(dnnl_eltwise_backward_desc_init(&bdesc, alg, &mds[DY], &mds[X], alpha, beta));
    return dp__cpu_pass_pd(cpu, &fdesc, k->backward ? &bdesc : NULL, NULL, dnnl_f32, "activation",
                           pd);
}

static void run_loop(const dp__activation_args *a, int backward)
{
    int kind = a->kind;
    float alpha = a->alpha, beta = a->beta;
    const float *x = a->x, *dy = a->dy;
    float *out = a->out;
    if (backward) {
#pragma omp parallel for simd if (a->n > 65536)
        for (int64_t i = 0; i < a->n; i++)
            out[i] = dp__act_backward(kind, x[i], dy[i], alpha, beta);
    } else {
#pragma omp parallel for simd if (a->n > 65536)
        for (int64_t i = 0; i < a->n; i++)
            out[i] = dp__act_forward(kind, x[i], alpha, beta);
    }
}

static int run(const dp__activation_args *a, dp_device_t *dev, int backward)
{
    dp__cpu *cpu = dev->impl;
    if (a->n == 0)
        return 0;
    float alpha = a->alpha, beta = a->beta;
    if (!algorithm(a->kind, &alpha, &beta)) {
        run_loop(a, backward);
        return 0;
    }
    act_key k;
    memset(&k, 0, sizeof k);
    k.backward = backward;
    k.kind = a->kind;
    k.n = a->n;
    k.alpha = a->alpha;
    k.beta = a->beta;
    dp__cpu_primitive *c;
    DP_TRY(dp__cpu_primitive_get(cpu, &k, sizeof k, act_pd, &c));
    DP_ASSERT(c); /* f32 always has a primitive */
    const dp__cpu_arg fwd[] = {{DNNL_ARG_SRC, X, a->x}, {DNNL_ARG_DST, OUT, a->out}};
    const dp__cpu_arg bwd[] = {
        {DNNL_ARG_SRC, X, a->x}, {DNNL_ARG_DIFF_DST, DY, a->dy}, {DNNL_ARG_DIFF_SRC, OUT, a->out}};
    return backward ? dp__cpu_primitive_run(cpu, c, bwd, 3) : dp__cpu_primitive_run(cpu, c, fwd, 2);
}

DP__CPU_PASSES(activation, dp__activation_args, run)
