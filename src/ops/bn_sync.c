/* SyncBatchNorm's exchange: a generation barrier over host memory. Slots
 * alternate between consecutive exchanges, so a fast replica writing the
 * next exchange's contribution never overwrites one a slow replica is still
 * reading: to write slot g again it must have passed exchange g + 1, which
 * the slow one joins only after reading exchange g. */
#include "ops/bn_sync.h"

#include "core/internal.h"

#include <string.h>

int dp_bn_sync_create(dp_bn_sync_t **out, int64_t channels, int max_ranks)
{
    if (channels < 1 || max_ranks < 1 || max_ranks > DP_MAX_DEVICES) {
        DP_ERROR("bn_sync: need channels >= 1 and 1..%d ranks", DP_MAX_DEVICES);
        return DP_EINVAL;
    }
    dp_bn_sync_t *s = dp__calloc(1, sizeof *s);
    if (!s)
        return DP_ENOMEM;
    s->max_ranks = max_ranks;
    s->len = 1 + 2 * channels;
    for (int i = 0; i < 2; i++) {
        s->slots[i] = dp__calloc((size_t)(max_ranks * s->len), sizeof(double));
        if (!s->slots[i]) {
            dp__free(s->slots[0]);
            dp__free(s);
            return DP_ENOMEM;
        }
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    *out = s;
    return 0;
}

void dp_bn_sync_close(dp_bn_sync_t *s)
{
    if (!s)
        return;
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    dp__free(s->slots[0]);
    dp__free(s->slots[1]);
    dp__free(s);
}

void dp__bn_sync_exchange(struct dp__bn_sync *s, int rank, int ranks, const double *mine,
                          int64_t len, double *total)
{
    DP_ASSERT(rank >= 0 && rank < ranks && ranks <= s->max_ranks && len <= s->len);
    pthread_mutex_lock(&s->mu);
    uint64_t g = s->generation;
    double *slots = s->slots[g & 1];
    memcpy(slots + rank * s->len, mine, (size_t)len * sizeof *mine);
    if (++s->arrived == ranks) {
        s->arrived = 0;
        s->generation++;
        pthread_cond_broadcast(&s->cv);
    } else {
        while (s->generation == g)
            pthread_cond_wait(&s->cv, &s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    for (int64_t i = 0; i < len; i++) {
        double sum = 0;
        for (int r = 0; r < ranks; r++)
            sum += slots[r * s->len + i];
        total[i] = sum;
    }
}
