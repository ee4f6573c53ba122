/* DP_ALLREDUCE_RING: reduce-scatter then all-gather around the ring of
 * devices; device k+1's kernels read device k's buffer. */
#include "comm/allreduce.h"
#include "core/internal.h"

/* Ring allreduce over n chunks. Reduce-scatter: in step s, device k+1 adds
 * device k's chunk (k - s) mod n into its own; after n-1 steps device k holds
 * the full sum of chunk (k + 1) mod n. All-gather: in step s, device k+1
 * copies chunk (k + 1 - s) mod n from device k. Each device sends 2(n-1)/n of
 * the buffer. Before each step every device waits for its two neighbours'
 * previous step: the left one wrote what it reads, the right one read what
 * it is about to write. */
int dp__allreduce_ring(dp_tensor_t *const *bufs, int n, int64_t len, const dp__allreduce_how *how)
{
    if (n < 2)
        return 0;
    /* Device k+1's kernels read device k's buffer: refused up front where
     * they cannot (two GPUs without peer access), as in reduce_to_first. */
    for (int k = 0; k < n; k++)
        DP_TRY(dp__check_kernel_read("allreduce ring", dp_tensor_device(bufs[(k + 1) % n]),
                                     dp_tensor_device(bufs[k])));
    /* Chunk c of the whole is [W c / n, W (c + 1) / n); this buffer holds
     * the whole's [grid_off, grid_off + len), so its part of chunk c is that
     * range shifted and clipped (possibly empty). */
    int64_t start[DP_MAX_DEVICES + 1];
    for (int c = 0; c <= n; c++)
        start[c] = DP_MIN(DP_MAX(how->grid_len * c / n - how->grid_off, 0), len);
    dp_event prev[DP_MAX_DEVICES];
    for (int k = 0; k < n; k++)
        prev[k] = dp_event_record(dp_tensor_device(bufs[k]));
    for (int phase = 0; phase < 2; phase++) {
        for (int s = 0; s < n - 1; s++) {
            for (int k = 0; k < n; k++) {
                int r = (k + 1) % n; /* receiver */
                dp_device_t *dev = dp_tensor_device(bufs[r]);
                dp_stream_wait_event(dev, prev[k]);
                dp_stream_wait_event(dev, prev[(r + 1) % n]);
                int c = phase == 0 ? ((k - s) % n + n) % n : ((k + 1 - s) % n + n) % n;
                int64_t cl = start[c + 1] - start[c];
                DP_TRY(phase == 0 ? dp__range_add(bufs[r], start[c], bufs[k], start[c], cl)
                                  : dp__range_copy(bufs[r], start[c], bufs[k], start[c], cl));
            }
            for (int k = 0; k < n; k++)
                prev[k] = dp_event_record(dp_tensor_device(bufs[k]));
        }
    }
    /* The neighbours read this buffer in the last step: wait for them before
     * it is written again. */
    for (int k = 0; k < n; k++) {
        dp_stream_wait_event(dp_tensor_device(bufs[k]), prev[(k + 1) % n]);
        dp_stream_wait_event(dp_tensor_device(bufs[k]), prev[(k + n - 1) % n]);
    }
    return 0;
}
