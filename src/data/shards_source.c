/* Dataset "tar": a shard set streamed through the loader. The loader's
 * workers ask for samples by id; the source knows each id's place in the
 * epoch (its plan) and so its lane and the lane's position k:
 *
 *   batch b (B rows) = lane 0's k in [b*P, b*P + P), lane 1's, ...   P = B/L
 *
 * A lane is read front to back. A worker wanting lane position k takes it
 * from the lane's window when a worker before it read it; else, when no
 * one is reading the lane, it reads (I/O only, without the lane's lock,
 * marked `reading`) the lane's next samples until k, leaving those of
 * other workers in the window, and decodes its own outside every lock.
 * The loader hands out positions in order, so the samples in a window
 * belong to workers already holding them: at most workers - 1 wait there.
 * Samples of other ranks (every_sample) and those before a resumed epoch's
 * first position are read and dropped. */
#include "data/shards_source.h"

#include "core/internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static void ahead_free(ahead *a)
{
    dp__free(a->bytes);
    dp__free(a->name);
    memset(a, 0, sizeof *a);
}

void dp__tar_lane_reset(lane_state *ls)
{
    dp_shard_lane_close(ls->lane);
    ls->lane = NULL;
    for (int64_t i = 0; i < ls->nwin; i++)
        ahead_free(&ls->win[i]);
    ls->nwin = 0;
    ls->next = 0;
    ls->reading = false;
    ls->err = 0;
    dp__free(ls->err_line);
    ls->err_line = NULL;
}

static char *dup_str(const char *t)
{
    size_t n = strlen(t) + 1;
    char *p = dp__malloc(n);
    if (p)
        memcpy(p, t, n);
    return p;
}

/* The lane's next sample into *a (its bytes copied): 1, or a DP_E* code
 * with its line (0 at the lane's end is one: the plan counted more). */
static int pull(shard_source *s, int j, lane_state *ls, ahead *a)
{
    if (!ls->lane) {
        dp_shard_lane_args args = {.seed = s->seed,
                                   .epoch = s->epoch,
                                   .lane = j,
                                   .lanes = s->lanes,
                                   .shuffle_buffer = dp__tar_lane_buffer(s),
                                   .shuffle = s->shuffle};
        DP_TRY(dp_shard_lane_open(&ls->lane, s->set, &args));
    }
    dp_shard_sample x;
    int rc = dp_shard_lane_next(ls->lane, &x);
    if (rc < 0)
        return rc;
    if (rc == 0) {
        DP_ERROR("tar: lane %d of %d ended after %lld samples, before the epoch's plan did", j,
                 s->lanes, (long long)ls->next);
        return DP_EFORMAT;
    }
    size_t nlen = strlen(x.shard) + strlen(x.member) + 3;
    a->bytes = dp__malloc(DP_MAX(x.image_size, 1));
    a->name = dp__malloc(nlen);
    if (!a->bytes || !a->name) {
        ahead_free(a);
        return DP_ENOMEM;
    }
    memcpy(a->bytes, x.image, x.image_size);
    a->size = x.image_size;
    snprintf(a->name, nlen, "%s: %s", x.shard, x.member);
    a->id = x.id;
    return 1;
}

/* Lane j's sample k into *got (its owner now): 0, or the code of the
 * lane's error at or before k, its line this thread's. */
static int take(shard_source *s, int j, int64_t k, ahead *got)
{
    lane_state *ls = &s->ls[j];
    int rc = 0;
    pthread_mutex_lock(&ls->mu);
    for (;;) {
        int64_t i = 0;
        while (i < ls->nwin && ls->win[i].k != k)
            i++;
        if (i < ls->nwin) {
            *got = ls->win[i];
            ls->win[i] = ls->win[--ls->nwin];
            break;
        }
        if (ls->err && k >= ls->err_at) {
            DP_ERROR("%s", ls->err_line ? ls->err_line : "tar: out of memory");
            rc = ls->err;
            break;
        }
        if (k < ls->next) {
            DP_ERROR("tar: lane %d's sample %lld asked for again in epoch %lld (a lane is read "
                     "once, front to back)",
                     j, (long long)k, (long long)s->epoch);
            rc = DP_EINVAL;
            break;
        }
        if (ls->reading) {
            pthread_cond_wait(&ls->cv, &ls->mu);
            continue;
        }
        ls->reading = true;
        pthread_mutex_unlock(&ls->mu);
        ahead a = {0};
        int r = pull(s, j, ls, &a);
        int64_t p = dp__tar_position(s, j, ls->next); /* next is ours while reading */
        if (r == 1 && p < s->samples && a.id != s->order[p]) {
            DP_ERROR("%s: sample id %lld where the plan has %lld: the shard changed since the "
                     "index pass",
                     a.name, (long long)a.id, (long long)s->order[p]);
            ahead_free(&a);
            r = DP_EFORMAT;
        }
        pthread_mutex_lock(&ls->mu);
        ls->reading = false;
        pthread_cond_broadcast(&ls->cv);
        if (r < 0) {
            ls->err = r;
            ls->err_at = ls->next;
            ls->err_line = dup_str(dp_last_error());
            continue;
        }
        a.k = ls->next++;
        if (a.k == k) {
            *got = a;
            break;
        }
        if (!dp__tar_mine(s, p)) {
            ahead_free(&a);
            continue;
        }
        if (ls->nwin == ls->cap) {
            int64_t cap = DP_MAX(8, 2 * ls->cap);
            ahead *win = dp__malloc((size_t)cap * sizeof *win);
            if (!win) {
                ahead_free(&a);
                ls->err = DP_ENOMEM;
                ls->err_at = a.k;
                continue;
            }
            if (ls->nwin)
                memcpy(win, ls->win, (size_t)ls->nwin * sizeof *win);
            dp__free(ls->win);
            ls->win = win;
            ls->cap = cap;
        }
        ls->win[ls->nwin++] = a;
    }
    pthread_mutex_unlock(&ls->mu);
    return rc;
}

static int check_shape(const shard_source *s, const char *name, const int chw[3])
{
    if (chw[0] == s->chw[0] && chw[1] == s->chw[1] && chw[2] == s->chw[2])
        return 0;
    DP_ERROR("%s: %dx%d pixels (width x height) after the transforms, but the first image gives "
             "%dx%d: every sample must have one size; add a stage that fixes it (center-crop:S "
             "after resize:S, or random-resized-crop:S)",
             name, chw[2], chw[1], s->chw[2], s->chw[1]);
    return DP_EINVAL;
}

static int source_read(void *self, int64_t id, uint64_t seed, int64_t epoch, float *out, size_t cap)
{
    shard_source *s = self;
    int64_t p = s->planned && seed == s->seed && epoch == s->epoch ? s->where[id] : -1;
    if (p < 0) {
        DP_ERROR("tar: sample %lld is not in epoch %lld's plan (a shard set is read in the "
                 "lanes' order, through the loader)",
                 (long long)id, (long long)epoch);
        return DP_EINVAL;
    }
    int j;
    int64_t k;
    dp__tar_lane_of(s, p, &j, &k);
    ahead a = {0};
    DP_TRY(take(s, j, k, &a));
    int chw[3];
    int rc = dp_transform_decode(&s->transform, (dp_jpeg_scale)s->opt.jpeg_scale, a.bytes, a.size,
                                 a.name, s->decode_channels, seed, epoch, id, out, cap, chw);
    if (rc == 0)
        rc = check_shape(s, a.name, chw);
    ahead_free(&a);
    return rc;
}

static int64_t source_opened(const void *self)
{
    const shard_source *s = self;
    return dp_shard_set_opened(s->set) - s->opened_before;
}

void dp__tar_free_layout(shard_source *s)
{
    for (int j = 0; s->ls && j < s->lanes; j++) {
        dp__tar_lane_reset(&s->ls[j]);
        dp__free(s->ls[j].win);
        pthread_cond_destroy(&s->ls[j].cv);
        pthread_mutex_destroy(&s->ls[j].mu);
    }
    dp__free(s->ls);
    dp__free(s->order);
    dp__free(s->where);
    s->ls = NULL;
    s->order = s->where = NULL;
    s->planned = false;
}

static void source_close(void *self)
{
    shard_source *s = self;
    if (!s)
        return;
    dp__tar_free_layout(s);
    dp_shard_set_close(s->set);
    dp__free(s);
}

static const dp__source_ops shard_ops = {.read = source_read,
                                         .opened = source_opened,
                                         .close = source_close,
                                         .layout = dp__tar_layout,
                                         .plan = dp__tar_plan};

/* The samples' shape from the set's first sample (its shard opened once,
 * not counted as the lanes' opening). */
static int first_shape(shard_source *s)
{
    dp_shard_lane_args args = {.lanes = 1, .shuffle_buffer = 1};
    dp_shard_lane_t *lane;
    DP_TRY(dp_shard_lane_open(&lane, s->set, &args));
    dp_shard_sample x;
    int rc = dp_shard_lane_next(lane, &x);
    dp_image first = {0};
    if (rc == 1)
        rc = dp_image_decode(x.image, x.image_size, x.member, s->opt.channels, &first);
    dp_shard_lane_close(lane);
    s->opened_before = dp_shard_set_opened(s->set);
    if (rc < 0)
        return rc;
    dp_transform_output_shape(&s->transform, first.channels, first.rows, first.cols, s->chw);
    int rows, cols;
    if (dp_transform_fixed_size(&s->transform, &rows, &cols)) {
        s->chw[1] = rows;
        s->chw[2] = cols;
    }
    s->decode_channels = first.channels;
    dp_image_close(&first);
    return 0;
}

/* The split's shard set: DIR's <split>-*.tar, or the pattern (train) and
 * its directory's test-*.tar (test). */
static int open_set(const char *spec, bool train, dp_shard_set_t **set)
{
    const char *split = train ? "train" : "test";
    struct stat st;
    bool dir = stat(spec, &st) == 0 && S_ISDIR(st.st_mode);
    char buf[DP__DATA_PATH_CAP];
    if (!dir && !train) {
        const char *slash = strrchr(spec, '/');
        snprintf(buf, sizeof buf, "%.*s", slash ? (int)(slash - spec) : 1, slash ? spec : ".");
        spec = buf;
    }
    DP_TRY(dp_shard_set_open(set, spec, split));
    const char *first = strrchr(dp_shard_set_path(*set, 0), '/');
    first = first ? first + 1 : dp_shard_set_path(*set, 0);
    if ((dir || !train) && strncmp(first, split, strlen(split)) != 0) {
        DP_ERROR("%s: no %s-*.tar shards (the %s split)", spec, split, split);
        dp_shard_set_close(*set);
        *set = NULL;
        return DP_ENOENT;
    }
    return 0;
}

int dp_shard_dataset_open(const char *spec, bool train, const dp_shard_dataset_options *opt,
                          dp_dataset *out)
{
    DP_ASSERT(spec && opt && out);
    memset(out, 0, sizeof *out);
    if (opt->channels != 0 && opt->channels != 1 && opt->channels != 3) {
        DP_ERROR("tar: `channels` %d: 1 or 3", opt->channels);
        return DP_EINVAL;
    }
    if (opt->shuffle_buffer < 0 || opt->lanes < 0) {
        DP_ERROR("tar: `shuffle_buffer` %lld and `shard_lanes` %d must be >= 0 (0: default)",
                 (long long)opt->shuffle_buffer, opt->lanes);
        return DP_EINVAL;
    }
    shard_source *s = dp__calloc(1, sizeof *s);
    if (!s)
        return DP_ENOMEM;
    s->opt = *opt;
    s->opt.transform = NULL;
    if (!s->opt.shuffle_buffer)
        s->opt.shuffle_buffer = DP_SHARD_SHUFFLE_BUFFER;
    if (opt->transform)
        s->transform = *opt->transform;
    int rc = open_set(spec, train, &s->set);
    if (rc == 0)
        rc = first_shape(s);
    if (rc < 0) {
        source_close(s);
        return rc;
    }
    s->chw[0] = s->chw[0] ? s->chw[0] : 1;
    int64_t n = dp_shard_set_samples(s->set);
    dp_dataset ds = {.n = n,
                     .channels = s->chw[0],
                     .rows = s->chw[1],
                     .cols = s->chw[2],
                     .classes = dp_shard_set_classes(s->set)};
    ds.labels = dp__malloc((size_t)n * sizeof *ds.labels);
    const char *const *names = dp_shard_set_class_names(s->set);
    if (names)
        ds.class_names = dp__calloc((size_t)ds.classes, sizeof *ds.class_names);
    bool ok = ds.labels && (!names || ds.class_names);
    for (int k = 0; ok && names && k < ds.classes; k++)
        ok = (ds.class_names[k] = dup_str(names[k])) != NULL;
    if (!ok) {
        dp_dataset_close(&ds);
        source_close(s);
        return DP_ENOMEM;
    }
    memcpy(ds.labels, s->set->labels, (size_t)n * sizeof *ds.labels);
    rc = dp__dataset_set_source(&ds, &shard_ops, s);
    if (rc < 0) {
        dp_dataset_close(&ds);
        return rc;
    }
    *out = ds;
    return 0;
}
