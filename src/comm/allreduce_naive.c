/* DP_ALLREDUCE_NAIVE, the seed's allreduce: every buffer added into device
 * 0's, which is then copied back into each device's own buffer. Device 0's
 * kernels read the other devices' buffers. */
#include "comm/allreduce.h"
#include "core/internal.h"

/* The first half of the seed's allreduce, data[0] = the sum of every
 * data[i], added pairwise: data[i] += data[i + s] for s = 1, 2, 4, ...
 * and i a multiple of 2 s, each on device i's stream. For 2 devices that
 * is the seed's data[0] += data[1]; for 2^j it is the tree that a batch's
 * split-invariant sums take (dp_set_split_invariant), so 4 devices give
 * the bits of one device. The other buffers hold partial sums after it
 * (the broadcast overwrites them). */
int dp__reduce_to_first(dp_tensor_t *const *bufs, int n, int64_t len)
{
    /* Device i's kernel reads device i + s's buffer: across two GPUs
     * without peer access that is an illegal address, so refuse before
     * issuing. */
    for (int s = 1; s < n; s *= 2)
        for (int i = 0; i + s < n; i += 2 * s)
            DP_TRY(dp__check_kernel_read("allreduce", dp_tensor_device(bufs[i]),
                                         dp_tensor_device(bufs[i + s])));
    for (int s = 1; s < n; s *= 2) {
        for (int i = 0; i + s < n; i += 2 * s) {
            dp_device_t *di = dp_tensor_device(bufs[i]), *dj = dp_tensor_device(bufs[i + s]);
            dp__after(di, dj);
            DP_TRY(dp__range_add(bufs[i], 0, bufs[i + s], 0, len));
            /* device i + s writes its buffer again only after this read */
            dp__after(dj, di);
        }
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
