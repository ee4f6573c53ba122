/* DP_ALLREDUCE_MPI, hierarchical: the rank's devices sum into the first
 * device's buffer (naive's first half), that buffer is summed across the
 * ranks by MPI on the first device's worker (mpi.c), and the result is
 * copied back to the rank's devices (naive's second half). With one rank it
 * is the naive algorithm. */
#include "dp/dist.h"

#include "comm/allreduce.h"
#include "comm/mpi.h"
#include "core/internal.h"

int dp__allreduce_mpi(dp_tensor_t *const *bufs, int n, int64_t len, const dp__allreduce_how *how)
{
    DP_TRY(dp__reduce_to_first(bufs, n, len));
    /* On the first device's worker, after the rank's devices have summed
     * into its buffer: the sum over the ranks, in place (through host
     * memory where the device's is not the host's). */
    if (dp_dist_size() > 1)
        DP_TRY(dp__host_apply(bufs[0], len,
                              how->bf16 ? dp__dist_sum_grads_bf16 : dp__dist_sum_grads,
                              how->bf16 ? "mpi_allgather_bf16" : "mpi_allreduce"));
    return dp__broadcast_from_first(bufs, n, len);
}
