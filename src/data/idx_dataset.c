/* The IDX image sets, Fashion-MNIST and MNIST: two IDX files per split,
 * images [N, 28, 28] as bytes and labels [N] as bytes 0..9, turned into
 * floats in [0, 1] (one channel) and int32 labels. */
#include "data/dataset.h"

#include "core/internal.h"

#include <string.h>

#define NUM_CLASSES 10

/* Finds "<dir>/<split>-<kind>-ubyte.gz", or the same without ".gz", and
 * reads it; `path` receives the name of the file read. */
static int read_split_file(const char *dir, const char *split, const char *kind,
                           const char *where_to_get, char path[DP__DATA_PATH_CAP], dp_idx *out)
{
    int n = snprintf(path, DP__DATA_PATH_CAP, "%s/%s-%s-ubyte.gz", dir, split, kind);
    if (n < 0 || n >= DP__DATA_PATH_CAP) {
        DP_ERROR("%s: directory name too long", dir);
        return DP_EINVAL;
    }
    if (dp__data_is_file(path))
        return dp_idx_read(path, out);
    path[n - 3] = '\0';
    if (dp__data_is_file(path))
        return dp_idx_read(path, out);
    DP_ERROR("%s.gz: no such file (nor %s)%s%s", path, path, where_to_get ? "; " : "",
             where_to_get ? where_to_get : "");
    return DP_ENOENT;
}

int dp__idx_dataset_load(const char *dir, bool train, const char *where_to_get, dp_dataset *out)
{
    DP_ASSERT(dir && out);
    memset(out, 0, sizeof *out);
    DP_TRY(dp__data_check_dir(dir));
    const char *split = train ? "train" : "t10k";
    char images_path[DP__DATA_PATH_CAP], labels_path[DP__DATA_PATH_CAP];
    dp_idx images = {0}, labels = {0};
    dp_dataset ds = {0};
    int rc = read_split_file(dir, split, "images-idx3", where_to_get, images_path, &images);
    if (rc < 0)
        goto done;
    rc = read_split_file(dir, split, "labels-idx1", where_to_get, labels_path, &labels);
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
    for (int64_t i = 0; i < labels.dims[0]; i++) {
        if (labels.data[i] >= NUM_CLASSES) {
            DP_ERROR("%s: label %d at index %lld is not below %d", labels_path, labels.data[i],
                     (long long)i, NUM_CLASSES);
            rc = DP_EFORMAT;
            goto done;
        }
    }
    /* The header's sizes are below 2^30 bytes in all (dp_idx_read), so
     * rows and cols fit in an int. */
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
    return rc;
}
