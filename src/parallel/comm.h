/* Cross-device ordering shared by the collectives. */
#ifndef DP_PARALLEL_COMM_H
#define DP_PARALLEL_COMM_H

#include "device/device.h"

/* Makes `waiter`'s later commands wait for everything enqueued on `dev` so
 * far (no host wait). */
void dp__after(dp_device_t *waiter, dp_device_t *dev);
/* Enqueues on dst_dev a copy of `bytes` from src (memory of src_dev) once
 * src_dev has run what it has queued; src_dev's later commands wait for the
 * copy, so src is not overwritten or reused before it is read. */
int dp__copy_between(dp_device_t *dst_dev, void *dst, dp_device_t *src_dev, const void *src,
                     size_t bytes);

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
