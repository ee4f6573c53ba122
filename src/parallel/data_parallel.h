/* DataParallel's state, shared by data_parallel.c (the replicas, the
 * seed's forward and the update) and data_parallel_step.c (the step as
 * DistributedDataParallel runs it: each replica on its own rows). */
#ifndef DP_PARALLEL_DATA_PARALLEL_H
#define DP_PARALLEL_DATA_PARALLEL_H

#include "dp/autograd.h"
#include "dp/parallel.h"

#include "comm/comm.h"
#include "nn/model.h"

struct dp_data_parallel {
    int n;
    dp_device_t *devs[DP_MAX_DEVICES];
    dp_model_t *replicas[DP_MAX_DEVICES]; /* [0] is the caller's model */
    dp_optimizer_t *optim[DP_MAX_DEVICES];
    dp_data_parallel_options opt;
    dp_bn_sync_t **bn_sync; /* --sync-bn: one group per batch norm layer */
    int nbn;
    dp__buckets *buckets; /* NULL with one device and one rank */
    int bn_runs;          /* replicas that run each batch norm layer (opt.bn_replicas) */
    /* dp_data_parallel_forward_backward and _evaluate, made on first use:
     * replica k's tapes (one that records, one that does not) and its loss
     * and right answers of a step, [1] floats on its device; `sums` holds
     * their copies on device 0. */
    dp_tape_t *train_tapes[DP_MAX_DEVICES], *eval_tapes[DP_MAX_DEVICES], *sums;
    dp_tensor_t *loss_acc[DP_MAX_DEVICES], *correct_acc[DP_MAX_DEVICES];
    dp_tensor_t *counts_acc[DP_MAX_DEVICES]; /* evaluation's counts, sized on first use */
};

/* Releases what the steps made (data_parallel_step.c). */
void dp__data_parallel_close_steps(dp_data_parallel_t *dp);

#endif
