/* DP_ALLREDUCE_MPI, hierarchical: the rank's devices sum into the first
 * device's buffer (naive's first half), that buffer is summed across the
 * ranks by MPI on the first device's worker (mpi.c), and the result is
 * copied back to the rank's devices (naive's second half). With one rank it
 * is the naive algorithm. */
#include "dp/dist.h"

#include "core/internal.h"
#include "parallel/allreduce.h"
#include "parallel/dist.h"

typedef struct rank_sum_args {
    float *data;
    int64_t len;
} rank_sum_args;

/* Runs on the first device's worker, after the rank's devices have summed
 * into its buffer: the sum over the ranks, in place. */
static int run_rank_sum(void *p, void *ctx)
{
    (void)ctx;
    rank_sum_args *a = p;
    return dp__dist_sum_grads(a->data, a->len);
}

static int run_free(void *p, void *ctx)
{
    (void)ctx;
    dp__free(*(void **)p);
    return 0;
}

int dp__allreduce_mpi(dp_tensor_t *const *bufs, int n, int64_t len)
{
    DP_TRY(dp__reduce_to_first(bufs, n, len));
    if (dp_dist_size() > 1 && len > 0) {
        dp_device_t *d0 = bufs[0]->dev;
        rank_sum_args a = {bufs[0]->data, len};
        if (dp_device_has(d0, DP_DEVICE_HOST_MEMORY)) {
            /* A CPU device's memory is this process's: MPI reads it directly. */
            dp__stream_push_named(d0->stream, run_rank_sum, "mpi_allreduce", &a, sizeof a);
        } else {
            /* Through host memory: commands on a device's stream run after
             * every earlier one has finished, copies included. */
            size_t bytes = (size_t)len * sizeof(float);
            float *host_buf = dp__malloc(bytes);
            if (!host_buf)
                return DP_ENOMEM;
            a.data = host_buf;
            DP_TRY(d0->ops->copy_to_host(d0, host_buf, bufs[0]->data, bytes));
            dp__stream_push_named(d0->stream, run_rank_sum, "mpi_allreduce", &a, sizeof a);
            DP_TRY(d0->ops->copy_from_host(d0, bufs[0]->data, host_buf, bytes));
            dp__stream_push_named(d0->stream, run_free, "free", &host_buf, sizeof host_buf);
        }
    }
    return dp__broadcast_from_first(bufs, n, len);
}
