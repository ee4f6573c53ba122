/* The pipeline executor's state, shared by pipeline.c (setup) and
 * pipeline_step.c (the steps).
 *
 * A stage's input is a copy of the previous stage's output on the stage's
 * device, given an autograd state of its own tape, so the stage's backward
 * writes its gradient there; the previous stage's backward copies that
 * gradient into its output's and backpropagates from it (dp_backward_from).
 * Tape (k, m) is reset once stage k - 1's backward of m has taken the
 * gradient of its input (stage 0's: after its own backward). */
#ifndef DP_PARALLEL_PIPELINE_H
#define DP_PARALLEL_PIPELINE_H

#include "dp/pipeline.h"

#include "autograd/tape.h"
#include "comm/comm.h"
#include "device/storage.h"

/* What device 0's worker reads at the end of a step. */
typedef struct dp__pipeline_summary {
    struct dp_pipeline *p;
    int parity;
} dp__pipeline_summary;

/* Split-invariant accumulation over micro-batches (pipeline_tree.c): a
 * binary counter of partial sums of a stage's gradient buffer, entry i
 * covering covers[i] micro-batches. */
enum { DP__PIPELINE_TREE_LEVELS = 8 }; /* 2^7 > DP_PIPELINE_MAX_MICRO_BATCHES */
typedef struct dp__pipeline_tree {
    dp_tensor_t *level[DP__PIPELINE_TREE_LEVELS];
    int64_t covers[DP__PIPELINE_TREE_LEVELS];
    int depth;
} dp__pipeline_tree;

struct dp_pipeline {
    int K, D, M; /* stages, pipelines, micro-batches at most */
    dp_pipeline_schedule schedule;
    float label_smoothing; /* the loss's (options.update) */
    int64_t in_chw[3];
    dp__pipeline_summary summary[2];
    int first[DP_PIPELINE_MAX_STAGES + 1];
    int *bn_stage;     /* [j]: the stage of batch norm layer j */
    bool *bn_replicas; /* [j n + r]: replica r runs batch norm layer j */
    dp_data_parallel_t *dp;
    dp_device_t *devs[DP_MAX_DEVICES];
    dp_tape_t **tapes;          /* [(d K + k) M + m] */
    dp_tensor_t **in, **out;    /* the same index: each task's input and output */
    dp_tensor_t **loss;         /* [d M + m] on the last stage's device */
    dp_tensor_t **xs, **labels; /* [d M + m]: the micro-batches, host copies */
    dp_tensor_t *loss_acc[DP_MAX_DEVICES], *correct_acc[DP_MAX_DEVICES]; /* [d] */
    /* Task times on the devices: [parity][(d K + k) 2 M + i][start, end]. */
    double *times[2];
    int step_m[2][DP_MAX_DEVICES]; /* micro-batches of each pipeline in that step */
    int parity;
    /* Written by device 0's worker (summarize), read after dp_waitall. */
    double bubble_sum;
    int64_t bubble_steps;
    double *last_start, *last_end; /* pipeline 0's last step, K 2 M each */
    int last_m;
    int64_t peak_bytes[DP_PIPELINE_MAX_STAGES], stage_params[DP_PIPELINE_MAX_STAGES];
    dp_pipeline_task *order; /* [k 2 M + i] for the step being issued */
    int *issue;              /* (k, i) pairs in issue order */
    int issue_m;             /* the micro-batch count order and issue are for; 0: none */
    double *sim_start;
    dp__pipeline_tree *tree; /* [d K + k] */
};

static inline size_t task_slot(const dp_pipeline_t *p, int d, int k, int i)
{
    return (((size_t)d * (size_t)p->K + (size_t)k) * 2 * (size_t)p->M + (size_t)i) * 2;
}

static inline size_t tape_index(const dp_pipeline_t *p, int d, int k, int m)
{
    return ((size_t)d * (size_t)p->K + (size_t)k) * (size_t)p->M + (size_t)m;
}

static inline dp_device_t *stage_device(const dp_pipeline_t *p, int d, int k)
{
    return p->devs[d * p->K + k];
}

static inline dp_model_t *stage_replica(dp_pipeline_t *p, int d, int k)
{
    return dp_data_parallel_replica(p->dp, d * p->K + k);
}

/* Whether a step of m_count micro-batches accumulates in the tree; then
 * each backward task of stage k of pipeline d runs between begin and push,
 * and end leaves the step's sum in the stage's gradient buffer. */
bool dp__pipeline_tree_on(int m_count);
int dp__pipeline_tree_begin(dp_pipeline_t *p, int d, int k);
int dp__pipeline_tree_push(dp_pipeline_t *p, int d, int k);
int dp__pipeline_tree_end(dp_pipeline_t *p, int d, int k);
void dp__pipeline_tree_close(dp_pipeline_t *p);

#endif
