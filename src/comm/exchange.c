/* The exchange: a generation barrier over host memory. Slots alternate
 * between consecutive rounds, so a fast participant writing the next
 * round's contribution never overwrites one a slow participant is still
 * reading: to write slot g again it must have passed round g + 1, which the
 * slow one joins only after reading round g. */
#include "comm/exchange.h"

#include "core/internal.h"
#include "device/kernels.h"

#include <pthread.h>
#include <stddef.h>
#include <string.h>

struct dp__exchange {
    dp__stats_exchange head; /* first: the kernels' way in (device/kernels.h) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int arrived;
    uint64_t generation;
    int max_members;
    int64_t len;      /* doubles per contribution, at most */
    double *slots[2]; /* [max_members][len], alternating between rounds */
};
_Static_assert(offsetof(struct dp__exchange, head) == 0, "kernels reach the sum through the head");

int dp__exchange_create(dp__exchange **out, int max_members, int64_t len)
{
    if (max_members < 1 || len < 1)
        return DP_EINVAL;
    dp__exchange *x = dp__calloc(1, sizeof *x);
    if (!x)
        return DP_ENOMEM;
    x->head.sum = dp__exchange_sum;
    x->max_members = max_members;
    x->len = len;
    for (int i = 0; i < 2; i++) {
        x->slots[i] = dp__calloc((size_t)(max_members * len), sizeof(double));
        if (!x->slots[i]) {
            dp__free(x->slots[0]);
            dp__free(x);
            return DP_ENOMEM;
        }
    }
    pthread_mutex_init(&x->mu, NULL);
    pthread_cond_init(&x->cv, NULL);
    *out = x;
    return 0;
}

void dp__exchange_close(dp__exchange *x)
{
    if (!x)
        return;
    pthread_cond_destroy(&x->cv);
    pthread_mutex_destroy(&x->mu);
    dp__free(x->slots[0]);
    dp__free(x->slots[1]);
    dp__free(x);
}

void dp__exchange_sum(dp__exchange *x, int member, int members, const double *mine, int64_t len,
                      double *total)
{
    DP_ASSERT(member >= 0 && member < members && members <= x->max_members && len <= x->len);
    pthread_mutex_lock(&x->mu);
    uint64_t g = x->generation;
    double *slots = x->slots[g & 1];
    memcpy(slots + member * x->len, mine, (size_t)len * sizeof *mine);
    if (++x->arrived == members) {
        x->arrived = 0;
        x->generation++;
        pthread_cond_broadcast(&x->cv);
    } else {
        while (x->generation == g)
            pthread_cond_wait(&x->cv, &x->mu);
    }
    pthread_mutex_unlock(&x->mu);
    for (int64_t i = 0; i < len; i++) {
        double sum = 0;
        for (int r = 0; r < members; r++)
            sum += slots[r * x->len + i];
        total[i] = sum;
    }
}
