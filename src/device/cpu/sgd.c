/* The SGD update over a whole parameter buffer on the CPU. */
#include "device/cpu/cpu.h"

static int run_sgd(void *p, void *ctx)
{
    dp__sgd_args *a = p;
    (void)ctx;
    float *w = a->params, *v = a->velocity;
    const float *g = a->grads;
    float lr = a->lr, scale = a->grad_scale, mom = a->momentum, wd = a->weight_decay;
    int64_t n = a->n;
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
