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

#endif
