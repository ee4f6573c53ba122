/* The model table: each model file provides its parameter list and forward. */
#ifndef DP_NN_MODEL_H
#define DP_NN_MODEL_H

#include "dp/nn.h"

typedef struct dp__model_ops {
    const char *name;
    /* The parameter specs in state_dict order; *n receives the count. */
    const dp_param_spec *(*specs)(int *n);
    /* Optional: buffers (running statistics) and the batch norm layers'
     * names, both NULL for models without batch norm. */
    const dp_param_spec *(*buffer_specs)(int *n);
    const char *const *(*bn_names)(int *n);
    int (*forward)(dp_model_t *m, dp_tensor_t *x, bool train, dp_tensor_t **logits);
} dp__model_ops;

struct dp_model {
    const dp__model_ops *ops;
    dp_device_t *dev;
    dp_params_t *params;
    dp_params_t *buffers; /* NULL without batch norm */
    int64_t batches_tracked;
    /* SyncBatchNorm: one group per batch norm layer, shared by the replicas,
     * this replica's rank, and how many replicas take part in the current
     * forward; written only through dp__model_set_sync_group. */
    dp_bn_sync_t **bn_sync;
    int sync_rank, sync_ranks;
    dp_forward_hook hook;
    void *hook_user;
};

/* A model whose parameters are not initialised (replicas get theirs by copy). */
int dp__model_create_uninit(dp_model_t **out, const char *name, dp_device_t *dev);
/* Makes m's batch norm layers SyncBatchNorm (DataParallel's sync_bn):
 * groups[j] is layer j's group (dp_model_bn_names order, shared by the
 * replicas, kept by the caller), `rank` this replica's place in them and
 * `ranks` how many replicas take part in the next forward. groups NULL: each
 * replica's own shard again. */
void dp__model_set_sync_group(dp_model_t *m, dp_bn_sync_t **groups, int rank, int ranks);

extern const dp__model_ops dp__lenet_ops;
extern const dp__model_ops dp__tutorial_ops;
extern const dp__model_ops dp__resnet18_ops;

#endif
