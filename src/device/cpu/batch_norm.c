/* Batch normalisation on the CPU, in the tensor's own layout (NHWC after a
 * convolution, NCHW for a user's input).
 *
 * Training takes the batch statistics, and the backward pass its sums, in
 * double (batch_norm_train.c, which says why), or SyncBatchNorm's group's
 * sums that the batch_norm_sums kernels and src/comm/'s exchange gave;
 * oneDNN then normalises with those statistics as given ones,
 * the ReLU fused with its flag. Eval normalises with the running
 * statistics, and its backward pass treats them as constants: oneDNN's
 * global statistics, forward and backward. A fused ReLU's backward takes dy
 * already masked (the op layer does it).
 *
 * bf16 data (statistics, scale and shift stay f32) runs oneDNN's bf16
 * batch normalization, or, on a CPU where it has none, its f32 one over
 * converted copies. */
#include "core/bf16.h"
#include "device/cpu/cpu.h"

#include <math.h>
#include <string.h>

typedef struct bn_key {
    int backward, nhwc, relu;
    dnnl_data_type_t type;
    int64_t x[4];
    float eps;
} bn_key;

/* The memory objects of a batch normalization primitive: data src, dst
 * (forward) or diff_dst, diff_src (backward); per channel mean, variance,
 * scale, shift, diff_scale, diff_shift. */
enum { SRC, DST, DIFF_DST, DIFF_SRC, MEAN, VAR, SCALE, SHIFT, DIFF_SCALE, DIFF_SHIFT, NMEMS };

static int bn_pd(dp__cpu *cpu, const void *key, dnnl_primitive_desc_t *pd, dnnl_memory_desc_t *mds,
                 int *n)
{
    const bn_key *k = key;
    dnnl_memory_desc_t data, stat;
    dnnl_dims_t xd = {k->x[0], k->x[1], k->x[2], k->x[3]}, cd = {k->x[1]};
    dnnl_memory_desc_init_by_tag(&data, 4, xd, k->type, k->nhwc ? dnnl_acdb : dnnl_abcd);
    dnnl_memory_desc_init_by_tag(&stat, 1, cd, dnnl_f32, dnnl_a);
    for (int i = 0; i < NMEMS; i++)
        mds[i] = i <= DIFF_SRC ? data : stat;
    *n = NMEMS;
    /* Both passes take the statistics as given (oneDNN's global
     * statistics): the running ones in eval, training's batch ones in the
     * forward pass. */
    unsigned flags = dnnl_use_scale | dnnl_use_shift | dnnl_use_global_stats;
    if (k->relu)
        flags |= dnnl_fuse_norm_relu;
    /* A backward primitive needs the training forward as its hint. */
    dnnl_prop_kind_t prop = k->backward ? dnnl_forward_training : dnnl_forward_inference;
    dnnl_batch_normalization_desc_t fdesc, bdesc;
    DP_DNNL_CHECK(dnnl_batch_normalization_forward_desc_init(&fdesc, prop, &data, k->eps, flags));
    if (k->backward)
        DP_DNNL_CHECK(dnnl_batch_normalization_backward_desc_init(&bdesc, dnnl_backward, &data,
                                                                  &data, k->eps, flags));
    return dp__cpu_pass_pd(cpu, &fdesc, k->backward ? &bdesc : NULL, NULL, k->type,
                           "batch normalization", pd);
}

/* The primitive for a's pass in its dtype, or NULL when oneDNN has none for
 * bf16 here. */
static int lookup(dp_device_t *dev, int backward, const dp__batch_norm_args *a,
                  dp__cpu_primitive **out)
{
    bn_key k;
    memset(&k, 0, sizeof k);
    k.backward = backward;
    k.type = dp__cpu_dnnl_type(a->x.dtype);
    /* The ReLU fused in the forward pass; the backward pass takes dy
     * masked by the op layer. */
    k.relu = a->relu && !backward;
    /* With one channel both layouts are the same bytes. */
    k.nhwc = a->x.nhwc && a->x.shape[1] > 1;
    memcpy(k.x, a->x.shape, sizeof k.x);
    k.eps = a->eps;
    return dp__cpu_primitive_get(dev->impl, &k, sizeof k, bn_pd, out);
}

static int64_t numel4(const int64_t *s)
{
    return s[0] * s[1] * s[2] * s[3];
}

/* a with its bf16 tensors x, y, dx, dy (bits 1, 2, 4, 8 of inputs and
 * outputs) as f32 copies in scratch: inputs converted, outputs to be
 * converted back. */
static int as_f32_args(dp__cpu *cpu, const dp__batch_norm_args *a, dp__batch_norm_args *f,
                       int inputs, int outputs)
{
    *f = *a;
    dp__tdesc *t[4] = {&f->x, &f->y, &f->dx, &f->dy};
    return dp__cpu_descs_as_f32(cpu, t, 4, (unsigned)inputs, (unsigned)outputs);
}

/* y from x with the statistics a gives as constants (running_mean and
 * running_var), as in eval. */
static int normalise(dp_device_t *dev, const dp__batch_norm_args *a)
{
    dp__cpu_primitive *c;
    DP_TRY(lookup(dev, 0, a, &c));
    if (!c) {
        dp__batch_norm_args f;
        DP_TRY(as_f32_args(dev->impl, a, &f, 1, 2));
        DP_TRY(normalise(dev, &f));
        dp__cpu_bf16_from_f32(a->y.data, f.y.data, numel4(a->y.shape));
        return 0;
    }
    const dp__cpu_arg args[] = {
        {DNNL_ARG_SRC, SRC, a->x.data},         {DNNL_ARG_DST, DST, a->y.data},
        {DNNL_ARG_SCALE, SCALE, a->gamma},      {DNNL_ARG_SHIFT, SHIFT, a->beta},
        {DNNL_ARG_MEAN, MEAN, a->running_mean}, {DNNL_ARG_VARIANCE, VAR, a->running_var}};
    return dp__cpu_primitive_run(dev->impl, c, args, 6);
}

static int run_forward(void *p, void *ctx)
{
    dp__batch_norm_args *a = p;
    dp_device_t *dev = ctx;
    if (a->training) {
        DP_TRY(dp__cpu_bn_statistics(a));
        dp__batch_norm_args given = *a;
        given.training = false;
        given.running_mean = a->save_mean;
        given.running_var = a->save_var;
        return normalise(dev, &given);
    }
    DP_TRY(normalise(dev, a));
    if (a->save_mean) {
        int64_t C = a->x.shape[1];
        memcpy(a->save_mean, a->running_mean, (size_t)C * sizeof(float));
        memcpy(a->save_var, a->running_var, (size_t)C * sizeof(float));
    }
    return 0;
}

static int run_backward(void *p, void *ctx)
{
    dp__batch_norm_args *a = p;
    dp_device_t *dev = ctx;
    dp__cpu_primitive *c;
    if (a->training)
        return dp__cpu_bn_train_backward(a);
    DP_TRY(lookup(dev, 1, a, &c));
    if (!c) {
        dp__batch_norm_args f;
        DP_TRY(as_f32_args(dev->impl, a, &f, 1 | 8, 4));
        DP_TRY(run_backward(&f, ctx));
        dp__cpu_bf16_from_f32(a->dx.data, f.dx.data, numel4(a->dx.shape));
        return 0;
    }
    /* oneDNN 2.6 checks that the shift is given to the backward pass too,
     * though no gradient depends on it. */
    const dp__cpu_arg args[] = {{DNNL_ARG_SRC, SRC, a->x.data},
                                {DNNL_ARG_DIFF_DST, DIFF_DST, a->dy.data},
                                {DNNL_ARG_MEAN, MEAN, a->save_mean},
                                {DNNL_ARG_VARIANCE, VAR, a->save_var},
                                {DNNL_ARG_SCALE, SCALE, a->gamma},
                                {DNNL_ARG_SHIFT, SHIFT, a->beta},
                                {DNNL_ARG_DIFF_SRC, DIFF_SRC, a->dx.data},
                                {DNNL_ARG_DIFF_SCALE, DIFF_SCALE, a->dgamma},
                                {DNNL_ARG_DIFF_SHIFT, DIFF_SHIFT, a->dbeta}};
    return dp__cpu_primitive_run(dev->impl, c, args, 9);
}

static int run_sums_forward(void *p, void *ctx)
{
    (void)ctx;
    return dp__cpu_bn_sums(p, false);
}

static int run_sums_backward(void *p, void *ctx)
{
    (void)ctx;
    return dp__cpu_bn_sums(p, true);
}

DP__CPU_ENTRY(batch_norm_sums_forward, dp__batch_norm_args, run_sums_forward)
DP__CPU_ENTRY(batch_norm_sums_backward, dp__batch_norm_args, run_sums_backward)
DP__CPU_ENTRY(batch_norm_forward, dp__batch_norm_args, run_forward)
DP__CPU_ENTRY(batch_norm_backward, dp__batch_norm_args, run_backward)
