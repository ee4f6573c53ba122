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
    dnnl_exec_arg_t args[3];
    if (backward) {
        dnnl_memory_set_data_handle(c->mem[X], (void *)a->b);
        dnnl_memory_set_data_handle(c->mem[DY], (void *)a->a);
        dnnl_memory_set_data_handle(c->mem[OUT], a->out);
        args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, c->mem[X]};
        args[1] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, c->mem[DY]};
        args[2] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_SRC, c->mem[OUT]};
    } else {
        dnnl_memory_set_data_handle(c->mem[X], (void *)a->a);
        dnnl_memory_set_data_handle(c->mem[OUT], a->out);
        args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, c->mem[X]};
        args[1] = (dnnl_exec_arg_t){DNNL_ARG_DST, c->mem[OUT]};
    }
    DP_DNNL_CHECK(dnnl_primitive_execute(c->prim, cpu->stream, backward ? 3 : 2, args));
    return 0;
}

static int run_forward(void *p, void *ctx)
{
    return run(p, ctx, 0);
}

static int run_backward(void *p, void *ctx)
{
    return run(p, ctx, 1);
}

int dp__cpu_leaky_relu_forward(dp_device_t *dev, const dp__eltwise_args *a)
{
    return dp__cpu_push(dev, run_forward, a, sizeof *a);
}

int dp__cpu_leaky_relu_backward(dp_device_t *dev, const dp__eltwise_args *a)
{
    return dp__cpu_push(dev, run_backward, a, sizeof *a);
}
