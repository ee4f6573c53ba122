/* DP_ALLREDUCE_NCCL: NCCL (the NCCL backend, nccl.c) sums the GPUs'
 * buffers. One command on the first device's worker issues every device's
 * part:
 *   1. device 0's worker waits until every other worker has issued its
 *      earlier work (their GPU streams hold it, before NCCL's);
 *   2. the command runs NCCL's allreduce for every device at once;
 *   3. every other device's worker waits for that command, so its later
 *      work is issued after NCCL's on its stream.
 *
 * Several logical devices on one GPU cannot be members of one group; they
 * take the ring algorithm instead (buffers on CPU devices are refused). It
 * is the default where every device is a distinct GPU (dp__allreduce_for):
 * unlike ring and naive it needs no peer access between them. */
#include "comm/allreduce.h"
#include "core/internal.h"
#include "device/device.h"

int dp__allreduce_nccl(dp_tensor_t *const *bufs, int n, int64_t len, const dp__allreduce_how *how)
{
    if (n < 2 || len == 0)
        return 0;
    dp_device_t *devs[DP_MAX_DEVICES];
    float *data[DP_MAX_DEVICES];
    for (int k = 0; k < n; k++) {
        devs[k] = bufs[k]->dev;
        data[k] = bufs[k]->data;
    }
    for (int k = 1; k < n; k++) {
        dp_device_t *pair[2] = {devs[0], devs[k]};
        if (!dp__nccl_available(pair, 2)) {
            DP_ERROR("allreduce nccl: buffer %d is on %s, not a GPU with NCCL", k,
                     dp_device_name(devs[k]));
            return DP_ENOTSUP;
        }
    }
    if (!dp__nccl_usable(devs, n)) {
        static int said;
        if (!said++)
            DP_INFO("allreduce nccl: several devices share a GPU; using the ring algorithm");
        return dp__allreduce_ring(bufs, n, len, how);
    }
    for (int k = 1; k < n; k++)
        dp__after(devs[0], devs[k]);
    DP_TRY(dp__nccl_enqueue_sum(devs, data, n, len));
    for (int k = 1; k < n; k++)
        dp__after(devs[k], devs[0]);
    for (int k = 0; k < n; k++)
        dp__tensor_written(bufs[k]);
    return 0;
}
