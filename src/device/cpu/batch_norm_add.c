/* Batch normalisation, a residual sum and a ReLU in one sweep on the CPU:
 * y = gamma (x - mean) / sqrt(var + eps) + beta + residual, then max(y, 0)
 * when relu is set: ResNet's block tail (bn2 -> + shortcut -> ReLU). x, residual and y (N, C, H, W)
 * share one layout (NHWC after a convolution, or NCHW) and one dtype (f32
 * or bf16); gamma, beta and the statistics are f32 (C).
 *
 * Why its own loop and not oneDNN: oneDNN 2.6's batch normalization fuses a
 * ReLU (dnnl_fuse_norm_relu) but not the addend before it (the
 * fuse_norm_add_relu flag arrived in a later oneDNN), so normalising there
 * and adding after writes y and reads it back: one sweep more over each
 * activation in bf16, two in f32 (the sum of oneDNN's f32 output and the
 * shortcut). Here x and residual are read once and y written once, the sum
 * kept in float between them (unrounded in bf16, where the unfused path
 * rounds the batch norm's output to bf16 before the sum).
 *
 * Training takes the batch statistics first, in double
 * (batch_norm_train.c: dp__cpu_bn_statistics, which also moves the running
 * ones); eval normalises with the running statistics. The loop is compiled
 * for AVX-512, AVX2 and plain x86-64, the CPU picking at load time. */
#include "core/bf16.h"
#include "device/cpu/clones.h"
#include "device/cpu/cpu.h"

#include <math.h>
#include <string.h>

/* Rows of the sweep: N H W rows of C channels in NHWC, N C rows of HW
 * positions of one channel in NCHW. Per channel: mean, scale = gamma /
 * sqrt(var + eps), beta. */
typedef struct apply_pass {
    int64_t N, C, HW;
    bool nhwc, relu;
    const void *x, *r;
    void *y;
    const float *mean, *scale, *beta;
} apply_pass;

enum { PAR_MIN = 32768 };

#define F32_LOAD(v) (v)
#define F32_STORE(v) (v)

/* Rows [row0, row1) of the sweep. The threads split the rows outside
 * (over_rows): a function GCC outlines for an OpenMP region does not
 * inherit the clones' targets, so the vector loop lives in the clone. */
#define APPLY_KERNEL(NAME, T, LOAD, STORE)                                                         \
    DP_CPU_CLONES static void NAME(const apply_pass *p, int64_t row0, int64_t row1)                \
    {                                                                                              \
        const T *x = p->x, *r = p->r;                                                              \
        T *y = p->y;                                                                               \
        const float *mean = p->mean, *scale = p->scale, *beta = p->beta;                           \
        int64_t C = p->C, HW = p->HW;                                                              \
        bool relu = p->relu;                                                                       \
        for (int64_t row = row0; row < row1; row++) {                                              \
            if (p->nhwc) {                                                                         \
                int64_t base = row * C;                                                            \
                _Pragma("omp simd") for (int64_t c = 0; c < C; c++)                                \
                {                                                                                  \
                    float v =                                                                      \
                        (LOAD(x[base + c]) - mean[c]) * scale[c] + beta[c] + LOAD(r[base + c]);    \
                    y[base + c] = STORE(relu && !(v > 0.0f) ? 0.0f : v);                           \
                }                                                                                  \
            } else {                                                                               \
                int64_t c = row % C, base = row * HW;                                              \
                float m = mean[c], s = scale[c], b = beta[c];                                      \
                _Pragma("omp simd") for (int64_t k = base; k < base + HW; k++)                     \
                {                                                                                  \
                    float v = (LOAD(x[k]) - m) * s + b + LOAD(r[k]);                               \
                    y[k] = STORE(relu && !(v > 0.0f) ? 0.0f : v);                                  \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

APPLY_KERNEL(apply_f32, float, F32_LOAD, F32_STORE)
APPLY_KERNEL(apply_bf16, dp__bf16, dp__bf16_to_f32, dp__bf16_from_f32)

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&                             \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#include <immintrin.h>
#define HAVE_BF16_VECTOR 1
/* The NHWC bf16 rows with AVX512-BF16's rounding (vcvtneps2bf16, as
 * oneDNN's kernels round; round to nearest even like dp__bf16_from_f32,
 * which the C clones take, NaN kept a NaN; it flushes values below
 * 2^-126 to zero, as oneDNN's do): the conversions in C made this sweep
 * slower than oneDNN's normalise and its add together. 16 channels a
 * vector, the rest of a row in C. */
__attribute__((target("avx512f,avx512bw,avx512bf16"))) static void
apply_bf16_nhwc_avx512bf16(const apply_pass *p, int64_t row0, int64_t row1)
{
    const dp__bf16 *x = p->x, *r = p->r;
    dp__bf16 *y = p->y;
    int64_t C = p->C;
    __m512 zero = _mm512_setzero_ps();
    for (int64_t row = row0; row < row1; row++) {
        int64_t base = row * C, c = 0;
        for (; c + 16 <= C; c += 16) {
            __m512 xv = _mm512_castsi512_ps(_mm512_slli_epi32(
                _mm512_cvtepu16_epi32(_mm256_loadu_si256((const void *)(x + base + c))), 16));
            __m512 rv = _mm512_castsi512_ps(_mm512_slli_epi32(
                _mm512_cvtepu16_epi32(_mm256_loadu_si256((const void *)(r + base + c))), 16));
            __m512 v = _mm512_sub_ps(xv, _mm512_loadu_ps(p->mean + c));
            v = _mm512_mul_ps(v, _mm512_loadu_ps(p->scale + c));
            v = _mm512_add_ps(v, _mm512_loadu_ps(p->beta + c));
            v = _mm512_add_ps(v, rv);
            if (p->relu) /* !(v > 0) -> 0, NaN included, as the C loop */
                v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, zero, _CMP_GT_OQ), v);
            __m256bh h = _mm512_cvtneps_pbh(v);
            _mm256_storeu_si256((void *)(y + base + c), (__m256i)h);
        }
        for (; c < C; c++) {
            float v = (dp__bf16_to_f32(x[base + c]) - p->mean[c]) * p->scale[c] + p->beta[c] +
                      dp__bf16_to_f32(r[base + c]);
            y[base + c] = dp__bf16_from_f32(p->relu && !(v > 0.0f) ? 0.0f : v);
        }
    }
}
#endif

typedef void (*rows_fn)(const apply_pass *p, int64_t row0, int64_t row1);

/* fn over every row, in blocks of ROWS_PER_BLOCK spread over the kernel
 * threads. */
enum { ROWS_PER_BLOCK = 64 };

static void over_rows(const apply_pass *p, rows_fn fn)
{
    int64_t rows = p->nhwc ? p->N * p->HW : p->N * p->C;
    int64_t nb = (rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK;
#pragma omp parallel for if (p->N * p->C * p->HW > PAR_MIN)
    for (int64_t b = 0; b < nb; b++) {
        int64_t r0 = b * ROWS_PER_BLOCK;
        fn(p, r0, r0 + ROWS_PER_BLOCK < rows ? r0 + ROWS_PER_BLOCK : rows);
    }
}

static int run_batch_norm_add(void *p, void *ctx)
{
    const dp__batch_norm_args *a = p;
    (void)ctx;
    int64_t C = a->x.shape[1];
    const float *mean = a->running_mean, *var = a->running_var;
    if (a->training) {
        DP_TRY(dp__cpu_bn_statistics(a));
        mean = a->save_mean;
        var = a->save_var;
    } else if (a->save_mean) {
        memcpy(a->save_mean, a->running_mean, (size_t)C * sizeof(float));
        memcpy(a->save_var, a->running_var, (size_t)C * sizeof(float));
    }
    float *scale = dp__malloc((size_t)C * sizeof *scale);
    if (!scale)
        return DP_ENOMEM;
    for (int64_t c = 0; c < C; c++)
        scale[c] = a->gamma[c] / sqrtf(var[c] + a->eps);
    apply_pass pass = {.N = a->x.shape[0],
                       .C = C,
                       .HW = a->x.shape[2] * a->x.shape[3],
                       .nhwc = a->x.nhwc && C > 1,
                       .relu = a->relu,
                       .x = a->x.data,
                       .r = a->residual.data,
                       .y = a->y.data,
                       .mean = mean,
                       .scale = scale,
                       .beta = a->beta};
    rows_fn fn = a->x.dtype == DP_BF16 ? apply_bf16 : apply_f32;
#ifdef HAVE_BF16_VECTOR
    if (a->x.dtype == DP_BF16 && pass.nhwc && __builtin_cpu_supports("avx512bf16"))
        fn = apply_bf16_nhwc_avx512bf16;
#endif
    over_rows(&pass, fn);
    dp__free(scale);
    return 0;
}

DP__CPU_ENTRY(batch_norm_add, dp__batch_norm_args, run_batch_norm_add)
