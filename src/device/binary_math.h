/* The binary ops of dp__binary_args (device/kernels.h), one element at a
 * time, for the CPU's loops and the CUDA kernels alike: where an element
 * of the full shape reads a broadcast operand, the op, and each operand's
 * gradient, as PyTorch's derivatives give them. Valid C and CUDA: host and
 * device functions under nvcc. */
#ifndef DP_DEVICE_BINARY_MATH_H
#define DP_DEVICE_BINARY_MATH_H

#include "device/kernels.h"

#ifdef __CUDACC__
#define DP__BIN_FN __host__ __device__
#else
#define DP__BIN_FN
#endif

/* The index into an operand broadcast as `bc` that element i (physical
 * order) of the full shape reads, at sample n and channel c of C. */
static inline DP__BIN_FN int64_t dp__binary_at(int bc, int64_t i, int64_t n, int64_t c, int64_t C)
{
    return bc == DP__BCAST_FULL      ? i
           : bc == DP__BCAST_CHANNEL ? c
           : bc == DP__BCAST_SCALAR  ? 0
                                     : n * C + c;
}

/* The channel of physical element j of a sample: (C, HW) or (HW, C). */
static inline DP__BIN_FN int64_t dp__binary_channel(int64_t j, int64_t C, int64_t HW, int nhwc)
{
    return nhwc ? j % C : j / HW;
}

static inline DP__BIN_FN float dp__binary_apply(int op, float a, float b)
{
    return op == DP__BINARY_ADD   ? a + b
           : op == DP__BINARY_SUB ? a - b
           : op == DP__BINARY_MUL ? a * b
                                  : a / b;
}

/* Element i's share of operand a's gradient (which = 0) or b's (1), for
 * dy and the operands' values a and b there: PyTorch's formulas, div's
 * divisor as -dy ((a / b) / b). */
static inline DP__BIN_FN float dp__binary_grad(int op, int which, float dy, float a, float b)
{
    switch (op) {
    case DP__BINARY_ADD:
        return dy;
    case DP__BINARY_SUB:
        return which ? -dy : dy;
    case DP__BINARY_MUL:
        return which ? dy * a : dy * b;
    default:
        return which ? -dy * ((a / b) / b) : dy / b;
    }
}

#endif
