/* Channel ranges between tensors (concat and split, src/ops/concat.c) on
 * the CPU: oneDNN's reorder between two strided views, (N, count, H W) of
 * each side with its layout's strides, which reorders NCHW to NHWC and back
 * on the way; its data handles point at the ranges' first channels, so one
 * primitive serves every offset. Accumulation (a split's backward) is the
 * reorder's sum post-op. */
#include "device/cpu/cpu.h"

#include <string.h>

typedef struct copy_key {
    int64_t N, HW, count, src_C, dst_C;
    int src_nhwc, dst_nhwc, accumulate;
    dnnl_data_type_t type;
} copy_key;

enum { SRC, DST };

static void view(dnnl_memory_desc_t *md, const copy_key *k, int64_t C, int nhwc)
{
    dnnl_dims_t dims = {k->N, k->count, k->HW};
    dnnl_dims_t strides = {C * k->HW, nhwc ? 1 : k->HW, nhwc ? C : 1};
    dnnl_memory_desc_init_by_strides(md, 3, dims, k->type, strides);
}

static int copy_pd(dp__cpu *cpu, const void *key, dnnl_primitive_desc_t *pd,
                   dnnl_memory_desc_t *mds, int *n)
{
    const copy_key *k = key;
    view(&mds[SRC], k, k->src_C, k->src_nhwc);
    view(&mds[DST], k, k->dst_C, k->dst_nhwc);
    *n = 2;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t ops = NULL;
    dnnl_status_t st = dnnl_success;
    if (k->accumulate && (st = dnnl_primitive_attr_create(&attr)) == dnnl_success &&
        (st = dnnl_post_ops_create(&ops)) == dnnl_success &&
        (st = dnnl_post_ops_append_sum(ops, 1.0f)) == dnnl_success)
        st = dnnl_primitive_attr_set_post_ops(attr, ops);
    if (st == dnnl_success)
        st = dnnl_reorder_primitive_desc_create(pd, &mds[SRC], cpu->engine, &mds[DST], cpu->engine,
                                                attr);
    if (ops)
        dnnl_post_ops_destroy(ops);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success) {
        DP_ERROR("oneDNN: cannot create a reorder of %lld channels: status %d", (long long)k->count,
                 (int)st);
        return DP_EDEVICE;
    }
    return 0;
}

/* The address of channel `off` of t at sample 0 and position 0. */
static void *channel_at(const dp__tdesc *t, int64_t off)
{
    int64_t HW = t->shape[2] * t->shape[3];
    size_t elem = t->dtype == DP_BF16 ? 2 : 4;
    return (char *)t->data + (size_t)(off * (t->nhwc ? 1 : HW)) * elem;
}

static int run(void *p, void *ctx)
{
    const dp__channel_copy_args *a = p;
    dp__cpu *cpu = ((dp_device_t *)ctx)->impl;
    copy_key k;
    memset(&k, 0, sizeof k);
    k.N = a->src.shape[0];
    k.HW = a->src.shape[2] * a->src.shape[3];
    k.count = a->count;
    k.src_C = a->src.shape[1];
    k.dst_C = a->dst.shape[1];
    k.src_nhwc = a->src.nhwc;
    k.dst_nhwc = a->dst.nhwc;
    k.accumulate = a->accumulate;
    k.type = dp__cpu_dnnl_type(a->src.dtype);
    dp__cpu_primitive *c;
    DP_TRY(dp__cpu_primitive_get(cpu, &k, sizeof k, copy_pd, &c));
    DP_ASSERT(c);
    const dp__cpu_arg args[] = {{DNNL_ARG_FROM, SRC, channel_at(&a->src, a->src_off)},
                                {DNNL_ARG_TO, DST, channel_at(&a->dst, a->dst_off)}};
    return dp__cpu_primitive_run(cpu, c, args, 2);
}

int dp__cpu_channel_copy(dp_device_t *dev, const dp__channel_copy_args *a)
{
    DP_ASSERT(a->src.ndim == 4 && a->dst.ndim == 4 && a->src.dtype == a->dst.dtype);
    return dp__cpu_push(dev, run, a, sizeof *a);
}
