/* An optimizer's update over a whole parameter buffer on the CPU (SGD,
 * Adam, AdamW: kernels.h gives the formulas), the clipping factor of the
 * gradient's global norm, and the check for non-finite gradients that runs
 * before them. */
#include "device/cpu/cpu.h"

#include <math.h>
#include <stdlib.h>

static void sgd(const dp__optimizer_args *a, float scale)
{
    float *w = a->params, *v = a->state0;
    const float *g = a->grads;
    float lr = a->lr, mom = a->momentum, wd = a->weight_decay;
    int64_t n = a->n;
    if (v && mom != 0.0f && a->nesterov) {
#pragma omp parallel for simd if (n > 65536)
        for (int64_t i = 0; i < n; i++) {
            float d = g[i] * scale + wd * w[i];
            v[i] = mom * v[i] + d;
            w[i] -= lr * (d + mom * v[i]);
        }
    } else if (v && mom != 0.0f) {
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
}

static void adam(const dp__optimizer_args *a, float scale)
{
    float *w = a->params, *m = a->state0, *s = a->state1;
    const float *g = a->grads;
    float b1 = a->beta1, b2 = a->beta2, eps = a->eps, sqrt_bias2 = a->sqrt_bias2;
    float step = a->lr / a->bias1;
    float wd = a->kind == DP__OPTIM_ADAM ? a->weight_decay : 0.0f;
    float decay = a->kind == DP__OPTIM_ADAMW ? 1.0f - a->lr * a->weight_decay : 1.0f;
    int64_t n = a->n;
#pragma omp parallel for simd if (n > 65536)
    for (int64_t i = 0; i < n; i++) {
        float p = w[i] * decay;
        float d = g[i] * scale + wd * p;
        m[i] += (1.0f - b1) * (d - m[i]);
        s[i] = b2 * s[i] + (1.0f - b2) * d * d;
        w[i] = p - step * (m[i] / (sqrtf(s[i]) / sqrt_bias2 + eps));
    }
}

static int run_optimizer_step(void *p, void *ctx)
{
    dp__optimizer_args *a = p;
    (void)ctx;
    /* A gradient with a NaN or an Inf would poison every weight it reaches:
     * the step is dropped, as PyTorch's GradScaler drops it. */
    if (a->first_nonfinite && *a->first_nonfinite < a->n)
        return 0;
    float scale = a->grad_scale * (a->clip ? a->clip[0] : 1.0f);
    if (a->kind == DP__OPTIM_SGD)
        sgd(a, scale);
    else
        adam(a, scale);
    return 0;
}

int dp__cpu_optimizer_step(dp_device_t *dev, const dp__optimizer_args *a)
{
    return dp__cpu_push(dev, run_optimizer_step, a, sizeof *a);
}

/* The squares summed in double, in blocks summed in order: the same norm
 * whatever the thread count. */
#define NORM_BLOCK 65536

static int run_grad_clip(void *p, void *ctx)
{
    dp__grad_clip_args *a = p;
    (void)ctx;
    const float *g = a->grads;
    int64_t n = a->n, blocks = (n + NORM_BLOCK - 1) / NORM_BLOCK;
    double *partial = malloc((size_t)(blocks > 0 ? blocks : 1) * sizeof *partial);
    if (!partial)
        return DP_ENOMEM;
#pragma omp parallel for if (n > 262144)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t lo = b * NORM_BLOCK, hi = lo + NORM_BLOCK < n ? lo + NORM_BLOCK : n;
        double acc = 0.0;
#pragma omp simd reduction(+ : acc)
        for (int64_t i = lo; i < hi; i++) {
            float x = g[i] * a->grad_scale;
            acc += (double)x * (double)x;
        }
        partial[b] = acc;
    }
    double sum = 0.0;
    for (int64_t b = 0; b < blocks; b++)
        sum += partial[b];
    free(partial);
    float norm = (float)sqrt(sum);
    float coef = a->max_norm / (norm + 1e-6f);
    a->out[0] = coef < 1.0f ? coef : 1.0f;
    a->out[1] = norm;
    return 0;
}

int dp__cpu_grad_clip(dp_device_t *dev, const dp__grad_clip_args *a)
{
    return dp__cpu_push(dev, run_grad_clip, a, sizeof *a);
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
