/* The batch loader: a permutation per epoch, and a pool of worker threads
 * that read (decode, transform, augment) the samples of the next batches
 * into a ring of slots while the caller trains.
 *
 * Ring: `nslots` = prefetch + 1 slots, each [cap, channels, rows, cols]
 * floats, [cap] labels and [cap] statuses (cap = this rank's largest chunk
 * of a batch). Batch b lives in slot b % nslots. The batches that may be in
 * the ring are [low, low + nslots) with low = the batch the caller holds
 * (or, holding none, the next it will take): `prefetch` batches ahead of
 * the one in use, and memory that does not grow with the dataset.
 *
 * Work: a sample at a time. A worker takes the next (batch, row) under the
 * mutex (`next_batch`, `next_row`), reads it without the lock into its row
 * of the batch's slot, and counts it done (`todo`); a batch is handed out
 * when its `todo` is 0, so in order whatever the workers' timing. What a
 * sample holds depends on (seed, epoch, its index) alone: the batches are
 * the same bit for bit for 1 worker or 8.
 *
 * Locking: one mutex guards every field marked (m). Workers read `perm`
 * and `epoch` without the lock, but only while counted in `busy`;
 * dp_loader_start_epoch clears `active`, waits for `busy` to reach 0 and
 * only then rewrites `perm` and `epoch` and resets the ring. The caller
 * reads the slot it holds without the lock; no worker writes a held slot
 * (its batch is below low + nslots only after it was handed back). */
#include "data/loader_internal.h"

#include "data/dataset.h"

#include "core/internal.h"

#include <stdio.h>
#include <string.h>

#define DEFAULT_PREFETCH 2

/* Whether batch b may be started now (its slot free) (m). */
static bool may_start(const dp_loader_t *l, int64_t b)
{
    int64_t low = l->next_consume - (l->held ? 1 : 0);
    return b < l->num_batches && b < low + l->nslots;
}

static void *worker_main(void *arg)
{
    dp_loader_t *l = arg;
    float *scratch = NULL;
    if (l->sample_floats)
        scratch = dp__malloc(l->sample_floats * sizeof *scratch);
    /* A sample's error is the batch's to report, on the caller's thread,
     * when the batch is reached: kept here, not logged. */
    dp__log_hold(true);
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->stop && !(l->active && may_start(l, l->next_batch)))
            pthread_cond_wait(&l->work_cv, &l->mu);
        if (l->stop)
            break;
        int64_t b = l->next_batch, r = l->next_row;
        dp__loader_slot *s = &l->slots[b % l->nslots];
        if (r == 0)
            dp__loader_slot_begin(l, s, b);
        if (s->rows == 0) { /* this rank has no row of it */
            l->next_batch++;
            pthread_cond_broadcast(&l->ready_cv);
            continue;
        }
        if (++l->next_row == s->rows) {
            l->next_batch++;
            l->next_row = 0;
        }
        l->busy++;
        pthread_mutex_unlock(&l->mu);

        int rc = scratch || !l->sample_floats ? dp__loader_read_row(l, s, r, scratch) : DP_ENOMEM;
        char line[sizeof s->error];
        if (rc < 0)
            snprintf(line, sizeof line, "%s", dp_last_error());

        pthread_mutex_lock(&l->mu);
        s->status[r] = rc;
        if (rc < 0 && (s->error_row < 0 || r < s->error_row)) {
            s->error_row = r;
            memcpy(s->error, line, sizeof line);
        }
        l->busy--;
        if (--s->todo == 0 || l->busy == 0)
            pthread_cond_broadcast(&l->ready_cv);
    }
    pthread_mutex_unlock(&l->mu);
    dp__log_hold(false);
    dp__free(scratch);
    return NULL;
}

static void free_loader(dp_loader_t *l)
{
    if (l->slots) {
        for (int i = 0; i < l->nslots; i++) {
            dp__free(l->slots[i].x);
            dp__free(l->slots[i].y);
            dp__free(l->slots[i].status);
        }
    }
    dp__free(l->slots);
    dp__free(l->perm);
    dp__free(l->threads);
    dp__free(l);
}

static int check_options(const dp_dataset *ds, const dp_loader_options *opt)
{
    if (opt->batch_size <= 0) {
        DP_ERROR("loader: batch size must be positive, got %lld", (long long)opt->batch_size);
        return DP_EINVAL;
    }
    if (opt->limit < 0) {
        DP_ERROR("loader: sample limit must be 0 (all) or positive, got %lld",
                 (long long)opt->limit);
        return DP_EINVAL;
    }
    if (opt->prefetch < 0 || opt->prefetch > DP_LOADER_MAX_PREFETCH) {
        DP_ERROR("loader: prefetch must be 0 (default) to %d, got %d", DP_LOADER_MAX_PREFETCH,
                 opt->prefetch);
        return DP_EINVAL;
    }
    if (opt->workers < 0 || opt->workers > DP_LOADER_MAX_WORKERS) {
        DP_ERROR("loader: workers must be 0 (default) to %d, got %d", DP_LOADER_MAX_WORKERS,
                 opt->workers);
        return DP_EINVAL;
    }
    if (opt->ranks < 0 || opt->rank < 0 || (opt->ranks > 0 && opt->rank >= opt->ranks) ||
        (opt->ranks == 0 && opt->rank != 0)) {
        DP_ERROR("loader: rank %d of %d ranks", opt->rank, opt->ranks);
        return DP_EINVAL;
    }
    if (opt->bad_images != DP_BAD_IMAGES_STOP && opt->bad_images != DP_BAD_IMAGES_SKIP) {
        DP_ERROR("loader: bad_images %d is neither stop nor skip", (int)opt->bad_images);
        return DP_EINVAL;
    }
    if (dp_augment_check(&opt->augment, dp_dataset_channels(ds)) < 0)
        return DP_EINVAL;
    if (ds->n < 0 || ds->channels < 0 || ds->rows < 0 || ds->cols < 0 ||
        (ds->n > 0 && ((!ds->images && !ds->pixels && !ds->source) || !ds->labels))) {
        DP_ERROR("loader: dataset is not loaded (n %lld, channels %d, rows %d, cols %d)",
                 (long long)ds->n, ds->channels, ds->rows, ds->cols);
        return DP_EINVAL;
    }
    return 0;
}

int dp_loader_init(dp_loader_t **out, const dp_dataset *ds, const dp_loader_options *opt)
{
    DP_ASSERT(out && ds && opt);
    *out = NULL;
    DP_TRY(check_options(ds, opt));

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
    l->rank = opt->rank;
    l->ranks = opt->ranks > 0 ? opt->ranks : 1;
    l->bad_images = opt->bad_images;
    l->nslots = (opt->prefetch > 0 ? opt->prefetch : DEFAULT_PREFETCH) + 1;
    l->nworkers = opt->workers > 0 ? opt->workers : dp__loader_default_workers();
    /* A source with its own order says how many samples an epoch has. */
    const dp__source_ops *ops = ds->source ? ds->source->ops : NULL;
    if (ops && ops->layout) {
        int64_t n = ops->layout(ds->source->self, l->batch_size, l->rank, l->ranks, opt->limit);
        if (n < 0) {
            dp__free(l);
            return (int)n;
        }
        l->n = n;
        l->num_batches = (l->n + l->batch_size - 1) / l->batch_size;
    }

    /* This rank's largest chunk: torch.chunk's first (ceil(n / ranks)). */
    int64_t whole = DP_MIN(l->batch_size, l->n);
    size_t cap = (size_t)DP_MAX((whole + l->ranks - 1) / l->ranks, 1);
    l->perm = dp__calloc((size_t)DP_MAX(l->n, 1), sizeof *l->perm);
    l->slots = dp__calloc((size_t)l->nslots, sizeof *l->slots);
    l->threads = dp__calloc((size_t)l->nworkers, sizeof *l->threads);
    if (!l->perm || !l->slots || !l->threads)
        goto nomem;
    for (int i = 0; i < l->nslots; i++) {
        if (l->sample_floats && cap > SIZE_MAX / sizeof(float) / l->sample_floats)
            goto nomem;
        l->slots[i].x = dp__malloc(cap * l->sample_floats * sizeof(float));
        l->slots[i].y = dp__malloc(cap * sizeof(int32_t));
        l->slots[i].status = dp__calloc(cap, sizeof(int));
        l->slots[i].index = -1;
        if (!l->slots[i].x || !l->slots[i].y || !l->slots[i].status)
            goto nomem;
    }

    if (pthread_mutex_init(&l->mu, NULL) != 0)
        goto fail_mutex;
    if (pthread_cond_init(&l->work_cv, NULL) != 0)
        goto fail_work_cv;
    if (pthread_cond_init(&l->ready_cv, NULL) != 0)
        goto fail_ready_cv;
    for (; l->started_threads < l->nworkers; l->started_threads++) {
        if (pthread_create(&l->threads[l->started_threads], NULL, worker_main, l) != 0) {
            DP_ERROR("loader: cannot start worker thread %d of %d", l->started_threads + 1,
                     l->nworkers);
            dp_loader_close(l);
            return DP_ENOMEM;
        }
    }
    *out = l;
    return DP_OK;

fail_ready_cv:
    pthread_cond_destroy(&l->work_cv);
fail_work_cv:
    pthread_mutex_destroy(&l->mu);
fail_mutex:
    free_loader(l);
    return DP_ENOMEM;

nomem:
    DP_ERROR("loader: out of memory for %d batch buffers of %zu samples", l->nslots, cap);
    free_loader(l);
    return DP_ENOMEM;
}

/* The caller's order is a permutation of 0 .. n-1: each index once. */
static int check_order(const dp_loader_t *l, const int64_t *order)
{
    uint8_t *seen = dp__calloc((size_t)DP_MAX(l->n, 1), 1);
    if (!seen) {
        DP_ERROR("loader: out of memory checking an order of %lld samples", (long long)l->n);
        return DP_ENOMEM;
    }
    int rc = DP_OK;
    for (int64_t i = 0; i < l->n && rc == DP_OK; i++) {
        int64_t k = order[i];
        if (k < 0 || k >= l->n || seen[k]) {
            DP_ERROR("loader: the order's entry %lld is %lld: %s", (long long)i, (long long)k,
                     k < 0 || k >= l->n ? "outside the dataset" : "a sample already in the order");
            rc = DP_EINVAL;
        } else {
            seen[k] = 1;
        }
    }
    dp__free(seen);
    return rc;
}

static int start_epoch(dp_loader_t *l, int64_t epoch, int64_t first_batch, const int64_t *order);

int dp_loader_start_epoch(dp_loader_t *l, int64_t epoch, int64_t first_batch)
{
    return start_epoch(l, epoch, first_batch, NULL);
}

int dp_loader_start_epoch_in_order(dp_loader_t *l, int64_t epoch, const int64_t *order)
{
    DP_ASSERT(l && order);
    const dp__source_ops *ops = l->ds->source ? l->ds->source->ops : NULL;
    if (ops && ops->plan) {
        DP_ERROR("loader: this dataset is read in its own order (shards); it takes no order");
        return DP_EINVAL;
    }
    int rc = check_order(l, order);
    return rc < 0 ? rc : start_epoch(l, epoch, 0, order);
}

static int start_epoch(dp_loader_t *l, int64_t epoch, int64_t first_batch, const int64_t *order)
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

    /* Park the workers: no new sample after this, and those in hand done. */
    pthread_mutex_lock(&l->mu);
    l->active = false;
    while (l->busy > 0)
        pthread_cond_wait(&l->ready_cv, &l->mu);
    pthread_mutex_unlock(&l->mu);

    /* The workers are idle until `active` is set again: `perm` and
     * `epoch` are ours. */
    l->epoch = epoch;
    const dp__source_ops *ops = l->ds->source ? l->ds->source->ops : NULL;
    int rc = 0;
    if (ops && ops->plan)
        rc = ops->plan(l->ds->source->self, l->seed, epoch, l->shuffle, first_batch * l->batch_size,
                       l->perm);
    for (int64_t i = 0; !(ops && ops->plan) && i < l->n; i++)
        l->perm[i] = order ? order[i] : i;
    if (rc < 0) {
        pthread_mutex_lock(&l->mu);
        l->started = false; /* no epoch to hand batches of */
        pthread_mutex_unlock(&l->mu);
        return rc;
    }
    if (l->shuffle && !order && !(ops && ops->plan)) {
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
    for (int i = 0; i < l->nslots; i++)
        l->slots[i].index = -1;
    l->held = false;
    l->next_batch = l->next_consume = first_batch;
    l->next_row = 0;
    l->started = true;
    l->active = true;
    pthread_cond_broadcast(&l->work_cv);
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
        pthread_cond_broadcast(&l->work_cv);
    }
    if (l->next_consume >= l->num_batches) {
        pthread_mutex_unlock(&l->mu);
        return 0;
    }
    int64_t want = l->next_consume;
    dp__loader_slot *s = &l->slots[want % l->nslots];
    while (!(s->index == want && s->todo == 0))
        pthread_cond_wait(&l->ready_cv, &l->mu);
    l->next_consume++;
    l->held = true;
    pthread_mutex_unlock(&l->mu);

    /* The slot is ours until the next call: its bad rows dealt with. */
    int rc = dp__loader_settle(l, s, out);
    if (rc < 0) {
        /* The run ends here: the workers read nothing more of this epoch,
         * and the end stays the end. */
        pthread_mutex_lock(&l->mu);
        l->active = false;
        l->next_consume = l->num_batches;
        l->held = false;
        pthread_mutex_unlock(&l->mu);
    }
    return rc < 0 ? rc : 1;
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
    pthread_cond_broadcast(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < l->started_threads; i++)
        pthread_join(l->threads[i], NULL);
    pthread_cond_destroy(&l->ready_cv);
    pthread_cond_destroy(&l->work_cv);
    pthread_mutex_destroy(&l->mu);
    free_loader(l);
}
