/* The run's data: the training and test sets (the options' own, or loaded
 * from the dataset's files), their loaders, and the samples' shape, which
 * the model is built for. */
#include "train/trainer.h"

#include "core/internal.h"

struct dp__train_data {
    dp_dataset train, test;                 /* loaded from files (empty when given) */
    const dp_dataset *train_set, *test_set; /* what the run uses: those, or the options' */
    int64_t chw[3];                         /* (channels, rows, cols) of every sample */
    dp_loader_t *train_loader, *test_loader;
};

/* Sample shape [channels, rows, cols] of ds, for messages. */
static const char *sample_shape_str(const dp_dataset *ds, char *buf, size_t size)
{
    int64_t shape[3] = {dp_dataset_channels(ds), ds->rows, ds->cols};
    return dp__shape_str(buf, size, 3, shape);
}

static int load(dp__train_data *d, const dp_train_options *o, bool train_too)
{
    if (train_too && (o->train_set == NULL) != (o->test_set == NULL)) {
        DP_ERROR("a program's own data needs both a training and a test set, got only the %s",
                 o->train_set ? "training set" : "test set");
        return DP_EINVAL;
    }
    if (o->test_set) {
        d->train_set = o->train_set;
        d->test_set = o->test_set;
    } else {
        if (train_too) {
            DP_TRY(dp_dataset_load(o->dataset, o->data_dir, true, &d->train));
            d->train_set = &d->train;
        }
        DP_TRY(dp_dataset_load(o->dataset, o->data_dir, false, &d->test));
        d->test_set = &d->test;
    }
    const dp_dataset *ds = train_too ? d->train_set : d->test_set;
    d->chw[0] = dp_dataset_channels(ds);
    d->chw[1] = ds->rows;
    d->chw[2] = ds->cols;
    const dp_dataset *test = d->test_set;
    if (dp_dataset_channels(test) != d->chw[0] || test->rows != d->chw[1] ||
        test->cols != d->chw[2]) {
        char a[64], b[64];
        DP_ERROR("the test samples are %s but the training samples %s: they must agree",
                 sample_shape_str(test, a, sizeof a), sample_shape_str(ds, b, sizeof b));
        return DP_EINVAL;
    }
    return 0;
}

int dp__data_open(dp__train_data **out, const dp_train_options *o, bool train_too)
{
    dp__train_data *d = dp__calloc(1, sizeof *d);
    if (!d)
        return DP_ENOMEM;
    *out = d;
    return load(d, o, train_too);
}

int dp__data_open_loaders(dp__train_data *d, const dp_train_options *o, uint64_t seed,
                          bool train_too)
{
    dp_loader_options lo = {.batch_size = o->batch_size,
                            .shuffle = o->shuffle,
                            .seed = seed,
                            .limit = o->limit_train,
                            .augment = o->augment};
    if (train_too)
        DP_TRY(dp_loader_init(&d->train_loader, d->train_set, &lo));
    /* Evaluation sees the images as they are, normalised as in training. */
    lo.shuffle = false;
    lo.limit = o->limit_test;
    lo.augment.crop_pad = 0;
    lo.augment.flip = false;
    return dp_loader_init(&d->test_loader, d->test_set, &lo);
}

void dp__data_close(dp__train_data *d)
{
    if (!d)
        return;
    dp_loader_close(d->train_loader);
    dp_loader_close(d->test_loader);
    dp_dataset_close(&d->train);
    dp_dataset_close(&d->test);
    dp__free(d);
}

const int64_t *dp__data_chw(const dp__train_data *d)
{
    return d->chw;
}

const dp_dataset *dp__data_train_set(const dp__train_data *d)
{
    return d->train_set;
}

dp_loader_t *dp__data_loader(const dp__train_data *d, bool train)
{
    return train ? d->train_loader : d->test_loader;
}

void dp__data_host_batch(const dp__trainer *t, const dp_batch *b, uint64_t seed, uint64_t step,
                         dp_host_batch *out)
{
    const int64_t *chw = t->data->chw;
    int64_t row0, n = dp__train_rank_rows(t, b->n, &row0);
    *out = (dp_host_batch){.x = b->x + row0 * chw[0] * chw[1] * chw[2],
                           .labels = b->y + row0,
                           .n = n,
                           .chw = {chw[0], chw[1], chw[2]},
                           .seed = seed,
                           .step = step,
                           .sample_offset = row0};
}
