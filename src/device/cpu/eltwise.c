/* Elementwise kernels and layout copies on the CPU: plain loops that the
 * compiler vectorises, spread over the worker's OpenMP team when large. */
#include "device/cpu/cpu.h"

#define PAR_MIN 32768

static int run_eltwise(void *p, void *ctx)
{
    dp__eltwise_args *a = p;
    (void)ctx;
    const float *x = a->a, *y = a->b;
    float *out = a->out, alpha = a->alpha;
    int64_t n = a->n;
    switch (a->op) {
    case DP__ELT_RELU:
#pragma omp parallel for simd if (n > PAR_MIN)
        for (int64_t i = 0; i < n; i++)
            out[i] = x[i] > 0.0f ? x[i] : 0.0f;
        break;
    case DP__ELT_RELU_BACKWARD:
#pragma omp parallel for simd if (n > PAR_MIN)
        for (int64_t i = 0; i < n; i++)
            out[i] = y[i] > 0.0f ? x[i] : 0.0f;
        break;
    case DP__ELT_ADD:
#pragma omp parallel for simd if (n > PAR_MIN)
        for (int64_t i = 0; i < n; i++)
            out[i] = x[i] + y[i];
        break;
    case DP__ELT_ACCUMULATE:
#pragma omp parallel for simd if (n > PAR_MIN)
        for (int64_t i = 0; i < n; i++)
            out[i] += x[i];
        break;
    case DP__ELT_SCALE:
#pragma omp parallel for simd if (n > PAR_MIN)
        for (int64_t i = 0; i < n; i++)
            out[i] = alpha * x[i];
        break;
    case DP__ELT_COPY:
#pragma omp parallel for simd if (n > PAR_MIN)
        for (int64_t i = 0; i < n; i++)
            out[i] = x[i];
        break;
    }
    return 0;
}

int dp__cpu_eltwise(dp_device_t *dev, const dp__eltwise_args *a)
{
    return dp__cpu_push(dev, run_eltwise, a, sizeof *a);
}

static int run_relayout(void *p, void *ctx)
{
    dp__relayout_args *a = p;
    (void)ctx;
    const float *src = a->src.data;
    float *dst = a->dst.data;
    int64_t N = a->src.shape[0], C = a->src.shape[1], H = a->src.shape[2], W = a->src.shape[3];
    int64_t HW = H * W;
    if (a->src.nhwc) {
#pragma omp parallel for if (N * C * HW > PAR_MIN)
        for (int64_t n = 0; n < N; n++)
            for (int64_t c = 0; c < C; c++)
                for (int64_t i = 0; i < HW; i++)
                    dst[(n * C + c) * HW + i] = src[(n * HW + i) * C + c];
    } else {
#pragma omp parallel for if (N * C * HW > PAR_MIN)
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < HW; i++)
                for (int64_t c = 0; c < C; c++)
                    dst[(n * HW + i) * C + c] = src[(n * C + c) * HW + i];
    }
    return 0;
}

int dp__cpu_relayout(dp_device_t *dev, const dp__relayout_args *a)
{
    DP_ASSERT(a->src.ndim == 4 && a->src.nhwc != a->dst.nhwc);
    return dp__cpu_push(dev, run_relayout, a, sizeof *a);
}
