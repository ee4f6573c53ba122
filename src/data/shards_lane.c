/* Lanes: the streams a shard set is read through. In epoch e the shards
 * are permuted by (seed, e), when shuffling, and dealt round-robin:
 *
 *   order  s3 s0 s4 s1 s2      lanes = 2
 *   lane 0 s3 s4 s2            lane 1 s0 s1
 *
 * Each lane reads its shards in turn, front to back, through a shuffle
 * buffer of B samples (WebDataset's shuffle(B)): fill it with the first B
 * samples, then emit buf[k] for k uniform below the fill and put the next
 * sample in its place; at the lane's end, move the last one into the hole
 * and shrink. B = 1 emits the shards' own order. A lane's draws come from
 * (seed, epoch, lane) alone, so its stream is the same whoever reads it,
 * on any thread or rank. */
#include "data/shards_impl.h"

#include "core/internal.h"

#include <string.h>

/* Streams of the counter-based generator, apart from the loader's
 * (seed, epoch) stream of its sample permutation. */
#define SHARD_ORDER_TAG 0x5348524400000000ull  /* "SHRD" */
#define SHARD_BUFFER_TAG 0x5342554600000000ull /* "SBUF" */

/* A buffered sample: it owns its image bytes (taken from the reader). */
typedef struct slot {
    uint8_t *image;
    size_t size; /* its malloc'd size: the image's, no more */
    char *key, *member;
    int32_t label;
    int64_t id;
    int shard;
} slot;

struct dp_shard_lane {
    dp_shard_set_t *set;
    dp_shard_lane_args args;
    int *shards; /* [nshards] this lane's shards, in reading order */
    int nshards, next_shard;
    int current;        /* the shard being read (index into set), or -1 */
    int64_t current_n;  /* samples read from it */
    dp__shard_reader r; /* open while current >= 0 */
    slot *buf;          /* [cap] the shuffle buffer, filled to n */
    int64_t n, cap;
    bool filled; /* the first fill is done */
    slot out;    /* the sample last emitted */
    dp_rng rng;
};

static bool args_ok(const dp_shard_lane_args *a)
{
    return a->lanes >= 1 && a->lane >= 0 && a->lane < a->lanes && a->epoch >= 0 &&
           a->epoch <= UINT32_MAX && a->shuffle_buffer >= 1;
}

int dp_shard_lane_shards(const dp_shard_set_t *set, const dp_shard_lane_args *args, int *shards)
{
    DP_ASSERT(args_ok(args));
    int n = set->nshards;
    int *order = dp__malloc((size_t)n * sizeof *order);
    if (!order)
        return DP_ENOMEM;
    for (int i = 0; i < n; i++)
        order[i] = i;
    if (args->shuffle) {
        dp_rng rng;
        dp_rng_init(&rng, args->seed ^ SHARD_ORDER_TAG, (uint64_t)args->epoch);
        for (int i = n - 1; i > 0; i--) {
            int j = (int)dp_rng_below(&rng, (uint64_t)i + 1);
            int t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
    }
    int m = 0;
    for (int i = args->lane; i < n; i += args->lanes)
        shards[m++] = order[i];
    dp__free(order);
    return m;
}

int64_t dp_shard_lane_samples(const dp_shard_set_t *set, const dp_shard_lane_args *args)
{
    int *shards = dp__malloc((size_t)set->nshards * sizeof *shards);
    if (!shards)
        return DP_ENOMEM;
    int m = dp_shard_lane_shards(set, args, shards);
    int64_t total = 0;
    for (int i = 0; i < m; i++)
        total += set->counts[shards[i]];
    dp__free(shards);
    return m < 0 ? m : total;
}

int dp_shard_lane_open(dp_shard_lane_t **out, const dp_shard_set_t *set,
                       const dp_shard_lane_args *args)
{
    DP_ASSERT(out && set && args);
    *out = NULL;
    if (!args_ok(args)) {
        DP_ERROR("shards: lane %d of %d, epoch %lld, shuffle buffer %lld: expected 0 <= lane < "
                 "lanes, 0 <= epoch < 2^32 and a buffer of at least 1",
                 args->lane, args->lanes, (long long)args->epoch, (long long)args->shuffle_buffer);
        return DP_EINVAL;
    }
    dp_shard_lane_t *l = dp__calloc(1, sizeof *l);
    if (!l)
        return DP_ENOMEM;
    l->set = (dp_shard_set_t *)set; /* its `opened` counter only */
    l->args = *args;
    l->current = -1;
    int64_t b = args->shuffle ? args->shuffle_buffer : 1;
    int64_t total = dp_shard_lane_samples(set, args);
    l->cap = DP_MAX(1, DP_MIN(b, total));
    l->shards = dp__malloc((size_t)set->nshards * sizeof *l->shards);
    l->buf = dp__calloc((size_t)l->cap, sizeof *l->buf);
    if (!l->shards || !l->buf || total < 0) {
        dp_shard_lane_close(l);
        return DP_ENOMEM;
    }
    l->nshards = dp_shard_lane_shards(set, args, l->shards);
    dp_rng_init(&l->rng, args->seed ^ SHARD_BUFFER_TAG,
                ((uint64_t)args->epoch << 32) | (uint32_t)args->lane);
    *out = l;
    return 0;
}

static void slot_free(slot *s)
{
    dp__free(s->image);
    dp__free(s->key);
    dp__free(s->member);
    memset(s, 0, sizeof *s);
}

void dp_shard_lane_close(dp_shard_lane_t *l)
{
    if (!l)
        return;
    dp__shard_reader_close(&l->r);
    for (int64_t i = 0; l->buf && i < l->cap; i++)
        slot_free(&l->buf[i]);
    slot_free(&l->out);
    dp__free(l->buf);
    dp__free(l->shards);
    dp__free(l);
}

/* The shard that has fewer or more samples than the index found. */
static int changed(dp_shard_lane_t *l)
{
    DP_ERROR("%s: %lld samples, but the index pass counted %lld: the shard changed while it "
             "was read",
             l->set->paths[l->current], (long long)l->current_n,
             (long long)l->set->counts[l->current]);
    return DP_EFORMAT;
}

static int replace_str(char **dst, const char *src)
{
    size_t n = strlen(src);
    char *p = dp__malloc(n + 1);
    if (!p)
        return DP_ENOMEM;
    memcpy(p, src, n + 1);
    dp__free(*dst);
    *dst = p;
    return 0;
}

/* The lane's next sample, in shard order, into *s (the reader's image
 * buffer moved into it): 1, 0 at the lane's end, or an error. */
static int pull(dp_shard_lane_t *l, slot *s)
{
    for (;;) {
        if (l->current < 0) {
            if (l->next_shard == l->nshards)
                return 0;
            l->current = l->shards[l->next_shard++];
            l->current_n = 0;
            int32_t cap = l->set->class_names ? l->set->classes - 1 : INT32_MAX;
            atomic_fetch_add(&l->set->opened, 1);
            int rc = dp__shard_reader_open(&l->r, l->set->paths[l->current], true, cap);
            if (rc < 0) {
                l->current = -1;
                return rc;
            }
        }
        int rc = dp__shard_reader_next(&l->r);
        if (rc < 0)
            return rc;
        if (rc == 0) {
            if (l->current_n != l->set->counts[l->current])
                return changed(l);
            dp__shard_reader_close(&l->r);
            l->current = -1;
            continue;
        }
        if (l->current_n == l->set->counts[l->current]) {
            l->current_n++;
            return changed(l);
        }
        /* The slot takes the reader's buffer, which read_member sized to
         * this image, and its own goes: recycling it to the reader instead
         * would let every buffer grow to the largest image that ever
         * passed through it, and B slots of the largest image hold far
         * more than B of the mean one (on a lane of 25,000 samples, 55 KB
         * against 31 KB). So the buffer holds about B x the mean image's
         * bytes, however many shards the lane reads. */
        dp__free(s->image);
        s->image = l->r.image;
        s->size = l->r.image_size;
        l->r.image = NULL;
        l->r.image_cap = 0;
        DP_TRY(replace_str(&s->key, l->r.key));
        DP_TRY(replace_str(&s->member, l->r.member));
        s->label = l->r.label;
        s->shard = l->current;
        s->id = l->set->first_id[l->current] + l->current_n++;
        return 1;
    }
}

int dp_shard_lane_next(dp_shard_lane_t *l, dp_shard_sample *sample)
{
    if (!l->filled) {
        while (l->n < l->cap) {
            int rc = pull(l, &l->buf[l->n]);
            if (rc < 0)
                return rc;
            if (rc == 0)
                break;
            l->n++;
        }
        l->filled = true;
    }
    if (l->n == 0)
        return 0;
    int64_t k = l->n == 1 ? 0 : (int64_t)dp_rng_below(&l->rng, (uint64_t)l->n);
    slot t = l->out;
    l->out = l->buf[k];
    l->buf[k] = t;
    int rc = pull(l, &l->buf[k]);
    if (rc < 0)
        return rc;
    if (rc == 0) {
        /* The lane is read: the last one fills the hole. */
        t = l->buf[k];
        l->buf[k] = l->buf[l->n - 1];
        l->buf[l->n - 1] = t;
        l->n--;
    }
    *sample = (dp_shard_sample){.image = l->out.image,
                                .image_size = l->out.size,
                                .member = l->out.member,
                                .shard = l->set->paths[l->out.shard],
                                .key = l->out.key,
                                .label = l->out.label,
                                .id = l->out.id};
    return 1;
}

/* The next id of the lane's shards in order (shards[*si], its *off-th
 * sample): 1, or 0 at the lane's end. */
static int next_id(const dp_shard_set_t *set, const int *shards, int m, int *si, int64_t *off,
                   int64_t *id)
{
    while (*si < m && *off == set->counts[shards[*si]]) {
        (*si)++;
        *off = 0;
    }
    if (*si == m)
        return 0;
    *id = set->first_id[shards[*si]] + (*off)++;
    return 1;
}

int64_t dp__shard_lane_ids(const dp_shard_set_t *set, const dp_shard_lane_args *args, int64_t *ids,
                           int64_t n)
{
    DP_ASSERT(args_ok(args));
    int *shards = dp__malloc((size_t)set->nshards * sizeof *shards);
    if (!shards)
        return DP_ENOMEM;
    int m = dp_shard_lane_shards(set, args, shards);
    int64_t total = 0;
    for (int i = 0; i < m; i++)
        total += set->counts[shards[i]];
    /* dp_shard_lane_next's buffer and draws, on ids instead of images. */
    int64_t cap = DP_MAX(1, DP_MIN(args->shuffle ? args->shuffle_buffer : 1, total));
    int64_t *buf = dp__malloc((size_t)cap * sizeof *buf);
    if (!buf) {
        dp__free(shards);
        return DP_ENOMEM;
    }
    dp_rng rng;
    dp_rng_init(&rng, args->seed ^ SHARD_BUFFER_TAG,
                ((uint64_t)args->epoch << 32) | (uint32_t)args->lane);
    int si = 0;
    int64_t off = 0, fill = 0, done = 0;
    while (fill < cap && next_id(set, shards, m, &si, &off, &buf[fill]))
        fill++;
    while (done < n && fill > 0) {
        int64_t k = fill == 1 ? 0 : (int64_t)dp_rng_below(&rng, (uint64_t)fill);
        ids[done++] = buf[k];
        if (!next_id(set, shards, m, &si, &off, &buf[k]))
            buf[k] = buf[--fill];
    }
    dp__free(buf);
    dp__free(shards);
    return done;
}
