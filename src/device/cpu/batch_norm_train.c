/* Batch normalisation's training passes on the CPU: the batch statistics
 * and the backward pass, summed in double.
 *
 * Why not oneDNN's training primitives: they sum each channel's n = N H W
 * values in float, and the backward pass subtracts two such sums from
 * every dy. An error e in sum(dy) / n shifts all of a channel's dx by
 * gamma / std e, which the convolution before it adds up over n
 * positions: its weight gradient came out 1.8% off the float64 one where
 * PyTorch's float32 (which sums in double on the CPU) is 8e-6 off, and the
 * gradient of a bias before batch norm, 0 in exact arithmetic, was 7e-3
 * (tests/device/cpu/test_bn_accuracy.c). Sums in double keep every such term at
 * float rounding, and make them the same for any split of the batch into
 * shards: SyncBatchNorm adds the shards' sums (the exchange src/comm/
 * issues between the batch_norm_sums kernel and the pass, device/kernels.h)
 * and goes on as one shard would.
 *
 * Channels are spread over the kernel threads in blocks, each block's sums
 * taken in one fixed order (lanes of 16 channels in NHWC, of 16 positions
 * in NCHW, added lane by lane), so the bits do not depend on the thread
 * count. The elementwise parts (xhat, dx) are float, whose rounding is
 * relative to each value. x, dy and dx are f32 or bf16; the statistics are
 * f32. The loops are compiled for AVX-512, AVX2 and plain x86-64, the CPU
 * picking at load time. */
#include "core/bf16.h"
#include "core/pairwise.h"
#include "device/cpu/clones.h"
#include "device/cpu/cpu.h"

#include <math.h>

/* A shard (N, C, H, W) as rows: N H W rows of C channels in NHWC, N C
 * rows of HW positions of one channel in NCHW. */
typedef struct shard {
    int64_t N, C, HW;
    bool nhwc;
} shard;

static shard shard_of(const dp__tdesc *x)
{
    return (shard){x->shape[0], x->shape[1], x->shape[2] * x->shape[3], x->nhwc && x->shape[1] > 1};
}

/* Channels (NHWC) or positions (NCHW) summed side by side. */
enum { LANES = 16 };

/* What one pass over a channel block reads and writes. Per channel:
 * mean, inv_std (float), scale = gamma inv_std, shift = sum dy / n,
 * slope = sum dy xhat / n; sums s1, s2 (double). */
typedef struct pass {
    shard s;
    const void *x, *dy;
    void *dx;
    const float *mean, *inv_std, *scale, *shift, *slope;
    double *s1, *s2;
} pass;

#define F32_LOAD(v) (v)
#define F32_STORE(v) (v)

/* One kernel per element type T, read through LOAD, written through
 * STORE, for channels [c0, c1):
 *   NAME_sums_x:  s1[c] = sum x, s2[c] = sum x^2 (products of floats are
 *                 exact in double);
 *   NAME_sums_dy: s1[c] = sum dy, s2[c] = sum dy xhat;
 *   NAME_dx:      dx = scale (dy - shift - xhat slope).
 * EACH(c, k) visits element k of channel c, lanes of LANES side by side. */
#define BN_KERNELS(NAME, T, LOAD, STORE)                                                           \
    DP_CPU_CLONES static void NAME##_sums_x(const pass *p, int64_t c0, int64_t c1)                 \
    {                                                                                              \
        const T *x = p->x;                                                                         \
        SUM_LANES(p, c0, c1, double v = LOAD(x[k]), v, v * v);                                     \
    }                                                                                              \
    DP_CPU_CLONES static void NAME##_sums_dy(const pass *p, int64_t c0, int64_t c1)                \
    {                                                                                              \
        const T *x = p->x, *dy = p->dy;                                                            \
        SUM_LANES(p, c0, c1, float g = LOAD(dy[k]);                                                \
                  float xhat = (LOAD(x[k]) - p->mean[c]) * p->inv_std[c], (double)g,               \
                  (double)g * (double)xhat);                                                       \
    }                                                                                              \
    DP_CPU_CLONES static void NAME##_dx(const pass *p, int64_t c0, int64_t c1)                     \
    {                                                                                              \
        const T *x = p->x, *dy = p->dy;                                                            \
        T *dx = p->dx;                                                                             \
        EACH(p, c0, c1, {                                                                          \
            float xhat = (LOAD(x[k]) - p->mean[c]) * p->inv_std[c];                                \
            dx[k] = STORE(p->scale[c] * (LOAD(dy[k]) - p->shift[c] - xhat * p->slope[c]));         \
        });                                                                                        \
    }

/* Lane J of the sums: PRE declares what A and B read of element K of
 * channel CC. */
#define ADD_TO_LANE(J, CC, K, PRE, A, B)                                                           \
    do {                                                                                           \
        int64_t c = (CC), k = (K);                                                                 \
        (void)c; /* sums_x reads x alone */                                                        \
        PRE;                                                                                       \
        a_[J] += A;                                                                                \
        b_[J] += B;                                                                                \
    } while (0)

/* Sums A and B over each channel of [c0, c1) into s1, s2: in NHWC a lane
 * per channel (c1 - c0 <= LANES), in NCHW LANES lanes over each row's
 * positions, the lanes then added in order. */
#define SUM_LANES(p, c0, c1, PRE, A, B)                                                            \
    do {                                                                                           \
        const shard *s_ = &(p)->s;                                                                 \
        double a_[LANES] = {0}, b_[LANES] = {0};                                                   \
        if (s_->nhwc) {                                                                            \
            int64_t w_ = (c1) - (c0);                                                              \
            if (w_ == LANES) /* a whole block: the trip count known, the lanes in registers */     \
                for (int64_t r_ = 0; r_ < s_->N * s_->HW; r_++)                                    \
                    _Pragma("omp simd") for (int64_t j_ = 0; j_ < LANES; j_++)                     \
                        ADD_TO_LANE(j_, (c0) + j_, r_ * s_->C + (c0) + j_, PRE, A, B);             \
            else                                                                                   \
                for (int64_t r_ = 0; r_ < s_->N * s_->HW; r_++)                                    \
                    _Pragma("omp simd") for (int64_t j_ = 0; j_ < w_; j_++)                        \
                        ADD_TO_LANE(j_, (c0) + j_, r_ * s_->C + (c0) + j_, PRE, A, B);             \
            for (int64_t j_ = 0; j_ < w_; j_++) {                                                  \
                (p)->s1[(c0) + j_] = a_[j_];                                                       \
                (p)->s2[(c0) + j_] = b_[j_];                                                       \
            }                                                                                      \
            break;                                                                                 \
        }                                                                                          \
        for (int64_t c_ = (c0); c_ < (c1); c_++) {                                                 \
            for (int64_t j_ = 0; j_ < LANES; j_++)                                                 \
                a_[j_] = b_[j_] = 0;                                                               \
            for (int64_t n_ = 0; n_ < s_->N; n_++) {                                               \
                int64_t base_ = (n_ * s_->C + c_) * s_->HW, i_ = 0;                                \
                for (; i_ + LANES <= s_->HW; i_ += LANES)                                          \
                    _Pragma("omp simd") for (int64_t j_ = 0; j_ < LANES; j_++)                     \
                        ADD_TO_LANE(j_, c_, base_ + i_ + j_, PRE, A, B);                           \
                for (; i_ < s_->HW; i_++)                                                          \
                    ADD_TO_LANE(i_ % LANES, c_, base_ + i_, PRE, A, B);                            \
            }                                                                                      \
            double sa_ = 0, sb_ = 0;                                                               \
            for (int64_t j_ = 0; j_ < LANES; j_++) {                                               \
                sa_ += a_[j_];                                                                     \
                sb_ += b_[j_];                                                                     \
            }                                                                                      \
            (p)->s1[c_] = sa_;                                                                     \
            (p)->s2[c_] = sb_;                                                                     \
        }                                                                                          \
    } while (0)

/* BODY for element k of each channel c of [c0, c1). */
#define EACH(p, c0, c1, BODY)                                                                      \
    do {                                                                                           \
        const shard *s_ = &(p)->s;                                                                 \
        if (s_->nhwc && (c1) - (c0) == LANES) {                                                    \
            for (int64_t r_ = 0; r_ < s_->N * s_->HW; r_++)                                        \
                _Pragma("omp simd") for (int64_t j_ = 0; j_ < LANES; j_++)                         \
                {                                                                                  \
                    int64_t c = (c0) + j_, k = r_ * s_->C + c;                                     \
                    BODY;                                                                          \
                }                                                                                  \
        } else if (s_->nhwc) {                                                                     \
            for (int64_t r_ = 0; r_ < s_->N * s_->HW; r_++)                                        \
                _Pragma("omp simd") for (int64_t c = (c0); c < (c1); c++)                          \
                {                                                                                  \
                    int64_t k = r_ * s_->C + c;                                                    \
                    BODY;                                                                          \
                }                                                                                  \
        } else {                                                                                   \
            for (int64_t c = (c0); c < (c1); c++)                                                  \
                for (int64_t n_ = 0; n_ < s_->N; n_++) {                                           \
                    int64_t base_ = (n_ * s_->C + c) * s_->HW;                                     \
                    _Pragma("omp simd") for (int64_t k = base_; k < base_ + s_->HW; k++)           \
                    {                                                                              \
                        BODY;                                                                      \
                    }                                                                              \
                }                                                                                  \
        }                                                                                          \
    } while (0)

BN_KERNELS(f32, float, F32_LOAD, F32_STORE)
BN_KERNELS(bf16, dp__bf16, dp__bf16_to_f32, dp__bf16_from_f32)

typedef void (*block_fn)(const pass *p, int64_t c0, int64_t c1);

/* fn over every channel block, the blocks spread over the kernel threads:
 * LANES channels a block in NHWC, one in NCHW. */
static void over_blocks(const pass *p, block_fn fn)
{
    int64_t width = p->s.nhwc ? LANES : 1, nb = (p->s.C + width - 1) / width;
    int64_t numel = p->s.N * p->s.C * p->s.HW;
#pragma omp parallel for if (numel > 32768)
    for (int64_t b = 0; b < nb; b++) {
        int64_t c0 = b * width, c1 = c0 + width < p->s.C ? c0 + width : p->s.C;
        fn(p, c0, c1);
    }
}

/* The shard's sums by fn (over elements of esize bytes) into s1, s2 (C
 * doubles each), and their float roundings into f1, f2 when those are not
 * NULL. With block_rows set (dp_set_split_invariant) and a shard of more
 * samples: the sums of each block of block_rows samples, added pairwise
 * (core/pairwise.h, the tree of ops/split_invariant.c), the doubles and
 * the blocks' float roundings each in their own tree. So a shard that is
 * a whole subtree of another device's batch holds that subtree's exact
 * bits, and dgamma and dbeta (f1, f2) add up across devices as the other
 * ops' parameter gradients do. */
static int tree_sums(const pass *p, size_t esize, int64_t block_rows, block_fn fn, double *s1,
                     double *s2, float *f1, float *f2)
{
    int64_t N = p->s.N, C = p->s.C, per_row = C * p->s.HW;
    int64_t nb = block_rows > 0 && N > block_rows ? (N + block_rows - 1) / block_rows : 1;
    /* block b's [sum 1 (C), sum 2 (C)], in doubles, then in floats */
    double *d = dp__malloc((size_t)(nb * 2 * C) * sizeof *d);
    float *f = dp__malloc((size_t)(nb * 2 * C) * sizeof *f);
    if (!d || !f) {
        dp__free(d);
        dp__free(f);
        return DP_ENOMEM;
    }
    for (int64_t b = 0; b < nb; b++) {
        int64_t row0 = b * block_rows; /* 0 for the one block of a shard */
        pass blk = *p;
        blk.s.N = nb == 1 ? N : DP_MIN(block_rows, N - row0);
        blk.x = (const char *)p->x + (size_t)(row0 * per_row) * esize;
        if (p->dy)
            blk.dy = (const char *)p->dy + (size_t)(row0 * per_row) * esize;
        blk.s1 = d + b * 2 * C;
        blk.s2 = blk.s1 + C;
        over_blocks(&blk, fn);
        for (int64_t i = 0; i < 2 * C; i++)
            f[b * 2 * C + i] = (float)d[b * 2 * C + i];
    }
    dp__pairwise_sum_f64(d, nb, 2 * C, 2 * C);
    dp__pairwise_sum_f32(f, nb, 2 * C, 2 * C);
    memcpy(s1, d, (size_t)C * sizeof *s1);
    memcpy(s2, d + C, (size_t)C * sizeof *s2);
    if (f1) {
        memcpy(f1, f, (size_t)C * sizeof *f1);
        memcpy(f2, f + C, (size_t)C * sizeof *f2);
    }
    dp__free(d);
    dp__free(f);
    return 0;
}

/* sums = this shard's [count, sum 1 (C), sum 2 (C)] by fn; f1, f2 as
 * tree_sums. */
static int shard_sums(const dp__batch_norm_args *a, const pass *p, block_fn fn, double *sums,
                      float *f1, float *f2)
{
    int64_t C = p->s.C;
    sums[0] = (double)(p->s.N * p->s.HW);
    return tree_sums(p, dp_dtype_size(a->x.dtype), a->block_rows, fn, sums + 1, sums + 1 + C, f1,
                     f2);
}

/* The forward pass's sums: [count, sum x (C), sum x^2 (C)]. */
static int forward_sums(const dp__batch_norm_args *a, double *sums)
{
    pass p = {.s = shard_of(&a->x), .x = a->x.data};
    return shard_sums(a, &p, a->x.dtype == DP_BF16 ? bf16_sums_x : f32_sums_x, sums, NULL, NULL);
}

/* The backward pass over x, dy and dx, its per-channel floats in f (4 C:
 * inv_std from the saved variance, then scale, shift and slope for
 * backward_dx to fill). */
static pass backward_pass(const dp__batch_norm_args *a, float *f)
{
    int64_t C = a->x.shape[1];
    for (int64_t c = 0; c < C; c++)
        f[c] = (float)(1.0 / sqrt((double)a->save_var[c] + (double)a->eps));
    return (pass){.s = shard_of(&a->x),
                  .x = a->x.data,
                  .dy = a->dy.data,
                  .dx = a->dx.data,
                  .mean = a->save_mean,
                  .inv_std = f,
                  .scale = f + C,
                  .shift = f + 2 * C,
                  .slope = f + 3 * C};
}

/* The backward pass's sums: [count, sum dy (C), sum dy xhat (C)], and this
 * shard's dbeta and dgamma (the gradients' allreduce adds the shards'). */
static int backward_sums(const dp__batch_norm_args *a, const pass *p, double *sums)
{
    return shard_sums(a, p, a->x.dtype == DP_BF16 ? bf16_sums_dy : f32_sums_dy, sums, a->dbeta,
                      a->dgamma);
}

int dp__cpu_bn_sums(const dp__batch_norm_args *a, bool backward)
{
    if (!backward)
        return forward_sums(a, a->sums);
    float *f = dp__malloc((size_t)(4 * a->x.shape[1]) * sizeof *f);
    if (!f)
        return DP_ENOMEM;
    pass p = backward_pass(a, f);
    int rc = backward_sums(a, &p, a->sums);
    dp__free(f);
    return rc;
}

int dp__cpu_bn_statistics(const dp__batch_norm_args *a)
{
    int64_t C = a->x.shape[1];
    /* the group's [count, sum x (C), sum x^2 (C)], or this shard's */
    const double *total = a->totals;
    double *own = NULL;
    if (!total) {
        own = dp__malloc((size_t)(1 + 2 * C) * sizeof *own);
        if (!own)
            return DP_ENOMEM;
        int rc = forward_sums(a, own);
        if (rc < 0) {
            dp__free(own);
            return rc;
        }
        total = own;
    }
    double count = total[0];
    float m = a->momentum;
    for (int64_t c = 0; c < C; c++) {
        double mean = total[1 + c] / count;
        double var = total[1 + C + c] / count - mean * mean;
        var = var > 0 ? var : 0;
        a->save_mean[c] = (float)mean;
        a->save_var[c] = (float)var;
        /* the running variance unbiased, as PyTorch's */
        a->running_mean[c] = (1.0f - m) * a->running_mean[c] + m * (float)mean;
        a->running_var[c] = (1.0f - m) * a->running_var[c] +
                            m * (float)(count > 1 ? var * count / (count - 1) : var);
    }
    dp__free(own);
    return 0;
}

int dp__cpu_bn_train_backward(const dp__batch_norm_args *a)
{
    int64_t C = a->x.shape[1];
    /* inv_std, scale, shift and slope (C floats each), then this shard's
     * sums (1 + 2 C doubles) where the group's are not given */
    size_t floats = (size_t)(4 * C), doubles = a->totals ? 0 : (size_t)(1 + 2 * C);
    double *own = dp__malloc(doubles * sizeof(double) + floats * sizeof(float));
    if (!own)
        return DP_ENOMEM;
    float *f = (float *)(own + doubles), *scale = f + C, *shift = f + 2 * C, *slope = f + 3 * C;
    pass p = backward_pass(a, f);
    const double *total = a->totals;
    if (!total) {
        int rc = backward_sums(a, &p, own);
        if (rc < 0) {
            dp__free(own);
            return rc;
        }
        total = own;
    }
    for (int64_t c = 0; c < C; c++) {
        scale[c] = a->gamma[c] * p.inv_std[c];
        shift[c] = (float)(total[1 + c] / total[0]);
        slope[c] = (float)(total[1 + C + c] / total[0]);
    }
    over_blocks(&p, a->x.dtype == DP_BF16 ? bf16_dx : f32_dx);
    dp__free(own);
    return 0;
}
