/* Average and max pooling on the CPU through oneDNN. Max pooling keeps
 * oneDNN's workspace (the argmax of each output, one byte or one int each)
 * in a buffer the op layer sizes at 4 bytes per output element. bf16
 * tensors run oneDNN's bf16 pooling, or, on a CPU where it has none, its
 * f32 pooling over converted copies (the same sums, rounded once). */
#include "core/bf16.h"
#include "device/cpu/clones.h"
#include "device/cpu/cpu.h"

#include <string.h>

typedef struct pool_key {
    int backward, kind, nhwc;
    dnnl_data_type_t type;
    int64_t x[4], y[4];
    int kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
} pool_key;

/* The memory objects of a pooling primitive: src and dst forward, diff_src
 * and diff_dst backward. */
enum { SRC, DST };

static int pool_pd(dp__cpu *cpu, const void *key, dnnl_primitive_desc_t *pd,
                   dnnl_memory_desc_t *mds, int *n)
{
    const pool_key *k = key;
    dnnl_memory_desc_t *x = &mds[SRC], *y = &mds[DST];
    dnnl_format_tag_t tag = k->nhwc ? dnnl_acdb : dnnl_abcd;
    dnnl_dims_t xd = {k->x[0], k->x[1], k->x[2], k->x[3]};
    dnnl_dims_t yd = {k->y[0], k->y[1], k->y[2], k->y[3]};
    dnnl_memory_desc_init_by_tag(x, 4, xd, k->type, tag);
    dnnl_memory_desc_init_by_tag(y, 4, yd, k->type, tag);
    *n = 2;
    dnnl_dims_t strides = {k->stride_h, k->stride_w}, kernel = {k->kernel_h, k->kernel_w};
    /* oneDNN counts the cells skipped between a window's cells: 0 is none */
    dnnl_dims_t dil = {k->dilation_h - 1, k->dilation_w - 1}, pad_l = {k->pad_h, k->pad_w};
    int64_t span_h = (int64_t)k->dilation_h * (k->kernel_h - 1) + 1;
    int64_t span_w = (int64_t)k->dilation_w * (k->kernel_w - 1) + 1;
    dnnl_dims_t pad_r = {(k->y[2] - 1) * k->stride_h + span_h - k->x[2] - k->pad_h,
                         (k->y[3] - 1) * k->stride_w + span_w - k->x[3] - k->pad_w};
    /* pad_r: what y's size asks for, beyond pad_l in ceil_mode. */
    dnnl_alg_kind_t alg = k->kind == DP__POOL_MAX           ? dnnl_pooling_max
                          : k->kind == DP__POOL_AVG_EXCLUDE ? dnnl_pooling_avg_exclude_padding
                                                            : dnnl_pooling_avg_include_padding;
    dnnl_pooling_v2_desc_t fdesc, bdesc;
    DP_DNNL_CHECK(dnnl_pooling_v2_forward_desc_init(&fdesc, dnnl_forward_training, alg, x, y,
                                                    strides, kernel, dil, pad_l, pad_r));
    if (k->backward)
        DP_DNNL_CHECK(dnnl_pooling_v2_backward_desc_init(&bdesc, alg, x, y, strides, kernel, dil,
                                                         pad_l, pad_r));
    return dp__cpu_pass_pd(cpu, &fdesc, k->backward ? &bdesc : NULL, NULL, k->type, "pooling", pd);
}

/* The primitive for the pass over a's tensors in `type`, or NULL when
 * oneDNN has none for bf16 here. */
static int lookup(dp_device_t *dev, int backward, const dp__pool2d_args *a, dnnl_data_type_t type,
                  dp__cpu_primitive **out)
{
    pool_key k;
    memset(&k, 0, sizeof k);
    k.backward = backward;
    k.kind = a->kind;
    k.nhwc = a->x.nhwc;
    k.type = type;
    memcpy(k.x, a->x.shape, sizeof k.x);
    memcpy(k.y, a->y.shape, sizeof k.y);
    k.kernel_h = a->kernel_h;
    k.kernel_w = a->kernel_w;
    k.stride_h = a->stride_h;
    k.stride_w = a->stride_w;
    k.pad_h = a->pad_h;
    k.pad_w = a->pad_w;
    k.dilation_h = a->dilation_h > 1 ? a->dilation_h : 1;
    k.dilation_w = a->dilation_w > 1 ? a->dilation_w : 1;
    if (type == dnnl_bf16 && (k.dilation_h > 1 || k.dilation_w > 1)) {
        /* oneDNN runs dilated bf16 pooling in its reference kernel, whose
         * gradient was 5% off the f32 one where windows overlap
         * (test_bf16): pool f32 copies instead, rounded once. */
        *out = NULL;
        return 0;
    }
    DP_TRY(dp__cpu_primitive_get(dev->impl, &k, sizeof k, pool_pd, out));
    int64_t y_numel = k.y[0] * k.y[1] * k.y[2] * k.y[3];
    if (*out && (*out)->ws_bytes > (size_t)y_numel * 4) {
        DP_ERROR("oneDNN: pooling workspace of %zu bytes exceeds 4 per output", (*out)->ws_bytes);
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
static int as_f32_args(dp__cpu *cpu, const dp__pool2d_args *a, dp__pool2d_args *f, int inputs,
                       int outputs)
{
    *f = *a;
    dp__tdesc *t[4] = {&f->x, &f->y, &f->dx, &f->dy};
    return dp__cpu_descs_as_f32(cpu, t, 4, (unsigned)inputs, (unsigned)outputs);
}

static int run_forward(void *p, void *ctx)
{
    dp__pool2d_args *a = p;
    dp_device_t *dev = ctx;
    dp__cpu_primitive *c;
    DP_TRY(lookup(dev, 0, a, dp__cpu_dnnl_type(a->x.dtype), &c));
    if (!c) {
        dp__pool2d_args f;
        DP_TRY(as_f32_args(dev->impl, a, &f, 1, 2));
        DP_TRY(run_forward(&f, ctx));
        dp__cpu_bf16_from_f32(a->y.data, f.y.data, numel4(a->y.shape));
        return 0;
    }
    const dp__cpu_arg args[] = {{DNNL_ARG_SRC, SRC, a->x.data},
                                {DNNL_ARG_DST, DST, a->y.data},
                                {DNNL_ARG_WORKSPACE, DP__CPU_WORKSPACE, a->workspace}};
    return dp__cpu_primitive_run(dev->impl, c, args, 3);
}

/* dx = (mask > 0) * avg_pool_backward(dy) in one pass, for windows that
 * tile the input without overlap or padding (LeNet's 2x2, stride 2). Rows
 * and columns past the last window get zero.
 *
 * The work is one call per row of x: in NHWC a row is W positions of C
 * contiguous channels, and each of the Q windows along it hands its
 * gradient row g (C values of dy) to kw positions; in NCHW a row is W
 * values of one channel. The inner loops are branch-free over C (or W)
 * and cloned for AVX-512 and AVX2 (the library is built for baseline
 * x86-64), so the bf16 conversions run vectorised: the scalar loop took
 * a quarter of a bf16 LeNet step (bench/PROFILE_LENET.md). */

#define F32_SAME(v) (v)

/* ROW_NHWC(d, m, g): one NHWC row, Q windows of kw positions of C values;
 * ROW_NCHW: one NCHW row, g the channel's Q window gradients. */
#define MASKED_ROWS(NAME, T, LOAD, STORE)                                                          \
    DP_CPU_CLONES static void NAME##_row_nhwc(T *restrict d, const T *restrict m,                  \
                                              const T *restrict g, int64_t Q, int kw, int64_t C,   \
                                              float inv)                                           \
    {                                                                                              \
        for (int64_t q = 0; q < Q; q++, g += C)                                                    \
            for (int j = 0; j < kw; j++, d += C, m += C)                                           \
                _Pragma("omp simd") for (int64_t c = 0; c < C; c++)                                \
                {                                                                                  \
                    T v = STORE(LOAD(g[c]) * inv);                                                 \
                    d[c] = LOAD(m[c]) > 0.0f ? v : (T)0;                                           \
                }                                                                                  \
    }                                                                                              \
    DP_CPU_CLONES static void NAME##_row_nchw(T *restrict d, const T *restrict m,                  \
                                              const T *restrict g, int64_t Q, int kw, float inv)   \
    {                                                                                              \
        for (int64_t q = 0; q < Q; q++)                                                            \
            for (int j = 0; j < kw; j++) {                                                         \
                T v = STORE(LOAD(g[q]) * inv);                                                     \
                d[q * kw + j] = LOAD(m[q * kw + j]) > 0.0f ? v : (T)0;                             \
            }                                                                                      \
    }

MASKED_ROWS(masked_bf16, dp__bf16, dp__bf16_to_f32, dp__bf16_from_f32)
MASKED_ROWS(masked_f32, float, F32_SAME, F32_SAME)

static void avg_backward_masked(const dp__pool2d_args *a)
{
    int64_t N = a->x.shape[0], C = a->x.shape[1], H = a->x.shape[2], W = a->x.shape[3];
    int64_t P = a->y.shape[2], Q = a->y.shape[3];
    int kh = a->kernel_h, kw = a->kernel_w;
    float inv = 1.0f / (float)(kh * kw);
    bool bf16 = a->dx.dtype == DP_BF16, nhwc = a->x.nhwc;
    size_t es = bf16 ? sizeof(dp__bf16) : sizeof(float);
    char *dx = a->dx.data;
    const char *dy = a->dy.data, *mask = a->relu_mask;
    /* rows: (n, h) in NHWC, (n, c, h) in NCHW; row r's values start at
     * r * W * (nhwc ? C : 1), its windows' gradients at (r / H * P + h / kh)
     * * Q * (nhwc ? C : 1). */
    int64_t rows = nhwc ? N * H : N * C * H, width = nhwc ? W * C : W, gw = nhwc ? Q * C : Q;
    int64_t covered = Q * kw * (nhwc ? C : 1); /* the row's values under a window */
#pragma omp parallel for
    for (int64_t r = 0; r < rows; r++) {
        int64_t h = r % H, ph = h / kh;
        char *d = dx + (size_t)(r * width) * es;
        const char *m = mask + (size_t)(r * width) * es;
        if (ph >= P) {
            memset(d, 0, (size_t)width * es);
            continue;
        }
        const char *g = dy + (size_t)(((r / H) * P + ph) * gw) * es;
        if (bf16 && nhwc)
            masked_bf16_row_nhwc((dp__bf16 *)d, (const dp__bf16 *)m, (const dp__bf16 *)g, Q, kw, C,
                                 inv);
        else if (bf16)
            masked_bf16_row_nchw((dp__bf16 *)d, (const dp__bf16 *)m, (const dp__bf16 *)g, Q, kw,
                                 inv);
        else if (nhwc)
            masked_f32_row_nhwc((float *)d, (const float *)m, (const float *)g, Q, kw, C, inv);
        else
            masked_f32_row_nchw((float *)d, (const float *)m, (const float *)g, Q, kw, inv);
        if (covered < width)
            memset(d + (size_t)covered * es, 0, (size_t)(width - covered) * es);
    }
}

/* dx *= (mask > 0), elements of type T. */
#define APPLY_MASK(T, LOAD, STORE)                                                                 \
    do {                                                                                           \
        T *dx = a->dx.data;                                                                        \
        const T *mask = a->relu_mask;                                                              \
        _Pragma("omp parallel for simd") for (int64_t i = 0; i < n; i++) dx[i] =                   \
            LOAD(mask[i]) > 0.0f ? dx[i] : STORE(0.0f);                                            \
    } while (0)

static int run_primitive_backward(dp_device_t *dev, const dp__pool2d_args *a, dp__cpu_primitive *c);

static int run_backward(void *p, void *ctx)
{
    dp__pool2d_args *a = p;
    dp_device_t *dev = ctx;
    if (a->relu_mask && a->kind == DP__POOL_AVG && a->stride_h == a->kernel_h &&
        a->stride_w == a->kernel_w && a->pad_h == 0 && a->pad_w == 0) {
        avg_backward_masked(a);
        return 0;
    }
    dp__cpu_primitive *c;
    DP_TRY(lookup(dev, 1, a, dp__cpu_dnnl_type(a->dx.dtype), &c));
    if (!c) {
        dp__pool2d_args f;
        DP_TRY(as_f32_args(dev->impl, a, &f, 8, 4));
        f.relu_mask = NULL; /* applied below, on a's own tensors */
        DP_TRY(run_backward(&f, ctx));
        dp__cpu_bf16_from_f32(a->dx.data, f.dx.data, numel4(a->dx.shape));
    } else {
        DP_TRY(run_primitive_backward(dev, a, c));
    }
    if (a->relu_mask) {
        int64_t n = numel4(a->x.shape);
        if (a->dx.dtype == DP_BF16)
            APPLY_MASK(dp__bf16, dp__bf16_to_f32, dp__bf16_from_f32);
        else
            APPLY_MASK(float, F32_SAME, F32_SAME);
    }
    return 0;
}

static int run_primitive_backward(dp_device_t *dev, const dp__pool2d_args *a, dp__cpu_primitive *c)
{
    const dp__cpu_arg args[] = {{DNNL_ARG_DIFF_DST, DST, a->dy.data},
                                {DNNL_ARG_DIFF_SRC, SRC, a->dx.data},
                                {DNNL_ARG_WORKSPACE, DP__CPU_WORKSPACE, a->workspace}};
    return dp__cpu_primitive_run(dev->impl, c, args, 3);
}

DP__CPU_ENTRY(pool2d_forward, dp__pool2d_args, run_forward)
DP__CPU_ENTRY(pool2d_backward, dp__pool2d_args, run_backward)
