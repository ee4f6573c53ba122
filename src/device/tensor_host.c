/* Tensors over the caller's host memory (DLPack's two directions) and the
 * timed wait for a tensor: what a front end that shares memory with NumPy
 * and PyTorch, and waits in slices to see its interrupts, needs of the
 * device layer. */
#include "core/internal.h"
#include "device/device.h"

#include <stdint.h>

int dp_tensor_wrap_host(dp_tensor_t **out, dp_device_t *dev, dp_dtype dtype, int ndim,
                        const int64_t *shape, void *data, void (*release)(void *ctx), void *ctx)
{
    if (!dp_device_has(dev, DP_DEVICE_HOST_MEMORY)) {
        DP_ERROR("dp_tensor_wrap_host: %s does not hold host memory (a CPU device does)",
                 dev->name);
        return DP_ENOTSUP;
    }
    if ((unsigned)dtype > DP_BF16 || (dtype == DP_BF16 && !dp_device_has(dev, DP_DEVICE_BF16))) {
        DP_ERROR("dp_tensor_wrap_host: %s has no tensors of dtype %d", dev->name, (int)dtype);
        return DP_EINVAL;
    }
    DP_TRY(dp__tensor_check_shape(dtype, ndim, shape));
    size_t size = dp_dtype_size(dtype);
    if ((!data && dp__numel(ndim, shape) > 0) || (uintptr_t)data % size != 0) {
        DP_ERROR("dp_tensor_wrap_host: data at %p is not an array of %zu-byte elements", data,
                 size);
        return DP_EINVAL;
    }
    dp_tensor_t *t = dp__tensor_view(dev, dtype, ndim, shape, data);
    if (!t)
        return DP_ENOMEM;
    t->release = release;
    t->release_ctx = ctx;
    *out = t;
    return 0;
}

typedef struct release_call {
    void (*release)(void *ctx);
    void *ctx;
} release_call;

static int run_release(void *p, void *worker_ctx)
{
    const release_call *c = p;
    (void)worker_ctx;
    c->release(c->ctx);
    return 0;
}

void dp__tensor_release_wrapped(const dp_tensor_t *t)
{
    release_call c = {t->release, t->release_ctx};
    dp__stream_push(t->dev->stream, run_release, &c, sizeof c);
}

void *dp_tensor_host_data(const dp_tensor_t *t)
{
    if (!t || !dp_device_has(t->dev, DP_DEVICE_HOST_MEMORY) || t->nhwc)
        return NULL;
    return t->data;
}

void dp_tensor_set_shared(dp_tensor_t *t)
{
    t->shared = 1;
    if (t->base)
        ((dp_tensor_t *)t->base)->shared = 1;
}

bool dp_tensor_is_shared(const dp_tensor_t *t)
{
    if (t->shared || t->release)
        return true;
    if (t->base)
        return t->base->shared;
    return !t->owns_data;
}

bool dp_tensor_may_share_memory(const dp_tensor_t *a, const dp_tensor_t *b)
{
    if (!a || !b)
        return false;
    if (a == b)
        return true;
    if (a->dev != b->dev || !a->data || !b->data)
        return false;
    const char *a0 = a->data, *b0 = b->data;
    return a0 < b0 + b->bytes && b0 < a0 + a->bytes;
}

int dp_tensor_wait_for(const dp_tensor_t *t, double seconds)
{
    return dp__stream_wait_seconds(t->dev->stream, dp__tensor_ready_seq(t), seconds,
                                   "dp_tensor_wait_for");
}
