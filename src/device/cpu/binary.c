/* Binary ops with broadcasting over channels (src/ops/binary.c) on the
 * CPU. Forward: oneDNN's binary primitive over the full operand seen as
 * (N, C, rest) with its layout's strides, the other as src1 broadcast from
 * (1, C, 1), (N, C, 1) or (1, 1, 1); when the first operand is the
 * broadcast one, add and mul swap them, sub computes -(b - a) (the same
 * bits: rounding is symmetric) through a linear post-op, and div, which
 * has no such form, runs a loop. Backward: loops, as oneDNN has no binary
 * backward: the full operands' gradients elementwise, the broadcast ones'
 * as sums in double over their broadcast axes in a fixed order, whatever
 * the thread count. */
#include "device/binary_math.h"
#include "device/cpu/cpu.h"

#include <omp.h>
#include <string.h>

#define PAR_MIN 32768
#define CHUNK 4096 /* elements per partial sum of a one-element gradient */

typedef struct binary_key {
    dnnl_alg_kind_t alg;
    int negate, nhwc, src1_bcast;
    int64_t N, C, HW;
} binary_key;

enum { SRC0, SRC1, DST };

static void bcast_dims(int bcast, int64_t N, int64_t C, dnnl_dims_t dims)
{
    dims[0] = bcast == DP__BCAST_SAMPLE_CHANNEL ? N : 1;
    dims[1] = bcast == DP__BCAST_SCALAR ? 1 : C;
    dims[2] = 1;
}

static int binary_pd(dp__cpu *cpu, const void *key, dnnl_primitive_desc_t *pd,
                     dnnl_memory_desc_t *mds, int *n)
{
    const binary_key *k = key;
    dnnl_dims_t dims = {k->N, k->C, k->HW}, bdims;
    dnnl_dims_t strides = {k->C * k->HW, k->nhwc ? 1 : k->HW, k->nhwc ? k->C : 1};
    DP_DNNL_CHECK(dnnl_memory_desc_init_by_strides(&mds[SRC0], 3, dims, dnnl_f32, strides));
    mds[DST] = mds[SRC0];
    if (k->src1_bcast == DP__BCAST_FULL) {
        mds[SRC1] = mds[SRC0];
    } else {
        bcast_dims(k->src1_bcast, k->N, k->C, bdims);
        DP_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&mds[SRC1], 3, bdims, dnnl_f32, dnnl_abc));
    }
    *n = 3;
    dnnl_binary_desc_t desc;
    DP_DNNL_CHECK(dnnl_binary_desc_init(&desc, k->alg, &mds[SRC0], &mds[SRC1], &mds[DST]));
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t ops = NULL;
    dnnl_status_t st = dnnl_success;
    if (k->negate && (st = dnnl_primitive_attr_create(&attr)) == dnnl_success &&
        (st = dnnl_post_ops_create(&ops)) == dnnl_success &&
        (st = dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_linear, -1.0f, 0.0f)) ==
            dnnl_success)
        st = dnnl_primitive_attr_set_post_ops(attr, ops);
    int rc = st == dnnl_success ? dp__cpu_pass_pd(cpu, &desc, NULL, attr, dnnl_f32, "binary", pd)
                                : DP_EDEVICE;
    if (ops)
        dnnl_post_ops_destroy(ops);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success)
        DP_ERROR("oneDNN: cannot describe a binary op's negation: status %d", (int)st);
    return rc;
}

/* The loops of every op and broadcast: the forward where oneDNN has no
 * form for it (a broadcast dividend). */
static void forward_loop(const dp__binary_args *a)
{
    int64_t N = a->N, C = a->C, HW = a->HW, per = C * HW;
#pragma omp parallel for collapse(2) if (N * per > PAR_MIN)
    for (int64_t n = 0; n < N; n++)
        for (int64_t j = 0; j < per; j++) {
            int64_t c = dp__binary_channel(j, C, HW, a->nhwc), i = n * per + j;
            a->y[i] = dp__binary_apply(a->op, a->a[dp__binary_at(a->a_bcast, i, n, c, C)],
                                       a->b[dp__binary_at(a->b_bcast, i, n, c, C)]);
        }
}

static int run_forward(void *p, void *ctx)
{
    const dp__binary_args *a = p;
    dp__cpu *cpu = ((dp_device_t *)ctx)->impl;
    bool swap = a->a_bcast != DP__BCAST_FULL;
    if (swap && a->op == DP__BINARY_DIV) {
        forward_loop(a);
        return 0;
    }
    static const dnnl_alg_kind_t algs[] = {dnnl_binary_add, dnnl_binary_sub, dnnl_binary_mul,
                                           dnnl_binary_div};
    binary_key k;
    memset(&k, 0, sizeof k);
    k.alg = algs[a->op];
    k.negate = swap && a->op == DP__BINARY_SUB;
    k.nhwc = a->nhwc;
    k.src1_bcast = swap ? a->a_bcast : a->b_bcast;
    k.N = a->N;
    k.C = a->C;
    k.HW = a->HW;
    dp__cpu_primitive *c;
    DP_TRY(dp__cpu_primitive_get(cpu, &k, sizeof k, binary_pd, &c));
    DP_ASSERT(c); /* f32 always has a primitive */
    const dp__cpu_arg args[] = {{DNNL_ARG_SRC_0, SRC0, swap ? a->b : a->a},
                                {DNNL_ARG_SRC_1, SRC1, swap ? a->a : a->b},
                                {DNNL_ARG_DST, DST, a->y}};
    return dp__cpu_primitive_run(cpu, c, args, 3);
}

/* The gradient of element i towards operand a (which = 0) or b (1). */
static inline float grad_of(const dp__binary_args *a, int which, int64_t i, int64_t n, int64_t c)
{
    return dp__binary_grad(a->op, which, a->dy[i], a->a[dp__binary_at(a->a_bcast, i, n, c, a->C)],
                           a->b[dp__binary_at(a->b_bcast, i, n, c, a->C)]);
}

/* Whether operand `which`'s gradient is dy or -dy (add, sub), and which
 * sign; the loops then read dy alone. */
static bool grad_is_dy(const dp__binary_args *a, int which, float *sign)
{
    *sign = a->op == DP__BINARY_SUB && which ? -1.0f : 1.0f;
    return a->op == DP__BINARY_ADD || a->op == DP__BINARY_SUB;
}

/* out[0 .. |bc|) = the sums of operand `which`'s gradient over the
 * elements that read each of its values. */
static int reduce(const dp__binary_args *a, int which, int bc, float *out)
{
    int64_t N = a->N, C = a->C, HW = a->HW, per = C * HW;
    if (bc == DP__BCAST_CHANNEL) {
        /* Each thread a block of channels, each channel's sum in the order
         * of n, then h, whatever the blocks; memory walked in its order
         * into a row of accumulators. Channel by channel down the rows
         * (a linear layer's bias: its channels are columns) and a grad_of
         * per element, the seed LeNet's two bias gradients took 36 us a
         * call; rows in order and dy read alone, 8 (AMD EPYC Zen 5). */
        double *sums = dp__calloc((size_t)C, sizeof *sums);
        if (!sums)
            return DP_ENOMEM;
#pragma omp parallel if (N * per > PAR_MIN)
        {
            int nt = omp_get_num_threads(), t = omp_get_thread_num();
            int64_t c0 = C * t / nt, c1 = C * (t + 1) / nt;
            float sign;
            bool dy_only = grad_is_dy(a, which, &sign);
            for (int64_t n = 0; n < N; n++) {
                const float *dy = a->dy + n * per;
                if (a->nhwc && dy_only) {
                    for (int64_t h = 0; h < HW; h++)
                        for (int64_t c = c0; c < c1; c++)
                            sums[c] += dy[h * C + c];
                } else if (a->nhwc) {
                    for (int64_t h = 0; h < HW; h++)
                        for (int64_t c = c0; c < c1; c++)
                            sums[c] += grad_of(a, which, n * per + h * C + c, n, c);
                } else if (dy_only) {
                    for (int64_t c = c0; c < c1; c++)
                        for (int64_t h = 0; h < HW; h++)
                            sums[c] += dy[c * HW + h];
                } else {
                    for (int64_t c = c0; c < c1; c++)
                        for (int64_t h = 0; h < HW; h++)
                            sums[c] += grad_of(a, which, n * per + c * HW + h, n, c);
                }
            }
        }
        /* -dy's sums are dy's negated, bit for bit (rounding is symmetric),
         * but for a zero: +0 either way, as 0 - s gives. */
        float sign;
        bool negate = grad_is_dy(a, which, &sign) && sign < 0;
        for (int64_t c = 0; c < C; c++)
            out[c] = (float)(negate ? 0.0 - sums[c] : sums[c]);
        dp__free(sums);
    } else if (bc == DP__BCAST_SAMPLE_CHANNEL) {
#pragma omp parallel for collapse(2) if (N * per > PAR_MIN)
        for (int64_t n = 0; n < N; n++)
            for (int64_t c = 0; c < C; c++) {
                double s = 0.0;
                for (int64_t h = 0; h < HW; h++) {
                    int64_t i = n * per + (a->nhwc ? h * C + c : c * HW + h);
                    s += grad_of(a, which, i, n, c);
                }
                out[n * C + c] = (float)s;
            }
    } else { /* one element: partial sums of fixed chunks, then in order */
        int64_t total = N * per, chunks = (total + CHUNK - 1) / CHUNK;
        double *part = dp__malloc((size_t)(chunks ? chunks : 1) * sizeof *part);
        if (!part)
            return DP_ENOMEM;
#pragma omp parallel for if (total > PAR_MIN)
        for (int64_t k = 0; k < chunks; k++) {
            double s = 0.0;
            int64_t end = (k + 1) * CHUNK < total ? (k + 1) * CHUNK : total;
            for (int64_t i = k * CHUNK; i < end; i++) {
                int64_t n = i / per, j = i % per;
                s += grad_of(a, which, i, n, dp__binary_channel(j, C, HW, a->nhwc));
            }
            part[k] = s;
        }
        double s = 0.0;
        for (int64_t k = 0; k < chunks; k++)
            s += part[k];
        out[0] = (float)s;
        dp__free(part);
    }
    return 0;
}

static int run_backward(void *p, void *ctx)
{
    const dp__binary_args *a = p;
    (void)ctx;
    int64_t N = a->N, C = a->C, HW = a->HW, per = C * HW;
    float *outs[2] = {a->da, a->db};
    int bcs[2] = {a->a_bcast, a->b_bcast};
    for (int which = 0; which < 2; which++) {
        float *out = outs[which];
        if (!out)
            continue;
        if (bcs[which] != DP__BCAST_FULL) {
            DP_TRY(reduce(a, which, bcs[which], out));
            continue;
        }
        float sign;
        if (grad_is_dy(a, which, &sign)) {
            if (sign > 0)
                memcpy(out, a->dy, (size_t)(N * per) * sizeof *out);
            else
#pragma omp parallel for if (N * per > PAR_MIN)
                for (int64_t i = 0; i < N * per; i++)
                    out[i] = -a->dy[i];
            continue;
        }
        /* In memory order, the channel counted, not divided out. */
#pragma omp parallel for if (N * per > PAR_MIN)
        for (int64_t n = 0; n < N; n++) {
            int64_t i = n * per;
            if (a->nhwc) {
                for (int64_t h = 0; h < HW; h++)
                    for (int64_t c = 0; c < C; c++, i++)
                        out[i] = grad_of(a, which, i, n, c);
            } else {
                for (int64_t c = 0; c < C; c++)
                    for (int64_t h = 0; h < HW; h++, i++)
                        out[i] = grad_of(a, which, i, n, c);
            }
        }
    }
    return 0;
}

DP__CPU_ENTRY(binary_forward, dp__binary_args, run_forward)
DP__CPU_ENTRY(binary_backward, dp__binary_args, run_backward)
