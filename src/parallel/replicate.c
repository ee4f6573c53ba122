/* get_params: dp_replicate. */
#include "dp/parallel.h"

#include "core/internal.h"
#include "nn/model.h"

int dp_replicate(dp_model_t **replicas, const dp_model_t *src, dp_device_t *const *devs, int n)
{
    for (int k = 0; k < n; k++)
        replicas[k] = NULL;
    for (int k = 0; k < n; k++) {
        int rc = dp__model_init_uninit(&replicas[k], &src->def, devs[k]);
        dp_tensor_t *dst = rc == 0 ? dp_params_values(replicas[k]->params) : NULL;
        if (rc == 0)
            rc = dp_broadcast(&dst, 1, dp_params_values(src->params));
        if (rc == 0 && src->buffers) {
            dst = dp_params_values(replicas[k]->buffers);
            rc = dp_broadcast(&dst, 1, dp_params_values(src->buffers));
        }
        if (rc < 0) {
            for (int j = 0; j <= k; j++)
                dp_model_close(replicas[j]);
            return rc;
        }
        dp_model_set_batches_tracked(replicas[k], src->batches_tracked);
        dp_model_set_forward_hook(replicas[k], src->hook, src->hook_user);
    }
    return 0;
}
