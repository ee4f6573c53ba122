/* The log-sum-exp of one row of logits, shared by the cross-entropy kernels
 * of both backends (cpu/loss.c, cuda/loss.cu) so that they compute it the
 * same way. Valid C and CUDA: a host and device function under nvcc. */
#ifndef DP_DEVICE_LOGSUMEXP_H
#define DP_DEVICE_LOGSUMEXP_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define DP__HOST_DEVICE __host__ __device__
#else
#define DP__HOST_DEVICE
#endif

/* log sum_j exp(z[j]) over z[0..k), k >= 1: the row's max m plus the log
 * of sum exp(z[j] - m) summed in double, which neither overflows nor loses
 * the small terms of a long row. */
static inline DP__HOST_DEVICE double dp__row_logsumexp(const float *z, int64_t k)
{
    float m = z[0];
    for (int64_t j = 1; j < k; j++)
        m = z[j] > m ? z[j] : m;
    double s = 0.0;
    for (int64_t j = 0; j < k; j++)
        s += exp((double)(z[j] - m));
    return (double)m + log(s);
}

/* One row's cross-entropy against label y with label smoothing eps, as
 * torch.nn.CrossEntropyLoss(label_smoothing=eps): the target is
 * (1 - eps) on y plus eps / k on every class, so the loss is
 * lse - (1 - eps) z[y] - (eps / k) sum_j z[j]. eps = 0 is lse - z[y]
 * exactly. */
static inline DP__HOST_DEVICE double dp__row_xent(const float *z, int64_t k, int32_t y, float eps)
{
    double lse = dp__row_logsumexp(z, k);
    if (eps == 0.0f)
        return lse - (double)z[y];
    double sum = 0.0;
    for (int64_t j = 0; j < k; j++)
        sum += (double)z[j];
    return lse - (1.0 - (double)eps) * (double)z[y] - (double)eps / (double)k * sum;
}

#endif
