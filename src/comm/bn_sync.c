/* SyncBatchNorm's groups: one statistics exchange (exchange.h) per batch
 * norm layer, each contribution a count and, per channel, two sums (1 + 2 C
 * doubles). The batch norm op issues the exchange between its kernels
 * (ops/bn_exchange.h). */
#include "dp/ops.h"

#include "comm/exchange.h"
#include "core/internal.h"

int dp_bn_sync_init(dp_bn_sync_t **out, int64_t channels, int max_ranks)
{
    if (channels < 1 || max_ranks < 1 || max_ranks > DP_MAX_DEVICES) {
        DP_ERROR("bn_sync: need channels >= 1 and 1..%d ranks", DP_MAX_DEVICES);
        return DP_EINVAL;
    }
    return dp__exchange_create(out, max_ranks, 1 + 2 * channels);
}

void dp_bn_sync_close(dp_bn_sync_t *s)
{
    dp__exchange_close(s);
}
