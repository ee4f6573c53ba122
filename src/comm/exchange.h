/* The statistics exchange among the devices of one process: a group of
 * `members` participants (device workers), each contributing a vector of
 * doubles and getting back the elementwise sum over all of them, added
 * pairwise in member order (core/pairwise.h), so that every participant gets the same bits
 * (SyncBatchNorm's statistics: a dp_bn_sync_t is one, bn_sync.c). A
 * participant blocks in dp__exchange_sum until all have arrived; the front
 * end must have issued every participant's command before it waits on any
 * of them, so that they all arrive. The batch norm op issues the sum as a
 * command of its own between its kernels, through the group's head
 * (ops/bn_exchange.h): on the device's stream, over its sums in host
 * memory (a host copy of a GPU's).
 *
 * Lock order: the exchange's mutex is a leaf, held to write a
 * contribution, to pass the barrier and, by the last to arrive, over the
 * sum (the ranks' included), which the others wait for anyway. */
#ifndef DP_COMM_EXCHANGE_H
#define DP_COMM_EXCHANGE_H

#include <stdint.h>

typedef struct dp__exchange dp__exchange;

/* A group of up to `max_members` participants, each contributing at most
 * `len` doubles. Returns 0, DP_EINVAL or DP_ENOMEM. */
int dp__exchange_create(dp__exchange **out, int max_members, int64_t len);
/* NULL is accepted. No participant may be inside dp__exchange_sum. */
void dp__exchange_close(dp__exchange *x);

/* total[0..len) = the sum over the `members` participants of their `mine`,
 * and, under mpirun, over every rank's group (dp__dist_sum_stats: each
 * rank's group must be called for the same layers in the same order);
 * `member` is this participant's place, 0 <= member < members <=
 * max_members, and len is at most the group's. Blocks until all `members`
 * have called it for this round. 0, or the ranks' sum's error. */
int dp__exchange_sum(dp__exchange *x, int member, int members, const double *mine, int64_t len,
                     double *total);

#endif
