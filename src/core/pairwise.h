/* The pairwise order of split-invariant sums, for vectors in host memory.
 *
 * parts[r * stride + i], r < n, i < len: part r's vector. The parts are
 * added in place, parts[i] += parts[i + s] for s = 1, 2, 4, ... and i a
 * multiple of 2 s, leaving the sum in part 0. That is a binary tree in
 * which [0, h) and [h, n) are summed apart and then added, h the largest
 * power of two below n: for n = 2^j, 2^i consecutive parts are a subtree,
 * the tree that ops/split_invariant.c builds over a batch's blocks and
 * that the naive allreduce adds devices in (comm/allreduce_naive.c). The
 * other parts hold partial sums afterwards. */
#ifndef DP_CORE_PAIRWISE_H
#define DP_CORE_PAIRWISE_H

#include <stdint.h>

#define DP__PAIRWISE_SUM(parts, n, stride, len)                                                    \
    do {                                                                                           \
        for (int64_t s_ = 1; s_ < (n); s_ *= 2)                                                    \
            for (int64_t r_ = 0; r_ + s_ < (n); r_ += 2 * s_)                                      \
                for (int64_t i_ = 0; i_ < (len); i_++)                                             \
                    (parts)[r_ * (stride) + i_] += (parts)[(r_ + s_) * (stride) + i_];             \
    } while (0)

static inline void dp__pairwise_sum_f64(double *parts, int64_t n, int64_t stride, int64_t len)
{
    DP__PAIRWISE_SUM(parts, n, stride, len);
}

static inline void dp__pairwise_sum_f32(float *parts, int64_t n, int64_t stride, int64_t len)
{
    DP__PAIRWISE_SUM(parts, n, stride, len);
}

#endif
