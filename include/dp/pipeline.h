/* dp/pipeline.h - model parallelism, the plan: a model's layers split into
 * K consecutive stages (stage k on device k), each batch split into M
 * micro-batches (torch.chunk sizes, dp_chunk_sizes) that flow through them,
 * and the order in which each stage runs its micro-batches' forwards (F)
 * and backwards (B):
 *
 *   GPipe  (Huang et al. 2019): every forward, then every backward; each
 *          stage keeps all M micro-batches' activations until its first B.
 *   1F1B   (PipeDream-Flush, torch.distributed.pipelining's Schedule1F1B):
 *          stage k runs min(K - 1 - k, M) forwards, then alternates one F
 *          and one B, then the remaining Bs; it keeps at most K - k
 *          micro-batches' activations.
 *
 * Both give the same gradients (they accumulate over the micro-batches) and,
 * for stages of equal cost, the same idle "bubble": (K - 1) / (M + K - 1)
 * of each device's time. Layers are numbered as `dptrain model` prints
 * them. */
#ifndef DP_PIPELINE_H
#define DP_PIPELINE_H

#include "dp/parallel.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { DP_PIPELINE_MAX_STAGES = 64, DP_PIPELINE_MAX_MICRO_BATCHES = 1024 };

typedef enum dp_pipeline_schedule {
    DP_PIPELINE_1F1B = 0, /* the default */
    DP_PIPELINE_GPIPE = 1,
} dp_pipeline_schedule;

/* "1f1b", "gpipe" (dp_name_parse reads them). */
extern const dp_name_table dp_pipeline_schedule_names;
const char *dp_pipeline_schedule_name(dp_pipeline_schedule s);

/* The split of nlayers layers into `stages` stages whose costliest stage is
 * the cheapest possible (cost[i] >= 0: FLOPs or measured seconds of layer
 * i). Stage k runs layers first[k] .. first[k + 1] - 1; first has stages + 1
 * entries, first[0] = 0 and first[stages] = nlayers. can_start[i] false
 * forbids a stage to start at layer i (inside a residual block); NULL allows
 * every layer. Among equally good splits, the one with the earliest split
 * points. DP_EINVAL (with the reason logged: more stages than layers where
 * a stage may start) when there is none. */
int dp_pipeline_balance(const double *cost, const bool *can_start, int nlayers, int stages,
                        int *first);

/* Reads a stage list as `--stages` takes it: ranges of layer indices, in
 * order, separated by commas ("0-3,4-7"; a single layer is "5"), which must
 * cover 0 .. nlayers - 1, each layer once. Fills first[] as
 * dp_pipeline_balance does (room for DP_PIPELINE_MAX_STAGES + 1) and
 * *stages. DP_EINVAL, with the reason logged ("stages 0-3,5-7: layer 4 is in
 * no stage"), for anything else. */
int dp_pipeline_parse_stages(const char *text, const bool *can_start, int nlayers, int *first,
                             int *stages);

/* One task of a stage: the forward or the backward of one micro-batch. */
typedef struct dp_pipeline_task {
    bool backward;
    int micro_batch;
} dp_pipeline_task;

/* The 2 micro_batches tasks of stage `stage` (0-based) of `stages`, in the
 * order the schedule runs them. */
int dp_pipeline_order(dp_pipeline_schedule schedule, int stages, int stage, int micro_batches,
                      dp_pipeline_task *tasks);

/* A schedule played out with fixed task times: forward[k] and backward[k]
 * seconds for each micro-batch on stage k; a forward on stage k starts when
 * stage k - 1's forward of that micro-batch has ended, a backward when stage
 * k + 1's backward has (on the last stage, its own forward), each stage runs
 * its tasks in dp_pipeline_order's order, one at a time. */
typedef struct dp_pipeline_timeline {
    double makespan;                       /* from the first start to the last end */
    double bubble_fraction;                /* idle device time / (stages x makespan) */
    int peak_live[DP_PIPELINE_MAX_STAGES]; /* most micro-batches whose forward
                                              has run and backward not yet */
} dp_pipeline_timeline;

/* start and end (each stages x 2 micro_batches, may be NULL) receive each
 * task's times, in stage k's order at [k * 2 micro_batches + i]. */
int dp_pipeline_simulate(dp_pipeline_schedule schedule, int stages, int micro_batches,
                         const double *forward, const double *backward, dp_pipeline_timeline *out,
                         double *start, double *end);

/* ---- the executor --------------------------------------------------------- */

/* Pipelines over devices: n = D K devices make D pipelines of K stages
 * (pipeline d on devs[d K .. d K + K - 1]), fed D shards of each batch. Each
 * device holds a whole replica of the model (a DataParallel of n replicas,
 * each batch norm layer's statistics averaged over the replicas of its
 * stage: options.bn_replicas) and runs the layers of its stage
 * (dp_model_forward_layers); the gradient sum over all n replicas is the
 * whole batch's gradient, so every replica makes the same update and
 * checkpoints, evaluation and resuming are those of data parallelism.
 *
 * Per stage and micro-batch, one tape holds the forward's activations from
 * the task's forward until its backward has run (and the next stage's has
 * taken its gradient), so what a stage keeps alive is what its schedule
 * keeps: all M micro-batches under GPipe, at most K - k under 1F1B. The
 * front end issues every task of a step at once, in the order of the
 * schedule played out with forwards of 1 and backwards of 2: each device's
 * queue holds its tasks in dp_pipeline_order's order, and activations and
 * their gradients cross between stages as copies ordered by events. */
typedef struct dp_pipeline dp_pipeline_t;

typedef struct dp_pipeline_options {
    int stages;        /* K >= 2 */
    const int *first;  /* K + 1 stage starts (dp_pipeline_balance's form), or
                          NULL: balanced by the layers' FLOPs */
    int micro_batches; /* M >= 1: each pipeline's shard of a batch in M
                          torch.chunk pieces */
    dp_pipeline_schedule schedule;
    dp_data_parallel_options update; /* allreduce, SGD, buckets; no sync_bn */
} dp_pipeline_options;

/* model: on devs[0], kept by the caller (replica 0); in_chw its samples'
 * shape. DP_ENOTSUP (logged) for a model whose definition has no
 * forward_layers, DP_EINVAL (logged) for a bad split. */
int dp_pipeline_init(dp_pipeline_t **out, dp_model_t *model, dp_device_t *const *devs, int n,
                     const int64_t *in_chw, const dp_pipeline_options *opt);
void dp_pipeline_close(dp_pipeline_t *p);
/* The replicas and their update (zero_grad, step, sync, SGD state). */
dp_data_parallel_t *dp_pipeline_data_parallel(dp_pipeline_t *p);
int dp_pipeline_stage_first(const dp_pipeline_t *p, int stage);

/* One batch's forwards and backwards, issued without waiting: x (n, C, H, W)
 * and labels (n) on the host (copied before return), split over the D
 * pipelines and into micro-batches; dropout's key is (seed, step, and each
 * sample's row + sample_offset). The gradients are left in the replicas
 * (dp_data_parallel_step makes the update); *loss (devs[0], 1 float) is set
 * to the batch's summed loss and correct (devs[0]) += its right answers. */
int dp_pipeline_forward_backward(dp_pipeline_t *p, const float *x, const int32_t *labels, int64_t n,
                                 uint64_t seed, uint64_t step, int64_t sample_offset,
                                 dp_tensor_t *loss, dp_tensor_t *correct);

/* What the devices measured, read after they ran the steps (dp_waitall). */
typedef struct dp_pipeline_stats {
    int64_t steps;
    double bubble_fraction; /* mean over the steps of each pipeline's idle share:
                               1 - busy / (K x makespan), tasks timed on the
                               devices */
    int64_t peak_activation_bytes[DP_PIPELINE_MAX_STAGES]; /* most bytes a stage's
                                                              tapes held at once */
    int64_t stage_params[DP_PIPELINE_MAX_STAGES];          /* parameters each stage trains */
    /* The last step's tasks of pipeline 0: start and end seconds (from the
     * step's first start) of stage k's task i, in dp_pipeline_order's order,
     * at [k * 2 micro_batches + i]; micro_batches is that step's count (0:
     * no step yet). */
    int micro_batches;
    const double *start, *end; /* p's, valid until its next step */
} dp_pipeline_stats;

/* Fills *s and starts counting anew (the bubble fraction of an epoch). */
void dp_pipeline_take_stats(dp_pipeline_t *p, dp_pipeline_stats *s);

#ifdef __cplusplus
}
#endif
#endif
