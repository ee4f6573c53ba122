/* The batch loader: a permutation per epoch, and one long-lived thread that
 * gathers the next batches into a ring of buffers while the caller trains.
 *
 * Ring: `nslots` = prefetch + 1 buffers, each [cap, channels, rows, cols] floats and
 * [cap] labels (cap = min(batch_size, n)). Batches go through the slots in
 * order, so at any time, walking forward from the slot the caller holds:
 *
 *   [held by the caller (0 or 1)] [ready: `filled`] [being filled (0 or 1)] [free]
 *
 * with `head` the first ready slot and `tail` the slot the thread fills next.
 * The thread may start a batch while filled + held < nslots, which leaves
 * `prefetch` batches prepared ahead of the one the caller holds.
 *
 * Locking: one mutex guards every field below marked (m). The thread reads
 * `perm` and `epoch` and writes a slot's buffers without the lock, but only
 * while `busy` is set; dp_loader_start_epoch clears `active`, waits for
 * `busy` to drop and only then rewrites `perm` and `epoch` and resets the
 * ring, so the mutex orders every access. The caller reads a slot it holds
 * without the lock; the thread never touches a held or ready slot.
 *
 * Augmentation (augment.c) happens here too, as each sample is gathered:
 * its draws depend on the seed, the epoch and the sample's index alone, so
 * the order the thread fills batches in does not matter. */
#include "dp/data.h"

#include "core/internal.h"

#include <pthread.h>
#include <string.h>

#define DEFAULT_PREFETCH 2

typedef struct loader_slot {
    float *x;      /* [cap, channels, rows, cols] */
    int32_t *y;    /* [cap] */
    int64_t n;     /* samples in the batch */
    int64_t index; /* batch number within the epoch */
} loader_slot;

struct dp_loader {
    const dp_dataset *ds;
    int64_t n; /* samples used: min(limit, ds->n) */
    int64_t batch_size;
    int64_t num_batches;
    size_t sample_floats; /* channels * rows * cols */
    bool shuffle;
    uint64_t seed;
    dp_augment_options augment;
    bool transform, random; /* dp_augment_any, dp_augment_random */
    int64_t epoch;          /* the current epoch, for the augmentation's draws */
    int64_t *perm;          /* [n]: sample ids in this epoch's order */
    float *scratch;         /* [sample_floats]: a sample before its augmentation */
    loader_slot *slots;
    int nslots;

    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work_cv;  /* the thread waits here for work */
    pthread_cond_t ready_cv; /* callers wait here for a batch, or for !busy */
    bool started;            /* (m) an epoch was started */
    bool active;             /* (m) the thread may produce batches */
    bool stop;               /* (m) the thread must exit */
    bool busy;               /* (m) the thread is filling slot `tail` */
    bool held;               /* (m) the caller holds the slot before `head` */
    int head, tail, filled;  /* (m) see the top of the file */
    int64_t next_produce;    /* (m) next batch the thread fills */
    int64_t next_consume;    /* (m) next batch dp_loader_next hands out */
};

/* Gathers batch `b` of the current permutation into `s`, each sample
 * augmented and normalised as the options say: here, on the loader's
 * thread, before the batch is split, so every rank and device trains on
 * the same images. */
static void fill_slot(const dp_loader_t *l, loader_slot *s, int64_t b)
{
    int64_t begin = b * l->batch_size;
    int64_t count = DP_MIN(l->batch_size, l->n - begin);
    const dp_dataset *ds = l->ds;
    for (int64_t i = 0; i < count; i++) {
        int64_t id = l->perm[begin + i];
        float *dst = s->x + (size_t)i * l->sample_floats;
        if (l->transform) {
            /* The sample as floats (bytes scaled, dp_dataset_get), then
             * cropped, flipped and normalised into the batch. */
            dp_dataset_get(ds, id, 1, l->scratch);
            dp_augment_draw d;
            if (l->random)
                dp_augment_draw_for(&l->augment, l->seed, l->epoch, id, &d);
            dp_augment_apply(&l->augment, l->random ? &d : NULL, dp_dataset_channels(ds), ds->rows,
                             ds->cols, l->scratch, dst);
        } else {
            dp_dataset_get(ds, id, 1, dst);
        }
        s->y[i] = ds->labels[id];
    }
    s->n = count;
    s->index = b;
}

static void *prefetch_main(void *arg)
{
    dp_loader_t *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->stop && !(l->active && l->next_produce < l->num_batches &&
                             l->filled + (int)l->held < l->nslots))
            pthread_cond_wait(&l->work_cv, &l->mu);
        if (l->stop)
            break;
        loader_slot *s = &l->slots[l->tail];
        int64_t b = l->next_produce++;
        l->busy = true;
        pthread_mutex_unlock(&l->mu);

        fill_slot(l, s, b);

        pthread_mutex_lock(&l->mu);
        l->busy = false;
        l->tail = (l->tail + 1) % l->nslots;
        l->filled++;
        pthread_cond_broadcast(&l->ready_cv);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static void free_loader(dp_loader_t *l)
{
    if (l->slots) {
        for (int i = 0; i < l->nslots; i++) {
            dp__free(l->slots[i].x);
            dp__free(l->slots[i].y);
        }
    }
    dp__free(l->slots);
    dp__free(l->perm);
    dp__free(l->scratch);
    dp__free(l);
}

int dp_loader_init(dp_loader_t **out, const dp_dataset *ds, const dp_loader_options *opt)
{
    DP_ASSERT(out && ds && opt);
    *out = NULL;
    if (opt->batch_size <= 0) {
        DP_ERROR("loader: batch size must be positive, got %lld", (long long)opt->batch_size);
        return DP_EINVAL;
    }
    if (opt->limit < 0) {
        DP_ERROR("loader: sample limit must be 0 (all) or positive, got %lld",
                 (long long)opt->limit);
        return DP_EINVAL;
    }
    if (opt->prefetch < 0) {
        DP_ERROR("loader: prefetch must be 0 (default) or positive, got %d", opt->prefetch);
        return DP_EINVAL;
    }
    if (dp_augment_check(&opt->augment, dp_dataset_channels(ds)) < 0)
        return DP_EINVAL;
    if (ds->n < 0 || ds->channels < 0 || ds->rows < 0 || ds->cols < 0 ||
        (ds->n > 0 && ((!ds->images && !ds->pixels) || !ds->labels))) {
        DP_ERROR("loader: dataset is not loaded (n %lld, channels %d, rows %d, cols %d)",
                 (long long)ds->n, ds->channels, ds->rows, ds->cols);
        return DP_EINVAL;
    }

    dp_loader_t *l = dp__calloc(1, sizeof *l);
    if (!l)
        return DP_ENOMEM;
    l->ds = ds;
    l->n = opt->limit > 0 ? DP_MIN(opt->limit, ds->n) : ds->n;
    l->batch_size = opt->batch_size;
    l->num_batches = (l->n + l->batch_size - 1) / l->batch_size;
    l->sample_floats = (size_t)dp_dataset_channels(ds) * (size_t)ds->rows * (size_t)ds->cols;
    l->shuffle = opt->shuffle;
    l->seed = opt->seed;
    l->augment = opt->augment;
    l->transform = dp_augment_any(&opt->augment);
    l->random = dp_augment_random(&opt->augment);
    l->nslots = (opt->prefetch > 0 ? opt->prefetch : DEFAULT_PREFETCH) + 1;

    size_t cap = (size_t)DP_MAX(DP_MIN(l->batch_size, l->n), 1);
    l->perm = dp__calloc((size_t)DP_MAX(l->n, 1), sizeof *l->perm);
    l->slots = dp__calloc((size_t)l->nslots, sizeof *l->slots);
    l->scratch = dp__malloc((size_t)DP_MAX(l->sample_floats, 1) * sizeof *l->scratch);
    if (!l->perm || !l->slots || !l->scratch)
        goto nomem;
    for (int i = 0; i < l->nslots; i++) {
        if (l->sample_floats && cap > SIZE_MAX / sizeof(float) / l->sample_floats)
            goto nomem;
        l->slots[i].x = dp__malloc(cap * l->sample_floats * sizeof(float));
        l->slots[i].y = dp__malloc(cap * sizeof(int32_t));
        if (!l->slots[i].x || !l->slots[i].y)
            goto nomem;
    }

    int rc = DP_ENOMEM;
    if (pthread_mutex_init(&l->mu, NULL) != 0)
        goto fail_mutex;
    if (pthread_cond_init(&l->work_cv, NULL) != 0)
        goto fail_work_cv;
    if (pthread_cond_init(&l->ready_cv, NULL) != 0)
        goto fail_ready_cv;
    if (pthread_create(&l->thread, NULL, prefetch_main, l) != 0) {
        DP_ERROR("loader: cannot start the prefetch thread");
        goto fail_thread;
    }
    *out = l;
    return DP_OK;

fail_thread:
    pthread_cond_destroy(&l->ready_cv);
fail_ready_cv:
    pthread_cond_destroy(&l->work_cv);
fail_work_cv:
    pthread_mutex_destroy(&l->mu);
fail_mutex:
    free_loader(l);
    return rc;

nomem:
    DP_ERROR("loader: out of memory for %d batch buffers of %zu samples", l->nslots, cap);
    free_loader(l);
    return DP_ENOMEM;
}

int dp_loader_start_epoch(dp_loader_t *l, int64_t epoch, int64_t first_batch)
{
    DP_ASSERT(l);
    if (epoch < 0) {
        DP_ERROR("loader: epoch must be >= 0, got %lld", (long long)epoch);
        return DP_EINVAL;
    }
    if (first_batch < 0 || first_batch > l->num_batches) {
        DP_ERROR("loader: first batch %lld is outside 0..%lld", (long long)first_batch,
                 (long long)l->num_batches);
        return DP_EINVAL;
    }

    /* Park the thread: no new batch after this, and the one in hand done. */
    pthread_mutex_lock(&l->mu);
    l->active = false;
    while (l->busy)
        pthread_cond_wait(&l->ready_cv, &l->mu);
    pthread_mutex_unlock(&l->mu);

    /* The thread is idle until `active` is set again: `perm` and `epoch`
     * are ours. */
    l->epoch = epoch;
    for (int64_t i = 0; i < l->n; i++)
        l->perm[i] = i;
    if (l->shuffle) {
        dp_rng rng;
        dp_rng_init(&rng, l->seed, (uint64_t)epoch);
        for (int64_t i = l->n - 1; i > 0; i--) {
            int64_t j = (int64_t)dp_rng_below(&rng, (uint64_t)i + 1);
            int64_t t = l->perm[i];
            l->perm[i] = l->perm[j];
            l->perm[j] = t;
        }
    }

    pthread_mutex_lock(&l->mu);
    l->head = l->tail = l->filled = 0;
    l->held = false;
    l->next_produce = l->next_consume = first_batch;
    l->started = true;
    l->active = true;
    pthread_cond_signal(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
    return DP_OK;
}

int dp_loader_next(dp_loader_t *l, dp_batch *out)
{
    DP_ASSERT(l && out);
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&l->mu);
    if (!l->started) {
        pthread_mutex_unlock(&l->mu);
        DP_ERROR("loader: dp_loader_next called before dp_loader_start_epoch");
        return DP_EINVAL;
    }
    /* The batch handed out last time goes back to the ring. */
    if (l->held) {
        l->held = false;
        pthread_cond_signal(&l->work_cv);
    }
    if (l->next_consume >= l->num_batches) {
        pthread_mutex_unlock(&l->mu);
        return 0;
    }
    while (l->filled == 0)
        pthread_cond_wait(&l->ready_cv, &l->mu);
    const loader_slot *s = &l->slots[l->head];
    l->head = (l->head + 1) % l->nslots;
    l->filled--;
    l->held = true;
    int64_t want = l->next_consume++;
    pthread_mutex_unlock(&l->mu);

    DP_ASSERT(s->index == want);
    out->x = s->x;
    out->y = s->y;
    out->n = s->n;
    out->index = s->index;
    return 1;
}

int64_t dp_loader_num_batches(const dp_loader_t *l)
{
    DP_ASSERT(l);
    return l->num_batches;
}

int64_t dp_loader_num_samples(const dp_loader_t *l)
{
    DP_ASSERT(l);
    return l->n;
}

void dp_loader_close(dp_loader_t *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_signal(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    pthread_cond_destroy(&l->ready_cv);
    pthread_cond_destroy(&l->work_cv);
    pthread_mutex_destroy(&l->mu);
    free_loader(l);
}
