/* One row of softmax or log-softmax (dp__softmax_args, device/kernels.h):
 * the C values x[0], x[stride], ... of one sample and position, forward and
 * backward, for the CUDA kernels and the CPU's log-softmax loops. The sum
 * of exponentials is taken in double, so that log-softmax near 0 (a
 * confident class: x - max - log sum, where the two nearly cancel) keeps
 * float32's accuracy. Valid C and CUDA: host and device functions under
 * nvcc. */
#ifndef DP_DEVICE_SOFTMAX_MATH_H
#define DP_DEVICE_SOFTMAX_MATH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define DP__SM_FN __host__ __device__
#else
#define DP__SM_FN
#endif

static inline DP__SM_FN void dp__softmax_row(const float *x, float *y, int64_t C, int64_t stride,
                                             bool log_)
{
    float m = x[0];
    for (int64_t c = 1; c < C; c++)
        m = x[c * stride] > m ? x[c * stride] : m;
    double s = 0.0;
    for (int64_t c = 0; c < C; c++)
        s += exp((double)(x[c * stride] - m));
    double lse = log(s);
    for (int64_t c = 0; c < C; c++) {
        double z = (double)(x[c * stride] - m);
        y[c * stride] = (float)(log_ ? z - lse : exp(z - lse));
    }
}

/* dx = y (dy - sum dy y), or for log-softmax dx = dy - exp(y) sum dy. */
static inline DP__SM_FN void dp__softmax_row_backward(const float *y, const float *dy, float *dx,
                                                      int64_t C, int64_t stride, bool log_)
{
    double s = 0.0;
    for (int64_t c = 0; c < C; c++)
        s += log_ ? (double)dy[c * stride] : (double)dy[c * stride] * y[c * stride];
    for (int64_t c = 0; c < C; c++) {
        int64_t i = c * stride;
        dx[i] = (float)(log_ ? dy[i] - exp((double)y[i]) * s : y[i] * (dy[i] - s));
    }
}

#endif
