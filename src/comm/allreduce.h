/* Inside src/comm/: the allreduce algorithms behind dp_allreduce_sum, one
 * file each, and what they share. allreduce.c dispatches through a table of
 * dp__allreduce_fn indexed by dp_allreduce_algo; no algorithm calls the
 * dispatcher.
 *
 *   allreduce_naive.c  the seed's: sum into bufs[0], copy back
 *   allreduce_ring.c   reduce-scatter + all-gather between neighbours
 *   allreduce_mpi.c    hierarchical: naive's halves around a sum across
 *                      the ranks (the MPI backend, mpi.c)
 *   allreduce_nccl.c   NCCL across distinct GPUs (the NCCL backend, nccl.c),
 *                      ring where they share one */
#ifndef DP_COMM_ALLREDUCE_H
#define DP_COMM_ALLREDUCE_H

#include "comm/comm.h"

#include <stdbool.h>

/* ---- what the algorithms run on (collective.c, transfer.c) --------------
 *
 * Offsets and counts are in float elements. Every call enqueues (no host
 * wait) and marks its destination written.
 *
 * Kernels that read another device's memory (dp__range_add, comm.h, and
 * dp__range_copy) run on the destination's device: CPU devices share this
 * process's memory, a GPU reads its own and a peer's where peer access is
 * enabled. Callers check with dp__check_kernel_read first and order them
 * against the source device with events (dp_event_record /
 * dp_stream_wait_event); the ring algorithm orders chunk by chunk, finer
 * than a whole-device wait. */

/* dst[dst_off + i] = src[src_off + i], i < n: a copy on dst's device. */
int dp__range_copy(dp_tensor_t *dst, int64_t dst_off, const dp_tensor_t *src, int64_t src_off,
                   int64_t n);
/* 0 when kernels of `reader` may read `owner`'s memory (CPU devices, logical
 * devices on one GPU, GPUs with peer access); else DP_ENOTSUP, with both
 * devices named after `what` in the log. */
int dp__check_kernel_read(const char *what, dp_device_t *reader, dp_device_t *owner);

/* Enqueues fn(data, n) on t's device's worker over t's first n floats as
 * host memory: t's own memory on a CPU device, else a host copy taken after
 * t's earlier commands and copied back before its later ones. `name` labels
 * the command (e.g. "mpi_allreduce"). */
typedef int (*dp__host_fn)(float *data, int64_t n);
int dp__host_apply(dp_tensor_t *t, int64_t n, dp__host_fn fn, const char *name);

/* The same over `bytes` of any memory of dev: enqueues fn(host, ctx) on
 * dev's worker, host being `data` itself on a device with host memory,
 * else a host copy of it taken after dev's earlier commands and copied
 * back before its later ones. ctx (ctx_size bytes, at most 64) is copied
 * into the command. */
typedef int (*dp__host_cmd_fn)(void *host, const void *ctx);
int dp__host_command(dp_device_t *dev, void *data, size_t bytes, dp__host_cmd_fn fn,
                     const void *ctx, size_t ctx_size, const char *name);

/* A 1-D view of base's floats [off, off + n) whose commands go to `on`
 * (base's device or its communication path, dp__comm_path); freed with
 * dp_tensor_free, which leaves the memory to base. */
int dp__range_view(dp_tensor_t **out, dp_tensor_t *base, int64_t off, int64_t n, dp_device_t *on);
/* The point in their device's stream after the last command that wrote any
 * of ts[0..n) (NULL entries skipped; all on one device). */
dp_event dp__written_event(dp_tensor_t *const *ts, int n);

/* ---- the NCCL backend (nccl.c; in a build without CUDA none is available) */

/* Whether NCCL sums over devs[0..n): available when n >= 2 and every
 * device is a GPU of one backend whose stream NCCL can issue on (the device
 * table's cuda_stream); usable as one group when, besides, they are n
 * distinct GPUs (not logical devices that share one). */
bool dp__nccl_available(dp_device_t *const *devs, int n);
bool dp__nccl_usable(dp_device_t *const *devs, int n);
/* Enqueues on devs[0]'s worker one command that sums data[k] (len floats in
 * devs[k]'s memory, devs usable) over k, each GPU's part on its own
 * stream, and returns from the command once the GPUs have finished. The
 * caller orders devs[0] after the other devices' earlier commands, and
 * their later commands after it. */
int dp__nccl_enqueue_sum(dp_device_t *const *devs, float *const *data, int n, int64_t len);

/* ---- the algorithms ----------------------------------------------------- */

/* How one allreduce runs beyond its buffers.
 * grid_off, grid_len: the buffers are elements [grid_off, grid_off + len)
 *   of a whole of grid_len (a bucket of the gradient buffer). The ring cuts
 *   the whole into its n chunks, so that each element is summed in the same
 *   order whether the whole is reduced at once or bucket by bucket; the
 *   other algorithms sum each element in one order anyway.
 * bf16: across ranks, each rank's sum is rounded to bfloat16 before it is
 *   sent and the ranks' values are added in float32 after (mpi only). */
typedef struct dp__allreduce_how {
    int64_t grid_off, grid_len;
    bool bf16;
} dp__allreduce_how;

/* One algorithm: afterwards every bufs[k] holds the elementwise sum over k.
 * The buffers are already checked (1 <= n <= DP_MAX_DEVICES, float, `len`
 * elements each, on distinct devices); the work is enqueued, and the
 * primitives above mark the buffers written. */
typedef int (*dp__allreduce_fn)(dp_tensor_t *const *bufs, int n, int64_t len,
                                const dp__allreduce_how *how);

int dp__allreduce_ring(dp_tensor_t *const *bufs, int n, int64_t len, const dp__allreduce_how *how);
int dp__allreduce_naive(dp_tensor_t *const *bufs, int n, int64_t len, const dp__allreduce_how *how);
int dp__allreduce_mpi(dp_tensor_t *const *bufs, int n, int64_t len, const dp__allreduce_how *how);
int dp__allreduce_nccl(dp_tensor_t *const *bufs, int n, int64_t len, const dp__allreduce_how *how);

/* dp_allreduce_sum with a `how` (NULL: the whole buffer, float32). */
int dp__allreduce_sum_how(dp_tensor_t *const *bufs, int n, dp_allreduce_algo algo,
                          const dp__allreduce_how *how);

/* The two halves of the naive algorithm, the first and last step of the mpi
 * one: bufs[0] += bufs[i]; then bufs[i] = bufs[0]. */
int dp__reduce_to_first(dp_tensor_t *const *bufs, int n, int64_t len);
int dp__broadcast_from_first(dp_tensor_t *const *bufs, int n, int64_t len);

#endif
