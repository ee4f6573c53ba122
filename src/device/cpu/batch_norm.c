/* Batch normalisation on the CPU through oneDNN, in the tensor's own layout
 * (NHWC after a convolution, NCHW for a user's input).
 *
 * oneDNN computes the batch statistics and the normalisation in one
 * primitive; the fused ReLU and the running-statistics update are short
 * loops in the same command. The backward pass receives dy already masked
 * by the ReLU (the op layer does it, or a following pool did), so one
 * primitive, without oneDNN's ReLU workspace, serves both cases. */
#include "device/cpu/cpu.h"
#include "engine/exchange.h"

#include <math.h>
#include <string.h>

typedef struct bn_key {
    int backward, training, nhwc;
    int64_t x[4];
    float eps;
} bn_key;

typedef struct bn_prim {
    dnnl_primitive_t prim;
    /* data: src, dst (forward) or diff_dst, diff_src (backward); per
     * channel: mean, variance, scale, shift, diff_scale, diff_shift */
    dnnl_memory_t m_src, m_dst, m_diff_dst, m_diff_src;
    dnnl_memory_t m_mean, m_var, m_scale, m_shift, m_diff_scale, m_diff_shift;
} bn_prim;

static void bn_prim_destroy(void *p)
{
    bn_prim *c = p;
    if (c->prim)
        dnnl_primitive_destroy(c->prim);
    dnnl_memory_t mems[] = {c->m_src, c->m_dst,   c->m_diff_dst, c->m_diff_src,   c->m_mean,
                            c->m_var, c->m_scale, c->m_shift,    c->m_diff_scale, c->m_diff_shift};
    for (size_t i = 0; i < DP_COUNTOF(mems); i++)
        if (mems[i])
            dnnl_memory_destroy(mems[i]);
    dp__free(c);
}

static int create_memories(dp__cpu *cpu, bn_prim *c, const dnnl_memory_desc_t *data,
                           const dnnl_memory_desc_t *stat)
{
    dnnl_memory_t *data_mems[] = {&c->m_src, &c->m_dst, &c->m_diff_dst, &c->m_diff_src};
    dnnl_memory_t *stat_mems[] = {&c->m_mean,  &c->m_var,        &c->m_scale,
                                  &c->m_shift, &c->m_diff_scale, &c->m_diff_shift};
    for (size_t i = 0; i < DP_COUNTOF(data_mems); i++)
        DP_DNNL_CHECK(dnnl_memory_create(data_mems[i], data, cpu->engine, DNNL_MEMORY_NONE));
    for (size_t i = 0; i < DP_COUNTOF(stat_mems); i++)
        DP_DNNL_CHECK(dnnl_memory_create(stat_mems[i], stat, cpu->engine, DNNL_MEMORY_NONE));
    return 0;
}

static int build(dp__cpu *cpu, const bn_key *k, bn_prim **out)
{
    dnnl_memory_desc_t data, stat;
    dnnl_dims_t xd = {k->x[0], k->x[1], k->x[2], k->x[3]}, cd = {k->x[1]};
    dnnl_memory_desc_init_by_tag(&data, 4, xd, dnnl_f32, k->nhwc ? dnnl_acdb : dnnl_abcd);
    dnnl_memory_desc_init_by_tag(&stat, 1, cd, dnnl_f32, dnnl_a);
    /* Eval normalises with the running statistics, and its backward pass
     * treats them as constants: both are oneDNN's global statistics. */
    unsigned flags = dnnl_use_scale | dnnl_use_shift;
    if (!k->training)
        flags |= dnnl_use_global_stats;
    /* A backward primitive needs the training forward as its hint. */
    dnnl_prop_kind_t prop =
        k->training || k->backward ? dnnl_forward_training : dnnl_forward_inference;
    dnnl_batch_normalization_desc_t fdesc, bdesc;
    dnnl_primitive_desc_t fwd = NULL, pd = NULL;
    DP_DNNL_CHECK(dnnl_batch_normalization_forward_desc_init(&fdesc, prop, &data, k->eps, flags));
    DP_DNNL_CHECK(dnnl_primitive_desc_create(&fwd, &fdesc, NULL, cpu->engine, NULL));
    if (k->backward) {
        dnnl_status_t st = dnnl_batch_normalization_backward_desc_init(&bdesc, dnnl_backward, &data,
                                                                       &data, k->eps, flags);
        if (st == dnnl_success)
            st = dnnl_primitive_desc_create(&pd, &bdesc, NULL, cpu->engine, fwd);
        if (st != dnnl_success) {
            dnnl_primitive_desc_destroy(fwd);
            DP_ERROR("oneDNN: batch normalization backward primitive: status %d", (int)st);
            return DP_EDEVICE;
        }
    } else {
        pd = fwd;
        fwd = NULL;
    }
    bn_prim *c = dp__calloc(1, sizeof *c);
    int rc = c ? 0 : DP_ENOMEM;
    if (rc == 0)
        rc = create_memories(cpu, c, &data, &stat);
    if (rc == 0 && dnnl_primitive_create(&c->prim, pd) != dnnl_success) {
        DP_ERROR("oneDNN: cannot create batch normalization primitive");
        rc = DP_EDEVICE;
    }
    dnnl_primitive_desc_destroy(pd);
    if (fwd)
        dnnl_primitive_desc_destroy(fwd);
    if (rc < 0) {
        if (c)
            bn_prim_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}

static int lookup(dp_device_t *dev, int backward, const dp__batch_norm_args *a, bn_prim **out)
{
    dp__cpu *cpu = dev->impl;
    bn_key k;
    memset(&k, 0, sizeof k);
    k.backward = backward;
    k.training = a->training;
    /* With one channel both layouts are the same bytes. */
    k.nhwc = a->x.nhwc && a->x.shape[1] > 1;
    memcpy(k.x, a->x.shape, sizeof k.x);
    k.eps = a->eps;
    bn_prim *c = dp__cpu_prim_find(cpu, &k, sizeof k);
    if (!c) {
        DP_TRY(build(cpu, &k, &c));
        DP_TRY(dp__cpu_prim_put(cpu, &k, sizeof k, c, bn_prim_destroy));
    }
    *out = c;
    return 0;
}

/* running = (1 - m) running + m batch, the variance made unbiased as
 * PyTorch does (n values per channel). */
static void update_running(const dp__batch_norm_args *a)
{
    int64_t C = a->x.shape[1];
    int64_t n = a->x.shape[0] * a->x.shape[2] * a->x.shape[3];
    float m = a->momentum;
    float unbias = n > 1 ? (float)n / (float)(n - 1) : 1.0f;
    for (int64_t c = 0; c < C; c++) {
        a->running_mean[c] = (1.0f - m) * a->running_mean[c] + m * a->save_mean[c];
        a->running_var[c] = (1.0f - m) * a->running_var[c] + m * a->save_var[c] * unbias;
    }
}

/* Element (n, c, i) of a 4-D tensor, i = h W + w, in either layout. */
static inline int64_t at(const dp__tdesc *t, int64_t n, int64_t c, int64_t i)
{
    int64_t C = t->shape[1], HW = t->shape[2] * t->shape[3];
    return t->nhwc ? (n * HW + i) * C + c : (n * C + c) * HW + i;
}

/* SyncBatchNorm forward: this shard's count, sum and sum of squares per
 * channel, summed over the group; the global mean and biased variance go to
 * save_mean/save_var and the running statistics, and oneDNN normalises with
 * them as given statistics. */
static int sync_statistics(const dp__batch_norm_args *a)
{
    int64_t N = a->x.shape[0], C = a->x.shape[1], HW = a->x.shape[2] * a->x.shape[3];
    const float *x = a->x.data;
    double *mine = dp__calloc((size_t)(1 + 2 * C), sizeof *mine);
    double *total = dp__calloc((size_t)(1 + 2 * C), sizeof *total);
    if (!mine || !total) {
        dp__free(mine);
        dp__free(total);
        return DP_ENOMEM;
    }
    mine[0] = (double)(N * HW);
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < HW; i++)
            for (int64_t c = 0; c < C; c++) {
                double v = x[at(&a->x, n, c, i)];
                mine[1 + c] += v;
                mine[1 + C + c] += v * v;
            }
    dp__exchange_sum(a->sync, a->rank, a->ranks, mine, 1 + 2 * C, total);
    double count = total[0];
    for (int64_t c = 0; c < C; c++) {
        double mean = total[1 + c] / count;
        double var = total[1 + C + c] / count - mean * mean;
        a->save_mean[c] = (float)mean;
        a->save_var[c] = (float)(var > 0 ? var : 0);
        float m = a->momentum;
        a->running_mean[c] = (1.0f - m) * a->running_mean[c] + m * (float)mean;
        a->running_var[c] =
            (1.0f - m) * a->running_var[c] + m * (float)(count > 1 ? var * count / (count - 1) : var);
    }
    dp__free(mine);
    dp__free(total);
    return 0;
}

/* SyncBatchNorm backward: dgamma and dbeta of this shard (the allreduce of
 * the gradients sums them), dx with the group's sums of dy and dy xhat:
 *   dx = gamma / std (dy - sum(dy) / count - xhat sum(dy xhat) / count) */
static int sync_backward(const dp__batch_norm_args *a)
{
    int64_t N = a->x.shape[0], C = a->x.shape[1], HW = a->x.shape[2] * a->x.shape[3];
    const float *x = a->x.data, *dy = a->dy.data;
    float *dx = a->dx.data;
    double *mine = dp__calloc((size_t)(1 + 2 * C), sizeof *mine);
    double *total = dp__calloc((size_t)(1 + 2 * C), sizeof *total);
    double *inv_std = dp__calloc((size_t)C, sizeof *inv_std);
    if (!mine || !total || !inv_std) {
        dp__free(mine);
        dp__free(total);
        dp__free(inv_std);
        return DP_ENOMEM;
    }
    for (int64_t c = 0; c < C; c++)
        inv_std[c] = 1.0 / sqrt((double)a->save_var[c] + (double)a->eps);
    mine[0] = (double)(N * HW);
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < HW; i++)
            for (int64_t c = 0; c < C; c++) {
                int64_t k = at(&a->x, n, c, i);
                double xhat = (x[k] - a->save_mean[c]) * inv_std[c];
                mine[1 + c] += dy[k];
                mine[1 + C + c] += dy[k] * xhat;
            }
    for (int64_t c = 0; c < C; c++) {
        a->dbeta[c] = (float)mine[1 + c];
        a->dgamma[c] = (float)mine[1 + C + c];
    }
    dp__exchange_sum(a->sync, a->rank, a->ranks, mine, 1 + 2 * C, total);
    double count = total[0];
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < HW; i++)
            for (int64_t c = 0; c < C; c++) {
                int64_t k = at(&a->x, n, c, i);
                double xhat = (x[k] - a->save_mean[c]) * inv_std[c];
                dx[k] = (float)(a->gamma[c] * inv_std[c] *
                                (dy[k] - total[1 + c] / count - xhat * total[1 + C + c] / count));
            }
    dp__free(mine);
    dp__free(total);
    dp__free(inv_std);
    return 0;
}

static int run_forward(void *p, void *ctx)
{
    dp__batch_norm_args *a = p;
    dp_device_t *dev = ctx;
    bn_prim *c;
    if (a->sync && a->training) {
        /* Normalise with the group's statistics, given to oneDNN as
         * global statistics (the eval primitive). */
        DP_TRY(sync_statistics(a));
        dp__batch_norm_args given = *a;
        given.training = false;
        given.running_mean = a->save_mean;
        given.running_var = a->save_var;
        given.save_mean = NULL;
        DP_TRY(lookup(dev, 0, &given, &c));
        a = &given;
        dnnl_memory_set_data_handle(c->m_src, a->x.data);
        dnnl_memory_set_data_handle(c->m_dst, a->y.data);
        dnnl_memory_set_data_handle(c->m_scale, (void *)a->gamma);
        dnnl_memory_set_data_handle(c->m_shift, (void *)a->beta);
        dnnl_memory_set_data_handle(c->m_mean, a->running_mean);
        dnnl_memory_set_data_handle(c->m_var, a->running_var);
        dnnl_exec_arg_t args[6] = {{DNNL_ARG_SRC, c->m_src},     {DNNL_ARG_DST, c->m_dst},
                                   {DNNL_ARG_SCALE, c->m_scale}, {DNNL_ARG_SHIFT, c->m_shift},
                                   {DNNL_ARG_MEAN, c->m_mean},   {DNNL_ARG_VARIANCE, c->m_var}};
        DP_DNNL_CHECK(dnnl_primitive_execute(c->prim, ((dp__cpu *)dev->impl)->stream, 6, args));
        if (a->relu) {
            float *y = a->y.data;
            int64_t n = a->x.shape[0] * a->x.shape[1] * a->x.shape[2] * a->x.shape[3];
            for (int64_t i = 0; i < n; i++)
                y[i] = y[i] > 0.0f ? y[i] : 0.0f;
        }
        return 0;
    }
    DP_TRY(lookup(dev, 0, a, &c));
    int64_t C = a->x.shape[1];
    dnnl_memory_set_data_handle(c->m_src, a->x.data);
    dnnl_memory_set_data_handle(c->m_dst, a->y.data);
    dnnl_memory_set_data_handle(c->m_scale, (void *)a->gamma);
    dnnl_memory_set_data_handle(c->m_shift, (void *)a->beta);
    /* Training: the batch statistics are outputs; eval: the running ones
     * are inputs. */
    dnnl_memory_set_data_handle(c->m_mean, a->training ? a->save_mean : a->running_mean);
    dnnl_memory_set_data_handle(c->m_var, a->training ? a->save_var : a->running_var);
    dnnl_exec_arg_t args[6] = {{DNNL_ARG_SRC, c->m_src},     {DNNL_ARG_DST, c->m_dst},
                               {DNNL_ARG_SCALE, c->m_scale}, {DNNL_ARG_SHIFT, c->m_shift},
                               {DNNL_ARG_MEAN, c->m_mean},   {DNNL_ARG_VARIANCE, c->m_var}};
    DP_DNNL_CHECK(dnnl_primitive_execute(c->prim, ((dp__cpu *)dev->impl)->stream, 6, args));
    if (a->relu) {
        float *y = a->y.data;
        int64_t n = a->x.shape[0] * C * a->x.shape[2] * a->x.shape[3];
#pragma omp parallel for simd if (n > 32768)
        for (int64_t i = 0; i < n; i++)
            y[i] = y[i] > 0.0f ? y[i] : 0.0f;
    }
    if (a->training) {
        update_running(a);
    } else if (a->save_mean) {
        memcpy(a->save_mean, a->running_mean, (size_t)C * sizeof(float));
        memcpy(a->save_var, a->running_var, (size_t)C * sizeof(float));
    }
    return 0;
}

static int run_backward(void *p, void *ctx)
{
    dp__batch_norm_args *a = p;
    dp_device_t *dev = ctx;
    bn_prim *c;
    if (a->sync && a->training)
        return sync_backward(a);
    DP_TRY(lookup(dev, 1, a, &c));
    dnnl_memory_set_data_handle(c->m_src, a->x.data);
    dnnl_memory_set_data_handle(c->m_diff_dst, a->dy.data);
    dnnl_memory_set_data_handle(c->m_diff_src, a->dx.data);
    dnnl_memory_set_data_handle(c->m_mean, a->save_mean);
    dnnl_memory_set_data_handle(c->m_var, a->save_var);
    dnnl_memory_set_data_handle(c->m_scale, (void *)a->gamma);
    dnnl_memory_set_data_handle(c->m_shift, (void *)a->beta);
    dnnl_memory_set_data_handle(c->m_diff_scale, a->dgamma);
    dnnl_memory_set_data_handle(c->m_diff_shift, a->dbeta);
    /* oneDNN 2.6 checks that the shift is given to the backward pass too,
     * though no gradient depends on it. */
    dnnl_exec_arg_t args[9] = {{DNNL_ARG_SRC, c->m_src},
                               {DNNL_ARG_DIFF_DST, c->m_diff_dst},
                               {DNNL_ARG_MEAN, c->m_mean},
                               {DNNL_ARG_VARIANCE, c->m_var},
                               {DNNL_ARG_SCALE, c->m_scale},
                               {DNNL_ARG_SHIFT, c->m_shift},
                               {DNNL_ARG_DIFF_SRC, c->m_diff_src},
                               {DNNL_ARG_DIFF_SCALE, c->m_diff_scale},
                               {DNNL_ARG_DIFF_SHIFT, c->m_diff_shift}};
    DP_DNNL_CHECK(dnnl_primitive_execute(c->prim, ((dp__cpu *)dev->impl)->stream, 9, args));
    return 0;
}

int dp__cpu_batch_norm_forward(dp_device_t *dev, const dp__batch_norm_args *a)
{
    return dp__cpu_push(dev, run_forward, a, sizeof *a);
}

int dp__cpu_batch_norm_backward(dp_device_t *dev, const dp__batch_norm_args *a)
{
    return dp__cpu_push(dev, run_backward, a, sizeof *a);
}
