/* Conversions between float32 and bfloat16 on the CPU, and the cast
 * kernels (float32 with bfloat16, and with int32). Plain loops over src/core/bf16.h's branch-free
 * conversions, which the compiler vectorises; the worker's OpenMP team shares them when they are
 * large. */
#include "core/bf16.h"
#include "device/cpu/cpu.h"
#include "device/int_convert.h"

#define PAR_MIN 65536

void dp__cpu_bf16_from_f32(void *dst, const float *src, int64_t n)
{
    dp__bf16 *d = dst;
#pragma omp parallel for simd if (n > PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        d[i] = dp__bf16_from_f32(src[i]);
}

void dp__cpu_f32_from_bf16(float *dst, const void *src, int64_t n)
{
    const dp__bf16 *s = src;
#pragma omp parallel for simd if (n > PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        dst[i] = dp__bf16_to_f32(s[i]);
}

void dp__cpu_round_bf16(float *dst, const float *src, int64_t n)
{
#pragma omp parallel for simd if (n > PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        dst[i] = dp__bf16_round(src[i]);
}

const float *dp__cpu_as_f32(dp__cpu *cpu, int slot, const dp__tdesc *t)
{
    if (t->dtype == DP_F32)
        return t->data;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    float *f = dp__cpu_scratch(cpu, slot, (size_t)n * sizeof *f);
    if (f)
        dp__cpu_f32_from_bf16(f, t->data, n);
    return f;
}

int dp__cpu_descs_as_f32(dp__cpu *cpu, dp__tdesc *const *t, int n, unsigned inputs,
                         unsigned outputs)
{
    for (int i = 0; i < n; i++) {
        if (!((inputs | outputs) & (1u << i)))
            continue;
        int64_t count = 1;
        for (int d = 0; d < t[i]->ndim; d++)
            count *= t[i]->shape[d];
        float *buf = dp__cpu_scratch(cpu, i, (size_t)count * sizeof(float));
        if (!buf)
            return DP_ENOMEM;
        if (inputs & (1u << i))
            dp__cpu_f32_from_bf16(buf, t[i]->data, count);
        t[i]->data = buf;
        t[i]->dtype = DP_F32;
    }
    return 0;
}

static int run_cast(void *p, void *ctx)
{
    dp__cast_args *a = p;
    (void)ctx;
    if (a->src_dtype == a->dst_dtype)
        memcpy(a->dst, a->src, (size_t)a->n * dp_dtype_size(a->src_dtype));
    else if (a->dst_dtype == DP_BF16)
        dp__cpu_bf16_from_f32(a->dst, a->src, a->n);
    else
        dp__cpu_f32_from_bf16(a->dst, a->src, a->n);
    return 0;
}

int dp__cpu_cast(dp_device_t *dev, const dp__cast_args *a)
{
    DP_ASSERT((a->src_dtype == DP_F32 || a->src_dtype == DP_BF16) &&
              (a->dst_dtype == DP_F32 || a->dst_dtype == DP_BF16));
    return dp__cpu_push(dev, run_cast, a, sizeof *a);
}

static int run_cast_int32(void *p, void *ctx)
{
    dp__cast_args *a = p;
    (void)ctx;
    int64_t n = a->n;
    if (a->src_dtype == a->dst_dtype) {
        memcpy(a->dst, a->src, (size_t)n * dp_dtype_size(a->src_dtype));
    } else if (a->dst_dtype == DP_I32) {
        const float *src = a->src;
        int32_t *dst = a->dst;
#pragma omp parallel for simd if (n > PAR_MIN)
        for (int64_t i = 0; i < n; i++)
            dst[i] = dp__i32_from_f32(src[i]);
    } else {
        const int32_t *src = a->src;
        float *dst = a->dst;
#pragma omp parallel for simd if (n > PAR_MIN)
        for (int64_t i = 0; i < n; i++)
            dst[i] = (float)src[i];
    }
    return 0;
}

int dp__cpu_cast_int32(dp_device_t *dev, const dp__cast_args *a)
{
    DP_ASSERT((a->src_dtype == DP_F32 || a->src_dtype == DP_I32) &&
              (a->dst_dtype == DP_F32 || a->dst_dtype == DP_I32));
    return dp__cpu_push(dev, run_cast_int32, a, sizeof *a);
}
