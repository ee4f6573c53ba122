/* DP_ALLREDUCE_NCCL: the devices' own collective library (NCCL, behind the
 * CUDA device table's group_allreduce entries in src/device/cuda/nccl.c).
 *
 * The allreduce is one command on the first device's worker that issues
 * every device's part:
 *   1. device 0's worker waits until every other worker has issued its
 *      earlier work (their device queues hold it, before the library's);
 *   2. the command runs the library's allreduce for every device at once;
 *   3. every other device's worker waits for that command, so its later
 *      work is issued after the library's on its queue.
 * Several logical devices on one GPU cannot be members of one group; they
 * take the ring algorithm instead (buffers on CPU devices are refused). It
 * is the default where every device is a distinct GPU (dp__nccl_suits):
 * unlike ring and naive it needs no peer access between them. */
#include "core/internal.h"
#include "parallel/allreduce.h"
#include "parallel/order.h"

static bool has_group(const dp_device_t *dev, const dp_device_t *first)
{
    return dev->ops == first->ops && dev->ops->group_allreduce_sum && dev->ops->group_allreduce_ok;
}

/* The default on GPUs (dp__allreduce_for): the library needs no peer
 * access, which the ring and naive algorithms' kernels do across GPUs. */
bool dp__nccl_suits(dp_device_t *const *devs, int n)
{
    if (n < 2)
        return false;
    for (int k = 0; k < n; k++)
        if (!has_group(devs[k], devs[0]))
            return false;
    return devs[0]->ops->group_allreduce_ok(devs, n);
}

int dp__allreduce_nccl(dp_tensor_t *const *bufs, int n, int64_t len)
{
    if (n < 2 || len == 0)
        return 0;
    dp_device_t *d0 = bufs[0]->dev, *devs[DP_MAX_DEVICES];
    float *data[DP_MAX_DEVICES];
    for (int k = 0; k < n; k++) {
        devs[k] = bufs[k]->dev;
        data[k] = bufs[k]->data;
        if (!has_group(devs[k], d0)) {
            DP_ERROR("allreduce nccl: buffer %d is on %s, not a GPU with NCCL", k, devs[k]->name);
            return DP_ENOTSUP;
        }
    }
    if (!d0->ops->group_allreduce_ok(devs, n)) {
        static int said;
        if (!said++)
            DP_INFO("allreduce nccl: several devices share a GPU; using the ring algorithm");
        return dp__allreduce_ring(bufs, n, len);
    }
    for (int k = 1; k < n; k++)
        dp__after(d0, devs[k]);
    DP_TRY(d0->ops->group_allreduce_sum(devs, data, n, len));
    for (int k = 1; k < n; k++)
        dp__after(devs[k], d0);
    return 0;
}
