/* Gradient buckets (buckets.c): DataParallel sums the gradients in ranges
 * of the gradient buffer, each as soon as the backward pass has written it,
 * on the devices' communication paths, as PyTorch's DDP does. */
#ifndef DP_PARALLEL_BUCKETS_H
#define DP_PARALLEL_BUCKETS_H

#include "dp/nn.h"
#include "dp/parallel.h"

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
