/* Dataset "tar"'s epochs: the layout (lanes L, P = B/L rows of each a
 * batch, whole batches only) and each epoch's order, known before any
 * image is read (the lanes' shuffle buffers run on the index's ids). */
#include "data/shards_source.h"

#include "core/internal.h"

#include <string.h>

int64_t dp__tar_position(const shard_source *s, int j, int64_t k)
{
    if (s->opt.every_sample)
        return k;
    return k / s->per * s->batch + j * s->per + k % s->per;
}

void dp__tar_lane_of(const shard_source *s, int64_t p, int *j, int64_t *k)
{
    if (s->opt.every_sample) {
        *j = 0;
        *k = p;
        return;
    }
    *j = (int)(p % s->batch / s->per);
    *k = p / s->batch * s->per + p % s->per;
}

int64_t dp__tar_lane_buffer(const shard_source *s)
{
    /* N = shuffle_buffer is the whole read's buffer: ceil(N / L) a lane,
     * so the L lanes hold L * ceil(N / L) < N + L samples together, and a
     * rank reading L / R of them its share, whatever L. A function of N
     * and L alone (never of ranks or devices): the streams stay the same
     * on any split. */
    return DP_MAX(1, (s->opt.shuffle_buffer + s->lanes - 1) / s->lanes);
}

bool dp__tar_mine(const shard_source *s, int64_t p)
{
    if (p < s->first || p >= s->samples)
        return false;
    int64_t begin = p / s->batch * s->batch, n = DP_MIN(s->batch, s->samples - begin);
    int64_t size = (n + s->ranks - 1) / s->ranks, lo = DP_MIN(s->rank * size, n);
    int64_t r = p - begin;
    return r >= lo && r < DP_MIN(lo + size, n);
}

/* Samples every lane holds in any epoch: a lane gets floor(S/L) shards or
 * more, so at least the floor(S/L) smallest shards' samples. */
static int64_t shortest_lane(const dp_shard_set_t *set, int lanes)
{
    int n = set->nshards, m = n / lanes;
    int64_t *c = dp__malloc((size_t)n * sizeof *c);
    if (!c)
        return DP_ENOMEM;
    memcpy(c, set->counts, (size_t)n * sizeof *c);
    int64_t total = 0;
    for (int i = 0; i < m; i++) { /* selection of the m smallest: m <= n, run once */
        int lo = i;
        for (int t = i + 1; t < n; t++)
            if (c[t] < c[lo])
                lo = t;
        int64_t x = c[i];
        c[i] = c[lo];
        c[lo] = x;
        total += c[i];
    }
    dp__free(c);
    return total;
}

/* The lanes when none is asked for: of the L <= 8 that divide the batch
 * and the shard count (every lane then gets as many shards), the largest
 * whose epoch keeps at least 9/10 of the batches that one lane reads (the
 * shortest lane sets an epoch's length, so uneven shards can cost more
 * lanes most of it: 4 shards of 64, 64, 64 and 8 samples on 4 lanes keep 2
 * batches of 16 of the 12 that one lane keeps), else 1; a function of the
 * set and the batch alone, never of ranks or devices. */
static int default_lanes(const dp_shard_set_t *set, int64_t batch)
{
    int shards = set->nshards;
    int64_t one = set->samples / batch;
    for (int lanes = DP_MIN(8, shards); lanes > 1; lanes--) {
        if (batch % lanes || shards % lanes)
            continue;
        int64_t shortest = shortest_lane(set, lanes); /* DP_ENOMEM: not taken */
        if (shortest >= 0 && 10 * (shortest / (batch / lanes)) >= 9 * one)
            return lanes;
    }
    return 1;
}

int64_t dp__tar_layout(void *self, int64_t batch, int rank, int ranks, int64_t limit)
{
    shard_source *s = self;
    dp__tar_free_layout(s);
    int shards = s->set->nshards;
    int64_t n = s->set->samples;
    s->batch = batch;
    s->rank = rank;
    s->ranks = ranks;
    if (s->opt.every_sample) {
        s->lanes = 1;
        s->per = batch;
        s->samples = limit > 0 ? DP_MIN(limit, n) : n;
    } else {
        s->lanes = s->opt.lanes ? s->opt.lanes : default_lanes(s->set, batch);
        if (s->lanes > shards) {
            DP_ERROR("`shard_lanes` %d: the set has %d shard%s, and each lane needs one", s->lanes,
                     shards, shards == 1 ? "" : "s");
            return DP_EINVAL;
        }
        if (batch % s->lanes) {
            DP_ERROR("`batch_size` %lld is not a multiple of `shard_lanes` %d: each batch takes "
                     "batch_size / shard_lanes rows of every lane",
                     (long long)batch, s->lanes);
            return DP_EINVAL;
        }
        if (s->lanes % ranks) {
            DP_ERROR("%d ranks do not divide `shard_lanes` %d: each rank reads whole lanes (set "
                     "`shard_lanes` to a multiple of the ranks that divides `batch_size`)",
                     ranks, s->lanes);
            return DP_EINVAL;
        }
        s->per = batch / s->lanes;
        int64_t shortest = shortest_lane(s->set, s->lanes);
        if (shortest < 0)
            return shortest;
        int64_t batches = shortest / s->per;
        if (limit > 0)
            batches = DP_MIN(batches, limit / batch);
        if (batches == 0) {
            DP_ERROR("%s: its shortest lane of %d holds %lld samples, fewer than batch_size / "
                     "shard_lanes = %lld: lower `batch_size` or `shard_lanes`",
                     s->set->paths[0], s->lanes, (long long)shortest, (long long)s->per);
            return DP_EINVAL;
        }
        s->samples = batches * batch;
        if (rank == 0)
            DP_INFO("tar: %lld samples in %d shards, %d lanes of %lld rows a batch: %lld batches "
                    "an epoch, %lld samples left out of each (whole batches only)",
                    (long long)n, shards, s->lanes, (long long)s->per, (long long)batches,
                    (long long)(n - s->samples));
    }
    s->ls = dp__calloc((size_t)s->lanes, sizeof *s->ls);
    s->order = dp__malloc((size_t)DP_MAX(s->samples, 1) * sizeof *s->order);
    s->where = dp__malloc((size_t)n * sizeof *s->where);
    if (!s->ls || !s->order || !s->where) {
        s->lanes = 0;
        dp__tar_free_layout(s);
        return DP_ENOMEM;
    }
    for (int j = 0; j < s->lanes; j++) {
        pthread_mutex_init(&s->ls[j].mu, NULL);
        pthread_cond_init(&s->ls[j].cv, NULL);
    }
    return s->samples;
}

int dp__tar_plan(void *self, uint64_t seed, int64_t epoch, bool shuffle, int64_t first,
                 int64_t *perm)
{
    shard_source *s = self;
    DP_ASSERT(s->ls);
    for (int j = 0; j < s->lanes; j++)
        dp__tar_lane_reset(&s->ls[j]);
    s->seed = seed;
    s->epoch = epoch;
    s->shuffle = shuffle;
    s->first = first;
    s->planned = false;
    int64_t need = s->opt.every_sample ? s->samples : s->samples / s->lanes;
    int64_t *ids = dp__malloc((size_t)DP_MAX(need, 1) * sizeof *ids);
    if (!ids)
        return DP_ENOMEM;
    for (int j = 0; j < s->lanes; j++) {
        dp_shard_lane_args args = {.seed = seed,
                                   .epoch = epoch,
                                   .lane = j,
                                   .lanes = s->lanes,
                                   .shuffle_buffer = dp__tar_lane_buffer(s),
                                   .shuffle = shuffle};
        int64_t got = dp__shard_lane_ids(s->set, &args, ids, need);
        if (got < need) {
            dp__free(ids);
            if (got >= 0)
                DP_ERROR("tar: lane %d holds %lld samples, the layout counted %lld", j,
                         (long long)got, (long long)need);
            return got < 0 ? (int)got : DP_EFORMAT;
        }
        for (int64_t k = 0; k < need; k++)
            s->order[dp__tar_position(s, j, k)] = ids[k];
    }
    dp__free(ids);
    for (int64_t i = 0; i < s->set->samples; i++)
        s->where[i] = -1;
    for (int64_t p = 0; p < s->samples; p++) {
        s->where[s->order[p]] = p;
        perm[p] = s->order[p];
    }
    s->planned = true;
    return 0;
}
