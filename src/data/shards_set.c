/* A shard set: its spec expanded, classes.txt read, and the index pass
 * over every shard's headers (data skipped, labels read), which counts
 * the samples of each shard and checks them, so that the lanes' counts
 * are known before any image is read. */
#include "data/shards_impl.h"

#include "core/internal.h"

#include <string.h>

void dp_shard_set_close(dp_shard_set_t *set)
{
    if (!set)
        return;
    for (int i = 0; i < set->nshards; i++)
        dp__free(set->paths[i]);
    dp__free(set->paths);
    for (int k = 0; set->class_names && k < set->classes; k++)
        dp__free(set->class_names[k]);
    dp__free(set->class_names);
    dp__free(set->counts);
    dp__free(set->first_id);
    dp__free(set->labels);
    dp__free(set);
}

/* The directory of the first shard ("." for a bare name). */
static void shards_dir(const char *first, char *dir, size_t size)
{
    const char *slash = strrchr(first, '/');
    if (!slash)
        snprintf(dir, size, ".");
    else if (slash == first)
        snprintf(dir, size, "/");
    else
        snprintf(dir, size, "%.*s", (int)(slash - first), first);
}

/* One more label at set->labels[set->samples + n], the array grown by
 * doubling (*cap its room). */
static int keep_label(dp_shard_set_t *set, int64_t n, int64_t *cap, int32_t label)
{
    int64_t at = set->samples + n;
    if (at == *cap) {
        int64_t grown = DP_MAX(1024, 2 * *cap);
        int32_t *labels = dp__malloc((size_t)grown * sizeof *labels);
        if (!labels)
            return DP_ENOMEM;
        if (at)
            memcpy(labels, set->labels, (size_t)at * sizeof *labels);
        dp__free(set->labels);
        set->labels = labels;
        *cap = grown;
    }
    set->labels[at] = label;
    return 0;
}

/* Shard s's samples counted and checked, their labels kept after the
 * earlier shards' (*room: set->labels' capacity); *max_label the largest. */
static int index_shard(dp_shard_set_t *set, int s, int64_t *room, int32_t *max_label)
{
    dp__shard_reader r;
    int32_t cap = set->class_names ? set->classes - 1 : INT32_MAX;
    DP_TRY(dp__shard_reader_open(&r, set->paths[s], false, cap));
    int64_t n = 0;
    int rc;
    while ((rc = dp__shard_reader_next(&r)) == 1) {
        rc = keep_label(set, n, room, r.label);
        if (rc < 0)
            break;
        n++;
        if (r.label > *max_label)
            *max_label = r.label;
    }
    dp__shard_reader_close(&r);
    set->counts[s] = n;
    return rc;
}

int dp_shard_set_open(dp_shard_set_t **out, const char *spec, const char *split)
{
    DP_ASSERT(out);
    *out = NULL;
    dp_shard_set_t *set = dp__calloc(1, sizeof *set);
    if (!set)
        return DP_ENOMEM;
    atomic_init(&set->opened, 0);
    int rc = dp__shard_spec_expand(spec, split, &set->paths, &set->nshards);
    if (rc == 0) {
        set->counts = dp__calloc((size_t)set->nshards, sizeof *set->counts);
        set->first_id = dp__calloc((size_t)set->nshards, sizeof *set->first_id);
        rc = set->counts && set->first_id ? 0 : DP_ENOMEM;
    }
    char dir[4096];
    if (rc == 0) {
        shards_dir(set->paths[0], dir, sizeof dir);
        rc = dp__shard_classes_read(dir, &set->class_names, &set->classes);
    }
    int32_t max_label = -1;
    int64_t cap = 0;
    for (int s = 0; rc == 0 && s < set->nshards; s++) {
        rc = index_shard(set, s, &cap, &max_label);
        set->first_id[s] = set->samples;
        set->samples += set->counts[s];
    }
    if (rc == 0 && set->samples == 0) {
        DP_ERROR("%s: no sample in %d shard%s (a sample is KEY.jpg, .jpeg or .png with KEY.cls)",
                 set->nshards == 1 ? set->paths[0] : spec, set->nshards,
                 set->nshards == 1 ? "" : "s");
        rc = DP_EFORMAT;
    }
    if (rc < 0) {
        dp_shard_set_close(set);
        return rc;
    }
    if (!set->class_names)
        set->classes = max_label + 1;
    *out = set;
    return 0;
}

int64_t dp_shard_set_samples(const dp_shard_set_t *set)
{
    return set->samples;
}

int dp_shard_set_shards(const dp_shard_set_t *set)
{
    return set->nshards;
}

const char *dp_shard_set_path(const dp_shard_set_t *set, int s)
{
    DP_ASSERT(s >= 0 && s < set->nshards);
    return set->paths[s];
}

int64_t dp_shard_set_shard_samples(const dp_shard_set_t *set, int s)
{
    DP_ASSERT(s >= 0 && s < set->nshards);
    return set->counts[s];
}

int64_t dp_shard_set_first_id(const dp_shard_set_t *set, int s)
{
    DP_ASSERT(s >= 0 && s < set->nshards);
    return set->first_id[s];
}

int dp_shard_set_classes(const dp_shard_set_t *set)
{
    return set->classes;
}

const char *const *dp_shard_set_class_names(const dp_shard_set_t *set)
{
    return (const char *const *)set->class_names;
}

int64_t dp_shard_set_opened(const dp_shard_set_t *set)
{
    return atomic_load(&((dp_shard_set_t *)set)->opened);
}
