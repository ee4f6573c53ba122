/* src/comm/: all communication, behind this one header for the layers
 * above (src/parallel/'s executors). The public collectives are in
 * dp/parallel.h (dp_allreduce_sum, dp_broadcast), the ranks in dp/dist.h
 * and SyncBatchNorm's groups in dp/ops.h; what is inside comm/ only is in
 * allreduce.h (the algorithms and what they run on), mpi.h (the MPI
 * backend's gradient sums) and exchange.h (the statistics exchange).
 *
 * MPI (mpi.c) and NCCL (nccl.c) are comm/'s backends: nothing outside this
 * folder calls either. */
#ifndef DP_COMM_COMM_H
#define DP_COMM_COMM_H

#include "dp/nn.h"
#include "dp/parallel.h"

#include <stdbool.h>
#include <stddef.h>

/* ---- between two devices (transfer.c) ----------------------------------- */

/* Every call enqueues (no host wait) and marks its destination written. */

/* Makes `waiter`'s later commands wait for everything enqueued on `dev` so
 * far (no host wait). */
void dp__after(dp_device_t *waiter, dp_device_t *dev);
/* Copies `bytes` from src + src_byte_off to dst + dst_byte_off, between any
 * two devices (a GPU's memory to a CPU device's is the GPU's copy to the
 * host), once src's device has run what it has queued; src's device waits
 * for the copy before its later commands, so the source is not overwritten
 * before it is read. Any dtype: offsets are in bytes. */
int dp__copy_between(dp_tensor_t *dst, size_t dst_byte_off, const dp_tensor_t *src,
                     size_t src_byte_off, size_t bytes);
/* dp__copy_between of all of src into dst (same bytes), waiting only for
 * src's last write, not for everything its device has queued. With
 * src_waits false src's device does not wait for the copy either: for a
 * source the caller keeps unchanged and alive until the copy has run by
 * another path (a pipeline stage's activation, freed only after a later
 * stage's backward that follows the copy). */
int dp__copy_written(dp_tensor_t *dst, dp_tensor_t *src, bool src_waits);
/* dst[dst_off + i] += src[src_off + i], i < n floats: a kernel on dst's
 * device that reads src's memory (collective.c). The caller orders it
 * against src's device with events; kernels of one GPU cannot read a CPU
 * device's memory, nor another GPU's without peer access. */
int dp__range_add(dp_tensor_t *dst, int64_t dst_off, const dp_tensor_t *src, int64_t src_off,
                  int64_t n);
/* Enqueues fn(arg) on dev's worker (timestamps, bookkeeping). */
void dp__enqueue_host_call(dp_device_t *dev, void (*fn)(void *arg), void *arg, const char *name);

/* ---- the allreduce ------------------------------------------------------ */

/* `algo` with AUTO resolved for these devices: mpi across several ranks,
 * else nccl where the devices are distinct GPUs with NCCL, else ring
 * (allreduce.c). */
dp_allreduce_algo dp__allreduce_for(dp_allreduce_algo algo, dp_device_t *const *devs, int n);

/* ---- gradient buckets (buckets.c) --------------------------------------- */

/* DataParallel sums the gradients in ranges of the gradient buffer, each as
 * soon as the backward pass has written it, on the devices' communication
 * paths, as PyTorch's DDP does. */
typedef struct dp__buckets dp__buckets;

/* Plans the buckets over the parameters of params[0..n) (one replica's on
 * each of n devices; n * ranks > 1): parameters in reverse order (the order
 * the backward pass finishes them), a bucket closed once it holds
 * min(1 MiB, cap) bytes for the first, `cap_mb` MiB for the others; cap_mb 0
 * makes one bucket of everything. */
int dp__buckets_init(dp__buckets **out, dp_params_t *const *params, int n, double cap_mb,
                     dp_allreduce_algo algo, dp_grad_compress compress);
void dp__buckets_close(dp__buckets *bk);

/* Enqueues the step's sums: bucket by bucket, in the same order on every
 * device and rank, each after the last write of its gradients on each
 * device, on the devices' communication paths; then orders every device's
 * later commands (the SGD step) after the last bucket. No host wait. */
int dp__buckets_allreduce(dp__buckets *bk);

int dp__buckets_count(const dp__buckets *bk);
/* Bucket b: parameters [first, first + count) of the parameter list, and
 * its bytes (float32). */
void dp__buckets_get(const dp__buckets *bk, int b, int *first, int *count, int64_t *bytes);
void dp__buckets_stats(dp__buckets *bk, dp_comm_stats *s);

#endif
