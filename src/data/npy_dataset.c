/* A dataset of .npy files (data/npy.c): DIR/train/images.npy with
 * DIR/train/labels.npy, and the same in DIR/test/. uint8 images are kept
 * as bytes (the loader scales each batch by 1/255), float32 ones as they
 * are; either way the file's data buffer becomes the dataset's, so a split
 * costs its file's size in memory and no more. */
#include "data/dataset.h"

#include "core/internal.h"

#include <math.h>
#include <string.h>

/* Labels at most this many classes: a label past it is a wrong file. */
#define NPY_MAX_CLASSES (1 << 20)

static int split_path(char *buf, const char *dir, bool train, const char *name)
{
    int n = snprintf(buf, DP__DATA_PATH_CAP, "%s/%s/%s", dir, train ? "train" : "test", name);
    if (n < 0 || n >= DP__DATA_PATH_CAP) {
        DP_ERROR("%s: directory name too long", dir);
        return DP_EINVAL;
    }
    return 0;
}

/* (N, H, W) or (N, C, H, W), each side 1 to 2^20 and C at most 1024;
 * (N, H, W, C) with C 1 or 3 is NumPy's channels-last habit: refused
 * with the transpose that fixes it. */
static int image_shape(const char *path, const dp_npy *a, int chw[3])
{
    char s[160];
    dp__shape_str(s, sizeof s, a->ndim, a->shape);
    if (a->ndim != 3 && a->ndim != 4) {
        DP_ERROR("%s: images of shape %s: expected (N, H, W) or (N, C, H, W)", path, s);
        return DP_EFORMAT;
    }
    if (a->ndim == 4 && (a->shape[3] == 1 || a->shape[3] == 3) && a->shape[1] != 1 &&
        a->shape[1] != 3) {
        DP_ERROR("%s: images of shape %s look channels-last (N, H, W, C): save "
                 "np.ascontiguousarray(x.transpose(0, 3, 1, 2)), (N, C, H, W)",
                 path, s);
        return DP_EFORMAT;
    }
    chw[0] = a->ndim == 4 ? (int)DP_MIN(a->shape[1], INT32_MAX) : 1;
    chw[1] = (int)DP_MIN(a->shape[a->ndim - 2], INT32_MAX);
    chw[2] = (int)DP_MIN(a->shape[a->ndim - 1], INT32_MAX);
    if (a->shape[0] < 1 || chw[0] < 1 || chw[0] > 1024 || chw[1] < 1 || chw[1] > (1 << 20) ||
        chw[2] < 1 || chw[2] > (1 << 20)) {
        DP_ERROR("%s: images of shape %s: expected at least one image, 1 to 1024 channels and "
                 "sides of 1 to 1048576",
                 path, s);
        return DP_EFORMAT;
    }
    if (a->dtype != DP_NPY_U8 && a->dtype != DP_NPY_F32) {
        DP_ERROR("%s: images must be uint8 or float32", path);
        return DP_EFORMAT;
    }
    return 0;
}

/* labels.npy into ds->labels: shape (n,), every value 0 to
 * NPY_MAX_CLASSES - 1; ds->classes the largest plus one. */
static int take_labels(const char *path, const dp_npy *a, int64_t n, dp_dataset *ds)
{
    if (a->ndim != 1 || a->shape[0] != n) {
        char s[160];
        DP_ERROR("%s: labels of shape %s: expected (%lld,), one per image", path,
                 dp__shape_str(s, sizeof s, a->ndim, a->shape), (long long)n);
        return DP_EFORMAT;
    }
    if (a->dtype == DP_NPY_F32) {
        DP_ERROR("%s: labels must be int64, int32 or uint8, not float32", path);
        return DP_EFORMAT;
    }
    int classes = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t v;
        if (a->dtype == DP_NPY_U8) {
            v = ((const uint8_t *)a->data)[i];
        } else if (a->dtype == DP_NPY_I32) {
            int32_t x;
            memcpy(&x, (const char *)a->data + 4 * i, 4);
            v = x;
        } else {
            memcpy(&v, (const char *)a->data + 8 * i, 8);
        }
        if (v < 0 || v >= NPY_MAX_CLASSES) {
            DP_ERROR("%s: label %lld at index %lld is outside 0..%d", path, (long long)v,
                     (long long)i, NPY_MAX_CLASSES - 1);
            return DP_EFORMAT;
        }
        ds->labels[i] = (int32_t)v;
        classes = DP_MAX(classes, (int)v + 1);
    }
    ds->classes = classes;
    return 0;
}

int dp__npy_dataset_peek(const char *dir, int64_t chw[3], int64_t *n)
{
    if (!dir)
        return dp_npy_dataset_load(dir, true, NULL); /* its message */
    DP_TRY(dp__data_check_dir(dir));
    char ipath[DP__DATA_PATH_CAP];
    DP_TRY(split_path(ipath, dir, true, "images.npy"));
    dp_npy im = {0};
    int shape[3];
    DP_TRY(dp__npy_read_header(ipath, &im));
    DP_TRY(image_shape(ipath, &im, shape));
    for (int i = 0; i < 3; i++)
        chw[i] = shape[i];
    *n = im.shape[0];
    return 0;
}

int dp_npy_dataset_load(const char *dir, bool train, dp_dataset *out)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (!dir) {
        DP_ERROR("npy: `data_dir` is required (DIR/train/images.npy, labels.npy and "
                 "DIR/test/...)");
        return DP_EINVAL;
    }
    DP_TRY(dp__data_check_dir(dir));
    char ipath[DP__DATA_PATH_CAP], lpath[DP__DATA_PATH_CAP];
    DP_TRY(split_path(ipath, dir, train, "images.npy"));
    DP_TRY(split_path(lpath, dir, train, "labels.npy"));
    dp_npy im = {0}, lb = {0};
    int chw[3] = {0, 0, 0};
    int rc = dp_npy_read(ipath, &im);
    if (rc == 0)
        rc = image_shape(ipath, &im, chw);
    if (rc == 0)
        rc = dp_npy_read(lpath, &lb);
    dp_dataset ds = {0};
    if (rc == 0) {
        ds.labels = dp__calloc((size_t)im.shape[0], sizeof *ds.labels);
        rc = ds.labels ? take_labels(lpath, &lb, im.shape[0], &ds) : DP_ENOMEM;
    }
    if (rc == 0) {
        float *f = im.data;
        for (size_t i = 0; im.dtype == DP_NPY_F32 && i < im.size / 4; i++) {
            if (!isfinite(f[i])) {
                DP_ERROR("%s: element %zu is %g: the images must be finite", ipath, i,
                         (double)f[i]);
                rc = DP_EFORMAT;
                break;
            }
        }
    }
    dp_npy_close(&lb);
    if (rc < 0) {
        dp_npy_close(&im);
        dp_dataset_close(&ds);
        return rc;
    }
    ds.n = im.shape[0];
    ds.channels = chw[0];
    ds.rows = chw[1];
    ds.cols = chw[2];
    if (im.dtype == DP_NPY_U8)
        ds.pixels = im.data;
    else
        ds.images = im.data;
    *out = ds; /* the file's buffer is the dataset's now */
    return 0;
}
