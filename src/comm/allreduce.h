/* Inside src/comm/: the allreduce algorithms behind dp_allreduce_sum, one
 * file each, and what they share. allreduce.c dispatches through a table of
 * dp__allreduce_fn indexed by dp_allreduce_algo; no algorithm calls the
 * dispatcher.
 *
 *   allreduce_naive.c  the seed's: sum into bufs[0], copy back
 *   allreduce_ring.c   reduce-scatter + all-gather between neighbours
 *   allreduce_mpi.c    hierarchical: naive's halves around a sum across
 *                      the ranks (the MPI backend, mpi.c)
 *   allreduce_nccl.c   the devices' collective library (the device table's
 *                      group_allreduce entries), ring where it cannot */
#ifndef DP_COMM_ALLREDUCE_H
#define DP_COMM_ALLREDUCE_H

#include "comm/comm.h"
#include "device/collective.h"

#include <stdbool.h>

/* How one allreduce runs beyond its buffers.
 * grid_off, grid_len: the buffers are elements [grid_off, grid_off + len)
 *   of a whole of grid_len (a bucket of the gradient buffer). The ring cuts
 *   the whole into its n chunks, so that each element is summed in the same
 *   order whether the whole is reduced at once or bucket by bucket; the
 *   other algorithms sum each element in one order anyway.
 * bf16: across ranks, each rank's sum is rounded to bfloat16 before it is
 *   sent and the ranks' values are added in float32 after (mpi only). */
typedef struct dp__allreduce_how {
    int64_t grid_off, grid_len;
    bool bf16;
} dp__allreduce_how;

/* One algorithm: afterwards every bufs[k] holds the elementwise sum over k.
 * The buffers are already checked (1 <= n <= DP_MAX_DEVICES, float, `len`
 * elements each, on distinct devices); the work is enqueued, and the
 * primitives of device/collective.h mark the buffers written. */
typedef int (*dp__allreduce_fn)(dp_tensor_t *const *bufs, int n, int64_t len,
                                const dp__allreduce_how *how);

int dp__allreduce_ring(dp_tensor_t *const *bufs, int n, int64_t len, const dp__allreduce_how *how);
int dp__allreduce_naive(dp_tensor_t *const *bufs, int n, int64_t len, const dp__allreduce_how *how);
int dp__allreduce_mpi(dp_tensor_t *const *bufs, int n, int64_t len, const dp__allreduce_how *how);
int dp__allreduce_nccl(dp_tensor_t *const *bufs, int n, int64_t len, const dp__allreduce_how *how);

/* dp_allreduce_sum with a `how` (NULL: the whole buffer, float32). */
int dp__allreduce_sum_how(dp_tensor_t *const *bufs, int n, dp_allreduce_algo algo,
                          const dp__allreduce_how *how);

/* The two halves of the naive algorithm, the first and last step of the mpi
 * one: bufs[0] += bufs[i]; then bufs[i] = bufs[0]. */
int dp__reduce_to_first(dp_tensor_t *const *bufs, int n, int64_t len);
int dp__broadcast_from_first(dp_tensor_t *const *bufs, int n, int64_t len);

/* Whether the nccl algorithm sums over `devs` as one group: n > 1 distinct
 * devices whose backend has a collective library (allreduce_nccl.c); AUTO
 * takes it there (dp__allreduce_for, comm.h). */
bool dp__nccl_suits(dp_device_t *const *devs, int n);

#endif
