/* dp/parallel.h - data parallelism: the seeds' primitives and DataParallel.
 *
 * From scratch, as d2l writes it:
 *   get_params   -> dp_replicate   (a model's parameters copied to each device)
 *   split_batch  -> dp_scatter     (torch.chunk: chunks of ceil(B / N) rows)
 *   allreduce    -> dp_allreduce_sum (naive: sum into device 0 and copy back;
 *                                     ring: reduce-scatter + all-gather)
 * and concise, as PyTorch's nn.DataParallel: dp_data_parallel_*, which
 * replicates a model, scatters each batch, runs the replicas at once,
 * gathers the outputs on device 0, and after backward sums the gradients.
 *
 * Every call only enqueues work: devices run concurrently, ordered by events
 * where one reads what another wrote. */
#ifndef DP_PARALLEL_H
#define DP_PARALLEL_H

#include "dp/nn.h"
#include "dp/optim.h"
#include "dp/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.chunk(B rows, n): chunk size ceil(B / n), the last one smaller, and
 * fewer than n chunks when B is small (B = 5, n = 4: 2, 2, 1). B = 0 gives n
 * empty chunks, as PyTorch does. Writes the sizes into sizes[0..n) (unused
 * entries 0) and returns the number of chunks. */
int dp_chunk_sizes(int64_t rows, int n, int64_t *sizes);

/* Splits x along dimension 0 into torch.chunk pieces, piece k on devs[k];
 * *nchunks receives the count. Differentiable: the backward gathers the
 * pieces' gradients into x's. */
int dp_scatter(dp_tensor_t **chunks, int *nchunks, dp_tensor_t *x, dp_device_t *const *devs, int n);
/* Concatenates xs[0..n) along dimension 0 on `dst`. Differentiable. */
int dp_gather(dp_tensor_t **out, dp_tensor_t *const *xs, int n, dp_device_t *dst);
/* Copies src into every dsts[k] (same element count), each on its device. */
int dp_broadcast(dp_tensor_t *const *dsts, int n, const dp_tensor_t *src);

typedef enum dp_allreduce_algo {
    DP_ALLREDUCE_AUTO = -1, /* mpi under mpirun with more than one rank, else nccl where
                               every device is a distinct GPU, else ring */
    DP_ALLREDUCE_RING = 0,  /* reduce-scatter + all-gather: each device sends 2(n-1)/n */
    DP_ALLREDUCE_NAIVE = 1, /* the seed's: sum into bufs[0], then copy it to the others */
    DP_ALLREDUCE_MPI = 2,   /* hierarchical: sum into bufs[0], MPI_Allreduce across the
                               ranks (dp/dist.h), copy back to the rank's devices */
    DP_ALLREDUCE_NCCL = 3,  /* NCCL over the GPUs (CUDA builds) */
} dp_allreduce_algo;

/* After it runs, every bufs[k] holds the elementwise sum of all of them
 * (same size, float, each on its own device); with DP_ALLREDUCE_MPI, the sum
 * over every rank's buffers. AUTO is resolved first, for the buffers'
 * devices. Naive, ring (and mpi's first step) read other devices' buffers
 * in kernels: across two GPUs without peer access, or a CPU device and a
 * GPU, they return DP_ENOTSUP before doing anything. */
int dp_allreduce_sum(dp_tensor_t *const *bufs, int n, dp_allreduce_algo algo);
/* "auto", "ring", "naive", "mpi", "nccl" (dp_name_parse reads them). */
extern const dp_name_table dp_allreduce_algo_names;
/* The algorithm AUTO stands for here, not knowing the devices: mpi across
 * several ranks, else ring (dp_allreduce_sum and DataParallel, which know
 * them, take nccl instead where every device is a distinct GPU). */
dp_allreduce_algo dp_allreduce_resolve(dp_allreduce_algo algo);
/* "ring", "naive", ... */
const char *dp_allreduce_algo_name(dp_allreduce_algo algo);

/* get_params: a replica of `src` on each devs[k] (same model, same values,
 * its own gradients). replicas[k] are new models the caller closes. */
int dp_replicate(dp_model_t **replicas, const dp_model_t *src, dp_device_t *const *devs, int n);

/* Device lists (dp_devices_open, dp_devices_close, dp_devices_str) are
 * declared in dp/tensor.h beside dp_device_open. */

/* ---- DataParallel ------------------------------------------------------------ */
typedef struct dp_data_parallel dp_data_parallel_t;

/* How gradients cross a process boundary (MPI ranks). */
typedef enum dp_grad_compress {
    DP_GRAD_COMPRESS_NONE = 0, /* float32 */
    DP_GRAD_COMPRESS_BF16 = 1  /* rounded to bfloat16, summed in float32: half the bytes */
} dp_grad_compress;

typedef struct dp_data_parallel_options {
    dp_allreduce_algo allreduce;
    dp_optimizer_options optimizer;
    /* SyncBatchNorm: batch statistics over all replicas' shards together
     * instead of each replica's own (DataParallel's default). */
    bool sync_bn;
    /* Gradient buckets, as PyTorch's DistributedDataParallel: the gradient
     * buffer is summed in ranges (parameters in reverse order, the first
     * bucket min(1, bucket_mb) MiB, the others bucket_mb MiB), each on the
     * devices' communication paths as soon as the backward pass has written
     * it. 0: one allreduce of everything after the backward pass. The
     * result is the same bits either way. DDP's default is 25. */
    double bucket_mb;
    dp_grad_compress grad_compress;
    /* Which replicas compute each batch norm layer, where not all do (a
     * model split over devices, dp/pipeline.h): bn_replicas[j * n + k] is
     * true where replica k runs batch norm layer j (dp_model_bn_names
     * order); that layer's running statistics are then averaged over those
     * replicas only. NULL: every replica runs every layer. Gradients need no
     * such mask: a replica that does not run a layer adds zeros to its sum. */
    const bool *bn_replicas;
    /* The loss of the executors' steps (dp_data_parallel_forward_backward,
     * the pipeline's): the summed cross-entropy with this label smoothing
     * (CrossEntropyLoss's label_smoothing; 0: none). */
    float label_smoothing;
} dp_data_parallel_options;

/* Where a step's gradient sums spend their time, summed over the steps
 * since dp_data_parallel_init (measured on the first device and its
 * communication path). */
typedef struct dp_comm_stats {
    double comm_seconds;    /* inside the gradient collectives */
    double exposed_seconds; /* the update waited for the last bucket after
                               the device's backward pass had ended */
    int64_t steps;
} dp_comm_stats;

/* Wraps `model` (on devs[0], kept by the caller) with replicas on devs[1..n). */
int dp_data_parallel_init(dp_data_parallel_t **out, dp_model_t *model, dp_device_t *const *devs,
                          int n, const dp_data_parallel_options *opt);
void dp_data_parallel_close(dp_data_parallel_t *dp);
/* Scatters x (on devs[0]) over the replicas, runs them concurrently and
 * gathers the outputs on devs[0]. */
int dp_data_parallel_forward(dp_data_parallel_t *dp, dp_tensor_t *x, bool train, dp_tensor_t **out);
/* A batch held on the host, as a loader hands it out: n samples of
 * chw[0] x chw[1] x chw[2] floats, row-major, and their n class indices.
 * Dropout's masks are keyed by (seed, step) and each sample's row plus
 * sample_offset, its index in the whole (global) batch. */
typedef struct dp_host_batch {
    const float *x;
    const int32_t *labels;
    int64_t n;
    int64_t chw[3];
    uint64_t seed, step;
    int64_t sample_offset;
} dp_host_batch;

/* A training step's forward and backward as PyTorch's
 * DistributedDataParallel runs it, issued without waiting: replica k
 * uploads its own torch.chunk of the batch's rows to its device, runs the
 * forward and the summed cross-entropy loss there and backpropagates it;
 * no output is gathered anywhere. The gradients are left in the replicas
 * (dp_data_parallel_step sums them and updates); *loss (1 float) is set to
 * the batch's summed loss and *correct (1 float) += its right answers, both
 * on devs[0]. The gradients equal dp_data_parallel_forward's on the
 * gathered batch bit for bit; the loss differs in the order of its sum. */
int dp_data_parallel_forward_backward(dp_data_parallel_t *dp, const dp_host_batch *b,
                                      dp_tensor_t *loss, dp_tensor_t *correct);
/* The same split for evaluation (no tape records), on devs[0]: *counts
 * (2 + K * K floats for K classes, dp_eval_counts_accumulate's) += the
 * batch's right answers, top-5 right answers and confusion matrix, and
 * *loss (1 float; may be NULL) += its summed cross-entropy (no smoothing). */
int dp_data_parallel_evaluate(dp_data_parallel_t *dp, const dp_host_batch *b, dp_tensor_t *counts,
                              dp_tensor_t *loss);
/* Replica k's summed loss of the last dp_data_parallel_forward_backward
 * (1 float on replica k's device, valid until the next), or NULL. */
dp_tensor_t *dp_data_parallel_replica_loss(dp_data_parallel_t *dp, int k);
/* Starts a step on every replica (gradients written fresh by the backward). */
void dp_data_parallel_zero_grad(dp_data_parallel_t *dp);
/* After dp_backward: sums the replicas' gradients with the allreduce, then
 * updates every replica identically: p -= lr * grad_sum * grad_scale. */
int dp_data_parallel_step(dp_data_parallel_t *dp, float grad_scale);
/* Averages the replicas' buffers (batch norm's running statistics) so every
 * replica holds the same; dp_data_parallel_step does it after each update. */
int dp_data_parallel_sync_buffers(dp_data_parallel_t *dp);
/* Copies replica 0's parameters, buffers and optimizer state to the other
 * replicas (after loading a checkpoint into replica 0). */
int dp_data_parallel_sync_from_first(dp_data_parallel_t *dp);
dp_optimizer_t *dp_data_parallel_optimizer(dp_data_parallel_t *dp, int k);
/* The learning rate (and, with momentum >= 0, SGD's momentum or Adam's
 * beta1) of every replica's next updates: a schedule's value for a step. */
void dp_data_parallel_set_lr(dp_data_parallel_t *dp, float lr, float momentum);
/* The communication times so far (all zero with one device and one rank);
 * read after the devices have run the steps (dp_waitall). */
void dp_data_parallel_comm_stats(dp_data_parallel_t *dp, dp_comm_stats *s);
/* The gradient buckets in the order they are summed (0 with one device and
 * one rank); bucket b holds parameters [first, first + count) of the model's
 * parameter list, `bytes` in float32. */
int dp_data_parallel_bucket_count(const dp_data_parallel_t *dp);
void dp_data_parallel_bucket(const dp_data_parallel_t *dp, int b, int *first, int *count,
                             int64_t *bytes);
/* "none", "bf16" (dp_name_parse reads them). */
extern const dp_name_table dp_grad_compress_names;
const char *dp_grad_compress_name(dp_grad_compress c);
int dp_data_parallel_size(const dp_data_parallel_t *dp);
dp_model_t *dp_data_parallel_replica(dp_data_parallel_t *dp, int k);

#ifdef __cplusplus
}
#endif
#endif
