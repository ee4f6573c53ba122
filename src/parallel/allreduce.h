/* The allreduce algorithms behind dp_allreduce_sum, one file each, and what
 * they share. allreduce.c dispatches through a table of dp__allreduce_fn
 * indexed by dp_allreduce_algo; no algorithm calls the dispatcher.
 *
 *   allreduce_naive.c  the seed's: sum into bufs[0], copy back
 *   allreduce_ring.c   reduce-scatter + all-gather between neighbours
 *   allreduce_mpi.c    hierarchical: naive's halves around a sum across
 *                      the ranks (mpi.c)
 *   allreduce_nccl.c   the devices' collective library (the device table's
 *                      group_allreduce entries), ring where it cannot */
#ifndef DP_PARALLEL_ALLREDUCE_H
#define DP_PARALLEL_ALLREDUCE_H

#include "device/device.h"
#include "dp/parallel.h"

#include <stdbool.h>

/* One algorithm: afterwards every bufs[k] holds the elementwise sum over k.
 * The buffers are already checked (1 <= n <= DP_MAX_DEVICES, float, `len`
 * elements each, on distinct devices); the work is enqueued, and the
 * dispatcher marks the buffers written. */
typedef int (*dp__allreduce_fn)(dp_tensor_t *const *bufs, int n, int64_t len);

int dp__allreduce_ring(dp_tensor_t *const *bufs, int n, int64_t len);
int dp__allreduce_naive(dp_tensor_t *const *bufs, int n, int64_t len);
int dp__allreduce_mpi(dp_tensor_t *const *bufs, int n, int64_t len);
int dp__allreduce_nccl(dp_tensor_t *const *bufs, int n, int64_t len);

/* The two halves of the naive algorithm, the first and last step of the mpi
 * one: bufs[0] += bufs[i]; then bufs[i] = bufs[0]. */
int dp__reduce_to_first(dp_tensor_t *const *bufs, int n, int64_t len);
int dp__broadcast_from_first(dp_tensor_t *const *bufs, int n, int64_t len);

/* Whether the nccl algorithm sums over `devs` as one group: n > 1 distinct
 * devices whose backend has a collective library (allreduce_nccl.c). */
bool dp__nccl_suits(dp_device_t *const *devs, int n);
/* `algo` with AUTO resolved for these devices: mpi across several ranks,
 * else nccl where dp__nccl_suits, else ring (allreduce.c). */
dp_allreduce_algo dp__allreduce_for(dp_allreduce_algo algo, dp_device_t *const *devs, int n);

/* 0 when kernels of `reader` may read `owner`'s memory (CPU devices, logical
 * devices on one GPU, GPUs with peer access); else DP_ENOTSUP, with both
 * devices named after `what` in the log (peer_access.c). */
int dp__check_kernel_read(const char *what, dp_device_t *reader, dp_device_t *owner);

/* dst[0..n) += src[0..n), a kernel on `dev`. */
static inline int dp__accumulate_on(dp_device_t *dev, float *dst, const float *src, int64_t n)
{
    if (n == 0)
        return 0;
    dp__eltwise_args a = {.op = DP__ELT_ACCUMULATE, .a = src, .out = dst, .n = n};
    return dev->ops->eltwise(dev, &a);
}

/* dst[0..n) = src[0..n), a copy on `dev`. */
static inline int dp__copy_on(dp_device_t *dev, float *dst, const float *src, int64_t n)
{
    if (n == 0)
        return 0;
    return dev->ops->copy_device(dev, dst, src, (size_t)n * sizeof(float));
}

#endif
