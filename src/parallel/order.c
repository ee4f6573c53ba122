/* Ordering across devices' streams, and copies between devices. */
#include "parallel/order.h"

#include "core/internal.h"

void dp__after(dp_device_t *waiter, dp_device_t *dev)
{
    if (waiter != dev)
        dp_stream_wait_event(waiter, dp_event_record(dev));
}

int dp__copy_between(dp_device_t *dst_dev, void *dst, dp_device_t *src_dev, const void *src,
                     size_t bytes)
{
    if (bytes == 0)
        return 0;
    /* A CPU device cannot read a GPU's memory: a copy from a GPU into a CPU
     * device's buffer is the GPU's copy to the host, issued once the CPU
     * device has finished with that buffer. Every other pair (CPU to CPU,
     * into a GPU from anywhere) is the destination's copy_device. */
    bool gpu_to_host = !dp_device_has(src_dev, DP_DEVICE_HOST_MEMORY) &&
                       dp_device_has(dst_dev, DP_DEVICE_HOST_MEMORY);
    if (gpu_to_host) {
        dp__after(src_dev, dst_dev);
        DP_TRY(src_dev->ops->copy_to_host(src_dev, dst, src, bytes));
        dp__after(dst_dev, src_dev);
        return 0;
    }
    dp__after(dst_dev, src_dev);
    DP_TRY(dst_dev->ops->copy_device(dst_dev, dst, src, bytes));
    dp__after(src_dev, dst_dev);
    return 0;
}
