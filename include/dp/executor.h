/* dp/executor.h - how one training step runs over the devices: the one
 * interface a training loop drives, whatever splits the work.
 *
 *   dp_executor_t *ex;
 *   dp_executor_init_data_parallel(&ex, dp);   // or _pipeline(&ex, pipe)
 *   for each batch b (on the host):
 *       dp_executor_forward_backward(ex, &b, loss, correct); // gradients in the replicas
 *       dp_executor_step(ex, 1.0f / b.n);                     // summed, then applied
 *   dp_executor_evaluate(ex, &test_batch, counts, loss);
 *   dp_executor_close(ex);                                    // closes dp or pipe too
 *
 * Data parallelism (dp/parallel.h: each replica on its own rows, as
 * DistributedDataParallel) and the pipeline (dp/pipeline.h: stages and
 * micro-batches) both implement it. Either way the devices hold replicas
 * of one model whose gradients are summed and applied alike, so the
 * update, the optimizer state and checkpoints are the replicas' own
 * (dp_executor_replicas). A program can add its own executor through
 * dp_executor_ops. Every call only enqueues work. */
#ifndef DP_EXECUTOR_H
#define DP_EXECUTOR_H

#include "dp/parallel.h"
#include "dp/pipeline.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dp_executor dp_executor_t;

/* What an executor does; `self` is the object given to dp_executor_init. */
typedef struct dp_executor_ops {
    const char *name; /* "data parallel", "pipeline" */
    /* The forward and backward of batch b (b->n >= 1), the gradients left
     * in the replicas; *loss (1 float on the first device) = the batch's
     * summed loss, *correct += its right answers. */
    int (*forward_backward)(void *self, const dp_host_batch *b, dp_tensor_t *loss,
                            dp_tensor_t *correct);
    /* On the first device: *counts (2 + K * K floats: right answers, top-5
     * right answers, confusion matrix, dp_eval_counts_accumulate's) and
     * *loss (1 float, or NULL: the summed cross-entropy) += batch b's. */
    int (*evaluate)(void *self, const dp_host_batch *b, dp_tensor_t *counts, dp_tensor_t *loss);
    void (*close)(void *self); /* may be NULL: the caller keeps self */
} dp_executor_ops;

/* An executor over `replicas` (which it does not close) running `ops` on
 * `self`. */
int dp_executor_init(dp_executor_t **out, const dp_executor_ops *ops, void *self,
                     dp_data_parallel_t *replicas);
/* Data parallelism over dp's replicas; the executor closes dp. */
int dp_executor_init_data_parallel(dp_executor_t **out, dp_data_parallel_t *dp);
/* The pipeline p (and its replicas); the executor closes p. */
int dp_executor_init_pipeline(dp_executor_t **out, dp_pipeline_t *p);
void dp_executor_close(dp_executor_t *e);
const char *dp_executor_name(const dp_executor_t *e);

/* A training step's forward and backward: the replicas' gradients start
 * from zero and hold batch b's; *loss = its summed loss (0 for a batch of
 * no rows, whose gradients are zero) and *correct += its right answers. */
int dp_executor_forward_backward(dp_executor_t *e, const dp_host_batch *b, dp_tensor_t *loss,
                                 dp_tensor_t *correct);
/* Once the gradients are ready: summed over the replicas (and ranks) and
 * applied to every replica alike: p -= lr * grad_sum * grad_scale. */
int dp_executor_step(dp_executor_t *e, float grad_scale);
/* Batch b with the model in eval mode: *counts += its right answers, top-5
 * right answers and confusion matrix, *loss (may be NULL) += its summed
 * loss (the ops' evaluate above). */
int dp_executor_evaluate(dp_executor_t *e, const dp_host_batch *b, dp_tensor_t *counts,
                         dp_tensor_t *loss);
/* The replicas, their optimizers and buffers: what a checkpoint saves and
 * loads (replica 0's), and the communication figures. */
dp_data_parallel_t *dp_executor_replicas(dp_executor_t *e);

#ifdef __cplusplus
}
#endif
#endif
