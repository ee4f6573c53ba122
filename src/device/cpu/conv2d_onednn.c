/* The oneDNN convolution implementations: direct with activations in NHWC,
 * direct in oneDNN's own (blocked) layout, and Winograd, each in f32 or
 * bf16 (bf16 activations, f32 weights rounded by the weight reorder, f32
 * weight gradients); groups and dilation where oneDNN has them (direct).
 * The transposed convolution runs oneDNN's deconvolution here too: the
 * same descriptors with x its input and y its output.
 *
 * Weights live in logical OIHW (K, C, R, S) f32 in the parameter buffer;
 * each call reorders them into the layout and type oneDNN chose (a few MiB
 * at most, against tens of MiB of activations). Activations arrive and
 * leave in the tensors' own layout (NHWC, or NCHW for a user's input); the
 * blocked and Winograd implementations reorder them into oneDNN's layout
 * and back, in scratch memory, and the chooser's timing includes that.
 * The direct one takes x in NHWC: a user's NCHW input of more than one
 * channel is reordered into NHWC scratch first, since for NCHW in and NHWC
 * out oneDNN has only its reference kernel (ResNet's 3->64 7x7 stem ran
 * it, seconds a step). A primitive whose implementation is still a
 * reference one is marked (conv_prim.ref): the chooser never times it. */
#include "device/cpu/conv2d.h"

#include <string.h>

typedef struct conv_key {
    int pass, impl, bf16;
    int transposed; /* oneDNN's deconvolution (conv_transpose2d) */
    int x_nhwc, has_bias, relu;
    int64_t x[4], w[4], y[4];
    int stride_h, stride_w, pad_h, pad_w, pad_bottom, pad_right;
    int dilation_h, dilation_w, groups;
} conv_key;

/* A reorder between a tensor's own layout and the primitive's, with the
 * buffer that holds the primitive's side (NULL when they are the same). */
typedef struct relayout {
    dnnl_primitive_t prim;
    dnnl_memory_t user, inner;
    size_t bytes;
    int slot; /* the scratch slot of the inner buffer */
} relayout;

/* One cached primitive with the reorders that feed (or drain) it. */
typedef struct conv_prim {
    dnnl_primitive_t prim;
    relayout w, a, b; /* weights; the pass's activation input; its output */
    dnnl_memory_t m_bias;
    bool ref; /* oneDNN's implementation is a reference one ("ref:...") */
} conv_prim;

static void relayout_destroy(relayout *r)
{
    if (r->prim)
        dnnl_primitive_destroy(r->prim);
    if (r->user)
        dnnl_memory_destroy(r->user);
    if (r->inner)
        dnnl_memory_destroy(r->inner);
}

static void conv_prim_destroy(void *p)
{
    conv_prim *c = p;
    if (c->prim)
        dnnl_primitive_destroy(c->prim);
    relayout_destroy(&c->w);
    relayout_destroy(&c->a);
    relayout_destroy(&c->b);
    if (c->m_bias)
        dnnl_memory_destroy(c->m_bias);
    dp__free(c);
}

/* The memory descriptors of one convolution: the tensors' own (user) and
 * those the primitive is asked for ("any" where oneDNN chooses). */
typedef struct conv_mds {
    dnnl_memory_desc_t x_user, y_user, x, y, w_user, w, b;
    dnnl_dims_t strides, dilates, pad_l, pad_r;
} conv_mds;

static void conv_mds_init(conv_mds *m, const conv_key *k)
{
    int64_t N = k->x[0], C = k->x[1], H = k->x[2], W = k->x[3];
    int64_t K = k->y[1], P = k->y[2], Q = k->y[3], R = k->w[2], S = k->w[3], G = k->groups;
    dnnl_data_type_t dt = k->bf16 ? dnnl_bf16 : dnnl_f32;
    dnnl_dims_t xd = {N, C, H, W}, bd = {K}, yd = {N, K, P, Q};
    /* The parameter's bytes as oneDNN's weights, (out, in, R, S) per group:
     * a convolution's (K, C / G, R, S) is goihw; a transposed one's
     * (C, K / G, R, S), PyTorch's, is giohw, its input channels outermost. */
    dnnl_dims_t wd = {G, K / G, C / G, R, S};
    dnnl_format_tag_t wtag = k->transposed ? dnnl_giohw : dnnl_goihw;
    int wn = 5;
    if (G == 1) { /* the same without the groups' dimension */
        wn = 4;
        memmove(wd, wd + 1, 4 * sizeof wd[0]);
        wtag = k->transposed ? dnnl_iohw : dnnl_oihw;
    }
    bool own = k->impl == DP__CONV_DIRECT;
    dnnl_memory_desc_init_by_tag(&m->x_user, 4, xd, dt, k->x_nhwc ? dnnl_acdb : dnnl_abcd);
    dnnl_memory_desc_init_by_tag(&m->y_user, 4, yd, dt, dnnl_acdb);
    dnnl_memory_desc_init_by_tag(&m->x, 4, xd, dt, own ? dnnl_acdb : dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&m->y, 4, yd, dt, own ? dnnl_acdb : dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&m->w_user, wn, wd, dnnl_f32, wtag);
    /* Weight gradients stay f32; forward weights take the pass's type. */
    dnnl_memory_desc_init_by_tag(
        &m->w, wn, wd, k->pass == DP__CONV_BACKWARD_WEIGHTS ? dnnl_f32 : dt, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&m->b, 1, bd, dnnl_f32, dnnl_a);
    m->strides[0] = k->stride_h;
    m->strides[1] = k->stride_w;
    m->dilates[0] = k->dilation_h - 1; /* oneDNN counts the taps' gaps */
    m->dilates[1] = k->dilation_w - 1;
    m->pad_l[0] = k->pad_h;
    m->pad_l[1] = k->pad_w;
    /* oneDNN wants the right padding that makes the sizes exact: below the
     * one asked where the stride leaves the last rows out, and, for a
     * transposed convolution, the output padding taken off it (negative
     * down to 1 - stride, which oneDNN takes). */
    int64_t span_h = (R - 1) * k->dilation_h + 1, span_w = (S - 1) * k->dilation_w + 1;
    if (k->transposed) {
        m->pad_r[0] = (H - 1) * k->stride_h + span_h - P - k->pad_h;
        m->pad_r[1] = (W - 1) * k->stride_w + span_w - Q - k->pad_w;
    } else {
        m->pad_r[0] = (P - 1) * k->stride_h + span_h - H - k->pad_h;
        m->pad_r[1] = (Q - 1) * k->stride_w + span_w - W - k->pad_w;
    }
}

static dnnl_alg_kind_t algorithm(const conv_key *k)
{
    if (k->transposed)
        return dnnl_deconvolution_direct;
    return k->impl == DP__CONV_WINOGRAD ? dnnl_convolution_winograd : dnnl_convolution_direct;
}

/* The operation descriptor of k's pass, a convolution or a deconvolution
 * (the same arguments: oneDNN's src is x, its dst y, for both), from the
 * memory descriptors x, w and y (the backward passes pass the layouts the
 * forward chose). */
static dnnl_status_t op_desc(const conv_key *k, const conv_mds *m, const dnnl_memory_desc_t *x,
                             const dnnl_memory_desc_t *w, const dnnl_memory_desc_t *y,
                             dnnl_convolution_desc_t *desc)
{
    const dnnl_memory_desc_t *b = k->has_bias ? &m->b : NULL;
    dnnl_alg_kind_t alg = algorithm(k);
    if (k->pass == DP__CONV_FORWARD && k->transposed)
        return dnnl_dilated_deconvolution_forward_desc_init(desc, dnnl_forward_training, alg, x, w,
                                                            b, y, m->strides, m->dilates, m->pad_l,
                                                            m->pad_r);
    if (k->pass == DP__CONV_FORWARD)
        return dnnl_dilated_convolution_forward_desc_init(desc, dnnl_forward_training, alg, x, w, b,
                                                          y, m->strides, m->dilates, m->pad_l,
                                                          m->pad_r);
    if (k->pass == DP__CONV_BACKWARD_DATA && k->transposed)
        return dnnl_dilated_deconvolution_backward_data_desc_init(desc, alg, x, w, y, m->strides,
                                                                  m->dilates, m->pad_l, m->pad_r);
    if (k->pass == DP__CONV_BACKWARD_DATA)
        return dnnl_dilated_convolution_backward_data_desc_init(desc, alg, x, w, y, m->strides,
                                                                m->dilates, m->pad_l, m->pad_r);
    if (k->transposed)
        return dnnl_dilated_deconvolution_backward_weights_desc_init(
            desc, alg, x, w, b, y, m->strides, m->dilates, m->pad_l, m->pad_r);
    return dnnl_dilated_convolution_backward_weights_desc_init(desc, alg, x, w, b, y, m->strides,
                                                               m->dilates, m->pad_l, m->pad_r);
}

/* The forward primitive descriptor (also the backward passes' hint), or a
 * status other than success when oneDNN has no such implementation. */
static dnnl_status_t make_fwd_pd(dp__cpu *cpu, const conv_key *k, const conv_mds *m,
                                 dnnl_primitive_desc_t *pd)
{
    dnnl_convolution_desc_t desc;
    dnnl_memory_desc_t w = m->w;
    w.data_type = k->bf16 ? dnnl_bf16 : dnnl_f32;
    conv_key fk = *k;
    fk.pass = DP__CONV_FORWARD;
    dnnl_status_t st = op_desc(&fk, m, &m->x, &w, &m->y, &desc);
    if (st != dnnl_success)
        return st;
    dnnl_primitive_attr_t attr = NULL;
    if (k->relu) {
        dnnl_post_ops_t ops;
        if (dnnl_primitive_attr_create(&attr) != dnnl_success ||
            dnnl_post_ops_create(&ops) != dnnl_success)
            return dnnl_out_of_memory;
        dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f);
        dnnl_primitive_attr_set_post_ops(attr, ops);
        dnnl_post_ops_destroy(ops);
    }
    st = dnnl_primitive_desc_create(pd, &desc, attr, cpu->engine, NULL);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return st;
}

/* A reorder user -> chosen (to_inner) or chosen -> user, or none (r zeroed
 * but for r->user) when the two are the same layout and type. */
static int make_relayout(dp__cpu *cpu, relayout *r, const dnnl_memory_desc_t *user,
                         const dnnl_memory_desc_t *chosen, int to_inner, int slot)
{
    DP_DNNL_CHECK(dnnl_memory_create(&r->user, user, cpu->engine, DNNL_MEMORY_NONE));
    if (dnnl_memory_desc_equal(user, chosen))
        return 0;
    r->bytes = dnnl_memory_desc_get_size(chosen);
    r->slot = slot;
    DP_DNNL_CHECK(dnnl_memory_create(&r->inner, chosen, cpu->engine, DNNL_MEMORY_NONE));
    dnnl_primitive_desc_t rpd;
    DP_DNNL_CHECK(dnnl_reorder_primitive_desc_create(&rpd, to_inner ? user : chosen, cpu->engine,
                                                     to_inner ? chosen : user, cpu->engine, NULL));
    dnnl_status_t st = dnnl_primitive_create(&r->prim, rpd);
    dnnl_primitive_desc_destroy(rpd);
    DP_DNNL_CHECK(st);
    return 0;
}

/* Points r at the user's data; returns the memory the primitive reads or
 * writes (the user's, or the scratch buffer behind a reorder). */
static dnnl_memory_t relayout_bind(dp__cpu *cpu, relayout *r, void *user_data)
{
    dnnl_memory_set_data_handle(r->user, user_data);
    if (!r->prim)
        return r->user;
    void *buf = dp__cpu_scratch(cpu, r->slot, r->bytes);
    if (!buf)
        return NULL;
    dnnl_memory_set_data_handle(r->inner, buf);
    return r->inner;
}

static int relayout_run(dp__cpu *cpu, relayout *r, int to_inner)
{
    if (!r->prim)
        return 0;
    dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, to_inner ? r->user : r->inner},
                              {DNNL_ARG_TO, to_inner ? r->inner : r->user}};
    DP_DNNL_CHECK(dnnl_primitive_execute(r->prim, cpu->stream, 2, args));
    return 0;
}

/* Builds key k's primitive; DP_ENOTSUP when oneDNN has no such one here. */
static int build(dp__cpu *cpu, const conv_key *k, conv_prim **out)
{
    conv_mds m;
    conv_mds_init(&m, k);
    dnnl_primitive_desc_t fwd = NULL, pd = NULL;
    if (make_fwd_pd(cpu, k, &m, &fwd) != dnnl_success)
        return DP_ENOTSUP;
    dnnl_status_t st = dnnl_success;
    if (k->pass == DP__CONV_FORWARD) {
        pd = fwd;
        fwd = NULL;
    } else {
        /* The backward passes take the layouts the forward chose. */
        dnnl_memory_desc_t x = *dnnl_primitive_desc_query_md(fwd, dnnl_query_src_md, 0);
        dnnl_memory_desc_t y = *dnnl_primitive_desc_query_md(fwd, dnnl_query_dst_md, 0);
        dnnl_convolution_desc_t desc;
        st = op_desc(k, &m, &x, &m.w, &y, &desc);
        if (st == dnnl_success)
            st = dnnl_primitive_desc_create(&pd, &desc, NULL, cpu->engine, fwd);
        dnnl_primitive_desc_destroy(fwd);
        if (st != dnnl_success)
            return DP_ENOTSUP;
    }
    conv_prim *c = dp__calloc(1, sizeof *c);
    int rc = c ? 0 : DP_ENOMEM;
#define MD(q) dnnl_primitive_desc_query_md(pd, q, 0)
    if (rc == 0 && k->pass == DP__CONV_FORWARD) {
        rc = make_relayout(cpu, &c->w, &m.w_user, MD(dnnl_query_weights_md), 1, 3);
        if (rc == 0)
            rc = make_relayout(cpu, &c->a, &m.x_user, MD(dnnl_query_src_md), 1, 4);
        if (rc == 0)
            rc = make_relayout(cpu, &c->b, &m.y_user, MD(dnnl_query_dst_md), 0, 5);
    } else if (rc == 0 && k->pass == DP__CONV_BACKWARD_DATA) {
        rc = make_relayout(cpu, &c->w, &m.w_user, MD(dnnl_query_weights_md), 1, 3);
        if (rc == 0)
            rc = make_relayout(cpu, &c->a, &m.y_user, MD(dnnl_query_diff_dst_md), 1, 4);
        if (rc == 0)
            rc = make_relayout(cpu, &c->b, &m.x_user, MD(dnnl_query_diff_src_md), 0, 5);
    } else if (rc == 0) {
        rc = make_relayout(cpu, &c->w, &m.w_user, MD(dnnl_query_diff_weights_md), 0, 3);
        if (rc == 0)
            rc = make_relayout(cpu, &c->a, &m.x_user, MD(dnnl_query_src_md), 1, 4);
        if (rc == 0)
            rc = make_relayout(cpu, &c->b, &m.y_user, MD(dnnl_query_diff_dst_md), 1, 5);
    }
#undef MD
    const char *info = NULL;
    if (rc == 0 &&
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &info) == dnnl_success)
        c->ref = info && strncmp(info, "ref", 3) == 0;
    if (rc == 0 &&
        (dnnl_memory_create(&c->m_bias, &m.b, cpu->engine, DNNL_MEMORY_NONE) != dnnl_success ||
         dnnl_primitive_create(&c->prim, pd) != dnnl_success)) {
        DP_ERROR("oneDNN: cannot create convolution primitive");
        rc = DP_EDEVICE;
    }
    dnnl_primitive_desc_destroy(pd);
    if (rc < 0) {
        if (c)
            conv_prim_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}

static void make_key(conv_key *k, dp__conv_pass pass, dp__conv_impl impl, const dp__conv2d_args *a)
{
    memset(k, 0, sizeof *k);
    k->pass = pass;
    k->impl = impl;
    k->bf16 = a->precision == DP_PRECISION_BF16;
    /* With one channel NCHW and NHWC are the same bytes; saying NHWC keeps
     * oneDNN on its fast kernels (for NCHW in, NHWC out it has only the
     * reference one). */
    k->x_nhwc = a->x.nhwc || a->x.shape[1] == 1;
    k->has_bias = pass == DP__CONV_FORWARD ? a->b.data != NULL : a->db.data != NULL;
    k->relu = pass == DP__CONV_FORWARD && a->fuse_relu;
    memcpy(k->x, a->x.shape, sizeof k->x);
    memcpy(k->w, a->w.shape, sizeof k->w);
    memcpy(k->y, (pass == DP__CONV_FORWARD ? &a->y : &a->dy)->shape, sizeof k->y);
    k->stride_h = a->stride_h;
    k->stride_w = a->stride_w;
    k->pad_h = a->pad_h;
    k->pad_w = a->pad_w;
    k->pad_bottom = a->pad_bottom;
    k->pad_right = a->pad_right;
    k->dilation_h = a->dilation_h;
    k->dilation_w = a->dilation_w;
    k->groups = a->groups;
}

/* The primitive of (pass, impl) for a, made the first time; DP_ENOTSUP
 * (remembered, so it is asked once) when oneDNN has none. */
static int lookup(dp__cpu *cpu, dp__conv_pass pass, dp__conv_impl impl, bool transposed,
                  const dp__conv2d_args *a, conv_prim **out)
{
    static conv_prim unsupported; /* the cache's mark for "none here" */
    conv_key k;
    make_key(&k, pass, impl, a);
    k.transposed = transposed;
    conv_prim *c = dp__cpu_prim_find(cpu, &k, sizeof k);
    if (!c) {
        int rc = build(cpu, &k, &c);
        if (rc == DP_ENOTSUP)
            c = &unsupported;
        else
            DP_TRY(rc);
        DP_TRY(dp__cpu_prim_put(cpu, &k, sizeof k, c,
                                c == &unsupported ? dp__cpu_destroy_nothing : conv_prim_destroy));
    }
    if (c == &unsupported)
        return DP_ENOTSUP;
    *out = c;
    return 0;
}

/* Runs `pass` of a convolution, or of a transposed one, with oneDNN. */
static int run(dp_device_t *dev, dp__conv_pass pass, dp__conv_impl impl, bool transposed,
               const dp__conv2d_args *a)
{
    dp__cpu *cpu = dev->impl;
    conv_prim *c;
    DP_TRY(lookup(cpu, pass, impl, transposed, a, &c));
    if (c->ref)
        dp__conv_note_reference_run();
    bool fwd = pass == DP__CONV_FORWARD, bwd_w = pass == DP__CONV_BACKWARD_WEIGHTS;
    /* weights in: w (forward, backward-data); out: dw */
    dnnl_memory_t w = relayout_bind(cpu, &c->w, bwd_w ? a->dw.data : a->w.data);
    /* the activation read and the one written (or, for dw, the second read) */
    const dp__tdesc *in = fwd ? &a->x : pass == DP__CONV_BACKWARD_DATA ? &a->dy : &a->x;
    const dp__tdesc *out = fwd ? &a->y : pass == DP__CONV_BACKWARD_DATA ? &a->dx : &a->dy;
    dnnl_memory_t src = relayout_bind(cpu, &c->a, in->data);
    dnnl_memory_t dst = relayout_bind(cpu, &c->b, out->data);
    if (!w || !src || !dst)
        return DP_ENOMEM;
    if (!bwd_w)
        DP_TRY(relayout_run(cpu, &c->w, 1));
    DP_TRY(relayout_run(cpu, &c->a, 1));
    if (bwd_w)
        DP_TRY(relayout_run(cpu, &c->b, 1));
    dnnl_exec_arg_t args[4];
    int nargs = 3;
    if (fwd) {
        args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, src};
        args[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, w};
        args[2] = (dnnl_exec_arg_t){DNNL_ARG_DST, dst};
        if (a->b.data) {
            dnnl_memory_set_data_handle(c->m_bias, a->b.data);
            args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, c->m_bias};
        }
    } else if (!bwd_w) {
        args[0] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, src};
        args[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, w};
        args[2] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_SRC, dst};
    } else {
        args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, src};
        args[1] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, dst};
        args[2] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_WEIGHTS, w};
        if (a->db.data) {
            dnnl_memory_set_data_handle(c->m_bias, a->db.data);
            args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_BIAS, c->m_bias};
        }
    }
    DP_DNNL_CHECK(dnnl_primitive_execute(c->prim, cpu->stream, nargs, args));
    if (bwd_w)
        return relayout_run(cpu, &c->w, 0);
    return relayout_run(cpu, &c->b, 0);
}

int dp__cpu_conv_onednn(dp_device_t *dev, dp__conv_pass pass, dp__conv_impl impl,
                        const dp__conv2d_args *a)
{
    return run(dev, pass, impl, false, a);
}

int dp__cpu_deconv_onednn(dp_device_t *dev, dp__conv_pass pass, const dp__conv2d_args *a)
{
    return run(dev, pass, DP__CONV_DIRECT, true, a);
}

int dp__cpu_conv_onednn_is_ref(dp_device_t *dev, dp__conv_pass pass, dp__conv_impl impl,
                               const dp__conv2d_args *a, bool *ref)
{
    conv_prim *c;
    DP_TRY(lookup(dev->impl, pass, impl, false, a, &c));
    *ref = c->ref;
    return 0;
}
