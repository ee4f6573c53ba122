/* dp_broadcast: one tensor copied to every destination, each copy issued on
 * its destination's device (dp__copy_between, transfer.c). */
#include "dp/parallel.h"

#include "comm/comm.h"
#include "core/internal.h"
#include "device/storage.h"

int dp_broadcast(dp_tensor_t *const *dsts, int n, const dp_tensor_t *src)
{
    for (int k = 0; k < n; k++) {
        if (dp_tensor_numel(dsts[k]) != dp_tensor_numel(src) ||
            dp_tensor_dtype(dsts[k]) != dp_tensor_dtype(src)) {
            DP_ERROR("broadcast: destination %d has another size or type than the source", k);
            return DP_ESHAPE;
        }
        if (dsts[k] == src)
            continue;
        DP_TRY(dp__copy_between(dsts[k], 0, src, 0, dp__tensor_bytes(src)));
    }
    return 0;
}
