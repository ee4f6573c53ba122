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
