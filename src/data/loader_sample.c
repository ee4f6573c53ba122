/* What the loader's workers do to each sample: this rank's rows of a
 * global batch (torch.chunk's split, as dp_chunk_sizes, which src/data
 * cannot call: parallel/ is above it), each read from the dataset (a
 * memcpy, or a streamed source's decode and transforms), then --augment's
 * crop and flip and Normalize; and what becomes of a sample that did not
 * read. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity */
#endif
#include "data/loader_internal.h"

#include "core/internal.h"

#include <sched.h>
#include <string.h>

/* torch.chunk(n, ranks)'s chunk `rank`: chunks of ceil(n / ranks) rows,
 * the last ones short or empty. */
static int64_t rank_rows(int64_t n, int rank, int ranks, int64_t *first)
{
    int64_t size = (n + ranks - 1) / ranks;
    *first = DP_MIN((int64_t)rank * size, n);
    return DP_MIN(size, n - *first);
}

void dp__loader_slot_begin(const dp_loader_t *l, dp__loader_slot *s, int64_t b)
{
    int64_t begin = b * l->batch_size;
    s->index = b;
    s->n = DP_MIN(l->batch_size, l->n - begin);
    s->rows = rank_rows(s->n, l->rank, l->ranks, &s->first);
    s->todo = s->rows;
    s->error_row = -1;
    for (int64_t r = 0; r < s->rows; r++) {
        s->y[r] = l->ds->labels[l->perm[begin + s->first + r]];
        s->status[r] = 0;
    }
}

/* Normalize of channels planes of `plane` floats each, in place. */
static void normalize_in_place(const dp_augment_options *o, int channels, size_t plane, float *x)
{
    if (o->norm_channels <= 0)
        return;
    for (int c = 0; c < channels; c++) {
        int k = o->norm_channels == 1 ? 0 : c;
        float mean = o->mean[k], std = o->std[k];
        float *p = x + (size_t)c * plane;
        for (size_t i = 0; i < plane; i++)
            p[i] = (p[i] - mean) / std;
    }
}

int dp__loader_read_row(const dp_loader_t *l, dp__loader_slot *s, int64_t r, float *scratch)
{
    int64_t id = l->perm[s->index * l->batch_size + s->first + r];
    float *dst = s->x + (size_t)r * l->sample_floats;
    const dp_dataset *ds = l->ds;
    if (!l->transform)
        return dp_dataset_read(ds, id, l->seed, l->epoch, dst);
    if (!l->random) {
        /* No crop or flip (the transform list's own are done): the sample
         * read straight into the batch and Normalize'd there, as
         * dp_augment_apply's (v - mean) / std without its copy. */
        DP_TRY(dp_dataset_read(ds, id, l->seed, l->epoch, dst));
        normalize_in_place(&l->augment, dp_dataset_channels(ds),
                           (size_t)ds->rows * (size_t)ds->cols, dst);
        return 0;
    }
    /* The sample as floats (bytes scaled, or decoded and transformed),
     * then cropped, flipped and normalised into the batch. */
    DP_TRY(dp_dataset_read(ds, id, l->seed, l->epoch, scratch));
    dp_augment_draw d;
    if (l->random)
        dp_augment_draw_for(&l->augment, l->seed, l->epoch, id, &d);
    dp_augment_apply(&l->augment, l->random ? &d : NULL, dp_dataset_channels(ds), ds->rows,
                     ds->cols, scratch, dst);
    return 0;
}

int dp__loader_settle(const dp_loader_t *l, dp__loader_slot *s, dp_batch *out)
{
    int64_t kept = 0;
    for (int64_t r = 0; r < s->rows; r++) {
        if (s->status[r] < 0) {
            /* The worker kept the file's line: said here, on the thread
             * that stops the run (its dp_last_error()), or as a warning. */
            if (l->bad_images == DP_BAD_IMAGES_STOP) {
                DP_ERROR("%s", s->error);
                return s->status[s->error_row];
            }
            if (r == s->error_row)
                DP_WARN("%s (skipped)", s->error);
            continue;
        }
        if (kept != r) {
            memmove(s->x + (size_t)kept * l->sample_floats, s->x + (size_t)r * l->sample_floats,
                    l->sample_floats * sizeof(float));
            s->y[kept] = s->y[r];
        }
        kept++;
    }
    out->x = s->x;
    out->y = s->y;
    out->skipped = s->rows - kept;
    out->n = s->n - out->skipped;
    out->rows = kept;
    out->first = s->first;
    out->index = s->index;
    /* Settled once: a second look (none today) sees the same batch. */
    s->rows = kept;
    s->n = out->n;
    for (int64_t r = 0; r < kept; r++)
        s->status[r] = 0;
    return 0;
}

int dp__loader_default_workers(void)
{
    /* One per core this process may run on: decoding a JPEG and resizing
     * it is one core's work, and the step's own threads wait on the
     * batch rather than compete with it (docs/data.md has the measure). */
    cpu_set_t set;
    int cores = 1;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        cores = CPU_COUNT(&set);
    return DP_MAX(1, DP_MIN(cores, 16));
}
