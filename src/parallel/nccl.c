/* DP_ALLREDUCE_NCCL: NCCL over the GPUs of this process (CUDA builds).
 *
 * One communicator clique per set of GPUs, made with ncclCommInitAll and
 * kept for the life of the process (as PyTorch keeps its NCCL groups). The
 * allreduce is one host command on the first device's worker that launches
 * every GPU's part in one NCCL group, each on its device's CUDA stream:
 *   1. device 0's worker waits until every other worker has issued its
 *      earlier work (their CUDA streams hold it, before NCCL's kernels);
 *   2. the command runs ncclAllReduce for every device in a group;
 *   3. every other device's worker waits for that command, so its later
 *      work is issued after NCCL's kernel on its stream.
 * Several logical devices on one GPU cannot be NCCL ranks of one clique;
 * they take the ring algorithm instead (buffers on CPU devices are refused).
 * NCCL is the default where every device is a distinct GPU (dp__nccl_suits):
 * unlike ring and naive it needs no peer access between them. */
#include "core/internal.h"
#include "parallel/comm.h"

#ifndef DP_HAVE_CUDA

bool dp__nccl_suits(dp_device_t *const *devs, int n)
{
    (void)devs;
    (void)n;
    return false;
}

int dp__allreduce_nccl(dp_tensor_t *const *bufs, int n, int64_t len)
{
    (void)bufs;
    (void)n;
    (void)len;
    DP_ERROR("allreduce nccl: this build has no CUDA backend");
    return DP_ENOTSUP;
}

#else

#include "device/cuda/cuda.h"
#include "dp/parallel.h"

#include <nccl.h>
#include <string.h>

#define DP_NCCL_CHECK(call)                                                                        \
    do {                                                                                           \
        ncclResult_t dp__nr = (call);                                                              \
        if (dp__nr != ncclSuccess) {                                                               \
            DP_ERROR("NCCL: %s failed: %s", #call, ncclGetErrorString(dp__nr));                    \
            return DP_EDEVICE;                                                                     \
        }                                                                                          \
    } while (0)

#define MAX_CLIQUES 8

/* Communicators of one ordered list of GPUs. */
typedef struct clique {
    int n;
    int ordinals[DP_MAX_DEVICES];
    ncclComm_t comms[DP_MAX_DEVICES];
} clique;

static pthread_mutex_t cliques_mu = PTHREAD_MUTEX_INITIALIZER;
static clique cliques[MAX_CLIQUES];
static int ncliques;

static int clique_get(const int *ordinals, int n, clique **out)
{
    int rc = 0;
    pthread_mutex_lock(&cliques_mu);
    for (int i = 0; i < ncliques; i++) {
        if (cliques[i].n == n &&
            memcmp(cliques[i].ordinals, ordinals, (size_t)n * sizeof *ordinals) == 0) {
            *out = &cliques[i];
            pthread_mutex_unlock(&cliques_mu);
            return 0;
        }
    }
    if (ncliques == MAX_CLIQUES) {
        DP_ERROR("allreduce nccl: more than %d sets of GPUs in one process", MAX_CLIQUES);
        rc = DP_EINVAL;
    } else {
        clique *c = &cliques[ncliques];
        ncclResult_t r = ncclCommInitAll(c->comms, n, ordinals);
        if (r != ncclSuccess) {
            DP_ERROR("NCCL: ncclCommInitAll over %d GPUs failed: %s", n, ncclGetErrorString(r));
            rc = DP_EDEVICE;
        } else {
            c->n = n;
            memcpy(c->ordinals, ordinals, (size_t)n * sizeof *ordinals);
            ncliques++;
            *out = c;
        }
    }
    pthread_mutex_unlock(&cliques_mu);
    return rc;
}

/* One allreduce; too large to travel inline in a command, so the command
 * carries a pointer and frees it. */
typedef struct nccl_job {
    clique *cl;
    float *data[DP_MAX_DEVICES];
    cudaStream_t streams[DP_MAX_DEVICES];
    bool sync; /* synchronous devices: wait for the GPUs before returning */
    int64_t len;
} nccl_job;

static int allreduce(const nccl_job *a)
{
    int n = a->cl->n;
    DP_NCCL_CHECK(ncclGroupStart());
    for (int k = 0; k < n; k++) {
        ncclResult_t r = ncclAllReduce(a->data[k], a->data[k], (size_t)a->len, ncclFloat, ncclSum,
                                       a->cl->comms[k], a->streams[k]);
        if (r != ncclSuccess) {
            ncclGroupEnd();
            DP_ERROR("NCCL: ncclAllReduce on GPU %d failed: %s", a->cl->ordinals[k],
                     ncclGetErrorString(r));
            return DP_EDEVICE;
        }
    }
    DP_NCCL_CHECK(ncclGroupEnd());
    if (a->sync)
        for (int k = 0; k < n; k++)
            DP_CUDA_CHECK(cudaStreamSynchronize(a->streams[k]));
    return 0;
}

static int run_allreduce(void *p, void *ctx)
{
    nccl_job *job = *(nccl_job **)p;
    (void)ctx;
    int rc = allreduce(job);
    dp__free(job);
    return rc;
}

/* The default on GPUs (dp__allreduce_for): NCCL needs no peer access,
 * which the ring and naive algorithms' kernels do across GPUs. */
bool dp__nccl_suits(dp_device_t *const *devs, int n)
{
    if (n < 2)
        return false;
    for (int k = 0; k < n; k++) {
        if (devs[k]->ops != &dp__cuda_ops)
            return false;
        for (int j = 0; j < k; j++)
            if (((dp__cuda *)devs[j]->impl)->ordinal == ((dp__cuda *)devs[k]->impl)->ordinal)
                return false;
    }
    return true;
}

int dp__allreduce_nccl(dp_tensor_t *const *bufs, int n, int64_t len)
{
    if (n == 1 || len == 0)
        return 0;
    int ordinals[DP_MAX_DEVICES];
    bool shared = false;
    for (int k = 0; k < n; k++) {
        dp_device_t *dev = bufs[k]->dev;
        if (dev->ops != &dp__cuda_ops) {
            DP_ERROR("allreduce nccl: buffer %d is on %s, not a GPU", k, dev->name);
            return DP_EINVAL;
        }
        ordinals[k] = ((dp__cuda *)dev->impl)->ordinal;
        for (int j = 0; j < k; j++)
            shared = shared || ordinals[j] == ordinals[k];
    }
    if (shared) {
        static int said;
        if (!said++)
            DP_INFO("allreduce nccl: several devices share a GPU; using the ring algorithm");
        return dp_allreduce_sum(bufs, n, DP_ALLREDUCE_RING);
    }
    clique *cl;
    DP_TRY(clique_get(ordinals, n, &cl));
    nccl_job *job = dp__calloc(1, sizeof *job);
    if (!job)
        return DP_ENOMEM;
    job->cl = cl;
    job->len = len;
    for (int k = 0; k < n; k++) {
        dp__cuda *cu = bufs[k]->dev->impl;
        job->data[k] = bufs[k]->data;
        job->streams[k] = cu->stream;
        job->sync = job->sync || !cu->async;
    }
    dp_device_t *d0 = bufs[0]->dev;
    for (int k = 1; k < n; k++)
        dp__after(d0, bufs[k]->dev);
    DP_TRY(dp__cuda_push(d0, run_allreduce, &job, sizeof job));
    for (int k = 1; k < n; k++)
        dp__after(bufs[k]->dev, d0);
    return 0;
}

#endif
