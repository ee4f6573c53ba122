/* The IDX image sets, Fashion-MNIST and MNIST: two IDX files per split,
 * images [N, 28, 28] as bytes and labels [N] as bytes 0..9, turned into
 * floats in [0, 1] (one channel) and int32 labels. */
#include "data/dataset.h"

#include "core/internal.h"

#include <string.h>

#define NUM_CLASSES 10

/* Larger image sides than this are taken for a corrupt header: the sets
 * read here are 28 x 28, and at 1024 x 1024 one sample's floats are 4 MiB,
 * so no header makes the loader allocate much before the data is there. */
#define IDX_MAX_SIDE 1024

/* Finds "<dir>/<split>-<kind>-ubyte.gz", or the same without ".gz", and
 * opens it with its header read; `path` receives the name of the file. */
static int open_split_file(const char *dir, const char *split, const char *kind,
                           const char *where_to_get, char path[DP__DATA_PATH_CAP],
                           dp__idx_file *out)
{
    int n = snprintf(path, DP__DATA_PATH_CAP, "%s/%s-%s-ubyte.gz", dir, split, kind);
    if (n < 0 || n >= DP__DATA_PATH_CAP) {
        DP_ERROR("%s: directory name too long", dir);
        return DP_EINVAL;
    }
    if (dp__data_is_file(path))
        return dp__idx_open(out, path);
    path[n - 3] = '\0';
    if (dp__data_is_file(path))
        return dp__idx_open(out, path);
    DP_ERROR("%s.gz: no such file (nor %s)%s%s", path, path, where_to_get ? "; " : "",
             where_to_get ? where_to_get : "");
    return DP_ENOENT;
}

/* The two headers against each other and the set's shape, before any data
 * is read: a header alone can promise gigabytes that the file never holds
 * (or holds as a small gzip of zeros). */
static int check_headers(const dp__idx_file *images, const dp__idx_file *labels)
{
    const dp_idx *im = &images->header, *lb = &labels->header;
    if (im->ndims != 3) {
        DP_ERROR("%s: images must have 3 dimensions, found %d", images->path, im->ndims);
        return DP_EFORMAT;
    }
    if (lb->ndims != 1) {
        DP_ERROR("%s: labels must have 1 dimension, found %d", labels->path, lb->ndims);
        return DP_EFORMAT;
    }
    if (im->dims[0] != lb->dims[0]) {
        DP_ERROR("%s: %lld labels, but %s has %lld images", labels->path, (long long)lb->dims[0],
                 images->path, (long long)im->dims[0]);
        return DP_EFORMAT;
    }
    if (im->dims[0] == 0) {
        DP_ERROR("%s: no images (the header says [0, %lld, %lld])", images->path,
                 (long long)im->dims[1], (long long)im->dims[2]);
        return DP_EFORMAT;
    }
    if (im->dims[1] < 1 || im->dims[2] < 1 || im->dims[1] > IDX_MAX_SIDE ||
        im->dims[2] > IDX_MAX_SIDE) {
        DP_ERROR("%s: images of %lld x %lld pixels: each side must be 1 to %d", images->path,
                 (long long)im->dims[1], (long long)im->dims[2], IDX_MAX_SIDE);
        return DP_EFORMAT;
    }
    return 0;
}

int dp__idx_dataset_peek(const char *dir, const char *where_to_get, int64_t chw[3], int64_t *n)
{
    DP_TRY(dp__data_check_dir(dir));
    char images_path[DP__DATA_PATH_CAP], labels_path[DP__DATA_PATH_CAP];
    dp__idx_file images_file = {0}, labels_file = {0};
    int rc = open_split_file(dir, "train", "images-idx3", where_to_get, images_path, &images_file);
    if (rc == 0)
        rc = open_split_file(dir, "train", "labels-idx1", where_to_get, labels_path, &labels_file);
    if (rc == 0)
        rc = check_headers(&images_file, &labels_file);
    if (rc == 0) {
        chw[0] = 1;
        chw[1] = images_file.header.dims[1];
        chw[2] = images_file.header.dims[2];
        *n = images_file.header.dims[0];
    }
    dp__idx_file_close(&labels_file);
    dp__idx_file_close(&images_file);
    return rc;
}

int dp__idx_dataset_load(const char *dir, bool train, const char *where_to_get, dp_dataset *out)
{
    DP_ASSERT(dir && out);
    memset(out, 0, sizeof *out);
    DP_TRY(dp__data_check_dir(dir));
    const char *split = train ? "train" : "t10k";
    char images_path[DP__DATA_PATH_CAP], labels_path[DP__DATA_PATH_CAP];
    dp__idx_file images_file = {0}, labels_file = {0};
    dp_idx images = {0}, labels = {0};
    dp_dataset ds = {0};
    int rc = open_split_file(dir, split, "images-idx3", where_to_get, images_path, &images_file);
    if (rc < 0)
        goto done;
    rc = open_split_file(dir, split, "labels-idx1", where_to_get, labels_path, &labels_file);
    if (rc < 0)
        goto done;
    rc = check_headers(&images_file, &labels_file);
    if (rc < 0)
        goto done;
    rc = dp__idx_read_data(&labels_file, &labels);
    if (rc < 0)
        goto done;
    for (int64_t i = 0; i < labels.dims[0]; i++) {
        if (labels.data[i] >= NUM_CLASSES) {
            DP_ERROR("%s: label %d at index %lld is not below %d", labels_path, labels.data[i],
                     (long long)i, NUM_CLASSES);
            rc = DP_EFORMAT;
            goto done;
        }
    }
    rc = dp__idx_read_data(&images_file, &images);
    if (rc < 0)
        goto done;
    /* check_headers held rows and cols to IDX_MAX_SIDE. */
    rc = dp__dataset_alloc(&ds, images.dims[0], 1, (int)images.dims[1], (int)images.dims[2],
                           images_path);
    if (rc < 0)
        goto done;
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
    dp__idx_file_close(&labels_file);
    dp__idx_file_close(&images_file);
    return rc;
}
