/* Inverted dropout on the CPU (dp__dropout_args): a loop over the samples
 * of the batch, each element's keep decision drawn from the counter-based
 * RNG at its global index, so that no mask is stored and the backward pass
 * regenerates it. Samples are spread over the worker's OpenMP team. */
#include "device/cpu/cpu.h"

#include "core/rng_mix.h"

static int run_dropout(void *p, void *ctx)
{
    dp__dropout_args *a = p;
    (void)ctx;
    const float *x = a->x;
    float *y = a->y;
    int64_t S = a->sample_size, C = a->C, HW = a->HW;
    uint64_t key = a->key;
    uint32_t threshold = a->threshold;
    float scale = a->scale;
#pragma omp parallel for if (a->samples * S > 32768)
    for (int64_t n = 0; n < a->samples; n++) {
        uint64_t base = (uint64_t)(a->sample_offset + n) * (uint64_t)S;
        const float *xs = x + n * S;
        float *ys = y + n * S;
        for (int64_t j = 0; j < S; j++) {
            /* j is the physical offset; i the logical (C, H, W) index */
            int64_t i = a->nhwc ? (j % C) * HW + j / C : j;
            uint32_t bits = (uint32_t)(dp__rng_bits(key, base + (uint64_t)i) >> 40);
            ys[j] = bits >= threshold ? xs[j] * scale : 0.0f;
        }
    }
    return 0;
}

int dp__cpu_dropout(dp_device_t *dev, const dp__dropout_args *a)
{
    return dp__cpu_push(dev, run_dropout, a, sizeof *a);
}
