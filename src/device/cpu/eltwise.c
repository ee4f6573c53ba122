/* Elementwise kernels and layout copies on the CPU: plain loops that the
 * compiler vectorises, spread over the worker's OpenMP team when large;
 * sigmoid and tanh (forward, and backward from the saved output) through
 * oneDNN's eltwise primitive, whose vectorised exp the loops lack. */
#include "device/cpu/cpu.h"

#include <string.h>

#define PAR_MIN 32768

/* One primitive per (direction, function, length), over the tensor seen as
 * a vector of n floats (any shape and layout: the op is elementwise). */
typedef struct act_key {
    int backward;
    dnnl_alg_kind_t alg;
    int64_t n;
} act_key;

typedef struct act_prim {
    dnnl_primitive_t prim;
    dnnl_memory_t m_a, m_b, m_out;
} act_prim;

static void act_prim_destroy(void *p)
{
    act_prim *c = p;
    if (c->prim)
        dnnl_primitive_destroy(c->prim);
    dnnl_memory_t mems[] = {c->m_a, c->m_b, c->m_out};
    for (size_t i = 0; i < DP_COUNTOF(mems); i++)
        if (mems[i])
            dnnl_memory_destroy(mems[i]);
    dp__free(c);
}

/* Forward: m_a = src, m_out = dst. Backward (from dst, the saved output):
 * m_a = diff_dst, m_b = dst, m_out = diff_src. */
static int act_build(dp__cpu *cpu, const act_key *k, act_prim **out)
{
    dnnl_memory_desc_t md;
    dnnl_dims_t dims = {k->n};
    dnnl_memory_desc_init_by_tag(&md, 1, dims, dnnl_f32, dnnl_a);
    dnnl_eltwise_desc_t fdesc, bdesc;
    dnnl_primitive_desc_t fwd = NULL, pd = NULL;
    DP_DNNL_CHECK(dnnl_eltwise_forward_desc_init(&fdesc, dnnl_forward_training, k->alg, &md, 0, 0));
    DP_DNNL_CHECK(dnnl_primitive_desc_create(&fwd, &fdesc, NULL, cpu->engine, NULL));
    if (k->backward) {
        dnnl_status_t st = dnnl_eltwise_backward_desc_init(&bdesc, k->alg, &md, &md, 0, 0);
        if (st == dnnl_success)
            st = dnnl_primitive_desc_create(&pd, &bdesc, NULL, cpu->engine, fwd);
        dnnl_primitive_desc_destroy(fwd);
        if (st != dnnl_success) {
            DP_ERROR("oneDNN: eltwise backward primitive: status %d", (int)st);
            return DP_EDEVICE;
        }
    } else {
        pd = fwd;
    }
    act_prim *c = dp__calloc(1, sizeof *c);
    int rc = c ? 0 : DP_ENOMEM;
    if (c && (dnnl_memory_create(&c->m_a, &md, cpu->engine, DNNL_MEMORY_NONE) != dnnl_success ||
              dnnl_memory_create(&c->m_b, &md, cpu->engine, DNNL_MEMORY_NONE) != dnnl_success ||
              dnnl_memory_create(&c->m_out, &md, cpu->engine, DNNL_MEMORY_NONE) != dnnl_success ||
              dnnl_primitive_create(&c->prim, pd) != dnnl_success)) {
        DP_ERROR("oneDNN: cannot create eltwise primitive");
        rc = DP_EDEVICE;
    }
    dnnl_primitive_desc_destroy(pd);
    if (rc < 0) {
        if (c)
            act_prim_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}

static int run_activation(const dp__eltwise_args *a, dp_device_t *dev)
{
    if (a->n == 0)
        return 0;
    dp__cpu *cpu = dev->impl;
    act_key k;
    memset(&k, 0, sizeof k);
    k.backward = a->op == DP__ELT_SIGMOID_BACKWARD || a->op == DP__ELT_TANH_BACKWARD;
    k.alg = a->op == DP__ELT_SIGMOID || a->op == DP__ELT_SIGMOID_BACKWARD
                ? dnnl_eltwise_logistic_use_dst_for_bwd
                : dnnl_eltwise_tanh_use_dst_for_bwd;
    k.n = a->n;
    act_prim *c = dp__cpu_prim_find(cpu, &k, sizeof k);
    if (!c) {
        DP_TRY(act_build(cpu, &k, &c));
        DP_TRY(dp__cpu_prim_put(cpu, &k, sizeof k, c, act_prim_destroy));
    }
    dnnl_memory_set_data_handle(c->m_a, (void *)a->a);
    dnnl_memory_set_data_handle(c->m_out, a->out);
    if (k.backward) {
        dnnl_memory_set_data_handle(c->m_b, (void *)a->b);
        dnnl_exec_arg_t args[3] = {
            {DNNL_ARG_DIFF_DST, c->m_a}, {DNNL_ARG_DST, c->m_b}, {DNNL_ARG_DIFF_SRC, c->m_out}};
        DP_DNNL_CHECK(dnnl_primitive_execute(c->prim, cpu->stream, 3, args));
    } else {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, c->m_a}, {DNNL_ARG_DST, c->m_out}};
        DP_DNNL_CHECK(dnnl_primitive_execute(c->prim, cpu->stream, 2, args));
    }
    return 0;
}

static int run_eltwise(void *p, void *ctx)
{
    dp__eltwise_args *a = p;
    const float *x = a->a, *y = a->b;
    float *out = a->out, alpha = a->alpha;
    int64_t n = a->n;
    switch (a->op) {
    case DP__ELT_RELU:
#pragma omp parallel for simd if (n > PAR_MIN)
        for (int64_t i = 0; i < n; i++)
            out[i] = x[i] > 0.0f ? x[i] : 0.0f;
        break;
    case DP__ELT_RELU_BACKWARD:
#pragma omp parallel for simd if (n > PAR_MIN)
        for (int64_t i = 0; i < n; i++)
            out[i] = y[i] > 0.0f ? x[i] : 0.0f;
        break;
    case DP__ELT_ADD:
#pragma omp parallel for simd if (n > PAR_MIN)
        for (int64_t i = 0; i < n; i++)
            out[i] = x[i] + y[i];
        break;
    case DP__ELT_ACCUMULATE:
#pragma omp parallel for simd if (n > PAR_MIN)
        for (int64_t i = 0; i < n; i++)
            out[i] += x[i];
        break;
    case DP__ELT_SCALE:
#pragma omp parallel for simd if (n > PAR_MIN)
        for (int64_t i = 0; i < n; i++)
            out[i] = alpha * x[i];
        break;
    case DP__ELT_COPY:
#pragma omp parallel for simd if (n > PAR_MIN)
        for (int64_t i = 0; i < n; i++)
            out[i] = x[i];
        break;
    case DP__ELT_SIGMOID:
    case DP__ELT_SIGMOID_BACKWARD:
    case DP__ELT_TANH:
    case DP__ELT_TANH_BACKWARD:
        return run_activation(a, ctx);
    }
    return 0;
}

int dp__cpu_eltwise(dp_device_t *dev, const dp__eltwise_args *a)
{
    return dp__cpu_push(dev, run_eltwise, a, sizeof *a);
}

static int run_relayout(void *p, void *ctx)
{
    dp__relayout_args *a = p;
    (void)ctx;
    const float *src = a->src.data;
    float *dst = a->dst.data;
    int64_t N = a->src.shape[0], C = a->src.shape[1], H = a->src.shape[2], W = a->src.shape[3];
    int64_t HW = H * W;
    if (a->src.nhwc) {
#pragma omp parallel for if (N * C * HW > PAR_MIN)
        for (int64_t n = 0; n < N; n++)
            for (int64_t c = 0; c < C; c++)
                for (int64_t i = 0; i < HW; i++)
                    dst[(n * C + c) * HW + i] = src[(n * HW + i) * C + c];
    } else {
#pragma omp parallel for if (N * C * HW > PAR_MIN)
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < HW; i++)
                for (int64_t c = 0; c < C; c++)
                    dst[(n * HW + i) * C + c] = src[(n * C + c) * HW + i];
    }
    return 0;
}

int dp__cpu_relayout(dp_device_t *dev, const dp__relayout_args *a)
{
    DP_ASSERT(a->src.ndim == 4 && a->src.nhwc != a->dst.nhwc);
    return dp__cpu_push(dev, run_relayout, a, sizeof *a);
}
