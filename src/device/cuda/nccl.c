/* NCCL, the CUDA device table's collective library (group_allreduce_ok and
 * group_allreduce_sum; src/parallel/allreduce_nccl.c orders the devices'
 * streams around it).
 *
 * One communicator clique per set of GPUs, made with ncclCommInitAll and
 * kept for the life of the process (as PyTorch keeps its NCCL groups). The
 * allreduce is one host command on the first device's worker that launches
 * every GPU's part in one NCCL group, each on its device's CUDA stream.
 * Several logical devices on one GPU cannot be NCCL ranks of one clique. */
#include "device/cuda/cuda.h"

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

bool dp__cuda_group_allreduce_ok(dp_device_t *const *devs, int n)
{
    for (int k = 0; k < n; k++)
        for (int j = 0; j < k; j++)
            if (((dp__cuda *)devs[j]->impl)->ordinal == ((dp__cuda *)devs[k]->impl)->ordinal)
                return false;
    return true;
}

int dp__cuda_group_allreduce_sum(dp_device_t *const *devs, float *const *data, int n, int64_t len)
{
    int ordinals[DP_MAX_DEVICES];
    for (int k = 0; k < n; k++)
        ordinals[k] = ((dp__cuda *)devs[k]->impl)->ordinal;
    clique *cl;
    DP_TRY(clique_get(ordinals, n, &cl));
    nccl_job *job = dp__calloc(1, sizeof *job);
    if (!job)
        return DP_ENOMEM;
    job->cl = cl;
    job->len = len;
    for (int k = 0; k < n; k++) {
        dp__cuda *cu = devs[k]->impl;
        job->data[k] = data[k];
        job->streams[k] = cu->stream;
        job->sync = job->sync || !cu->async;
    }
    return dp__cuda_push(devs[0], run_allreduce, &job, sizeof job);
}
