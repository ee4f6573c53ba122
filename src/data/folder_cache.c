/* An image folder decoded into memory up front (the `cache` option): each
 * image as bytes at its own size, the transforms drawn and applied per
 * epoch as the loader reads each sample. Memory: the images' bytes, all of
 * them, so for sets that fit; a file that does not decode is kept as its
 * error line, met when the loader reaches it, as a streamed set meets it. */
#include "data/folder_source.h"

#include "core/internal.h"

#include <string.h>

int dp__folder_cache_all(dp__folder_source *src)
{
    int64_t n = src->files.n;
    src->images = dp__calloc((size_t)DP_MAX(n, 1), sizeof *src->images);
    src->errors = dp__calloc((size_t)DP_MAX(n, 1), sizeof *src->errors);
    if (!src->images || !src->errors)
        return DP_ENOMEM;
    for (int64_t i = 0; i < n; i++) {
        /* A file that does not decode is the loader's to report when it
         * reaches it, as a streamed one: its line kept, not logged. */
        dp__log_hold(true);
        void *buf;
        size_t len;
        int rc = dp__folder_take_bytes(src, i, &buf, &len);
        if (rc == 0) {
            rc = dp_image_decode(buf, len, src->files.paths[i], src->decode_channels,
                                 &src->images[i]);
            dp__free(buf);
        }
        dp__log_hold(false);
        if (rc == DP_ENOMEM)
            return rc;
        if (rc < 0 && !(src->errors[i] = dp__strdup(dp_last_error())))
            return DP_ENOMEM;
    }
    return 0;
}

static int cache_read(void *self, int64_t i, uint64_t seed, int64_t epoch, float *out, size_t cap)
{
    const dp__folder_source *src = self;
    if (src->errors[i]) {
        DP_ERROR("%s", src->errors[i]);
        return DP_EFORMAT;
    }
    const dp_image *img = &src->images[i];
    int chw[3];
    dp_transform_output_shape(&src->transform, img->channels, img->rows, img->cols, chw);
    dp_transform_draws d;
    dp_transform_draw(&src->transform, seed, epoch, i, img->rows, img->cols, &d);
    /* A fixed-size list gives its size whatever the input: the draws'
     * boxes are what the output shape depends on otherwise. */
    int rows, cols;
    if (dp_transform_fixed_size(&src->transform, &rows, &cols)) {
        chw[1] = rows;
        chw[2] = cols;
    }
    DP_TRY(dp__folder_check_shape(src, i, chw));
    DP_ASSERT((size_t)chw[0] * (size_t)chw[1] * (size_t)chw[2] <= cap);
    return dp_transform_apply(&src->transform, &d, img, out);
}

static int64_t cache_opened(const void *self)
{
    const dp__folder_source *src = self;
    return atomic_load(&src->opened);
}

const dp__source_ops dp__folder_cache_ops = {
    .read = cache_read, .opened = cache_opened, .close = dp__folder_source_close};
