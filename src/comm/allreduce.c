/* dp_allreduce_sum: checks the buffers, resolves AUTO for their devices and
 * runs one algorithm from the table below (one file each, allreduce.h). */
#include "dp/parallel.h"

#include "dp/dist.h"

#include "comm/allreduce.h"
#include "core/internal.h"

#include <string.h>

#define ALGO_COUNT 4

static const dp__allreduce_fn algos[ALGO_COUNT] = {
    [DP_ALLREDUCE_RING] = dp__allreduce_ring,
    [DP_ALLREDUCE_NAIVE] = dp__allreduce_naive,
    [DP_ALLREDUCE_MPI] = dp__allreduce_mpi,
    [DP_ALLREDUCE_NCCL] = dp__allreduce_nccl,
};
_Static_assert(DP_ALLREDUCE_NCCL + 1 == ALGO_COUNT, "one table entry per dp_allreduce_algo");

static const dp_named_value algo_names[] = {{"auto", DP_ALLREDUCE_AUTO},
                                            {"ring", DP_ALLREDUCE_RING},
                                            {"naive", DP_ALLREDUCE_NAIVE},
                                            {"mpi", DP_ALLREDUCE_MPI},
                                            {"nccl", DP_ALLREDUCE_NCCL}};
_Static_assert(DP_COUNTOF(algo_names) == ALGO_COUNT + 1, "a name for every dp_allreduce_algo");
const dp_name_table dp_allreduce_algo_names = DP_NAME_TABLE(algo_names);

int dp_allreduce_sum(dp_tensor_t *const *bufs, int n, dp_allreduce_algo algo)
{
    return dp__allreduce_sum_how(bufs, n, algo, NULL);
}

int dp__allreduce_sum_how(dp_tensor_t *const *bufs, int n, dp_allreduce_algo algo,
                          const dp__allreduce_how *how)
{
    if (n < 1 || n > DP_MAX_DEVICES) {
        DP_ERROR("allreduce: need 1..%d buffers", DP_MAX_DEVICES);
        return DP_EINVAL;
    }
    int64_t len = dp_tensor_numel(bufs[0]);
    for (int k = 0; k < n; k++) {
        if (dp_tensor_dtype(bufs[k]) != DP_F32 || dp_tensor_numel(bufs[k]) != len) {
            DP_ERROR("allreduce: buffer %d is not a float buffer of %lld elements", k,
                     (long long)len);
            return DP_ESHAPE;
        }
        for (int j = 0; j < k; j++) {
            if (dp_tensor_device(bufs[j]) == dp_tensor_device(bufs[k])) {
                DP_ERROR("allreduce: buffers %d and %d are on the same device %s", j, k,
                         dp_device_name(dp_tensor_device(bufs[k])));
                return DP_EINVAL;
            }
        }
    }
    dp_device_t *devs[DP_MAX_DEVICES];
    for (int k = 0; k < n; k++)
        devs[k] = dp_tensor_device(bufs[k]);
    algo = dp__allreduce_for(algo, devs, n);
    if ((int)algo < 0 || (int)algo >= ALGO_COUNT) {
        DP_ERROR("allreduce: unknown algorithm %d", (int)algo);
        return DP_EINVAL;
    }
    dp__allreduce_how whole = {0, len, false};
    if (!how)
        how = &whole;
    if (how->grid_off < 0 || how->grid_off + len > how->grid_len) {
        DP_ERROR("allreduce: elements [%lld, %lld) are not inside the whole of %lld",
                 (long long)how->grid_off, (long long)(how->grid_off + len),
                 (long long)how->grid_len);
        return DP_EINVAL;
    }
    return algos[algo](bufs, n, len, how);
}

const char *dp_allreduce_algo_name(dp_allreduce_algo algo)
{
    const char *name = dp_name_of(&dp_allreduce_algo_names, algo);
    return name ? name : "?";
}

dp_allreduce_algo dp_allreduce_resolve(dp_allreduce_algo algo)
{
    if (algo != DP_ALLREDUCE_AUTO)
        return algo;
    return dp_dist_size() > 1 ? DP_ALLREDUCE_MPI : DP_ALLREDUCE_RING;
}

/* On GPUs the ring's kernels read the neighbour GPU's memory, which needs
 * peer access; NCCL does not, and is faster there, so it is the default
 * wherever it applies. */
dp_allreduce_algo dp__allreduce_for(dp_allreduce_algo algo, dp_device_t *const *devs, int n)
{
    if (algo != DP_ALLREDUCE_AUTO || dp_dist_size() > 1)
        return dp_allreduce_resolve(algo);
    return dp__nccl_usable(devs, n) ? DP_ALLREDUCE_NCCL : DP_ALLREDUCE_RING;
}
