/* Counter-based RNG: value(seed, stream, index) = mix(seed, stream, index).
 * The mixer is SplitMix64's finaliser applied twice over the three words,
 * which passes BigCrush as a counter-based generator and costs a few
 * multiplications; that is plenty for weight init and shuffling. */
#include "core/internal.h"
#include "core/rng_mix.h"

#include <math.h>

void dp_rng_init(dp_rng *rng, uint64_t seed, uint64_t stream)
{
    rng->seed = seed;
    rng->stream = stream;
    rng->counter = 0;
}

uint64_t dp_rng_u64(dp_rng *rng)
{
    return dp__rng_bits(dp__rng_key(rng->seed, rng->stream), rng->counter++);
}

float dp_rng_uniform(dp_rng *rng)
{
    /* 24 random bits: every value is exactly representable in float. */
    return (float)(dp_rng_u64(rng) >> 40) * (1.0f / 16777216.0f);
}

float dp_rng_normal(dp_rng *rng)
{
    double u1 = ((double)(dp_rng_u64(rng) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    double u2 = (double)(dp_rng_u64(rng) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

uint64_t dp_rng_below(dp_rng *rng, uint64_t n)
{
    /* Lemire's multiply-shift with rejection: unbiased. */
    DP_ASSERT(n > 0);
    for (;;) {
        uint64_t x = dp_rng_u64(rng);
        __uint128_t m = (__uint128_t)x * n;
        uint64_t low = (uint64_t)m;
        if (low >= n || low >= (uint64_t)(-n) % n)
            return (uint64_t)(m >> 64);
    }
}
