/* What the collectives of src/parallel/ need of the device layer, over
 * tensors they see only through this header and dp/tensor.h (they never
 * read struct dp_tensor or the device table).
 *
 * Offsets and counts are in float elements. Every call enqueues (no host
 * wait) and marks its destination written.
 *
 * Kernels that read another device's memory (dp__range_add, dp__range_copy)
 * run on the destination's device: CPU devices share this process's memory,
 * a GPU reads its own and a peer's where peer access is enabled. Callers
 * check with dp__check_kernel_read first and order them against the source
 * device with events (dp_event_record / dp_stream_wait_event); the ring
 * algorithm orders chunk by chunk, finer than a whole-device wait. */
#ifndef DP_DEVICE_COLLECTIVE_H
#define DP_DEVICE_COLLECTIVE_H

#include "dp/tensor.h"

#include <stdbool.h>
#include <stddef.h>

/* dst[dst_off + i] += src[src_off + i], i < n: a kernel on dst's device. */
int dp__range_add(dp_tensor_t *dst, int64_t dst_off, const dp_tensor_t *src, int64_t src_off,
                  int64_t n);
/* dst[dst_off + i] = src[src_off + i], i < n: a copy on dst's device. */
int dp__range_copy(dp_tensor_t *dst, int64_t dst_off, const dp_tensor_t *src, int64_t src_off,
                   int64_t n);
/* 0 when kernels of `reader` may read `owner`'s memory (CPU devices, logical
 * devices on one GPU, GPUs with peer access); else DP_ENOTSUP, with both
 * devices named after `what` in the log (collective.c). */
int dp__check_kernel_read(const char *what, dp_device_t *reader, dp_device_t *owner);

/* Bytes of the whole tensor, and of one index of its first dimension (a
 * row of a batch); whether it is stored channels-last (dp_scatter and
 * dp_gather split and join the logical layout only). The owned bytes are
 * 0 for a view of another tensor's memory (what a tape holds for it). */
size_t dp__tensor_bytes(const dp_tensor_t *t);
size_t dp__tensor_owned_bytes(const dp_tensor_t *t);
size_t dp__tensor_row_bytes(const dp_tensor_t *t);
bool dp__tensor_nhwc(const dp_tensor_t *t);

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

/* The backend's collective library (NCCL on CUDA) over devs[0..n):
 * available when n >= 2 and every device is of one backend that has one;
 * usable as one group when, besides, they are n distinct physical devices. */
bool dp__group_allreduce_available(dp_device_t *const *devs, int n);
bool dp__group_allreduce_usable(dp_device_t *const *devs, int n);
/* bufs[k] (len floats each, on devs available and usable as a group)
 * becomes the sum over k: one command on bufs[0]'s device that issues every
 * device's part, ordered after the other devices' earlier commands and
 * before their later ones. */
int dp__group_allreduce_sum(dp_tensor_t *const *bufs, int n, int64_t len);

/* Enqueues fn(data, n) on t's device's worker over t's first n floats as
 * host memory: t's own memory on a CPU device, else a host copy taken after
 * t's earlier commands and copied back before its later ones. `name` labels
 * the command (e.g. "mpi_allreduce"). */
typedef int (*dp__host_fn)(float *data, int64_t n);
int dp__host_apply(dp_tensor_t *t, int64_t n, dp__host_fn fn, const char *name);

/* ---- the communication path (comm_path.c) ------------------------------ */

/* dev's communication path: a device on dev's memory with a stream (and a
 * worker) of its own, opened on first use and closed with dev; dev itself
 * where the backend has none (then collectives run in dev's stream order).
 * Commands on the path are ordered against dev's only by events. */
dp_device_t *dp__comm_path(dp_device_t *dev);
/* A 1-D view of base's floats [off, off + n) whose commands go to `on`
 * (base's device or its path); freed with dp_tensor_free, which leaves the
 * memory to base. */
int dp__range_view(dp_tensor_t **out, dp_tensor_t *base, int64_t off, int64_t n, dp_device_t *on);
/* The point in their device's stream after the last command that wrote any
 * of ts[0..n) (NULL entries skipped; all on one device). */
dp_event dp__written_event(dp_tensor_t *const *ts, int n);
/* Enqueues fn(arg) on dev's worker (timestamps, bookkeeping). */
void dp__enqueue_host_call(dp_device_t *dev, void (*fn)(void *arg), void *arg, const char *name);

#endif
