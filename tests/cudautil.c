/* Helpers of the CUDA tests (see cudautil.h). */
#include "cudautil.h"

#include "dp/dp.h"

#include <math.h>
#include <stdio.h>

const char *no_gpu_reason(void)
{
    static char why[96];
    if (!dp_cuda_built())
        return "CPU-only build";
    if (dp_cuda_device_count() == 0) {
        snprintf(why, sizeof why, "cudaGetDeviceCount = 0");
        return why;
    }
    return NULL;
}

/* Deterministic values in [-1, 1). */
void fill_random(float *v, int64_t n, uint64_t seed)
{
    uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = (float)((double)(s >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
    }
}

/* max |a - b| / max |b|, the relative error in the max norm. */
double rel_error(const float *a, const float *b, int64_t n)
{
    double diff = 0, ref = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        diff = d > diff ? d : diff;
        ref = fabs((double)b[i]) > ref ? fabs((double)b[i]) : ref;
    }
    return diff / ref;
}
