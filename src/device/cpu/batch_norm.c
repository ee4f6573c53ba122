/* Batch normalisation on the CPU through oneDNN, in the tensor's own layout
 * (NHWC after a convolution, NCHW for a user's input).
 *
 * oneDNN computes the batch statistics and the normalisation in one
 * primitive, and the ReLU after it with its fused-ReLU flag: in training
 * the primitive keeps the ReLU's mask in the op's workspace (relu_ws, a bit
 * or a byte an element) and the backward primitive applies it to dy, so
 * neither pass spends a sweep of its own on the ReLU. The running-statistics
 * update is a short loop in the same command. SyncBatchNorm's own loops
 * take dy already masked (the op layer does it).
 *
 * bf16 data (statistics, scale and shift stay f32) runs oneDNN's bf16
 * batch normalization, or, on a CPU where it has none, its f32 one over
 * converted copies. */
#include "core/bf16.h"
#include "device/cpu/cpu.h"

#include <math.h>
#include <string.h>

typedef struct bn_key {
    int backward, training, nhwc, relu;
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
    /* Eval normalises with the running statistics, and its backward pass
     * treats them as constants: both are oneDNN's global statistics. */
    unsigned flags = dnnl_use_scale | dnnl_use_shift;
    if (!k->training)
        flags |= dnnl_use_global_stats;
    if (k->relu)
        flags |= dnnl_fuse_norm_relu;
    /* A backward primitive needs the training forward as its hint. */
    dnnl_prop_kind_t prop =
        k->training || k->backward ? dnnl_forward_training : dnnl_forward_inference;
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
    k.training = a->training;
    k.type = dp__cpu_dnnl_type(a->x.dtype);
    /* The ReLU fused: in training with the op's mask, in eval always (no
     * mask: eval's backward takes dy masked by the op layer). */
    k.relu = a->relu && !a->sync && (a->relu_ws || (!a->training && !backward));
    /* With one channel both layouts are the same bytes. */
    k.nhwc = a->x.nhwc && a->x.shape[1] > 1;
    memcpy(k.x, a->x.shape, sizeof k.x);
    k.eps = a->eps;
    DP_TRY(dp__cpu_primitive_get(dev->impl, &k, sizeof k, bn_pd, out));
    if (*out && (*out)->ws_bytes > (size_t)(k.x[0] * k.x[1] * k.x[2] * k.x[3])) {
        DP_ERROR("oneDNN: batch normalization's ReLU mask of %zu bytes exceeds one a value",
                 (*out)->ws_bytes);
        return DP_EDEVICE;
    }
    return 0;
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

/* y = max(y, 0) over n elements of `dtype`. */
static void relu_in_place(void *data, dp_dtype dtype, int64_t n)
{
    if (dtype == DP_BF16) {
        dp__bf16 *y = data;
#pragma omp parallel for simd if (n > 32768)
        for (int64_t i = 0; i < n; i++)
            y[i] = dp__bf16_to_f32(y[i]) > 0.0f ? y[i] : 0;
        return;
    }
    float *y = data;
#pragma omp parallel for simd if (n > 32768)
    for (int64_t i = 0; i < n; i++)
        y[i] = y[i] > 0.0f ? y[i] : 0.0f;
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
    dp__stats_exchange_sum(a->sync, a->rank, a->ranks, mine, 1 + 2 * C, total);
    double count = total[0];
    for (int64_t c = 0; c < C; c++) {
        double mean = total[1 + c] / count;
        double var = total[1 + C + c] / count - mean * mean;
        a->save_mean[c] = (float)mean;
        a->save_var[c] = (float)(var > 0 ? var : 0);
        float m = a->momentum;
        a->running_mean[c] = (1.0f - m) * a->running_mean[c] + m * (float)mean;
        a->running_var[c] = (1.0f - m) * a->running_var[c] +
                            m * (float)(count > 1 ? var * count / (count - 1) : var);
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
    dp__stats_exchange_sum(a->sync, a->rank, a->ranks, mine, 1 + 2 * C, total);
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
    dp__cpu_primitive *c;
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
        dnnl_memory_set_data_handle(c->mem[SRC], a->x.data);
        dnnl_memory_set_data_handle(c->mem[DST], a->y.data);
        dnnl_memory_set_data_handle(c->mem[SCALE], (void *)a->gamma);
        dnnl_memory_set_data_handle(c->mem[SHIFT], (void *)a->beta);
        dnnl_memory_set_data_handle(c->mem[MEAN], a->running_mean);
        dnnl_memory_set_data_handle(c->mem[VAR], a->running_var);
        dnnl_exec_arg_t args[6] = {
            {DNNL_ARG_SRC, c->mem[SRC]},     {DNNL_ARG_DST, c->mem[DST]},
            {DNNL_ARG_SCALE, c->mem[SCALE]}, {DNNL_ARG_SHIFT, c->mem[SHIFT]},
            {DNNL_ARG_MEAN, c->mem[MEAN]},   {DNNL_ARG_VARIANCE, c->mem[VAR]}};
        DP_DNNL_CHECK(dnnl_primitive_execute(c->prim, ((dp__cpu *)dev->impl)->stream, 6, args));
        if (a->relu)
            relu_in_place(a->y.data, a->y.dtype, numel4(a->x.shape));
        return 0;
    }
    DP_TRY(lookup(dev, 0, a, &c));
    if (!c) {
        dp__batch_norm_args f;
        DP_TRY(as_f32_args(dev->impl, a, &f, 1, 2));
        DP_TRY(run_forward(&f, ctx));
        dp__cpu_bf16_from_f32(a->y.data, f.y.data, numel4(a->y.shape));
        return 0;
    }
    int64_t C = a->x.shape[1];
    dnnl_memory_set_data_handle(c->mem[SRC], a->x.data);
    dnnl_memory_set_data_handle(c->mem[DST], a->y.data);
    dnnl_memory_set_data_handle(c->mem[SCALE], (void *)a->gamma);
    dnnl_memory_set_data_handle(c->mem[SHIFT], (void *)a->beta);
    /* Training: the batch statistics are outputs; eval: the running ones
     * are inputs. */
    dnnl_memory_set_data_handle(c->mem[MEAN], a->training ? a->save_mean : a->running_mean);
    dnnl_memory_set_data_handle(c->mem[VAR], a->training ? a->save_var : a->running_var);
    dnnl_exec_arg_t args[7] = {{DNNL_ARG_SRC, c->mem[SRC]},     {DNNL_ARG_DST, c->mem[DST]},
                               {DNNL_ARG_SCALE, c->mem[SCALE]}, {DNNL_ARG_SHIFT, c->mem[SHIFT]},
                               {DNNL_ARG_MEAN, c->mem[MEAN]},   {DNNL_ARG_VARIANCE, c->mem[VAR]},
                               {DNNL_ARG_WORKSPACE, c->ws}};
    if (c->ws)
        dnnl_memory_set_data_handle(c->ws, a->relu_ws);
    DP_DNNL_CHECK(
        dnnl_primitive_execute(c->prim, ((dp__cpu *)dev->impl)->stream, c->ws ? 7 : 6, args));
    if (a->relu && !(a->relu_ws || !a->training))
        relu_in_place(a->y.data, a->y.dtype, numel4(a->x.shape));
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
    dp__cpu_primitive *c;
    if (a->sync && a->training)
        return sync_backward(a);
    DP_TRY(lookup(dev, 1, a, &c));
    if (!c) {
        dp__batch_norm_args f;
        DP_TRY(as_f32_args(dev->impl, a, &f, 1 | 8, 4));
        DP_TRY(run_backward(&f, ctx));
        dp__cpu_bf16_from_f32(a->dx.data, f.dx.data, numel4(a->dx.shape));
        return 0;
    }
    dnnl_memory_set_data_handle(c->mem[SRC], a->x.data);
    dnnl_memory_set_data_handle(c->mem[DIFF_DST], a->dy.data);
    dnnl_memory_set_data_handle(c->mem[DIFF_SRC], a->dx.data);
    dnnl_memory_set_data_handle(c->mem[MEAN], a->save_mean);
    dnnl_memory_set_data_handle(c->mem[VAR], a->save_var);
    dnnl_memory_set_data_handle(c->mem[SCALE], (void *)a->gamma);
    dnnl_memory_set_data_handle(c->mem[SHIFT], (void *)a->beta);
    dnnl_memory_set_data_handle(c->mem[DIFF_SCALE], a->dgamma);
    dnnl_memory_set_data_handle(c->mem[DIFF_SHIFT], a->dbeta);
    /* oneDNN 2.6 checks that the shift is given to the backward pass too,
     * though no gradient depends on it. */
    dnnl_exec_arg_t args[10] = {{DNNL_ARG_SRC, c->mem[SRC]},
                                {DNNL_ARG_DIFF_DST, c->mem[DIFF_DST]},
                                {DNNL_ARG_MEAN, c->mem[MEAN]},
                                {DNNL_ARG_VARIANCE, c->mem[VAR]},
                                {DNNL_ARG_SCALE, c->mem[SCALE]},
                                {DNNL_ARG_SHIFT, c->mem[SHIFT]},
                                {DNNL_ARG_DIFF_SRC, c->mem[DIFF_SRC]},
                                {DNNL_ARG_DIFF_SCALE, c->mem[DIFF_SCALE]},
                                {DNNL_ARG_DIFF_SHIFT, c->mem[DIFF_SHIFT]}};
    if (c->ws)
        dnnl_memory_set_data_handle(c->ws, a->relu_ws);
    args[9] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE, c->ws};
    DP_DNNL_CHECK(
        dnnl_primitive_execute(c->prim, ((dp__cpu *)dev->impl)->stream, c->ws ? 10 : 9, args));
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
