/* The run's data: the training and test sets (the options' own, or loaded
 * from the dataset's files), their loaders, the samples' shape, which the
 * model is built for, and their classes (what checkpoints record of them
 * for predict). */
#include "train/trainer.h"
#include "train/option_values.h"

#include "core/internal.h"
#include "dp/dist.h"
#include "dp/shards.h"
#include "dp/transform.h"
#include "io/json.h"

#include <string.h>

struct dp__train_data {
    dp_dataset train, test;                 /* loaded from files (empty when given) */
    const dp_dataset *train_set, *test_set; /* what the run uses: those, or the options' */
    int64_t chw[3];                         /* (channels, rows, cols) of every sample */
    int classes;                            /* labels are below it; 0: not known */
    char *classes_json;                     /* their names as a JSON array, or NULL */
    dp_loader_t *train_loader, *test_loader;
    dp_transform_list train_transform, test_transform; /* a folder's, each split's */
};

/* A folder's test classes must be its training classes, or label k would
 * mean two things (ImageFolder numbers each split's directories alone). */
static int check_same_classes(const dp_train_options *o, const dp_dataset *train,
                              const dp_dataset *test)
{
    for (int k = 0; k < DP_MAX(train->classes, test->classes); k++) {
        const char *a = k < train->classes ? train->class_names[k] : NULL;
        const char *b = k < test->classes ? test->class_names[k] : NULL;
        if (!a || !b || strcmp(a, b) != 0) {
            DP_ERROR("%s/test: class %d is %s, in %s/train it is %s: the class directories of "
                     "train and test must be the same",
                     o->data.data_dir, k, b ? DP_REPR(b) : "missing", o->data.data_dir,
                     a ? DP_REPR(a) : "missing");
            return DP_EINVAL;
        }
    }
    return 0;
}

typedef struct json_buf {
    char *s;
    size_t n, cap;
    bool failed;
} json_buf;

static void json_put(void *ctx, const char *bytes, size_t n)
{
    json_buf *b = ctx;
    if (b->failed)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = DP_MAX(2 * b->cap, b->n + n + 64);
        char *s = dp__malloc(cap);
        if (!s) {
            b->failed = true;
            return;
        }
        if (b->n)
            memcpy(s, b->s, b->n);
        dp__free(b->s);
        b->s = s;
        b->cap = cap;
    }
    memcpy(b->s + b->n, bytes, n);
    b->n += n;
    b->s[b->n] = '\0';
}

/* ["name", ...] of names[0..n) (a class name that is not UTF-8 cannot be
 * one: refused, naming it). */
static int classes_json(const char *const *names, int n, const char *where, char **out)
{
    json_buf b = {0};
    json_put(&b, "[", 1);
    for (int k = 0; k < n; k++) {
        if (!dp__utf8_valid(names[k])) {
            DP_ERROR("%s: the class name %s is not UTF-8: rename its directory", where,
                     DP_REPR(names[k]));
            dp__free(b.s);
            return DP_EINVAL;
        }
        if (k)
            json_put(&b, ",", 1);
        dp__json_string(names[k], strlen(names[k]), json_put, &b);
    }
    json_put(&b, "]", 1);
    if (b.failed) {
        dp__free(b.s);
        return DP_ENOMEM;
    }
    *out = b.s;
    return 0;
}

/* The classes' count and names, from the folder's directories, the
 * built-in dataset's list, or a set's own count. */
static int take_classes(dp__train_data *d, const dp_train_options *o)
{
    const dp_dataset *ds = d->train_set ? d->train_set : d->test_set;
    d->classes = DP_MAX(ds->classes, d->test_set->classes);
    if (ds->class_names)
        return classes_json((const char *const *)ds->class_names, ds->classes, o->data.data_dir,
                            &d->classes_json);
    const char *const *builtin = o->test_set ? NULL : dp_dataset_builtin_classes(o->data.dataset);
    if (builtin)
        return classes_json(builtin, 10, "dataset", &d->classes_json);
    return 0;
}

/* Each split's transforms: `train_transform` and `test_transform`, else
 * `transform`'s recipe's. They are for images of any size: a folder's. */
static int take_transforms(dp__train_data *d, const dp_train_options *o)
{
    d->train_transform = o->data.train_transform;
    d->test_transform = o->data.test_transform;
    if (o->data.transform == DP__TRANSFORM_IMAGENET) {
        if (d->train_transform.n == 0)
            DP_TRY(dp_transform_parse("imagenet", &d->train_transform));
        if (d->test_transform.n == 0)
            DP_TRY(dp_transform_parse("imagenet-test", &d->test_transform));
    }
    bool folder = o->data.dataset &&
                  (strcmp(o->data.dataset, "folder") == 0 || strcmp(o->data.dataset, "tar") == 0);
    if ((d->train_transform.n || d->test_transform.n) && (!folder || o->test_set)) {
        DP_ERROR("`train_transform`, `test_transform` and `transform` are for `dataset` folder "
                 "(images of any size); %s has samples of one size: use `augment`",
                 o->test_set       ? "a program's own data"
                 : o->data.dataset ? o->data.dataset
                                   : "fashion-mnist");
        return DP_EINVAL;
    }
    return 0;
}

/* One split of the options' dataset: a folder's with `channels`, streamed
 * (or cached) through its transforms. */
static int load_split(const dp__train_data *d, const dp_train_options *o, bool train, int channels,
                      dp_dataset *out)
{
    if (o->data.dataset && strcmp(o->data.dataset, "folder") == 0) {
        dp_folder_options fo = {.channels = channels,
                                .transform = train ? &d->train_transform : &d->test_transform,
                                .jpeg_scale = o->data.jpeg_scale,
                                .cache = o->data.cache};
        return dp_image_folder_open(o->data.data_dir, train, &fo, out);
    }
    if (o->data.dataset && strcmp(o->data.dataset, "tar") == 0) {
        /* The test split whole, in the set's order (its accuracy is over
         * every sample); the training split in lanes (docs/shards.md). */
        dp_shard_dataset_options so = {
            .channels = channels,
            .transform = train ? &d->train_transform : &d->test_transform,
            .jpeg_scale = o->data.jpeg_scale,
            .shuffle_buffer = o->data.shuffle ? o->data.shuffle_buffer : 1,
            .lanes = o->data.shard_lanes,
            .every_sample = !train};
        if (!o->data.data_dir) {
            DP_ERROR("`dataset` tar: `data_dir` is required: a directory of train-*.tar and "
                     "test-*.tar, or the training shards' pattern");
            return DP_EINVAL;
        }
        return dp_shard_dataset_open(o->data.data_dir, train, &so, out);
    }
    if (channels && channels != 1 && channels != 3) {
        DP_ERROR("`channels` %d: 1 or 3", channels);
        return DP_EINVAL;
    }
    if (o->data.cache)
        DP_WARN("`cache` is for `dataset` folder: %s is read into memory anyway",
                o->data.dataset ? o->data.dataset : "fashion-mnist");
    return dp_dataset_load(o->data.dataset, o->data.data_dir, train, out);
}

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
    }
    DP_TRY(take_transforms(d, o));
    if (!o->test_set) {
        if (o->data.channels && !(o->data.dataset && (strcmp(o->data.dataset, "folder") == 0 ||
                                                      strcmp(o->data.dataset, "tar") == 0))) {
            DP_ERROR("`channels` is for `dataset` folder; %s has its own",
                     o->data.dataset ? o->data.dataset : "fashion-mnist");
            return DP_EINVAL;
        }
        int channels = o->data.channels;
        if (train_too) {
            DP_TRY(load_split(d, o, true, channels, &d->train));
            d->train_set = &d->train;
            channels = dp_dataset_channels(&d->train); /* the test images are read alike */
        }
        DP_TRY(load_split(d, o, false, channels, &d->test));
        d->test_set = &d->test;
        if (train_too && d->train.class_names)
            DP_TRY(check_same_classes(o, &d->train, &d->test));
    }
    DP_TRY(take_classes(d, o));
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

int dp__data_peek(const dp_train_options *o, int64_t chw[3], int64_t *n)
{
    if (o->train_set) {
        chw[0] = dp_dataset_channels(o->train_set);
        chw[1] = o->train_set->rows;
        chw[2] = o->train_set->cols;
        *n = o->train_set->n;
        return 0;
    }
    if (o->test_set)
        return 1; /* load() says what is missing */
    return dp_dataset_sample_shape(o->data.dataset, o->data.data_dir, chw, n);
}

int dp__data_open(dp__train_data **out, const dp_train_options *o, bool train_too)
{
    dp__train_data *d = dp__calloc(1, sizeof *d);
    if (!d)
        return DP_ENOMEM;
    *out = d;
    return load(d, o, train_too);
}

/* ImageNet's Normalize(mean, std), which --transform imagenet brings. */
static const dp_augment_options imagenet_normalize = {
    .norm_channels = 3, .mean = {0.485f, 0.456f, 0.406f}, .std = {0.229f, 0.224f, 0.225f}};

int dp__data_open_loaders(dp__train_data *d, const dp_train_options *o, uint64_t seed,
                          bool train_too)
{
    /* The crop and flip of `augment`, the normalisation of `normalize`. */
    dp_augment_options augment = o->data.normalize;
    if (augment.norm_channels == 0 && o->data.transform == DP__TRANSFORM_IMAGENET)
        augment = imagenet_normalize;
    augment.crop_pad = o->data.augment.crop_pad;
    augment.flip = o->data.augment.flip;
    /* Each rank reads only its rows of every global batch. */
    dp_loader_options lo = {.batch_size = o->data.batch_size,
                            .shuffle = o->data.shuffle,
                            .seed = seed,
                            .limit = o->data.limit_train,
                            .prefetch = o->data.prefetch,
                            .augment = augment,
                            .workers = o->data.workers,
                            .rank = dp_dist_rank(),
                            .ranks = dp_dist_size(),
                            .bad_images = o->data.bad_images};
    if (train_too)
        DP_TRY(dp_loader_init(&d->train_loader, d->train_set, &lo));
    /* Evaluation sees the images as they are, normalised as in training. */
    lo.shuffle = false;
    lo.limit = o->data.limit_test;
    lo.augment.crop_pad = 0;
    lo.augment.flip = false;
    return dp_loader_init(&d->test_loader, d->test_set, &lo);
}

void dp__data_close(dp__train_data *d)
{
    if (!d)
        return;
    /* What this process read of a streamed set: under mpirun, its share. */
    if (d->train.source)
        DP_INFO("training set: %lld image files opened by this process, of %lld",
                (long long)dp_dataset_files_opened(&d->train), (long long)d->train.n);
    dp_loader_close(d->train_loader);
    dp_loader_close(d->test_loader);
    dp_dataset_close(&d->train);
    dp_dataset_close(&d->test);
    dp__free(d->classes_json);
    dp__free(d);
}

int dp__data_classes(const dp__train_data *d)
{
    return d ? d->classes : 0;
}

void dp__data_record(const dp__trainer *t, dp_checkpoint_state *ck)
{
    memcpy(ck->input_chw, t->data->chw, sizeof ck->input_chw);
    ck->classes = t->data->classes_json;
}

const int64_t *dp__data_chw(const dp__train_data *d)
{
    return d->chw;
}

const dp_dataset *dp__data_train_set(const dp__train_data *d)
{
    return d->train_set;
}

const dp_dataset *dp__data_test_set(const dp__train_data *d)
{
    return d->test_set;
}

dp_loader_t *dp__data_loader(const dp__train_data *d, bool train)
{
    return train ? d->train_loader : d->test_loader;
}

void dp__data_host_batch(const dp__trainer *t, const dp_batch *b, uint64_t seed, uint64_t step,
                         dp_host_batch *out)
{
    /* The loader filled only this rank's rows (b->first on): they are the
     * batch's x as they are, not offset again. */
    const int64_t *chw = t->data->chw;
    *out = (dp_host_batch){.x = b->x,
                           .labels = b->y,
                           .n = b->rows,
                           .chw = {chw[0], chw[1], chw[2]},
                           .seed = seed,
                           .step = step,
                           .sample_offset = b->first};
}
