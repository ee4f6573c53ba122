/* dp_train_data_samples: the samples a run's step would get, for `dptrain
 * data` to dump and draw: the data opened and the loaders made as
 * dp_train makes them (data.c), one epoch's batches taken in order.
 * dp_train_data_stream takes them the same way and keeps none, for
 * `dptrain data --bench` on any count in the loader's memory alone. */
#include "train/trainer.h"

#include "core/internal.h"

#include <string.h>

/* The class names of the opened data: a folder's directories, a built-in
 * set's list, else "0", "1", ... */
static int take_names(const dp_dataset *ds, const dp_train_options *o, dp_data_samples *out)
{
    const char *const *builtin = o->test_set ? NULL : dp_dataset_builtin_classes(o->data.dataset);
    int k = ds->class_names ? ds->classes : builtin ? 10 : ds->classes;
    out->classes = k;
    out->class_names = dp__calloc((size_t)DP_MAX(k, 1), sizeof *out->class_names);
    if (!out->class_names)
        return DP_ENOMEM;
    for (int i = 0; i < k; i++) {
        char num[16];
        snprintf(num, sizeof num, "%d", i);
        const char *name = ds->class_names ? ds->class_names[i] : builtin ? builtin[i] : num;
        if (!(out->class_names[i] = dp__strdup(name)))
            return DP_ENOMEM;
    }
    return 0;
}

/* Epoch `epoch`'s first out->cap samples in the loader's order: copied
 * into out->x and out->labels where they are allocated, else counted only
 * (each batch dropped when the next is taken: the loader's memory alone). */
static int gather(dp_loader_t *l, int64_t epoch, dp_data_samples *out)
{
    size_t per = (size_t)(out->chw[0] * out->chw[1] * out->chw[2]);
    DP_TRY(dp_loader_start_epoch(l, epoch, 0));
    dp_batch b;
    int more;
    while (out->n < out->cap && (more = dp_loader_next(l, &b)) > 0) {
        int64_t take = DP_MIN(b.rows, out->cap - out->n);
        if (out->x) {
            memcpy(out->x + (size_t)out->n * per, b.x, (size_t)take * per * sizeof *out->x);
            memcpy(out->labels + out->n, b.y, (size_t)take * sizeof *out->labels);
        }
        out->n += take;
        out->skipped += b.skipped;
    }
    return out->n < out->cap && more < 0 ? more : 0;
}

/* dp_train_data_samples, keeping the samples or (keep false) counting them. */
static int take_samples(const dp_train_options *o, bool test, int64_t epoch, int64_t count,
                        bool keep, dp_data_samples *out)
{
    DP_ASSERT(o && out);
    memset(out, 0, sizeof *out);
    if (count < 1 || epoch < 0) {
        DP_ERROR("data samples: count %lld (at least 1) of epoch %lld (from 0)", (long long)count,
                 (long long)epoch);
        return DP_EINVAL;
    }
    DP_TRY(dp_train_options_check(o));
    dp__train_data *d = NULL;
    int rc = dp__data_open(&d, o, !test);
    if (rc == 0)
        rc = dp__data_open_loaders(d, o, o->run.seed, !test);
    dp_loader_t *l = rc == 0 ? dp__data_loader(d, !test) : NULL;
    if (rc == 0) {
        memcpy(out->chw, dp__data_chw(d), sizeof out->chw);
        out->cap = DP_MIN(count, dp_loader_num_samples(l));
        size_t per = (size_t)(out->chw[0] * out->chw[1] * out->chw[2]);
        if (keep) {
            out->x = dp__malloc((size_t)DP_MAX(out->cap, 1) * per * sizeof *out->x);
            out->labels = dp__malloc((size_t)DP_MAX(out->cap, 1) * sizeof *out->labels);
            rc = out->x && out->labels ? 0 : DP_ENOMEM;
        }
    }
    if (rc == 0)
        rc = gather(l, epoch, out);
    if (rc == 0)
        rc = take_names(test ? dp__data_test_set(d) : dp__data_train_set(d), o, out);
    dp__data_close(d);
    if (rc < 0)
        dp_data_samples_free(out);
    return rc;
}

int dp_train_data_samples(const dp_train_options *o, bool test, int64_t epoch, int64_t count,
                          dp_data_samples *out)
{
    return take_samples(o, test, epoch, count, true, out);
}

int dp_train_data_stream(const dp_train_options *o, bool test, int64_t epoch, int64_t count,
                         dp_data_samples *out)
{
    return take_samples(o, test, epoch, count, false, out);
}

void dp_data_samples_free(dp_data_samples *s)
{
    if (!s)
        return;
    for (int i = 0; s->class_names && i < s->classes; i++)
        dp__free(s->class_names[i]);
    dp__free(s->class_names);
    dp__free(s->x);
    dp__free(s->labels);
    memset(s, 0, sizeof *s);
}
