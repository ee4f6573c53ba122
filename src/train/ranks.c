/* Many processes under mpirun: each rank takes its chunk of every global
 * batch, and all must have been started with the same options. */
#include "train/trainer.h"

#include "core/internal.h"

#include <string.h>

/* This rank's rows of a global batch of n: chunk `rank` of torch.chunk(n,
 * ranks), starting at row *first. */
int64_t dp__train_rank_rows(const dp__trainer *t, int64_t n, int64_t *first)
{
    int64_t sizes[DP_MAX_RANKS];
    dp_chunk_sizes(n, t->ranks, sizes);
    *first = 0;
    for (int r = 0; r < t->rank; r++)
        *first += sizes[r];
    return sizes[t->rank];
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 1099511628211ull;
    return h;
}

/* Every rank must train the same model on the same batches: a rank started
 * with other options would silently train something else. */
int dp__train_check_ranks_agree(const dp__trainer *t)
{
    const dp_train_options *o = t->o;
    uint64_t h = 14695981039346656037ull;
    h = fnv1a(h, o->model, strlen(o->model) + 1);
    h = fnv1a(h, &o->batch_size, sizeof o->batch_size);
    h = fnv1a(h, &o->lr, sizeof o->lr);
    h = fnv1a(h, &o->momentum, sizeof o->momentum);
    h = fnv1a(h, &o->weight_decay, sizeof o->weight_decay);
    h = fnv1a(h, &o->epochs, sizeof o->epochs);
    h = fnv1a(h, &o->seed, sizeof o->seed);
    h = fnv1a(h, &o->shuffle, sizeof o->shuffle);
    h = fnv1a(h, &o->limit_train, sizeof o->limit_train);
    h = fnv1a(h, &o->limit_test, sizeof o->limit_test);
    h = fnv1a(h, &o->sync_bn, sizeof o->sync_bn);
    uint64_t all[DP_MAX_RANKS];
    DP_TRY(dp_dist_gather_u64(h, all));
    for (int r = 1; r < t->ranks; r++) {
        if (all[r] != all[0]) {
            DP_ERROR("rank %d was started with other training options than rank 0 (model, batch "
                     "size, lr, epochs, seed, limits must be the same on every rank)",
                     r);
            return DP_EINVAL;
        }
    }
    return 0;
}
