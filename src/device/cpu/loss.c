/* Softmax cross-entropy and argmax accuracy on the CPU. The loss is summed in
 * double so that a sum over a large batch does not lose small terms. */
#include "device/cpu/cpu.h"
#include "device/logsumexp.h"

#include <math.h>

static int run_xent_forward(void *p, void *ctx)
{
    dp__xent_args *a = p;
    (void)ctx;
    double total = 0.0;
    for (int64_t i = 0; i < a->n; i++) {
        const float *z = a->logits + i * a->k;
        int32_t y = a->labels[i];
        if (y < 0 || y >= a->k) {
            DP_ERROR("cross_entropy: label %d of row %lld is outside 0..%lld", y, (long long)i,
                     (long long)a->k - 1);
            return DP_EINVAL;
        }
        double term = dp__row_xent(z, a->k, y, a->smoothing);
        if (a->per_row)
            a->loss[i] = (float)term;
        total += term;
    }
    if (a->per_row)
        return 0;
    if (a->mean && a->n > 0)
        total /= (double)a->n;
    a->loss[0] = (float)total;
    return 0;
}

int dp__cpu_cross_entropy_forward(dp_device_t *dev, const dp__xent_args *a)
{
    return dp__cpu_push(dev, run_xent_forward, a, sizeof *a);
}

static int run_xent_backward(void *p, void *ctx)
{
    dp__xent_args *a = p;
    (void)ctx;
    float g = a->per_row ? 0.0f : a->dloss[0];
    if (a->mean && a->n > 0)
        g /= (float)a->n;
    for (int64_t i = 0; i < a->n; i++) {
        const float *z = a->logits + i * a->k;
        float *dz = a->dlogits + i * a->k;
        if (a->per_row)
            g = a->dloss[i];
        /* The forward reported a bad label already; a backward that runs
         * after it (the commands after a failed one still run) must not
         * write outside the row. */
        int32_t y = a->labels[i];
        if (y < 0 || (int64_t)y >= a->k) {
            DP_ERROR("cross_entropy backward: label %d of row %lld is outside 0..%lld", y,
                     (long long)i, (long long)a->k - 1);
            return DP_EINVAL;
        }
        double lse = dp__row_logsumexp(z, a->k);
        float spread = a->smoothing / (float)a->k;
        for (int64_t j = 0; j < a->k; j++)
            dz[j] = g * ((float)exp((double)z[j] - lse) - spread);
        dz[y] -= g * (1.0f - a->smoothing);
    }
    return 0;
}

int dp__cpu_cross_entropy_backward(dp_device_t *dev, const dp__xent_args *a)
{
    return dp__cpu_push(dev, run_xent_backward, a, sizeof *a);
}

static int run_accuracy(void *p, void *ctx)
{
    dp__accuracy_args *a = p;
    (void)ctx;
    int64_t correct = 0, top5 = 0;
    for (int64_t i = 0; i < a->n; i++) {
        const float *z = a->logits + i * a->k;
        int64_t best = 0;
        for (int64_t j = 1; j < a->k; j++)
            if (z[j] > z[best])
                best = j;
        int32_t y = a->labels[i];
        if ((int64_t)y >= a->k || y < 0) {
            DP_ERROR("accuracy: label %d of row %lld is outside 0..%lld", y, (long long)i,
                     (long long)a->k - 1);
            return DP_EINVAL;
        }
        correct += best == y;
        if (a->top5) {
            int64_t above = 0;
            for (int64_t j = 0; j < a->k; j++)
                above += z[j] > z[y];
            top5 += above < 5;
        }
        if (a->confusion)
            a->confusion[(int64_t)y * a->k + best] += 1.0f;
    }
    a->correct[0] += (float)correct;
    if (a->top5)
        a->top5[0] += (float)top5;
    return 0;
}

int dp__cpu_accuracy(dp_device_t *dev, const dp__accuracy_args *a)
{
    return dp__cpu_push(dev, run_accuracy, a, sizeof *a);
}
