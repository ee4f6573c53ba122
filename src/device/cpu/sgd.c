/* The SGD update over a whole parameter buffer on the CPU, and the check
 * for non-finite gradients that runs before it. */
#include "device/cpu/cpu.h"

#include <math.h>

static int run_sgd(void *p, void *ctx)
{
    dp__sgd_args *a = p;
    (void)ctx;
    float *w = a->params, *v = a->velocity;
    const float *g = a->grads;
    float lr = a->lr, scale = a->grad_scale, mom = a->momentum, wd = a->weight_decay;
    int64_t n = a->n;
    /* A gradient with a NaN or an Inf would poison every weight it reaches:
     * the step is dropped, as PyTorch's GradScaler drops it. */
    if (a->first_nonfinite && *a->first_nonfinite < n)
        return 0;
    if (v && mom != 0.0f) {
#pragma omp parallel for simd if (n > 65536)
        for (int64_t i = 0; i < n; i++) {
            float d = g[i] * scale + wd * w[i];
            v[i] = mom * v[i] + d;
            w[i] -= lr * v[i];
        }
    } else {
#pragma omp parallel for simd if (n > 65536)
        for (int64_t i = 0; i < n; i++)
            w[i] -= lr * (g[i] * scale + wd * w[i]);
    }
    return 0;
}

int dp__cpu_sgd(dp_device_t *dev, const dp__sgd_args *a)
{
    return dp__cpu_push(dev, run_sgd, a, sizeof *a);
}

/* Blocks of BLOCK elements are tested with one sum each (x - x is 0 for a
 * finite x and NaN for NaN or Inf, and a sum with a NaN is NaN), which the
 * compiler vectorises; only a block that fails is searched element by
 * element, so a finite buffer costs one streaming pass. */
#define BLOCK 4096

static int run_check_finite(void *p, void *ctx)
{
    dp__check_finite_args *a = p;
    (void)ctx;
    const float *x = a->data;
    int64_t n = a->n, blocks = (n + BLOCK - 1) / BLOCK, first_bad_block = blocks;
#pragma omp parallel for if (n > 262144)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t lo = b * BLOCK, hi = lo + BLOCK < n ? lo + BLOCK : n;
        float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
        for (int64_t i = lo; i < hi; i++)
            acc += x[i] - x[i];
        if (acc != 0.0f) {
#pragma omp critical(dp_check_finite)
            if (b < first_bad_block)
                first_bad_block = b;
        }
    }
    int64_t first = n;
    for (int64_t i = first_bad_block * BLOCK; i < n; i++) {
        if (!isfinite(x[i])) {
            first = i;
            break;
        }
    }
    *a->first_nonfinite = first;
    return 0;
}

int dp__cpu_check_finite(dp_device_t *dev, const dp__check_finite_args *a)
{
    return dp__cpu_push(dev, run_check_finite, a, sizeof *a);
}
