/* conv2d_pool on the CPU: a convolution whose outputs each take few inputs
 * (C R S taps, at most DP__CONV_POOL_MAX_TAPS), its bias and ReLU, and a
 * k x k average pool of stride k, in one pass over each image; and the
 * weight and bias gradients from the pooled gradient in one more.
 *
 * Why its own loops and not oneDNN's: a layer like LeNet's first (1 -> 20
 * channels, 3x3 on 28x28: 9 multiply-adds an output) is bound by its
 * activations' traffic, not by arithmetic. Unfused, oneDNN 2.6 writes the
 * 20x26x26 output of every image (blocked, then reordered to NHWC),
 * pooling reads it back, the backward writes the masked gradient at that
 * size and oneDNN's weight pass reads it: 1.8 ms of a 9.8 ms bf16 step on
 * a Zen 5 core, for 31 MFLOP (bench/PROFILE_LENET.md). Here that activation
 * lives only in registers: per image the input is read, the pooled output
 * and one byte per ReLU decision written; the backward reads the pooled
 * gradient, those bytes and the input.
 *
 * The work: output channels in blocks of LANES (one AVX-512 vector, two
 * AVX2 ones), the block's C R S weights (or weight gradients) kept in
 * registers while each tap's input value, broadcast, multiplies them. Each
 * image is first copied into zero-padded f32 planes, one per channel, so
 * a tap is one load at a fixed offset. The arithmetic is f32; under bf16
 * x and the weights are bf16 values, whose products f32 holds exactly, and
 * the convolution's output is rounded to bf16 before the ReLU and the
 * mean, as the unfused ops round it: what differs from them is the order
 * of the f32 sums. The threads split the images; the weight gradient is
 * summed per image, then per thread, then over the threads in their
 * order, so a given thread count gives the same bits every run. */
#include "core/bf16.h"
#include "device/cpu/clones.h"
#include "device/cpu/cpu.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

enum { LANES = DP__CONV_POOL_LANES };

/* The shapes and offsets both passes use. The convolution's rows and
 * columns under a window: P = pool PP, Q = pool QQ. */
typedef struct plan {
    int64_t N, C, H, W, K, PP, QQ, P, Q;
    int pool, taps, stride_h, stride_w, pad_h, pad_w;
    int64_t Hp, Wp;                      /* a padded plane */
    int64_t off[DP__CONV_POOL_MAX_TAPS]; /* tap t = (c R + r) S + s in the planes */
    int64_t blocks;                      /* ceil(K / LANES) */
    int64_t KL;                          /* blocks LANES: a position's lanes */
    bool bf16, relu, x_nhwc, dy_nhwc;
    float inv; /* 1 / pool^2 */
} plan;

static plan make_plan(const dp__conv2d_pool_args *a)
{
    const dp__conv2d_args *c = &a->conv;
    plan p = {
        .N = c->x.shape[0],
        .C = c->x.shape[1],
        .H = c->x.shape[2],
        .W = c->x.shape[3],
        .K = c->w.shape[0],
        .PP = c->y.shape[2],
        .QQ = c->y.shape[3],
        .pool = a->pool,
        .stride_h = c->stride_h,
        .stride_w = c->stride_w,
        .pad_h = c->pad_h,
        .pad_w = c->pad_w,
        .bf16 = c->x.dtype == DP_BF16,
        .relu = c->fuse_relu,
        .x_nhwc = c->x.nhwc != 0,
        .dy_nhwc = c->dy.nhwc != 0,
        .inv = 1.0f / (float)(a->pool * a->pool),
    };
    p.P = p.PP * p.pool;
    p.Q = p.QQ * p.pool;
    p.Hp = p.H + c->pad_h + c->pad_bottom;
    p.Wp = p.W + c->pad_w + c->pad_right;
    int64_t R = c->w.shape[2], S = c->w.shape[3];
    p.taps = (int)(p.C * R * S);
    for (int64_t ch = 0; ch < p.C; ch++)
        for (int64_t r = 0; r < R; r++)
            for (int64_t s = 0; s < S; s++)
                p.off[(ch * R + r) * S + s] =
                    (ch * p.Hp + r * c->dilation_h) * p.Wp + s * c->dilation_w;
    p.blocks = (p.K + LANES - 1) / LANES;
    p.KL = p.blocks * LANES;
    return p;
}

/* Image n of x into C zero-padded planes of Hp x Wp floats: a row of a
 * plane is W values apart by `step` in x (1 in NCHW or for one channel, C
 * in NHWC). */
DP_CPU_CLONES static void load_image(const plan *p, const void *x, int64_t n, float *planes)
{
    memset(planes, 0, sizeof(float) * (size_t)(p->C * p->Hp * p->Wp));
    const int64_t W = p->W, step = p->x_nhwc ? p->C : 1;
    for (int64_t c = 0; c < p->C; c++)
        for (int64_t h = 0; h < p->H; h++) {
            float *row = planes + (c * p->Hp + h + p->pad_h) * p->Wp + p->pad_w;
            int64_t at = n * p->C * p->H * W + (p->x_nhwc ? h * W * p->C + c : (c * p->H + h) * W);
            if (p->bf16) {
                const dp__bf16 *src = (const dp__bf16 *)x + at;
#pragma omp simd
                for (int64_t w = 0; w < W; w++)
                    row[w] = dp__bf16_to_f32(src[w * step]);
            } else {
                const float *src = (const float *)x + at;
#pragma omp simd
                for (int64_t w = 0; w < W; w++)
                    row[w] = src[w * step];
            }
        }
}

/* Block b's weights as wt[t][l] = w[b LANES + l][t] (OIHW: w[k][t]), zero
 * past K, rounded to bf16 under bf16. */
static void block_weights(const plan *p, const float *w, int64_t b, float *wt)
{
    for (int t = 0; t < p->taps; t++)
        for (int l = 0; l < LANES; l++) {
            int64_t k = b * LANES + l;
            float v = k < p->K ? w[k * p->taps + t] : 0.0f;
            wt[t * LANES + l] = p->bf16 ? dp__bf16_round(v) : v;
        }
}

/* A block's LANES floats as one GCC vector: one AVX-512 register in the
 * avx512f clone, two in the AVX2 one, four SSE ones in the plain one. */
typedef float vf __attribute__((vector_size(LANES * sizeof(float))));
typedef int32_t vi __attribute__((vector_size(LANES * sizeof(int32_t))));
typedef uint32_t vu __attribute__((vector_size(LANES * sizeof(uint32_t))));
typedef uint16_t vh __attribute__((vector_size(LANES * sizeof(uint16_t))));
/* The helpers below pass these vectors by value; they are static and
 * inlined, so the calling convention GCC warns about is never an ABI. */
#pragma GCC diagnostic ignored "-Wpsabi"

static inline vi bits(vf v)
{
    vi u;
    memcpy(&u, &v, sizeof u);
    return u;
}

static inline vf floats(vi u)
{
    vf v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* The ReLU's decisions of a block as the bits of a 16-bit word (lane l:
 * bit l), and back as lanes of -1 and 0. To bits: the lanes narrowed to
 * bytes (one vpmovdb with AVX-512) whose sign bits SSE2's pmovmskb
 * gathers; back: a broadcast and a test. */
typedef signed char vb __attribute__((vector_size(LANES)));

static inline uint16_t to_bits(vi on)
{
    vb b = __builtin_convertvector(on, vb);
#if defined(__SSE2__)
    return (uint16_t)__builtin_ia32_pmovmskb128((__attribute__((vector_size(16))) char)b);
#else
    uint16_t m = 0;
    for (int l = 0; l < LANES; l++)
        m |= (uint16_t)((b[l] & 1) << l);
    return m;
#endif
}

static const vi lane_bit = {1 << 0, 1 << 1, 1 << 2,  1 << 3,  1 << 4,  1 << 5,  1 << 6,  1 << 7,
                            1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12, 1 << 13, 1 << 14, 1 << 15};

static inline vi from_bits(uint16_t m)
{
    vi all = {0};
    return ((all + (int32_t)m) & lane_bit) != 0;
}

/* Rounded to the nearest bf16, ties to even, as bits in the low half.
 * Without core/bf16.h's NaN case (three more operations a lane): a NaN
 * stays a NaN unless the top 7 bits of its payload are all set (x86's
 * default NaN is 0x7fc00000), and a step with a NaN here ends in a
 * non-finite loss whichever value it rounds to, which check_finite skips
 * or stops. */
static inline vi round_bits(vf v)
{
    vu u = (vu)bits(v);
    return (vi)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static inline vf round_bf16(vf v)
{
    return floats((vi)((vu)round_bits(v) << 16));
}

/* The plan's sizes as locals: stores through the mask's and y's char-
 * sized pointers may alias anything a pointer reaches, so that read
 * through p, every size would be loaded again after each store. */
#define PLAN_LOCALS(p)                                                                             \
    const int64_t PP = (p)->PP, QQ = (p)->QQ, P = (p)->P, Q = (p)->Q, K = (p)->K;                  \
    const int64_t blocks = (p)->blocks;                                                            \
    const int64_t row_step = (p)->stride_h * (p)->Wp, col_step = (p)->stride_w;                    \
    const int pool = (p)->pool;                                                                    \
    int64_t off[DP__CONV_POOL_MAX_TAPS];                                                           \
    for (int t = 0; t < taps; t++)                                                                 \
        off[t] = (p)->off[t];

/* One image, one block of channels [k0, k0 + lanes): pooled outputs into
 * y (NHWC), ReLU decisions into mask (NULL: not kept). wt: the block's
 * taps x LANES weights. taps, bf16 and relu are constants in the
 * specialised calls (forward_block). */
static inline __attribute__((always_inline)) void
forward_body(const plan *p, const float *planes, const float *wt, const float *bias, int64_t n,
             int64_t k0, int lanes, void *y, uint16_t *mask, const int taps, const bool bf16,
             const bool relu)
{
    PLAN_LOCALS(p)
    vf b, zero = {0}, w[DP__CONV_POOL_MAX_TAPS];
    memcpy(&b, bias, sizeof b);
    for (int t = 0; t < taps; t++)
        memcpy(&w[t], wt + t * LANES, sizeof w[t]);
    const float inv = p->inv;
    for (int64_t i = 0; i < PP; i++)
        for (int64_t j = 0; j < QQ; j++) {
            vf sum = zero;
            for (int u = 0; u < pool; u++)
                for (int v = 0; v < pool; v++) {
                    int64_t oh = i * pool + u, ow = j * pool + v;
                    const float *src = planes + oh * row_step + ow * col_step;
                    vf acc = b;
#pragma GCC unroll 32
                    for (int t = 0; t < taps; t++)
                        acc += src[off[t]] * w[t];
                    if (bf16)
                        acc = round_bf16(acc);
                    if (relu) {
                        vi on = acc > zero;
                        /* acc * 0 where cut: a NaN stays NaN, as oneDNN's ReLU */
                        acc = floats((bits(acc) & on) | (bits(acc * 0.0f) & ~on));
                        if (mask)
                            mask[((n * P + oh) * Q + ow) * blocks + k0 / LANES] = to_bits(on);
                    }
                    sum += acc;
                }
            sum *= inv;
            int64_t at = ((n * PP + i) * QQ + j) * K + k0;
            if (bf16) {
                vh h = __builtin_convertvector(round_bits(sum), vh);
                if (lanes == LANES)
                    memcpy((dp__bf16 *)y + at, &h, sizeof h);
                else
                    for (int l = 0; l < lanes; l++)
                        ((dp__bf16 *)y)[at + l] = h[l];
            } else if (lanes == LANES) {
                memcpy((float *)y + at, &sum, sizeof sum);
            } else {
                for (int l = 0; l < lanes; l++)
                    ((float *)y)[at + l] = sum[l];
            }
        }
}

/* One image, one block of channels: dwt[t][l] += the weight gradient,
 * dbt[l] += the bias gradient, from the image's pooled gradient through
 * the pool and the mask. g: the block's gradients per pooled output,
 * (PP, QQ, LANES), already divided by pool^2 (gradients_of). */
static inline __attribute__((always_inline)) void
backward_body(const plan *p, const float *planes, const float *g, const uint16_t *mask, int64_t n,
              int64_t k0, float *dwt, float *dbt, const int taps, const bool relu)
{
    PLAN_LOCALS(p)
    (void)K;
    vf acc[DP__CONV_POOL_MAX_TAPS], db = {0}, zero = {0};
    for (int t = 0; t < taps; t++)
        acc[t] = zero;
    for (int64_t i = 0; i < PP; i++)
        for (int64_t j = 0; j < QQ; j++) {
            vf gi;
            memcpy(&gi, g + (i * QQ + j) * LANES, sizeof gi);
            for (int u = 0; u < pool; u++)
                for (int v = 0; v < pool; v++) {
                    int64_t oh = i * pool + u, ow = j * pool + v;
                    const float *src = planes + oh * row_step + ow * col_step;
                    vf gm = gi;
                    if (relu)
                        gm = floats(bits(gi) &
                                    from_bits(mask[((n * P + oh) * Q + ow) * blocks + k0 / LANES]));
                    db += gm;
#pragma GCC unroll 32
                    for (int t = 0; t < taps; t++)
                        acc[t] += src[off[t]] * gm;
                }
        }
    for (int t = 0; t < taps; t++)
        for (int l = 0; l < LANES; l++)
            dwt[t * LANES + l] += acc[t][l];
    for (int l = 0; l < LANES; l++)
        dbt[l] += db[l];
}

/* Image n's pooled gradient dy as g (blocks, PP, QQ, LANES) floats, each
 * dy / pool^2 in dy's type as the unfused pool's backward writes it; the
 * lanes past K are left as they are (zero: run_backward clears g once).
 * row: K PP QQ floats of scratch, the image's dy in f32 first. */
DP_CPU_CLONES static void gradients_of(const plan *p, const void *dy, int64_t n, float *g,
                                       float *row)
{
    const int64_t K = p->K, cells = p->PP * p->QQ, all = K * cells;
    const float inv = p->inv;
    if (p->dy_nhwc) {
        if (p->bf16) {
            const dp__bf16 *src = (const dp__bf16 *)dy + n * all;
#pragma omp simd
            for (int64_t i = 0; i < all; i++)
                row[i] = dp__bf16_round(dp__bf16_to_f32(src[i]) * inv);
        } else {
            const float *src = (const float *)dy + n * all;
#pragma omp simd
            for (int64_t i = 0; i < all; i++)
                row[i] = src[i] * inv;
        }
    } else { /* NCHW: (K, cells) -> (cells, K) */
        for (int64_t k = 0; k < K; k++)
            for (int64_t c = 0; c < cells; c++) {
                int64_t at = (n * K + k) * cells + c;
                float v = (p->bf16 ? dp__bf16_to_f32(((const dp__bf16 *)dy)[at])
                                   : ((const float *)dy)[at]) *
                          inv;
                row[c * K + k] = p->bf16 ? dp__bf16_round(v) : v;
            }
    }
    for (int64_t c = 0; c < cells; c++)
        for (int64_t blk = 0; blk < p->blocks; blk++) {
            int64_t lanes = K - blk * LANES < LANES ? K - blk * LANES : LANES;
            memcpy(g + (blk * cells + c) * LANES, row + c * K + blk * LANES,
                   sizeof(float) * (size_t)lanes);
        }
}

/* The passes for any tap count and setting, and for LeNet's first layer
 * (1 x 3 x 3 taps, with its ReLU) with all three known, so that its
 * weights and gradient sums stay in registers. */
DP_CPU_CLONES static void forward_block(const plan *p, const float *planes, const float *wt,
                                        const float *bias, int64_t n, int64_t k0, int lanes,
                                        void *y, uint16_t *mask)
{
    if (p->taps == 9 && p->relu && p->bf16)
        forward_body(p, planes, wt, bias, n, k0, lanes, y, mask, 9, true, true);
    else if (p->taps == 9 && p->relu)
        forward_body(p, planes, wt, bias, n, k0, lanes, y, mask, 9, false, true);
    else
        forward_body(p, planes, wt, bias, n, k0, lanes, y, mask, p->taps, p->bf16, p->relu);
}

DP_CPU_CLONES static void backward_block(const plan *p, const float *planes, const float *g,
                                         const uint16_t *mask, int64_t n, int64_t k0, float *dwt,
                                         float *dbt)
{
    if (p->taps == 9 && p->relu)
        backward_body(p, planes, g, mask, n, k0, dwt, dbt, 9, true);
    else
        backward_body(p, planes, g, mask, n, k0, dwt, dbt, p->taps, p->relu);
}

static int lanes_of(const plan *p, int64_t b)
{
    int64_t left = p->K - b * LANES;
    return (int)(left < LANES ? left : LANES);
}

static int run_forward(void *args, void *ctx)
{
    const dp__conv2d_pool_args *a = args;
    (void)ctx;
    plan p = make_plan(a);
    size_t wt_floats = (size_t)(p.blocks * p.taps * LANES);
    float *wt = malloc(sizeof(float) * (wt_floats + (size_t)(p.blocks * LANES)));
    if (!wt)
        return DP_ENOMEM;
    float *bias = wt + wt_floats;
    const float *b = a->conv.b.data;
    for (int64_t blk = 0; blk < p.blocks; blk++) {
        block_weights(&p, a->conv.w.data, blk, wt + blk * p.taps * LANES);
        for (int l = 0; l < LANES; l++) {
            int64_t k = blk * LANES + l;
            bias[blk * LANES + l] = b && k < p.K ? b[k] : 0.0f;
        }
    }
    size_t plane_floats = (size_t)(p.C * p.Hp * p.Wp);
    int failed = 0;
#pragma omp parallel
    {
        float *planes = malloc(sizeof(float) * plane_floats);
        if (!planes) {
#pragma omp atomic write
            failed = 1;
        } else {
            int nt = omp_get_num_threads(), id = omp_get_thread_num();
            for (int64_t n = p.N * id / nt; n < p.N * (id + 1) / nt; n++) {
                load_image(&p, a->conv.x.data, n, planes);
                for (int64_t blk = 0; blk < p.blocks; blk++)
                    forward_block(&p, planes, wt + blk * p.taps * LANES, bias + blk * LANES, n,
                                  blk * LANES, lanes_of(&p, blk), a->conv.y.data,
                                  p.relu ? a->mask : NULL);
            }
            free(planes);
        }
    }
    free(wt);
    return failed ? DP_ENOMEM : 0;
}

static int run_backward(void *args, void *ctx)
{
    const dp__conv2d_pool_args *a = args;
    (void)ctx;
    plan p = make_plan(a);
    /* Per thread: the block-major gradient dwt[blk][t][l], then dbt[blk][l]. */
    size_t part = (size_t)(p.blocks * (p.taps + 1) * LANES);
    int most = omp_get_max_threads();
    float *parts = calloc((size_t)most * part, sizeof(float));
    if (!parts)
        return DP_ENOMEM;
    /* a thread's image and its pooled gradient */
    size_t plane_floats = (size_t)(p.C * p.Hp * p.Wp),
           g_floats = (size_t)((p.KL + p.K) * p.PP * p.QQ);
    int failed = 0, team = 1;
#pragma omp parallel
    {
        int nt = omp_get_num_threads(), id = omp_get_thread_num();
        float *planes = calloc(plane_floats + g_floats, sizeof(float));
        if (id == 0)
            team = nt;
        if (!planes || nt > most) {
#pragma omp atomic write
            failed = 1;
        } else {
            float *mine = parts + (size_t)id * part, *g = planes + plane_floats;
            for (int64_t n = p.N * id / nt; n < p.N * (id + 1) / nt; n++) {
                load_image(&p, a->conv.x.data, n, planes);
                gradients_of(&p, a->conv.dy.data, n, g, g + p.KL * p.PP * p.QQ);
                for (int64_t blk = 0; blk < p.blocks; blk++)
                    backward_block(&p, planes, g + blk * p.PP * p.QQ * LANES, a->mask, n,
                                   blk * LANES, mine + blk * p.taps * LANES,
                                   mine + p.blocks * p.taps * LANES + blk * LANES);
            }
        }
        free(planes);
    }
    if (!failed) {
        /* Over the threads in their order: the same bits for the same team. */
        for (int id = 1; id < team; id++)
            for (size_t i = 0; i < part; i++)
                parts[i] += parts[(size_t)id * part + i];
        float *dw = a->conv.dw.data, *db = a->conv.db.data;
        for (int64_t k = 0; k < p.K; k++) {
            int64_t blk = k / LANES, l = k % LANES;
            for (int t = 0; t < p.taps; t++)
                dw[k * p.taps + t] = parts[(blk * p.taps + t) * LANES + l];
            if (db)
                db[k] = parts[p.blocks * p.taps * LANES + blk * LANES + l];
        }
    }
    free(parts);
    return failed ? DP_ENOMEM : 0;
}

DP__CPU_ENTRY(conv2d_pool_forward, dp__conv2d_pool_args, run_forward)
DP__CPU_ENTRY(conv2d_pool_backward, dp__conv2d_pool_args, run_backward)
