/* Cross-device ordering shared by the collectives. */
#ifndef DP_PARALLEL_COMM_H
#define DP_PARALLEL_COMM_H

#include "device/device.h"
#include "dp/parallel.h"

#include <stdbool.h>

/* Makes `waiter`'s later commands wait for everything enqueued on `dev` so
 * far (no host wait). */
void dp__after(dp_device_t *waiter, dp_device_t *dev);
/* Enqueues on dst_dev a copy of `bytes` from src (memory of src_dev) once
 * src_dev has run what it has queued; src_dev's later commands wait for the
 * copy, so src is not overwritten or reused before it is read. */
int dp__copy_between(dp_device_t *dst_dev, void *dst, dp_device_t *src_dev, const void *src,
                     size_t bytes);

/* 0 when kernels of `reader` may read `owner`'s memory (CPU devices, logical
 * devices on one GPU, GPUs with peer access); else DP_ENOTSUP, with both
 * devices named after `what` in the log (peer_access.c). */
int dp__check_kernel_read(const char *what, dp_device_t *reader, dp_device_t *owner);
/* Whether NCCL can sum over `devs`: n > 1 distinct GPUs, in a CUDA build
 * (nccl.c). */
bool dp__nccl_suits(dp_device_t *const *devs, int n);
/* `algo` with AUTO resolved for these devices: mpi across several ranks,
 * else nccl where dp__nccl_suits, else ring. */
dp_allreduce_algo dp__allreduce_for(dp_allreduce_algo algo, dp_device_t *const *devs, int n);

/* DP_ALLREDUCE_MPI (src/parallel/mpi.c) and DP_ALLREDUCE_NCCL
 * (src/parallel/nccl.c): the same contract as dp_allreduce_sum, buffers
 * already checked (n >= 1, float, `len` elements each, distinct devices). */
int dp__allreduce_mpi(dp_tensor_t *const *bufs, int n, int64_t len);
int dp__allreduce_nccl(dp_tensor_t *const *bufs, int n, int64_t len);
/* The seed's naive allreduce, and its two halves (the first and last step
 * of the hierarchical mpi one): bufs[0] += bufs[i]; bufs[i] = bufs[0]. */
int dp__allreduce_naive(dp_tensor_t *const *bufs, int n, int64_t len);
int dp__reduce_to_first(dp_tensor_t *const *bufs, int n, int64_t len);
int dp__broadcast_from_first(dp_tensor_t *const *bufs, int n, int64_t len);

#endif
