/* The exchange: a generation barrier over host memory. Slots alternate
 * between consecutive rounds, so a fast participant writing the next
 * round's contribution never overwrites one a slow participant is still
 * reading: to write slot g again it must have passed round g + 1, which the
 * slow one joins only after reading round g. */
#include "comm/exchange.h"

#include "comm/allreduce.h"
#include "comm/mpi.h"
#include "core/internal.h"
#include "core/pairwise.h"
#include "ops/bn_exchange.h"

#include <pthread.h>
#include <stddef.h>
#include <string.h>

struct dp__exchange {
    dp__bn_exchange head; /* first: the batch norm op's way in (ops/bn_exchange.h) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int arrived;
    uint64_t generation;
    int max_members;
    int64_t len;       /* doubles per contribution, at most */
    double *slots[2];  /* [max_members][len], alternating between rounds */
    double *totals[2]; /* [len]: each round's sum */
    int rc[2];         /* each round's: the ranks' sum's */
};
_Static_assert(offsetof(struct dp__exchange, head) == 0,
               "the op reaches the exchange through the head");

/* One member's exchange, a command on its device's stream over its sums in
 * host memory (dp__host_command). */
typedef struct exchange_cmd {
    dp__exchange *x;
    int member, members;
    int64_t len;
} exchange_cmd;

static int run_exchange(void *host, const void *ctx)
{
    const exchange_cmd *c = ctx;
    return dp__exchange_sum(c->x, c->member, c->members, host, c->len, host);
}

static int issue(dp__exchange *x, dp_device_t *dev, int member, int members, double *sums,
                 int64_t len)
{
    DP_ASSERT(member >= 0 && member < members && members <= x->max_members && len <= x->len);
    exchange_cmd c = {x, member, members, len};
    return dp__host_command(dev, sums, (size_t)len * sizeof *sums, run_exchange, &c, sizeof c,
                            "bn_exchange");
}

int dp__exchange_create(dp__exchange **out, int max_members, int64_t len)
{
    if (max_members < 1 || len < 1)
        return DP_EINVAL;
    dp__exchange *x = dp__calloc(1, sizeof *x);
    if (!x)
        return DP_ENOMEM;
    x->head.issue = issue;
    x->max_members = max_members;
    x->len = len;
    for (int i = 0; i < 2; i++) {
        x->slots[i] = dp__calloc((size_t)(max_members * len), sizeof(double));
        x->totals[i] = dp__calloc((size_t)len, sizeof(double));
        if (!x->slots[i] || !x->totals[i]) {
            for (int j = 0; j <= i; j++) {
                dp__free(x->slots[j]);
                dp__free(x->totals[j]);
            }
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
    for (int i = 0; i < 2; i++) {
        dp__free(x->slots[i]);
        dp__free(x->totals[i]);
    }
    dp__free(x);
}

int dp__exchange_sum(dp__exchange *x, int member, int members, const double *mine, int64_t len,
                     double *total)
{
    DP_ASSERT(member >= 0 && member < members && members <= x->max_members && len <= x->len);
    pthread_mutex_lock(&x->mu);
    uint64_t g = x->generation;
    double *slots = x->slots[g & 1], *sum = x->totals[g & 1];
    memcpy(slots + member * x->len, mine, (size_t)len * sizeof *mine);
    if (++x->arrived == members) {
        /* The last to arrive sums for everyone, the other ranks' groups
         * included; the others wait for it. */
        dp__pairwise_sum_f64(slots, members, x->len, len);
        memcpy(sum, slots, (size_t)len * sizeof *sum);
        x->rc[g & 1] = dp__dist_sum_stats(sum, len);
        x->arrived = 0;
        x->generation++;
        pthread_cond_broadcast(&x->cv);
    } else {
        while (x->generation == g)
            pthread_cond_wait(&x->cv, &x->mu);
    }
    int rc = x->rc[g & 1];
    pthread_mutex_unlock(&x->mu);
    /* Round g + 2 writes these again only after every member has arrived
     * there, so after this copy. */
    memcpy(total, sum, (size_t)len * sizeof *total);
    return rc;
}
