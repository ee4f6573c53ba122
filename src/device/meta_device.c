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

/* A kernel that runs nothing, for every slot of the op list: the op has
 * checked the shapes already. */
/* clang-format off */
#define KERNEL(slot, args, x)                                \
    static int meta_##slot(dp_device_t *dev, const args *a) \
    {                                                        \
        (void)dev;                                           \
        (void)a;                                             \
        return 0;                                            \
    }
#define LINE(name, args, kernels, backends, cost) DP__OP_SLOTS_##kernels(KERNEL, name, args, ~)
DP__OP_LIST(LINE)
#undef LINE
#undef KERNEL
/* clang-format on */

const dp__device_ops dp__meta_ops = {
    .kind = "meta",
    .traces = true,
    .caps = DP_DEVICE_DETERMINISTIC,
    .open = meta_open,
    .close = meta_close,
    .alloc = meta_alloc,
    .free = meta_free,
    .upload_fresh = meta_copy,
    .copy_from_host = meta_copy,
    .copy_to_host = meta_copy,
    .copy_device = meta_copy,
/* clang-format off */
#define KERNEL(slot, args, x) .slot = meta_##slot,
#define LINE(name, args, kernels, backends, cost) DP__OP_SLOTS_##kernels(KERNEL, name, args, ~)
    DP__OP_LIST(LINE)
#undef LINE
#undef KERNEL
    /* clang-format on */
};
