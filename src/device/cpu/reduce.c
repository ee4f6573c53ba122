/* Reductions on the CPU (src/ops/reduce.c): sum and mean over one axis of
 * x seen as (outer, len, inner), their backward, and argmax. Sums run in
 * double; an output whose len exceeds DP__REDUCE_CHUNK is summed chunk by
 * chunk (the chunks in parallel, their sums added in order), others each
 * by one thread in order, so no result depends on the thread count. */
#include "core/bf16.h"
#include "device/cpu/cpu.h"

#include <math.h>

/* Elements of work below which a loop stays on one thread. */
#define PAR_MIN 32768

static double f32_sum(const float *x, int64_t len, int64_t inner)
{
    double s = 0.0;
    for (int64_t l = 0; l < len; l++)
        s += (double)x[l * inner];
    return s;
}

static int64_t i32_sum(const int32_t *x, int64_t len, int64_t inner)
{
    int64_t s = 0;
    for (int64_t l = 0; l < len; l++)
        s += x[l * inner];
    return s;
}

/* The sum of len > DP__REDUCE_CHUNK elements, inner apart, chunk by
 * chunk: part (one double a chunk) holds the chunks' sums. */
static double f32_chunked(const float *x, int64_t len, int64_t inner, double *part)
{
    int64_t chunks = (len + DP__REDUCE_CHUNK - 1) / DP__REDUCE_CHUNK;
#pragma omp parallel for
    for (int64_t c = 0; c < chunks; c++) {
        int64_t l0 = c * DP__REDUCE_CHUNK;
        part[c] = f32_sum(x + l0 * inner, DP_MIN(DP__REDUCE_CHUNK, len - l0), inner);
    }
    double s = 0.0;
    for (int64_t c = 0; c < chunks; c++)
        s += part[c];
    return s;
}

static int run_forward(void *p, void *ctx)
{
    const dp__reduce_args *a = p;
    (void)ctx;
    int64_t outs = a->outer * a->inner, len = a->len, inner = a->inner;
    if (a->dtype == DP_I32) {
        const int32_t *x = a->x;
        int32_t *y = a->y;
#pragma omp parallel for if (outs * len > PAR_MIN)
        for (int64_t k = 0; k < outs; k++) {
            int64_t o = k / inner, i = k % inner;
            /* wraps as int32 arithmetic would: through uint32_t */
            y[k] = (int32_t)(uint32_t)i32_sum(x + o * len * inner + i, len, inner);
        }
        return 0;
    }
    DP_ASSERT(a->dtype == DP_F32);
    const float *x = a->x;
    float *y = a->y;
    if (len > DP__REDUCE_CHUNK) { /* the chunks of each output in parallel */
        double *part = dp__malloc((size_t)(len / DP__REDUCE_CHUNK + 1) * sizeof *part);
        if (!part)
            return DP_ENOMEM;
        for (int64_t k = 0; k < outs; k++) {
            int64_t o = k / inner, i = k % inner;
            y[k] = (float)(f32_chunked(x + o * len * inner + i, len, inner, part) * a->scale);
        }
        dp__free(part);
        return 0;
    }
#pragma omp parallel for if (outs * len > PAR_MIN)
    for (int64_t k = 0; k < outs; k++) {
        int64_t o = k / inner, i = k % inner;
        y[k] = (float)(f32_sum(x + o * len * inner + i, len, inner) * a->scale);
    }
    return 0;
}

static int run_backward(void *p, void *ctx)
{
    const dp__reduce_args *a = p;
    (void)ctx;
    const float *dy = a->dy;
    float *dx = a->dx;
    int64_t len = a->len, inner = a->inner, n = a->outer * len * inner;
    float scale = (float)a->scale;
#pragma omp parallel for if (n > PAR_MIN)
    for (int64_t j = 0; j < n; j++) {
        int64_t o = j / (len * inner), i = j % inner;
        dx[j] = dy[o * inner + i] * scale;
    }
    return 0;
}

DP__CPU_ENTRY(reduce_forward, dp__reduce_args, run_forward)
DP__CPU_ENTRY(reduce_backward, dp__reduce_args, run_backward)

/* x[j] as a double (exact for f32, bf16 and i32). */
static double load(const void *x, dp_dtype dtype, int64_t j)
{
    if (dtype == DP_I32)
        return ((const int32_t *)x)[j];
    if (dtype == DP_BF16)
        return dp__bf16_to_f32(((const dp__bf16 *)x)[j]);
    return ((const float *)x)[j];
}

static int run_argmax(void *p, void *ctx)
{
    const dp__reduce_args *a = p;
    (void)ctx;
    int64_t outs = a->outer * a->inner, len = a->len, inner = a->inner;
    int32_t *y = a->y;
#pragma omp parallel for if (outs * len > PAR_MIN)
    for (int64_t k = 0; k < outs; k++) {
        int64_t base = (k / inner) * len * inner + k % inner, best = 0;
        double best_v = load(a->x, a->dtype, base);
        for (int64_t l = 1; l < len && !isnan(best_v); l++) {
            double v = load(a->x, a->dtype, base + l * inner);
            if (v > best_v || isnan(v)) {
                best = l;
                best_v = v;
            }
        }
        y[k] = (int32_t)best;
    }
    return 0;
}

DP__CPU_ENTRY(argmax, dp__reduce_args, run_argmax)

static int run_eq(void *p, void *ctx)
{
    const dp__eq_args *a = p;
    (void)ctx;
    int64_t n = a->n;
    if (a->a_dtype == DP_I32 && a->b_dtype == DP_I32) {
        const int32_t *x = a->a, *z = a->b;
#pragma omp parallel for simd if (n > PAR_MIN)
        for (int64_t i = 0; i < n; i++)
            a->y[i] = x[i] == z[a->b_one ? 0 : i];
        return 0;
    }
    /* as float32: an int32 operand converted as torch promotes it */
#pragma omp parallel for if (n > PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        a->y[i] =
            (float)load(a->a, a->a_dtype, i) == (float)load(a->b, a->b_dtype, a->b_one ? 0 : i);
    return 0;
}

DP__CPU_ENTRY(eq, dp__eq_args, run_eq)
