/* Datasets as one type: the buffers every reader fills, a program's own
 * arrays (dp_dataset_from_memory), loading a dataset by name, and the
 * samples as floats whichever way they are held. */
#include "data/dataset.h"

#include "dp/shards.h"

#include "core/internal.h"

#include <string.h>
#include <sys/stat.h>

bool dp__data_is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && !S_ISDIR(st.st_mode);
}

int dp__data_check_dir(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        DP_ERROR("%s: no such directory", dir);
        return DP_ENOENT;
    }
    return 0;
}

int dp__data_require_dir(const char *dir, const char *name, const char *where_to_get)
{
    if (!dir) {
        DP_ERROR("%s: `data_dir` is required (no package installs it); %s", name, where_to_get);
        return DP_EINVAL;
    }
    return dp__data_check_dir(dir);
}

int dp__dataset_alloc(dp_dataset *ds, int64_t n, int channels, int rows, int cols, const char *what)
{
    return dp__dataset_alloc_as(ds, n, channels, rows, cols, false, what);
}

int dp__dataset_alloc_as(dp_dataset *ds, int64_t n, int channels, int rows, int cols, bool bytes,
                         const char *what)
{
    memset(ds, 0, sizeof *ds);
    if (n < 0 || channels <= 0 || rows <= 0 || cols <= 0) {
        DP_ERROR("%s: bad size: %lld samples of [%d, %d, %d]", what, (long long)n, channels, rows,
                 cols);
        return DP_EINVAL;
    }
    /* Each factor is below 2^31 and n < 2^63: check the product step by
     * step against what a size_t of floats can hold. */
    uint64_t per = (uint64_t)channels * (uint64_t)rows * (uint64_t)cols;
    uint64_t max = SIZE_MAX / sizeof(float);
    if (per > max || (n > 0 && (uint64_t)n > max / per)) {
        DP_ERROR("%s: %lld samples of [%d, %d, %d] do not fit in memory", what, (long long)n,
                 channels, rows, cols);
        return DP_EINVAL;
    }
    size_t count = (size_t)DP_MAX(n, 1);
    if (bytes)
        ds->pixels = dp__calloc(count * (size_t)per, 1);
    else
        ds->images = dp__calloc(count * (size_t)per, sizeof(float));
    ds->labels = dp__calloc(count, sizeof(int32_t));
    if (!(ds->images || ds->pixels) || !ds->labels) {
        dp_dataset_close(ds);
        DP_ERROR("%s: out of memory for %lld samples of [%d, %d, %d]", what, (long long)n, channels,
                 rows, cols);
        return DP_ENOMEM;
    }
    ds->n = n;
    ds->channels = channels;
    ds->rows = rows;
    ds->cols = cols;
    return 0;
}

int dp_dataset_from_memory(dp_dataset *out, int64_t n, int channels, int rows, int cols,
                           const float *images, const uint8_t *bytes, const int32_t *labels,
                           int classes)
{
    DP_ASSERT(out);
    memset(out, 0, sizeof *out);
    if ((images == NULL) == (bytes == NULL)) {
        DP_ERROR("in-memory dataset: give the images either as floats or as bytes, not %s",
                 images ? "both" : "neither");
        return DP_EINVAL;
    }
    if (!labels || classes <= 0) {
        DP_ERROR("in-memory dataset: labels and a positive number of classes are required "
                 "(classes %d)",
                 classes);
        return DP_EINVAL;
    }
    for (int64_t i = 0; i < n; i++) {
        if (labels[i] < 0 || labels[i] >= classes) {
            DP_ERROR("in-memory dataset: label %d at index %lld is outside 0..%d", labels[i],
                     (long long)i, classes - 1);
            return DP_EINVAL;
        }
    }
    dp_dataset ds;
    DP_TRY(dp__dataset_alloc(&ds, n, channels, rows, cols, "in-memory dataset"));
    size_t count = (size_t)n * (size_t)channels * (size_t)rows * (size_t)cols;
    if (images) {
        memcpy(ds.images, images, count * sizeof(float));
    } else {
        for (size_t i = 0; i < count; i++)
            ds.images[i] = (float)bytes[i] / 255.0f;
    }
    memcpy(ds.labels, labels, (size_t)n * sizeof(int32_t));
    ds.classes = classes;
    *out = ds;
    return 0;
}

static const char *const dataset_names[] = {"fashion-mnist", "mnist", "cifar10", "folder",
                                            "npy",           "tar",   NULL};

static const char *const cifar10_classes[] = {"airplane", "automobile", "bird",  "cat",  "deer",
                                              "dog",      "frog",       "horse", "ship", "truck"};
static const char *const digit_classes[] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
const char *const *dp_dataset_builtin_classes(const char *name)
{
    if (!name || strcmp(name, "fashion-mnist") == 0)
        return dp__fashion_mnist_names();
    if (strcmp(name, "mnist") == 0)
        return digit_classes;
    if (strcmp(name, "cifar10") == 0)
        return cifar10_classes;
    return NULL;
}

const char *const *dp_dataset_names(void)
{
    return dataset_names;
}

int dp_dataset_load(const char *name, const char *dir, bool train, dp_dataset *out)
{
    DP_ASSERT(out);
    memset(out, 0, sizeof *out);
    int rc;
    if (!name || strcmp(name, "fashion-mnist") == 0)
        rc = dp_fashion_mnist_load(dir, train, out);
    else if (strcmp(name, "mnist") == 0)
        rc = dp_mnist_load(dir, train, out);
    else if (strcmp(name, "cifar10") == 0)
        rc = dp_cifar10_load(dir, train, out);
    else if (strcmp(name, "folder") == 0)
        return dp_image_folder_load(dir, train, 0, out);
    else if (strcmp(name, "npy") == 0)
        return dp_npy_dataset_load(dir, train, out);
    else if (strcmp(name, "tar") == 0) {
        if (!dir) {
            DP_ERROR("tar: `data_dir` is required: a directory of train-*.tar and test-*.tar, "
                     "or the training shards' pattern");
            return DP_EINVAL;
        }
        dp_shard_dataset_options so = {.every_sample = !train};
        return dp_shard_dataset_open(dir, train, &so, out);
    } else {
        DP_ERROR("`dataset` %s is unknown (known: fashion-mnist, mnist, cifar10, folder, npy, tar)",
                 name);
        return DP_EINVAL;
    }
    if (rc == 0)
        out->classes = 10; /* the readers check that every label is below 10 */
    return rc;
}

int dp_dataset_sample_shape(const char *name, const char *dir, int64_t chw[3], int64_t *n)
{
    if (!name || strcmp(name, "fashion-mnist") == 0)
        return dp__idx_dataset_peek(dir ? dir : DP_FASHION_MNIST_DIR, NULL, chw, n);
    if (strcmp(name, "mnist") == 0) {
        DP_TRY(dp__data_require_dir(dir, "MNIST", dp__mnist_where));
        return dp__idx_dataset_peek(dir, dp__mnist_where, chw, n);
    }
    if (strcmp(name, "cifar10") == 0)
        return dp__cifar10_peek(dir, chw, n);
    if (strcmp(name, "npy") == 0)
        return dp__npy_dataset_peek(dir, chw, n);
    return 1; /* a folder or shards: the first image says, once decoded */
}

int dp_dataset_channels(const dp_dataset *ds)
{
    DP_ASSERT(ds);
    return ds->channels > 0 ? ds->channels : 1;
}

void dp_dataset_get(const dp_dataset *ds, int64_t first, int64_t count, float *out)
{
    DP_ASSERT(ds && out && first >= 0 && count >= 0 && first + count <= ds->n);
    size_t per = (size_t)dp_dataset_channels(ds) * (size_t)ds->rows * (size_t)ds->cols;
    size_t begin = (size_t)first * per, len = (size_t)count * per;
    if (ds->source) {
        /* Read as epoch 0 draws them; a sample that does not read is zeros
         * here, and its error is the loader's to report when it meets it. */
        dp__log_hold(true);
        for (int64_t i = 0; i < count; i++)
            if (ds->source->ops->read(ds->source->self, first + i, 0, 0, out + (size_t)i * per,
                                      per) < 0)
                memset(out + (size_t)i * per, 0, per * sizeof *out);
        dp__log_hold(false);
        return;
    }
    if (!ds->pixels) {
        memcpy(out, ds->images + begin, len * sizeof(float));
        return;
    }
    for (size_t i = 0; i < len; i++)
        out[i] = (float)ds->pixels[begin + i] / 255.0f;
}

int dp__dataset_set_source(dp_dataset *ds, const dp__source_ops *ops, void *self)
{
    struct dp_dataset_source *src = dp__calloc(1, sizeof *src);
    if (!src) {
        ops->close(self);
        return DP_ENOMEM;
    }
    src->ops = ops;
    src->self = self;
    ds->source = src;
    return 0;
}

int64_t dp_dataset_files_opened(const dp_dataset *ds)
{
    DP_ASSERT(ds);
    if (!ds->source || !ds->source->ops->opened)
        return 0;
    return ds->source->ops->opened(ds->source->self);
}

int dp_dataset_read(const dp_dataset *ds, int64_t i, uint64_t seed, int64_t epoch, float *out)
{
    DP_ASSERT(ds && out && i >= 0 && i < ds->n);
    if (!ds->source) {
        dp_dataset_get(ds, i, 1, out);
        return 0;
    }
    size_t cap = (size_t)dp_dataset_channels(ds) * (size_t)ds->rows * (size_t)ds->cols;
    return ds->source->ops->read(ds->source->self, i, seed, epoch, out, cap);
}

void dp_dataset_close(dp_dataset *ds)
{
    if (!ds)
        return;
    if (ds->source) {
        ds->source->ops->close(ds->source->self);
        dp__free(ds->source);
    }
    for (int k = 0; ds->class_names && k < ds->classes; k++)
        dp__free(ds->class_names[k]);
    dp__free(ds->class_names);
    dp__free(ds->pixels);
    dp__free(ds->images);
    dp__free(ds->labels);
    memset(ds, 0, sizeof *ds);
}
