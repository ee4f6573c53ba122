/* The meta device ("meta:0", PyTorch's device="meta"): tensors with shapes
 * and no memory, kernels that run nothing. A forward on it walks every op's
 * shape checks and records the tape as on a real device, so dp_model_summary
 * learns the shapes, parameters and FLOPs of a model whose weights or
 * activations would not fit in memory, at no cost.
 *
 * Its blocks are distinct addresses that nothing may read or write: each
 * allocation takes the next range of a counter of its own. Copies to the
 * host leave the host buffer as it was; a caller that reads values back has
 * no business on this device. */
#include "device/device.h"

#include "core/internal.h"

#include <stdint.h>

typedef struct meta_device {
    uintptr_t next; /* the next block's address */
} meta_device;

static int meta_open(dp_device_t *dev)
{
    meta_device *m = dp__calloc(1, sizeof *m);
    if (!m)
        return DP_ENOMEM;
    /* Past the zero page, so that no block is NULL. */
    m->next = 1u << 16;
    dev->impl = m;
    /* A stream like any device's: the engine orders and waits on it. */
    int rc = dp__stream_init(&dev->stream, dev->name, NULL, dev);
    if (rc < 0) {
        dp__free(m);
        dev->impl = NULL;
    }
    return rc;
}

static void meta_close(dp_device_t *dev)
{
    dp__stream_close(dev->stream);
    dp__free(dev->impl);
}

static void *meta_alloc(dp_device_t *dev, size_t bytes)
{
    meta_device *m = dev->impl;
    size_t step = (bytes + 63) & ~(size_t)63;
    /* The front end allocates (one thread per device), so no lock; a range
     * that would wrap the address space is refused as out of memory. */
    if (step == 0 || m->next > UINTPTR_MAX / 2 - step)
        return NULL;
    void *p = (void *)m->next;
    m->next += step;
    return p;
}

static void meta_free(dp_device_t *dev, void *p)
{
    (void)dev;
    (void)p;
}

static int meta_copy(dp_device_t *dev, void *dst, const void *src, size_t bytes)
{
    (void)dev;
    (void)dst;
    (void)src;
    (void)bytes;
    return 0;
}

/* A kernel that runs nothing: the op has checked the shapes already. */
#define META_KERNEL(name, args_type)                                                               \
    static int meta_##name(dp_device_t *dev, const args_type *a)                                   \
    {                                                                                              \
        (void)dev;                                                                                 \
        (void)a;                                                                                   \
        return 0;                                                                                  \
    }
META_KERNEL(fill, dp__fill_args)
META_KERNEL(conv2d, dp__conv2d_args)
META_KERNEL(pool2d, dp__pool2d_args)
META_KERNEL(eltwise, dp__eltwise_args)
META_KERNEL(dropout, dp__dropout_args)
META_KERNEL(gemm, dp__gemm_args)
META_KERNEL(bias, dp__bias_args)
META_KERNEL(relayout, dp__relayout_args)
META_KERNEL(xent, dp__xent_args)
META_KERNEL(accuracy, dp__accuracy_args)
META_KERNEL(sgd, dp__sgd_args)
META_KERNEL(batch_norm, dp__batch_norm_args)
META_KERNEL(adaptive_pool, dp__adaptive_pool_args)
META_KERNEL(check_finite, dp__check_finite_args)

const dp__device_ops dp__meta_ops = {
    .kind = "meta",
    .caps = DP_DEVICE_DETERMINISTIC,
    .open = meta_open,
    .close = meta_close,
    .alloc = meta_alloc,
    .free = meta_free,
    .upload_fresh = meta_copy,
    .copy_from_host = meta_copy,
    .copy_to_host = meta_copy,
    .copy_device = meta_copy,
    .fill = meta_fill,
    .conv2d_forward = meta_conv2d,
    .conv2d_backward_data = meta_conv2d,
    .conv2d_backward_weights = meta_conv2d,
    .pool2d_forward = meta_pool2d,
    .pool2d_backward = meta_pool2d,
    .eltwise = meta_eltwise,
    .dropout = meta_dropout,
    .gemm = meta_gemm,
    .bias_add = meta_bias,
    .bias_grad = meta_bias,
    .relayout = meta_relayout,
    .cross_entropy_forward = meta_xent,
    .cross_entropy_backward = meta_xent,
    .accuracy = meta_accuracy,
    .sgd = meta_sgd,
    .batch_norm_forward = meta_batch_norm,
    .batch_norm_backward = meta_batch_norm,
    .adaptive_avg_pool_forward = meta_adaptive_pool,
    .adaptive_avg_pool_backward = meta_adaptive_pool,
    .check_finite = meta_check_finite,
};
