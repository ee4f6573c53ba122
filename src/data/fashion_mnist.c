/* Fashion-MNIST: two IDX files per split, images [N, 28, 28] as bytes and
 * labels [N] as bytes 0..9, turned into floats in [0, 1] and int32 labels. */
#include "dp/data.h"

#include "core/internal.h"

#include <string.h>
#include <sys/stat.h>

/* Class names in label order, as d2l's get_fashion_mnist_labels. */
static const char *const label_names[] = {
    "t-shirt", "trouser", "pullover", "dress", "coat",
    "sandal",  "shirt",   "sneaker",  "bag",   "ankle boot",
};
#define NUM_CLASSES 10
_Static_assert(DP_COUNTOF(label_names) == NUM_CLASSES, "one name per class");

const char *dp_fashion_mnist_label(int label)
{
    if (label < 0 || label >= NUM_CLASSES)
        return "unknown";
    return label_names[label];
}

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

#define PATH_CAP 4096

/* Finds "<dir>/<split>-<kind>-ubyte.gz", or the same without ".gz", and
 * reads it; `path` receives the name of the file read. */
static int read_split_file(const char *dir, const char *split, const char *kind,
                           char path[PATH_CAP], dp_idx *out)
{
    int n = snprintf(path, PATH_CAP, "%s/%s-%s-ubyte.gz", dir, split, kind);
    if (n < 0 || n >= PATH_CAP) {
        DP_ERROR("%s: directory name too long", dir);
        return DP_EINVAL;
    }
    if (is_file(path))
        return dp_idx_read(path, out);
    path[n - 3] = '\0';
    if (is_file(path))
        return dp_idx_read(path, out);
    DP_ERROR("%s.gz: no such file (nor %s)", path, path);
    return DP_ENOENT;
}

int dp_fashion_mnist_load(const char *dir, bool train, dp_dataset *out)
{
    DP_ASSERT(out);
    memset(out, 0, sizeof *out);
    if (!dir)
        dir = DP_FASHION_MNIST_DIR;
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        DP_ERROR("%s: no such directory", dir);
        return DP_ENOENT;
    }
    const char *split = train ? "train" : "t10k";
    char images_path[PATH_CAP], labels_path[PATH_CAP];
    dp_idx images = {0}, labels = {0};
    dp_dataset ds = {0};
    int rc = read_split_file(dir, split, "images-idx3", images_path, &images);
    if (rc < 0)
        goto done;
    rc = read_split_file(dir, split, "labels-idx1", labels_path, &labels);
    if (rc < 0)
        goto done;
    if (images.ndims != 3) {
        DP_ERROR("%s: images must have 3 dimensions, found %d", images_path, images.ndims);
        rc = DP_EFORMAT;
        goto done;
    }
    if (labels.ndims != 1) {
        DP_ERROR("%s: labels must have 1 dimension, found %d", labels_path, labels.ndims);
        rc = DP_EFORMAT;
        goto done;
    }
    if (images.dims[0] != labels.dims[0]) {
        DP_ERROR("%s: %lld labels, but %s has %lld images", labels_path, (long long)labels.dims[0],
                 images_path, (long long)images.dims[0]);
        rc = DP_EFORMAT;
        goto done;
    }
    ds.n = images.dims[0];
    ds.rows = (int)images.dims[1];
    ds.cols = (int)images.dims[2];
    for (int64_t i = 0; i < ds.n; i++) {
        if (labels.data[i] >= NUM_CLASSES) {
            DP_ERROR("%s: label %d at index %lld is not below %d", labels_path, labels.data[i],
                     (long long)i, NUM_CLASSES);
            rc = DP_EFORMAT;
            goto done;
        }
    }
    /* images.size <= 1 GiB, so the float buffer fits in size_t. */
    ds.images = dp__calloc(images.size, sizeof(float));
    ds.labels = dp__calloc((size_t)ds.n, sizeof(int32_t));
    if (!ds.images || !ds.labels) {
        rc = DP_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < images.size; i++)
        ds.images[i] = (float)images.data[i] / 255.0f;
    for (int64_t i = 0; i < ds.n; i++)
        ds.labels[i] = labels.data[i];
    *out = ds;
    ds = (dp_dataset){0};
    rc = DP_OK;

done:
    dp_dataset_close(&ds);
    dp_idx_close(&labels);
    dp_idx_close(&images);
    return rc;
}

void dp_dataset_close(dp_dataset *ds)
{
    if (!ds)
        return;
    dp__free(ds->images);
    dp__free(ds->labels);
    memset(ds, 0, sizeof *ds);
}
