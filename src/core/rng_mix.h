/* The mixer of the counter-based RNG (rng.c), inline so that kernels (CPU
 * loops, and CUDA, where these are __host__ __device__) draw exactly the
 * numbers dp_rng_u64 gives: dp_rng_u64 of (seed, stream) at counter i is
 * dp__rng_bits(dp__rng_key(seed, stream), i). Valid C and CUDA C++. */
#ifndef DP_CORE_RNG_MIX_H
#define DP_CORE_RNG_MIX_H

#include <stdint.h>

#ifdef __CUDACC__
#define DP__RNG_FN static inline __host__ __device__
#else
#define DP__RNG_FN static inline
#endif

/* SplitMix64's finaliser. */
DP__RNG_FN uint64_t dp__mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The key of one (seed, stream): computed once, shared by every index. */
DP__RNG_FN uint64_t dp__rng_key(uint64_t seed, uint64_t stream)
{
    return dp__mix64(seed + 0x9e3779b97f4a7c15ULL * (stream + 1));
}

/* The 64 random bits at `counter` of the stream that `key` names. */
DP__RNG_FN uint64_t dp__rng_bits(uint64_t key, uint64_t counter)
{
    return dp__mix64(key ^ (counter * 0xd1b54a32d192ed03ULL + 0x632be59bd9b4e019ULL));
}

#endif
