/* DP_ALLREDUCE_NCCL: NCCL over the GPUs of this process (CUDA builds). */
#include "core/internal.h"
#include "parallel/comm.h"

int dp__allreduce_nccl(dp_tensor_t *const *bufs, int n, int64_t len)
{
    (void)bufs;
    (void)n;
    (void)len;
    DP_ERROR("allreduce nccl: this build has no CUDA backend");
    return DP_ENOTSUP;
}
