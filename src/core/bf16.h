/* bfloat16: the top 16 bits of an IEEE float32 (sign, 8 exponent bits, 7
 * stored significand bits, so 8 bits of precision: unit roundoff
 * u = 2^-8). Conversions round to nearest, ties to even, as oneDNN's
 * reorders and AVX512-BF16's vcvtneps2bf16 do, so the reference bf16 path
 * and the native one round every value the same way. A NaN stays a quiet
 * NaN.
 *
 * Branch-free, so that loops over them vectorise. */
#ifndef DP_CORE_BF16_H
#define DP_CORE_BF16_H

#include <stdint.h>
#include <string.h>

typedef uint16_t dp__bf16;

static inline float dp__bf16_to_f32(dp__bf16 h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline dp__bf16 dp__bf16_from_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t nan = (u >> 16) | 0x40u; /* keep it a (quiet) NaN */
    return (dp__bf16)(((u & 0x7fffffffu) > 0x7f800000u) ? nan : rounded);
}

/* f rounded to the nearest bf16, as a float: the reference path's operands. */
static inline float dp__bf16_round(float f)
{
    return dp__bf16_to_f32(dp__bf16_from_f32(f));
}

#endif
