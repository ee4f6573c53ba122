/* DP_ALLREDUCE_NAIVE, the seed's allreduce: every buffer added into device
 * 0's, which is then copied back into each device's own buffer. Device 0's
 * kernels read the other devices' buffers. */
#include "comm/allreduce.h"
#include "core/internal.h"

/* The first half of the seed's allreduce: data[0] += data[i] for every i. */
int dp__reduce_to_first(dp_tensor_t *const *bufs, int n, int64_t len)
{
    dp_device_t *d0 = dp_tensor_device(bufs[0]);
    /* Device 0's kernel reads every other buffer: across two GPUs without
     * peer access that is an illegal address, so refuse before issuing. */
    for (int i = 1; i < n; i++)
        DP_TRY(dp__check_kernel_read("allreduce", d0, dp_tensor_device(bufs[i])));
    for (int i = 1; i < n; i++) {
        dp__after(d0, dp_tensor_device(bufs[i]));
        DP_TRY(dp__range_add(bufs[0], 0, bufs[i], 0, len));
    }
    return 0;
}

/* The second half: data[0] copied back into each device's own buffer (in
 * place: the d2l version that rebinds data[i] leaves the other devices
 * without the sum). */
int dp__broadcast_from_first(dp_tensor_t *const *bufs, int n, int64_t len)
{
    dp_device_t *d0 = dp_tensor_device(bufs[0]);
    for (int i = 1; i < n; i++) {
        dp__after(dp_tensor_device(bufs[i]), d0);
        DP_TRY(dp__range_copy(bufs[i], 0, bufs[0], 0, len));
    }
    /* Device 0 writes its buffer again only after every copy has read it. */
    for (int i = 1; i < n; i++)
        dp__after(d0, dp_tensor_device(bufs[i]));
    return 0;
}

int dp__allreduce_naive(dp_tensor_t *const *bufs, int n, int64_t len, const dp__allreduce_how *how)
{
    (void)how;
    if (n < 2)
        return 0;
    DP_TRY(dp__reduce_to_first(bufs, n, len));
    return dp__broadcast_from_first(bufs, n, len);
}
