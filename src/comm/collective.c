/* What the allreduce algorithms run on (allreduce.h): kernels over ranges
 * of another device's memory and host functions over a tensor's memory,
 * issued through the device table. */
#include "comm/allreduce.h"
#include "core/internal.h"
#include "device/device.h"
#include "engine/stream.h"

#include <stddef.h>
#include <string.h>

static int check_range(const char *what, const dp_tensor_t *t, int64_t off, int64_t n)
{
    if (t->dtype != DP_F32 || off < 0 || n < 0 || off + n > dp__numel(t->ndim, t->shape)) {
        DP_ERROR("%s: range [%lld, %lld) is not inside a float tensor of %lld elements", what,
                 (long long)off, (long long)(off + n), (long long)dp__numel(t->ndim, t->shape));
        return DP_EINVAL;
    }
    return 0;
}

/* dst[dst_off..) += or = src[src_off..), n floats, on dst's device. */
static int range_op(bool add, dp_tensor_t *dst, int64_t dst_off, const dp_tensor_t *src,
                    int64_t src_off, int64_t n)
{
    const char *what = add ? "range add" : "range copy";
    DP_TRY(check_range(what, dst, dst_off, n));
    DP_TRY(check_range(what, src, src_off, n));
    if (n == 0)
        return 0;
    float *to = (float *)dst->data + dst_off;
    const float *from = (const float *)src->data + src_off;
    if (add) {
        dp__eltwise_args a = {.op = DP__ELT_ACCUMULATE, .a = from, .out = to, .n = n};
        DP_TRY(dst->dev->ops->eltwise(dst->dev, &a));
    } else {
        DP_TRY(dst->dev->ops->copy_device(dst->dev, to, from, (size_t)n * sizeof(float)));
    }
    dp__tensor_written(dst);
    return 0;
}

int dp__range_add(dp_tensor_t *dst, int64_t dst_off, const dp_tensor_t *src, int64_t src_off,
                  int64_t n)
{
    return range_op(true, dst, dst_off, src, src_off, n);
}

int dp__range_copy(dp_tensor_t *dst, int64_t dst_off, const dp_tensor_t *src, int64_t src_off,
                   int64_t n)
{
    return range_op(false, dst, dst_off, src, src_off, n);
}

/* Which devices' kernels may read which devices' buffers, checked before
 * the allreduce algorithms that add another device's buffer into their own
 * in a kernel: naive and ring, and the first step of mpi.
 *
 * CPU devices share this process's memory. A GPU's kernels read its own
 * memory, that of every logical device on it included, and another GPU's
 * only where peer access was enabled when the device opened; without it the
 * read is an illegal address that kills the CUDA context mid-step, so it is
 * refused up front instead. A CPU device cannot read a GPU's memory, nor a
 * GPU kernel a CPU device's pageable memory. NCCL and copies between
 * devices (dp__copy_between) need none of this. The backend answers
 * for two of its own devices (the device table's can_read). */
int dp__check_kernel_read(const char *what, dp_device_t *reader, dp_device_t *owner)
{
    bool gpu_reader = !dp_device_has(reader, DP_DEVICE_HOST_MEMORY);
    bool gpu_owner = !dp_device_has(owner, DP_DEVICE_HOST_MEMORY);
    if (!gpu_reader && !gpu_owner)
        return 0;
    if (gpu_reader && gpu_owner && reader->ops == owner->ops && reader->ops->can_read) {
        if (reader->ops->can_read(reader, owner))
            return 0;
        DP_ERROR("%s: %s cannot read the memory of %s: the two GPUs have no peer access; the "
                 "nccl algorithm sums across them without it",
                 what, reader->name, owner->name);
        return DP_ENOTSUP;
    }
    DP_ERROR("%s: %s cannot read the memory of %s in a kernel (a CPU device and a GPU)", what,
             reader->name, owner->name);
    return DP_ENOTSUP;
}

/* A command of dp__host_command: fn over host memory with its context. */
typedef struct host_cmd {
    dp__host_cmd_fn fn;
    void *host;
    _Alignas(16) unsigned char ctx[64];
} host_cmd;

static int run_host_cmd(void *p, void *ctx)
{
    (void)ctx;
    host_cmd *c = p;
    return c->fn(c->host, c->ctx);
}

static int run_free(void *p, void *ctx)
{
    (void)ctx;
    dp__free(*(void **)p);
    return 0;
}

int dp__host_command(dp_device_t *dev, void *data, size_t bytes, dp__host_cmd_fn fn,
                     const void *ctx, size_t ctx_size, const char *name)
{
    host_cmd c = {fn, data, {0}};
    DP_ASSERT(ctx_size <= sizeof c.ctx);
    memcpy(c.ctx, ctx, ctx_size);
    size_t size = offsetof(host_cmd, ctx) + ctx_size;
    if (dp_device_has(dev, DP_DEVICE_HOST_MEMORY)) {
        /* A CPU device's memory is this process's: fn reads it directly. */
        dp__stream_push_named(dev->stream, run_host_cmd, name, &c, size);
        return 0;
    }
    /* Through host memory: commands on a device's stream run after every
     * earlier one has finished, copies included. */
    void *host = dp__malloc(bytes);
    if (!host)
        return DP_ENOMEM;
    int rc = dev->ops->copy_to_host(dev, host, data, bytes);
    if (rc < 0) {
        dp__free(host);
        return rc;
    }
    c.host = host;
    dp__stream_push_named(dev->stream, run_host_cmd, name, &c, size);
    rc = dev->ops->copy_from_host(dev, data, host, bytes);
    /* Freed after the copy back, whether or not it was queued. */
    dp__stream_push_named(dev->stream, run_free, "free", &host, sizeof host);
    return rc;
}

typedef struct host_apply_args {
    dp__host_fn fn;
    int64_t n;
} host_apply_args;

static int run_host_fn(void *host, const void *ctx)
{
    const host_apply_args *a = ctx;
    return a->fn(host, a->n);
}

int dp__host_apply(dp_tensor_t *t, int64_t n, dp__host_fn fn, const char *name)
{
    DP_TRY(check_range(name, t, 0, n));
    if (n == 0)
        return 0;
    host_apply_args a = {fn, n};
    DP_TRY(dp__host_command(t->dev, t->data, (size_t)n * sizeof(float), run_host_fn, &a, sizeof a,
                            name));
    dp__tensor_written(t);
    return 0;
}
