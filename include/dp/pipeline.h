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

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { DP_PIPELINE_MAX_STAGES = 64 };

typedef enum dp_pipeline_schedule {
    DP_PIPELINE_1F1B = 0, /* the default */
    DP_PIPELINE_GPIPE = 1,
} dp_pipeline_schedule;

/* "1f1b" or "gpipe"; -1 for anything else. */
int dp_pipeline_schedule_parse(const char *name);
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

#ifdef __cplusplus
}
#endif
#endif
