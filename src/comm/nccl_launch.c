/* NCCL's allreduce on the GPUs' streams (nccl.c says when): built into
 * the CUDA backend's module, libdptrain-cuda.so, with NCCL itself
 * (cmake/cuda.cmake), and called through it as dp__nccl_launch_sum.
 *
 * One communicator clique per set of GPUs, made with ncclCommInitAll and
 * kept for the life of the process (as PyTorch keeps its NCCL groups). The
 * allreduce is one host command on the first device's worker that launches
 * every GPU's part in one NCCL group, each on its device's CUDA stream, and
 * waits for them: a CUDA device's command is finished on the GPU when its
 * worker returns (src/device/cuda/cuda.h, "Completion"). */
#include "comm/allreduce.h"
#include "core/internal.h"
#include "device/device.h"
#include "engine/stream.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <string.h>

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
    int64_t len;
} nccl_job;

/* Launches every GPU's part in one group. The launch holds the free mutex
 * (device/device.h) from ncclGroupStart to ncclGroupEnd: a cudaFree on another
 * thread (a device's block cache, a worker's scratch) in the middle of it
 * would wait for the GPUs whose NCCL kernels are already launched, and
 * those spin for the peers whose launch waits behind the free, a hang. */
static int group_launch(const nccl_job *a)
{
    int n = a->cl->n;
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) {
        DP_ERROR("NCCL: ncclGroupStart failed: %s", ncclGetErrorString(r));
        return DP_EDEVICE;
    }
    for (int k = 0; k < n; k++) {
        r = ncclAllReduce(a->data[k], a->data[k], (size_t)a->len, ncclFloat, ncclSum,
                          a->cl->comms[k], a->streams[k]);
        if (r != ncclSuccess) {
            ncclGroupEnd();
            DP_ERROR("NCCL: ncclAllReduce on GPU %d failed: %s", a->cl->ordinals[k],
                     ncclGetErrorString(r));
            return DP_EDEVICE;
        }
    }
    r = ncclGroupEnd();
    if (r != ncclSuccess) {
        DP_ERROR("NCCL: ncclGroupEnd failed: %s", ncclGetErrorString(r));
        return DP_EDEVICE;
    }
    return 0;
}

static int allreduce(const nccl_job *a)
{
    int n = a->cl->n;
    dp__device_free_lock();
    int rc = group_launch(a);
    dp__device_free_unlock();
    if (rc < 0)
        return rc;
    for (int k = 0; k < n; k++) {
        cudaError_t e = cudaStreamSynchronize(a->streams[k]);
        if (e == cudaSuccess)
            e = cudaGetLastError();
        if (e != cudaSuccess) {
            DP_ERROR("NCCL: the allreduce on GPU %d failed: %s", a->cl->ordinals[k],
                     cudaGetErrorString(e));
            return DP_EDEVICE;
        }
    }
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

/* Looked up by name (nccl.c), declared here for the compiler. */
int dp__nccl_launch_sum(dp_device_t *const *devs, float *const *data, int n, int64_t len);

int dp__nccl_launch_sum(dp_device_t *const *devs, float *const *data, int n, int64_t len)
{
    int ordinals[DP_MAX_DEVICES];
    for (int k = 0; k < n; k++)
        ordinals[k] = devs[k]->index;
    clique *cl;
    DP_TRY(clique_get(ordinals, n, &cl));
    nccl_job *job = dp__calloc(1, sizeof *job);
    if (!job)
        return DP_ENOMEM;
    job->cl = cl;
    job->len = len;
    for (int k = 0; k < n; k++) {
        job->data[k] = data[k];
        job->streams[k] = (cudaStream_t)devs[k]->ops->cuda_stream(devs[k]);
    }
    dp__stream_push_named(devs[0]->stream, run_allreduce, "nccl_allreduce", &job, sizeof job);
    return 0;
}
