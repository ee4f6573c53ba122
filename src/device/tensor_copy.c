/* dst = src between any two devices and layouts (dp_tensor_copy, and
 * dp_to_device's forward and backward).
 *
 * Order: a copy runs on one device's stream; the other device's stream is
 * made to wait for the copy's device before and after it (events, no host
 * wait), so the copy reads src after src's last write, and src's device
 * writes or frees src only after the copy has read it. A CPU device cannot
 * read a GPU's memory: a copy from a GPU into host memory is the GPU's copy
 * to the host, every other pair (CPU to CPU, into a GPU from anywhere) the
 * destination's copy_device.
 *
 * Layouts: a 4-D tensor may be stored N, H, W, C. The values go in logical
 * order: a source in that layout is rearranged on its own device into a
 * logical temporary first, and a destination in it is filled by a
 * rearrangement on its device from a logical block there. */
#include "core/internal.h"
#include "device/device.h"

#include <string.h>

/* Makes `waiter`'s later commands wait for everything enqueued on dev. */
static void after(dp_device_t *waiter, dp_device_t *dev)
{
    if (waiter != dev)
        dp_stream_wait_event(waiter, dp_event_record(dev));
}

/* dst's bytes = src's bytes (one size), ordered as the top says. */
static int copy_bytes(dp_tensor_t *dst, const dp_tensor_t *src)
{
    dp_device_t *to = dst->dev, *from = src->dev;
    if (dst->bytes == 0)
        return 0;
    bool gpu_to_host =
        !dp_device_has(from, DP_DEVICE_HOST_MEMORY) && dp_device_has(to, DP_DEVICE_HOST_MEMORY);
    if (gpu_to_host) {
        after(from, to); /* dst's device is done with dst */
        DP_TRY(from->ops->copy_to_host(from, dst->data, src->data, dst->bytes));
        after(to, from); /* dst's readers wait for the copy */
    } else {
        after(to, from); /* the copy reads src after its last write */
        DP_TRY(to->ops->copy_device(to, dst->data, src->data, dst->bytes));
        after(from, to); /* src is written or freed only after the copy */
    }
    return 0;
}

/* dst (4-D, its own layout) = src (4-D, the other layout, on dst's device,
 * the same logical shape): the relayout kernel. */
static int relayout(dp_tensor_t *dst, const dp_tensor_t *src)
{
    dp__relayout_args r;
    memset(&r, 0, sizeof r);
    r.src = dp__desc(src);
    r.dst = dp__desc(dst);
    return dst->dev->ops->relayout(dst->dev, &r);
}

/* A view of t's memory with shape (ndim, shape) in logical order, on t's
 * device (the caller frees it: the memory stays t's). */
static int logical_view(dp_tensor_t **out, const dp_tensor_t *t, int ndim, const int64_t *shape)
{
    *out = dp__tensor_view(t->dev, t->dtype, ndim, shape, t->data);
    return *out ? 0 : DP_ENOMEM;
}

int dp__tensor_copy_logical(dp_tensor_t *dst, const dp_tensor_t *src)
{
    if (dst == src || dst->bytes == 0)
        return 0;
    bool same_layout =
        (!src->nhwc && !dst->nhwc) ||
        (src->nhwc && dst->nhwc && memcmp(src->shape, dst->shape, sizeof src->shape) == 0);
    if (same_layout) {
        if (dst->data == src->data)
            return 0;
        DP_TRY(copy_bytes(dst, src));
        dp__tensor_written(dst);
        return 0;
    }
    int rc = 0;
    dp_tensor_t *flat = NULL, *moved = NULL, *as_dst = NULL;
    const dp_tensor_t *cur = src;
    if (src->nhwc) { /* src's values in logical order, on src's device */
        rc = dp__tensor_alloc(&flat, src->dev, src->dtype, src->ndim, src->shape, 0);
        if (rc == 0)
            rc = relayout(flat, src);
        cur = flat;
    }
    if (rc == 0 && !dst->nhwc) {
        rc = copy_bytes(dst, cur);
    } else if (rc == 0) { /* those values as dst's shape, on dst's device */
        if (cur->dev != dst->dev) {
            rc = dp__tensor_alloc(&moved, dst->dev, dst->dtype, dst->ndim, dst->shape, 0);
            if (rc == 0)
                rc = copy_bytes(moved, cur);
            cur = moved;
        }
        if (rc == 0)
            rc = logical_view(&as_dst, cur, dst->ndim, dst->shape);
        if (rc == 0)
            rc = relayout(dst, as_dst);
    }
    if (rc == 0)
        dp__tensor_written(dst);
    /* Each temporary goes back to its device's cache after the commands
     * enqueued so far, the copies that read it among them. */
    dp__tensor_release(as_dst);
    dp__tensor_release(moved);
    dp__tensor_release(flat);
    return rc;
}

int dp_tensor_copy(dp_tensor_t *dst, const dp_tensor_t *src)
{
    char ds[64], ss[64];
    if (!dst || !src) {
        DP_ERROR("dp_tensor_copy: a tensor is NULL");
        return DP_EINVAL;
    }
    if (dp__numel(dst->ndim, dst->shape) != dp__numel(src->ndim, src->shape)) {
        DP_ERROR("dp_tensor_copy: %s into %s: the element counts differ",
                 dp_tensor_shape_str(src, ss, sizeof ss), dp_tensor_shape_str(dst, ds, sizeof ds));
        return DP_ESHAPE;
    }
    if (dst->dtype != src->dtype) {
        DP_ERROR("dp_tensor_copy: %s into %s (dp_cast converts)", dp__dtype_name(src->dtype),
                 dp__dtype_name(dst->dtype));
        return DP_EINVAL;
    }
    return dp__tensor_copy_logical(dst, src);
}
