/* The model struct behind dp_model_t. */
#ifndef DP_NN_MODEL_H
#define DP_NN_MODEL_H

#include "dp/nn.h"

struct dp_model {
    dp_model_def def; /* a copy; what it points to outlives the model */
    dp_device_t *dev;
    dp_params_t *params;
    dp_params_t *buffers; /* NULL without batch norm */
    int64_t batches_tracked;
    /* SyncBatchNorm: one group per batch norm layer, shared by the replicas,
     * this replica's rank, and how many replicas take part in the current
     * forward; written only through dp__model_set_sync_group, read only
     * through dp_model_bn_params. */
    dp_bn_sync_t **bn_sync;
    int sync_rank, sync_ranks;
    dp_forward_hook hook;
    void *hook_user;
    /* Dropout's key (dp_model_set_step). */
    uint64_t seed, step;
    int64_t sample_offset;
};

/* A model whose parameters are not initialised (replicas get theirs by copy). */
int dp__model_init_uninit(dp_model_t **out, const dp_model_def *def, dp_device_t *dev);
/* Makes m's batch norm layers SyncBatchNorm (DataParallel's sync_bn):
 * groups[j] is layer j's group (dp_model_bn_names order, shared by the
 * replicas, kept by the caller), `rank` this replica's place in them and
 * `ranks` how many replicas take part in the next forward. groups NULL: each
 * replica's own shard again. */
void dp__model_set_sync_group(dp_model_t *m, dp_bn_sync_t **groups, int rank, int ranks);

#endif
