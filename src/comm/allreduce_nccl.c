/* DP_ALLREDUCE_NCCL: the devices' own collective library (NCCL, behind the
 * CUDA device table's group_allreduce entries in src/device/cuda/nccl.c,
 * reached through allreduce.h). One command on the first device's
 * worker issues every device's part (dp__group_allreduce_sum).
 *
 * Several logical devices on one GPU cannot be members of one group; they
 * take the ring algorithm instead (buffers on CPU devices are refused). It
 * is the default where every device is a distinct GPU (dp__nccl_suits):
 * unlike ring and naive it needs no peer access between them. */
#include "comm/allreduce.h"
#include "core/internal.h"

/* The default on GPUs (dp__allreduce_for): the library needs no peer
 * access, which the ring and naive algorithms' kernels do across GPUs. */
bool dp__nccl_suits(dp_device_t *const *devs, int n)
{
    return dp__group_allreduce_usable(devs, n);
}

int dp__allreduce_nccl(dp_tensor_t *const *bufs, int n, int64_t len, const dp__allreduce_how *how)
{
    if (n < 2 || len == 0)
        return 0;
    dp_device_t *devs[DP_MAX_DEVICES];
    for (int k = 0; k < n; k++)
        devs[k] = dp_tensor_device(bufs[k]);
    for (int k = 1; k < n; k++) {
        dp_device_t *pair[2] = {devs[0], devs[k]};
        if (!dp__group_allreduce_available(pair, 2)) {
            DP_ERROR("allreduce nccl: buffer %d is on %s, not a GPU with NCCL", k,
                     dp_device_name(devs[k]));
            return DP_ENOTSUP;
        }
    }
    if (!dp__group_allreduce_usable(devs, n)) {
        static int said;
        if (!said++)
            DP_INFO("allreduce nccl: several devices share a GPU; using the ring algorithm");
        return dp__allreduce_ring(bufs, n, len, how);
    }
    return dp__group_allreduce_sum(bufs, n, len);
}
