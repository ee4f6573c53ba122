/* float32 to int32 as the cast kernels of both backends (cpu/convert.c,
 * cuda/cast.cu) convert it, so that every device gives the same integers:
 * truncation toward zero, as torch's .type(torch.int); NaN and values
 * outside int32's range give INT32_MIN, which is what x86's conversion
 * (and so torch on a CPU) gives, where C leaves the conversion undefined.
 * Valid C and CUDA: a host and device function under nvcc. */
#ifndef DP_DEVICE_INT_CONVERT_H
#define DP_DEVICE_INT_CONVERT_H

#include <stdint.h>

#ifdef __CUDACC__
#define DP__INT_HOST_DEVICE __host__ __device__
#else
#define DP__INT_HOST_DEVICE
#endif

static inline DP__INT_HOST_DEVICE int32_t dp__i32_from_f32(float f)
{
    /* -2^31 <= f < 2^31 is in range (both bounds exact in float); NaN fails
     * both comparisons */
    return f >= -2147483648.0f && f < 2147483648.0f ? (int32_t)f : INT32_MIN;
}

#endif
