/* dp_broadcast: one tensor copied to every destination, each copy issued on
 * its destination's device (dp__copy_between). */
#include "dp/parallel.h"

#include "core/internal.h"
#include "parallel/order.h"

int dp_broadcast(dp_tensor_t *const *dsts, int n, const dp_tensor_t *src)
{
    for (int k = 0; k < n; k++) {
        if (dp__numel(dsts[k]->ndim, dsts[k]->shape) != dp__numel(src->ndim, src->shape)) {
            DP_ERROR("broadcast: destination %d has another size than the source", k);
            return DP_ESHAPE;
        }
        if (dsts[k] == src)
            continue;
        DP_TRY(dp__copy_between(dsts[k]->dev, dsts[k]->data, src->dev, src->data, src->bytes));
        dp__tensor_written(dsts[k]);
    }
    return 0;
}
