/* An image folder read as the loader goes (the default for folders), and
 * what it shares with the cached form (folder_cache.c): opening a split
 * (the file list, and the first image for the channels and, where the
 * transforms do not fix it, the samples' size; that file's bytes kept
 * for its first read, so that a run opens each file once an epoch).
 *
 * Memory: the file list and labels, the first file's bytes until sample
 * 0 is first read (to the end where this rank never reads it); each read
 * holds one file's bytes and its decoded image for as long as the read
 * takes (the worker's), and writes [channels, rows, cols] floats into the
 * loader's batch. */
#include "data/folder_source.h"

#include "core/internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* A file larger than this is not an image a decoder would accept
 * (DP_IMAGE_MAX_PIXELS of 16-bit RGBA, uncompressed, is 512 MiB). */
#define FOLDER_MAX_FILE_BYTES ((int64_t)1 << 30)

int dp__folder_read_file(const char *path, void **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        DP_ERROR("%s: cannot open: %s", path, strerror(errno));
        return errno == ENOENT ? DP_ENOENT : DP_EIO;
    }
    struct stat st;
    int rc = 0;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        DP_ERROR("%s: not a regular file", path);
        rc = DP_EIO;
    } else if (st.st_size > FOLDER_MAX_FILE_BYTES) {
        DP_ERROR("%s: %lld bytes, more than an image may have (%lld)", path, (long long)st.st_size,
                 (long long)FOLDER_MAX_FILE_BYTES);
        rc = DP_EINVAL;
    } else if (!(*buf = dp__malloc((size_t)DP_MAX(st.st_size, 1)))) {
        rc = DP_ENOMEM;
    } else if (fread(*buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
        DP_ERROR("%s: cannot read its %lld bytes", path, (long long)st.st_size);
        rc = DP_EIO;
    }
    fclose(f);
    if (rc < 0) {
        dp__free(*buf);
        *buf = NULL;
        return rc;
    }
    *len = (size_t)st.st_size;
    return 0;
}

int dp__folder_take_bytes(dp__folder_source *src, int64_t i, void **buf, size_t *len)
{
    /* The look's opening is counted here, as the read it serves: `opened`
     * is then exactly the samples this process read from disk. */
    atomic_fetch_add(&src->opened, 1);
    if (i == 0 && (*buf = atomic_exchange(&src->first_bytes, NULL)) != NULL) {
        *len = src->first_len;
        return 0;
    }
    return dp__folder_read_file(src->files.paths[i], buf, len);
}

int dp__folder_check_shape(const dp__folder_source *src, int64_t i, const int chw[3])
{
    if (chw[0] == src->chw[0] && chw[1] == src->chw[1] && chw[2] == src->chw[2])
        return 0;
    DP_ERROR("%s: %dx%d pixels (width x height) after the transforms, but the first image, %s, "
             "gives %dx%d: every sample must have one size; add a stage that fixes it "
             "(center-crop:S after resize:S, or random-resized-crop:S)",
             src->files.paths[i], chw[2], chw[1], src->files.paths[0], src->chw[2], src->chw[1]);
    return DP_EINVAL;
}

static int stream_read(void *self, int64_t i, uint64_t seed, int64_t epoch, float *out, size_t cap)
{
    dp__folder_source *src = self;
    const char *path = src->files.paths[i];
    void *buf;
    size_t len;
    DP_TRY(dp__folder_take_bytes(src, i, &buf, &len));
    int chw[3];
    int rc = dp_transform_decode(&src->transform, src->jpeg_scale, buf, len, path,
                                 src->decode_channels, seed, epoch, i, out, cap, chw);
    dp__free(buf);
    if (rc == 0)
        rc = dp__folder_check_shape(src, i, chw);
    return rc;
}

static int64_t folder_opened(const void *self)
{
    const dp__folder_source *src = self;
    return atomic_load(&src->opened);
}

void dp__folder_source_close(void *self)
{
    dp__folder_source *src = self;
    if (!src)
        return;
    for (int64_t i = 0; src->images && i < src->files.n; i++) {
        dp_image_close(&src->images[i]);
        dp__free(src->errors ? src->errors[i] : NULL);
    }
    dp__free(src->images);
    dp__free(src->errors);
    dp__free(atomic_load(&src->first_bytes));
    dp__folder_files_close(&src->files);
    dp__free(src);
}

static const dp__source_ops stream_ops = {
    .read = stream_read, .opened = folder_opened, .close = dp__folder_source_close};

/* The samples' (C, H, W): the transforms' fixed size with the first
 * image's channels, else what the first image becomes. The file's bytes
 * are kept for sample 0's read (first_bytes). */
static int first_image_shape(dp__folder_source *src, int channels)
{
    dp_image first;
    void *buf;
    size_t len;
    DP_TRY(dp__folder_read_file(src->files.paths[0], &buf, &len));
    int rc = dp_image_decode(buf, len, src->files.paths[0], channels, &first);
    if (rc < 0) {
        dp__free(buf);
        return rc;
    }
    src->first_len = len;
    atomic_store(&src->first_bytes, buf);
    int rows, cols;
    int chw[3];
    dp_transform_output_shape(&src->transform, first.channels, first.rows, first.cols, chw);
    src->chw[0] = chw[0];
    src->chw[1] = chw[1];
    src->chw[2] = chw[2];
    if (dp_transform_fixed_size(&src->transform, &rows, &cols)) {
        src->chw[1] = rows;
        src->chw[2] = cols;
    }
    /* Every later image is decoded to the first one's channels; a gray or
     * rgb stage then sets the samples'. */
    src->decode_channels = first.channels;
    dp_image_close(&first);
    return 0;
}

int dp_image_folder_open(const char *dir, bool train, const dp_folder_options *opt, dp_dataset *out)
{
    DP_ASSERT(out && opt);
    memset(out, 0, sizeof *out);
    if (opt->channels != 0 && opt->channels != 1 && opt->channels != 3) {
        DP_ERROR("folder: `channels` %d: 1 or 3", opt->channels);
        return DP_EINVAL;
    }
    dp__folder_source *src = dp__calloc(1, sizeof *src);
    if (!src)
        return DP_ENOMEM;
    atomic_init(&src->opened, 0);
    atomic_init(&src->first_bytes, NULL);
    if (opt->transform)
        src->transform = *opt->transform;
    src->jpeg_scale = opt->jpeg_scale == DP_JPEG_SCALE_OFF ? DP_JPEG_SCALE_OFF : DP_JPEG_SCALE_AUTO;
    int rc = dp__folder_list(dir, train, &src->files);
    if (rc == 0)
        rc = first_image_shape(src, opt->channels);
    if (rc == 0 && opt->cache)
        rc = dp__folder_cache_all(src);
    if (rc < 0) {
        dp__folder_source_close(src);
        return rc;
    }
    src->chw[0] = src->chw[0] ? src->chw[0] : 1;
    /* The samples are decoded to decode_channels; chw[0] is what the
     * transforms make of them. */
    dp_dataset ds = {.n = src->files.n,
                     .channels = src->chw[0],
                     .rows = src->chw[1],
                     .cols = src->chw[2],
                     .classes = src->files.classes,
                     .class_names = src->files.class_names};
    ds.labels = dp__malloc((size_t)DP_MAX(ds.n, 1) * sizeof *ds.labels);
    if (!ds.labels) {
        dp__folder_source_close(src);
        return DP_ENOMEM;
    }
    memcpy(ds.labels, src->files.labels, (size_t)ds.n * sizeof *ds.labels);
    /* The names move to the dataset, which frees them. */
    src->files.class_names = NULL;
    src->files.classes = 0;
    rc = dp__dataset_set_source(&ds, opt->cache ? &dp__folder_cache_ops : &stream_ops, src);
    if (rc < 0) {
        dp_dataset_close(&ds);
        return rc;
    }
    *out = ds;
    return 0;
}
