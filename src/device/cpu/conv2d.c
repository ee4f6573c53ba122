/* Convolution on the CPU through oneDNN.
 *
 * Activations come in NHWC (or NCHW for a user's input) and leave in NHWC;
 * weights live in logical OIHW (K, C, R, S) in the parameter buffer, and each
 * call reorders them into the layout oneDNN chose for the primitive (a few
 * hundred KiB at most, against megabytes of activations). Measured here for
 * LeNet's second convolution at batch 256: NHWC with oneDNN-chosen weights
 * runs its brgconv kernels at ~176 GFLOP/s, plain NCHW/OIHW ~121. */
#include "device/cpu/cpu.h"

#include <string.h>

enum { CONV_FWD, CONV_BWD_DATA, CONV_BWD_WEIGHTS };

typedef struct conv_key {
    int kind;
    int x_nhwc, has_bias, relu;
    int64_t x[4], w[4];
    int stride_h, stride_w, pad_h, pad_w;
} conv_key;

/* One cached primitive with the weight reorder that feeds (or drains) it. */
typedef struct conv_prim {
    dnnl_primitive_t prim;
    dnnl_primitive_t w_reorder; /* NULL when oneDNN's layout is OIHW itself */
    float *w_buf;               /* weights in oneDNN's layout */
    dnnl_memory_t m_src, m_w_user, m_w, m_bias, m_dst;
} conv_prim;

static void conv_prim_destroy(void *p)
{
    conv_prim *c = p;
    if (c->prim)
        dnnl_primitive_destroy(c->prim);
    if (c->w_reorder)
        dnnl_primitive_destroy(c->w_reorder);
    dnnl_memory_t mems[] = {c->m_src, c->m_w_user, c->m_w, c->m_bias, c->m_dst};
    for (size_t i = 0; i < DP_COUNTOF(mems); i++)
        if (mems[i])
            dnnl_memory_destroy(mems[i]);
    dp__free(c->w_buf);
    dp__free(c);
}

static void make_key(conv_key *k, int kind, const dp__conv2d_args *a)
{
    memset(k, 0, sizeof *k);
    k->kind = kind;
    /* With one channel NCHW and NHWC are the same bytes; saying NHWC keeps
     * oneDNN on its fast kernels (for NCHW in, NHWC out it has only the
     * reference one). */
    k->x_nhwc = a->x.nhwc || a->x.shape[1] == 1;
    k->has_bias = kind == CONV_FWD ? a->b.data != NULL : a->db.data != NULL;
    k->relu = kind == CONV_FWD && a->fuse_relu;
    memcpy(k->x, a->x.shape, sizeof k->x);
    memcpy(k->w, a->w.shape, sizeof k->w);
    k->stride_h = a->stride_h;
    k->stride_w = a->stride_w;
    k->pad_h = a->pad_h;
    k->pad_w = a->pad_w;
}

/* The memory descriptors of one convolution; weights "any" for oneDNN to choose. */
typedef struct conv_mds {
    dnnl_memory_desc_t x, w_any, w_user, b, y;
    dnnl_dims_t strides, pad_l, pad_r;
} conv_mds;

static void conv_mds_init(conv_mds *m, const conv_key *k)
{
    int64_t N = k->x[0], H = k->x[2], W = k->x[3];
    int64_t K = k->w[0], R = k->w[2], S = k->w[3];
    int64_t P = (H + 2 * k->pad_h - R) / k->stride_h + 1;
    int64_t Q = (W + 2 * k->pad_w - S) / k->stride_w + 1;
    dnnl_dims_t xd = {N, k->x[1], H, W}, wd = {K, k->x[1], R, S}, bd = {K}, yd = {N, K, P, Q};
    dnnl_memory_desc_init_by_tag(&m->x, 4, xd, dnnl_f32, k->x_nhwc ? dnnl_acdb : dnnl_abcd);
    dnnl_memory_desc_init_by_tag(&m->w_any, 4, wd, dnnl_f32, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&m->w_user, 4, wd, dnnl_f32, dnnl_abcd);
    dnnl_memory_desc_init_by_tag(&m->b, 1, bd, dnnl_f32, dnnl_a);
    dnnl_memory_desc_init_by_tag(&m->y, 4, yd, dnnl_f32, dnnl_acdb);
    m->strides[0] = k->stride_h;
    m->strides[1] = k->stride_w;
    m->pad_l[0] = m->pad_r[0] = k->pad_h;
    m->pad_l[1] = m->pad_r[1] = k->pad_w;
    /* oneDNN wants the right padding that makes the output size exact. */
    m->pad_r[0] = (P - 1) * k->stride_h + R - H - k->pad_h;
    m->pad_r[1] = (Q - 1) * k->stride_w + S - W - k->pad_w;
}

static int make_fwd_pd(dp__cpu *cpu, const conv_key *k, const conv_mds *m, int relu,
                       dnnl_primitive_desc_t *pd)
{
    dnnl_convolution_desc_t desc;
    DP_DNNL_CHECK(dnnl_convolution_forward_desc_init(
        &desc, dnnl_forward_training, dnnl_convolution_direct, &m->x, &m->w_any,
        k->has_bias ? &m->b : NULL, &m->y, m->strides, m->pad_l, m->pad_r));
    dnnl_primitive_attr_t attr = NULL;
    if (relu) {
        dnnl_post_ops_t ops;
        DP_DNNL_CHECK(dnnl_primitive_attr_create(&attr));
        DP_DNNL_CHECK(dnnl_post_ops_create(&ops));
        DP_DNNL_CHECK(dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f));
        DP_DNNL_CHECK(dnnl_primitive_attr_set_post_ops(attr, ops));
        dnnl_post_ops_destroy(ops);
    }
    dnnl_status_t st = dnnl_primitive_desc_create(pd, &desc, attr, cpu->engine, NULL);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    DP_DNNL_CHECK(st);
    return 0;
}

/* Creates the reorder between the user's OIHW weights and oneDNN's layout:
 * to_prim = user -> primitive (forward, backward data), else primitive -> user. */
static int make_weight_reorder(dp__cpu *cpu, conv_prim *c, const dnnl_memory_desc_t *user,
                               const dnnl_memory_desc_t *chosen, int to_prim)
{
    DP_DNNL_CHECK(dnnl_memory_create(&c->m_w_user, user, cpu->engine, DNNL_MEMORY_NONE));
    if (dnnl_memory_desc_equal(user, chosen)) {
        c->m_w = c->m_w_user;
        c->m_w_user = NULL;
        return 0;
    }
    c->w_buf = dp__malloc(dnnl_memory_desc_get_size(chosen));
    if (!c->w_buf)
        return DP_ENOMEM;
    DP_DNNL_CHECK(dnnl_memory_create(&c->m_w, chosen, cpu->engine, c->w_buf));
    dnnl_primitive_desc_t rpd;
    DP_DNNL_CHECK(dnnl_reorder_primitive_desc_create(&rpd, to_prim ? user : chosen, cpu->engine,
                                                     to_prim ? chosen : user, cpu->engine, NULL));
    dnnl_status_t st = dnnl_primitive_create(&c->w_reorder, rpd);
    dnnl_primitive_desc_destroy(rpd);
    DP_DNNL_CHECK(st);
    return 0;
}

static int reorder_weights(dp__cpu *cpu, conv_prim *c, int to_prim)
{
    if (!c->w_reorder)
        return 0;
    dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, to_prim ? c->m_w_user : c->m_w},
                              {DNNL_ARG_TO, to_prim ? c->m_w : c->m_w_user}};
    DP_DNNL_CHECK(dnnl_primitive_execute(c->w_reorder, cpu->stream, 2, args));
    return 0;
}

static int build(dp__cpu *cpu, const conv_key *k, conv_prim **out)
{
    conv_mds m;
    conv_mds_init(&m, k);
    conv_prim *c = dp__calloc(1, sizeof *c);
    if (!c)
        return DP_ENOMEM;
    int rc = 0;
    dnnl_primitive_desc_t fwd = NULL, pd = NULL;
    rc = make_fwd_pd(cpu, k, &m, k->relu, &fwd);
    if (rc < 0)
        goto fail;
    if (k->kind == CONV_FWD) {
        pd = fwd;
        fwd = NULL;
    } else {
        dnnl_convolution_desc_t desc;
        dnnl_status_t st;
        if (k->kind == CONV_BWD_DATA)
            st = dnnl_convolution_backward_data_desc_init(&desc, dnnl_convolution_direct, &m.x,
                                                          &m.w_any, &m.y, m.strides, m.pad_l,
                                                          m.pad_r);
        else
            st = dnnl_convolution_backward_weights_desc_init(
                &desc, dnnl_convolution_direct, &m.x, &m.w_any, k->has_bias ? &m.b : NULL, &m.y,
                m.strides, m.pad_l, m.pad_r);
        if (st == dnnl_success)
            st = dnnl_primitive_desc_create(&pd, &desc, NULL, cpu->engine, fwd);
        if (st != dnnl_success) {
            DP_ERROR("oneDNN: convolution backward primitive: status %d", (int)st);
            rc = DP_EDEVICE;
            goto fail;
        }
    }
    dnnl_query_t wq = k->kind == CONV_BWD_WEIGHTS ? dnnl_query_diff_weights_md
                                                  : dnnl_query_weights_md;
    const dnnl_memory_desc_t *chosen = dnnl_primitive_desc_query_md(pd, wq, 0);
    rc = make_weight_reorder(cpu, c, &m.w_user, chosen, k->kind != CONV_BWD_WEIGHTS);
    if (rc < 0)
        goto fail;
    if (dnnl_memory_create(&c->m_src, &m.x, cpu->engine, DNNL_MEMORY_NONE) != dnnl_success ||
        dnnl_memory_create(&c->m_dst, &m.y, cpu->engine, DNNL_MEMORY_NONE) != dnnl_success ||
        dnnl_memory_create(&c->m_bias, &m.b, cpu->engine, DNNL_MEMORY_NONE) != dnnl_success ||
        dnnl_primitive_create(&c->prim, pd) != dnnl_success) {
        DP_ERROR("oneDNN: cannot create convolution primitive");
        rc = DP_EDEVICE;
        goto fail;
    }
    dnnl_primitive_desc_destroy(pd);
    if (fwd)
        dnnl_primitive_desc_destroy(fwd);
    *out = c;
    return 0;
fail:
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (fwd)
        dnnl_primitive_desc_destroy(fwd);
    conv_prim_destroy(c);
    return rc;
}

static int lookup(dp_device_t *dev, int kind, const dp__conv2d_args *a, conv_prim **out)
{
    dp__cpu *cpu = dev->impl;
    conv_key k;
    make_key(&k, kind, a);
    conv_prim *c = dp__cpu_prim_find(cpu, &k, sizeof k);
    if (!c) {
        DP_TRY(build(cpu, &k, &c));
        DP_TRY(dp__cpu_prim_put(cpu, &k, sizeof k, c, conv_prim_destroy));
    }
    *out = c;
    return 0;
}

static int run_forward(void *p, void *ctx)
{
    dp__conv2d_args *a = p;
    dp_device_t *dev = ctx;
    dp__cpu *cpu = dev->impl;
    conv_prim *c;
    DP_TRY(lookup(dev, CONV_FWD, a, &c));
    if (c->m_w_user)
        dnnl_memory_set_data_handle(c->m_w_user, a->w.data);
    else
        dnnl_memory_set_data_handle(c->m_w, a->w.data);
    DP_TRY(reorder_weights(cpu, c, 1));
    dnnl_memory_set_data_handle(c->m_src, a->x.data);
    dnnl_memory_set_data_handle(c->m_dst, a->y.data);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, c->m_src},
                               {DNNL_ARG_WEIGHTS, c->m_w},
                               {DNNL_ARG_DST, c->m_dst},
                               {DNNL_ARG_BIAS, c->m_bias}};
    int nargs = 3;
    if (a->b.data) {
        dnnl_memory_set_data_handle(c->m_bias, a->b.data);
        nargs = 4;
    }
    DP_DNNL_CHECK(dnnl_primitive_execute(c->prim, cpu->stream, nargs, args));
    return 0;
}

static int run_backward_data(void *p, void *ctx)
{
    dp__conv2d_args *a = p;
    dp_device_t *dev = ctx;
    dp__cpu *cpu = dev->impl;
    conv_prim *c;
    DP_TRY(lookup(dev, CONV_BWD_DATA, a, &c));
    if (c->m_w_user)
        dnnl_memory_set_data_handle(c->m_w_user, a->w.data);
    else
        dnnl_memory_set_data_handle(c->m_w, a->w.data);
    DP_TRY(reorder_weights(cpu, c, 1));
    dnnl_memory_set_data_handle(c->m_src, a->dx.data);
    dnnl_memory_set_data_handle(c->m_dst, a->dy.data);
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_DIFF_DST, c->m_dst},
                               {DNNL_ARG_WEIGHTS, c->m_w},
                               {DNNL_ARG_DIFF_SRC, c->m_src}};
    DP_DNNL_CHECK(dnnl_primitive_execute(c->prim, cpu->stream, 3, args));
    return 0;
}

static int run_backward_weights(void *p, void *ctx)
{
    dp__conv2d_args *a = p;
    dp_device_t *dev = ctx;
    dp__cpu *cpu = dev->impl;
    conv_prim *c;
    DP_TRY(lookup(dev, CONV_BWD_WEIGHTS, a, &c));
    if (c->m_w_user)
        dnnl_memory_set_data_handle(c->m_w_user, a->dw.data);
    else
        dnnl_memory_set_data_handle(c->m_w, a->dw.data);
    dnnl_memory_set_data_handle(c->m_src, a->x.data);
    dnnl_memory_set_data_handle(c->m_dst, a->dy.data);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, c->m_src},
                               {DNNL_ARG_DIFF_DST, c->m_dst},
                               {DNNL_ARG_DIFF_WEIGHTS, c->m_w},
                               {DNNL_ARG_DIFF_BIAS, c->m_bias}};
    int nargs = 3;
    if (a->db.data) {
        dnnl_memory_set_data_handle(c->m_bias, a->db.data);
        nargs = 4;
    }
    DP_DNNL_CHECK(dnnl_primitive_execute(c->prim, cpu->stream, nargs, args));
    DP_TRY(reorder_weights(cpu, c, 0));
    return 0;
}

int dp__cpu_conv2d_forward(dp_device_t *dev, const dp__conv2d_args *a)
{
    return dp__cpu_push(dev, run_forward, a, sizeof *a);
}

int dp__cpu_conv2d_backward_data(dp_device_t *dev, const dp__conv2d_args *a)
{
    return dp__cpu_push(dev, run_backward_data, a, sizeof *a);
}

int dp__cpu_conv2d_backward_weights(dp_device_t *dev, const dp__conv2d_args *a)
{
    return dp__cpu_push(dev, run_backward_weights, a, sizeof *a);
}
