/* Between two devices: copies ordered by events (dp_scatter, dp_gather,
 * dp_broadcast and the pipeline's stages send their tensors through them),
 * and what the collectives on the communication paths need of a device's
 * stream (views of a range on a path, the event after a tensor's last
 * write, host calls). */
#include "comm/allreduce.h"
#include "comm/comm.h"
#include "core/internal.h"
#include "device/device.h"
#include "engine/stream.h"

void dp__after(dp_device_t *waiter, dp_device_t *dev)
{
    if (waiter != dev)
        dp_stream_wait_event(waiter, dp_event_record(dev));
}

int dp__copy_between(dp_tensor_t *dst, size_t dst_byte_off, const dp_tensor_t *src,
                     size_t src_byte_off, size_t bytes)
{
    if (dst_byte_off + bytes > dst->bytes || src_byte_off + bytes > src->bytes) {
        DP_ERROR("copy between devices: %zu bytes do not fit at offsets %zu (of %zu) and %zu "
                 "(of %zu)",
                 bytes, dst_byte_off, dst->bytes, src_byte_off, src->bytes);
        return DP_EINVAL;
    }
    if (bytes == 0)
        return 0;
    dp_device_t *dst_dev = dst->dev, *src_dev = src->dev;
    char *to = (char *)dst->data + dst_byte_off;
    const char *from = (const char *)src->data + src_byte_off;
    /* A CPU device cannot read a GPU's memory: a copy from a GPU into a CPU
     * device's buffer is the GPU's copy to the host, issued once the CPU
     * device has finished with that buffer. Every other pair (CPU to CPU,
     * into a GPU from anywhere) is the destination's copy_device. */
    bool gpu_to_host = !dp_device_has(src_dev, DP_DEVICE_HOST_MEMORY) &&
                       dp_device_has(dst_dev, DP_DEVICE_HOST_MEMORY);
    if (gpu_to_host) {
        dp__after(src_dev, dst_dev);
        DP_TRY(src_dev->ops->copy_to_host(src_dev, to, from, bytes));
        dp__after(dst_dev, src_dev);
    } else {
        dp__after(dst_dev, src_dev);
        DP_TRY(dst_dev->ops->copy_device(dst_dev, to, from, bytes));
        dp__after(src_dev, dst_dev);
    }
    dp__tensor_written(dst);
    return 0;
}

int dp__copy_written(dp_tensor_t *dst, dp_tensor_t *src, bool src_waits)
{
    dp_device_t *dst_dev = dst->dev, *src_dev = src->dev;
    if (dst->bytes != src->bytes || (!dp_device_has(src_dev, DP_DEVICE_HOST_MEMORY) &&
                                     dp_device_has(dst_dev, DP_DEVICE_HOST_MEMORY)))
        return dp__copy_between(dst, 0, src, 0, src->bytes);
    if (dp__tensor_ready_seq(src) > 0 && src_dev != dst_dev)
        DP_TRY(dp_stream_wait_event(dst_dev, dp__written_event(&src, 1)));
    DP_TRY(dst_dev->ops->copy_device(dst_dev, dst->data, src->data, src->bytes));
    if (src_waits && src_dev != dst_dev)
        dp__after(src_dev, dst_dev);
    dp__tensor_written(dst);
    return 0;
}

int dp__range_view(dp_tensor_t **out, dp_tensor_t *base, int64_t off, int64_t n, dp_device_t *on)
{
    if (base->dtype != DP_F32 || off < 0 || n < 1 || off + n > dp__numel(base->ndim, base->shape)) {
        DP_ERROR("range view: [%lld, %lld) is not inside a float tensor of %lld elements",
                 (long long)off, (long long)(off + n),
                 (long long)dp__numel(base->ndim, base->shape));
        return DP_EINVAL;
    }
    if (on != base->dev && on->comm_of != base->dev) {
        DP_ERROR("range view: %s is not %s or its communication path", on->name, base->dev->name);
        return DP_EINVAL;
    }
    dp_tensor_t *v = dp__tensor_view(on, DP_F32, 1, &n, (float *)base->data + off);
    if (!v)
        return DP_ENOMEM;
    *out = v;
    return 0;
}

dp_event dp__written_event(dp_tensor_t *const *ts, int n)
{
    dp_event ev = {NULL, 0};
    for (int i = 0; i < n; i++) {
        if (!ts[i])
            continue;
        if (!ev.dev)
            ev.dev = ts[i]->dev;
        DP_ASSERT(ts[i]->dev == ev.dev);
        uint64_t seq = dp__tensor_ready_seq(ts[i]);
        if (seq > ev.seq)
            ev.seq = seq;
    }
    return ev;
}

typedef struct host_call_args {
    void (*fn)(void *arg);
    void *arg;
} host_call_args;

static int run_host_call(void *p, void *ctx)
{
    (void)ctx;
    host_call_args *a = p;
    a->fn(a->arg);
    return 0;
}

void dp__enqueue_host_call(dp_device_t *dev, void (*fn)(void *arg), void *arg, const char *name)
{
    host_call_args a = {fn, arg};
    dp__stream_push_named(dev->stream, run_host_call, name, &a, sizeof a);
}
