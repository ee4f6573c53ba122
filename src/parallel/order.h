/* Cross-device ordering shared by the collectives (order.c).
 *
 * Devices here share an address space (CPU devices; CUDA devices with peer
 * access), or copy between them, so a device reads another's buffer
 * directly, ordered by events: the reader waits for the writer's event
 * before reading, and the writer waits for the reader's event before
 * writing that buffer again. No host-wide sync. */
#ifndef DP_PARALLEL_ORDER_H
#define DP_PARALLEL_ORDER_H

#include "device/device.h"

#include <stddef.h>

/* Makes `waiter`'s later commands wait for everything enqueued on `dev` so
 * far (no host wait). */
void dp__after(dp_device_t *waiter, dp_device_t *dev);
/* Enqueues on dst_dev a copy of `bytes` from src (memory of src_dev) once
 * src_dev has run what it has queued; src_dev's later commands wait for the
 * copy, so src is not overwritten or reused before it is read. */
int dp__copy_between(dp_device_t *dst_dev, void *dst, dp_device_t *src_dev, const void *src,
                     size_t bytes);

#endif
