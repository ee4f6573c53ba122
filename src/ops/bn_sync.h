/* The exchange behind SyncBatchNorm: each of `ranks` workers contributes a
 * vector of doubles and gets back the sum over all of them, in rank order
 * (so every replica computes bit-identical statistics). Workers block in
 * the exchange until all have arrived; the front end issues every replica's
 * forward before it waits on any, so they all arrive. */
#ifndef DP_OPS_BN_SYNC_H
#define DP_OPS_BN_SYNC_H

#include "dp/ops.h"

#include <pthread.h>

struct dp__bn_sync {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int arrived;
    uint64_t generation;
    int max_ranks;
    int64_t len;      /* doubles per contribution: 1 + 2 C */
    double *slots[2]; /* [max_ranks][len], alternating between exchanges */
};

/* total[0..len) = sum over ranks of their `mine`. len <= 1 + 2 C. */
void dp__bn_sync_exchange(struct dp__bn_sync *s, int rank, int ranks, const double *mine,
                          int64_t len, double *total);

#endif
