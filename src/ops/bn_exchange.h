/* SyncBatchNorm's statistics exchange as the batch norm op issues it,
 * between its kernels (ops/batch_norm.c):
 *
 *   batch_norm_sums_forward (this shard's sums, in dev's memory)
 *     -> exchange: the sums become the group's, on every member
 *     -> batch_norm_forward with those totals (the statistics, normalised)
 *
 * and the same around batch_norm_backward. A group (dp_bn_sync_t, struct
 * dp__exchange) is made by src/comm/, which sits above the ops and issues
 * the exchange (comm/exchange.c); it begins with this head, so that the op
 * reaches it without depending on src/comm/. No kernel calls a collective:
 * the exchange is a command of its own in the device's stream order. */
#ifndef DP_OPS_BN_EXCHANGE_H
#define DP_OPS_BN_EXCHANGE_H

#include "dp/tensor.h"

#include <stdint.h>

struct dp__exchange;

typedef struct dp__bn_exchange {
    /* Enqueues, on dev's stream after what is queued there, the exchange
     * of `sums` (len doubles in dev's memory, written by the commands
     * before it): once all `members` have had theirs issued and run, each
     * member's sums hold the elementwise total over the members, added
     * pairwise in member order (the same bits on every device), and under
     * mpirun over every rank's group. `member` is dev's place, 0 <= member
     * < members. Returns 0 or an error of issuing; the sum's own error is
     * the command's, which the stream reports. Every member's exchange
     * must be issued before the front end waits on any of them. */
    int (*issue)(struct dp__exchange *x, dp_device_t *dev, int member, int members, double *sums,
                 int64_t len);
} dp__bn_exchange;

/* The head of the group x. */
static inline const dp__bn_exchange *dp__bn_exchange_of(const struct dp__exchange *x)
{
    /* A pointer to a struct, converted, points to its first member. */
    return (const dp__bn_exchange *)(const void *)x;
}

#endif
