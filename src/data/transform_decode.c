/* An image file's bytes to a transformed sample (dp_transform_decode).
 *
 * With DP_JPEG_SCALE_OFF, or for a PNG, or when the list does not start
 * with a resize or a random resized crop: the whole image decoded, then
 * dp_transform_apply. With DP_JPEG_SCALE_AUTO on a JPEG whose list starts
 * with one: the header read first (the size), the draws made on that full
 * size (so the boxes are those of a full decode), then the largest DCT
 * scale 1/denom, denom in 1, 2, 4, 8, that keeps the first stage's box at
 * least as large as its target on both sides (as PIL's draft), and only
 * the rows and iMCU columns of the scaled image that the box covers, with
 * a margin, are decoded; the box, mapped to the scaled image's pixels
 * (x / denom), is resized from them. */
#include "data/transform_internal.h"

#include "core/internal.h"

#include <math.h>
#include <string.h>

/* Pixels decoded past each side of the scaled box: the resize reads only
 * inside the box, but libjpeg's fancy upsampling of chroma near the cut
 * edges differs from a full decode's, and the box's fractional ends round
 * outwards. */
#define REGION_MARGIN 4

static bool is_jpeg(const uint8_t *p, size_t len)
{
    return len >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff;
}

/* The largest denom whose scaled box (h / denom, w / denom) stays at least
 * as large as the target rows x cols. */
static int pick_denom(const int box[4], int rows, int cols)
{
    int denom = 8;
    while (denom > 1 && ((double)box[2] / denom < rows || (double)box[3] / denom < cols))
        denom /= 2;
    return denom;
}

static int check_cap(const char *name, const int chw[3], size_t cap)
{
    size_t need = (size_t)chw[0] * (size_t)chw[1] * (size_t)chw[2];
    if (need > cap) {
        DP_ERROR("%s: its transformed sample is %dx%dx%d (%zu floats), more than the %zu the "
                 "batch holds",
                 name, chw[0], chw[1], chw[2], need, cap);
        return DP_EINVAL;
    }
    return 0;
}

/* The fast path: img gets the scaled region, fbox the first stage's box in
 * img's pixels. */
static int decode_scaled(const dp_transform_list *l, const dp_transform_draws *d, const void *buf,
                         size_t len, const char *name, int channels, int rows, int cols,
                         dp_image *img, double fbox[4])
{
    int size[2];
    dp__transform_stage_size(&l->t[0], rows, cols, size);
    const int *box = d->box[0];
    int denom = pick_denom(box, size[0], size[1]);
    int srows = (rows + denom - 1) / denom, scols = (cols + denom - 1) / denom;
    double y0 = (double)box[0] / denom, x0 = (double)box[1] / denom;
    double y1 = (double)(box[0] + box[2]) / denom, x1 = (double)(box[1] + box[3]) / denom;
    int top = DP_MAX(0, (int)floor(y0) - REGION_MARGIN);
    int left = DP_MAX(0, (int)floor(x0) - REGION_MARGIN);
    int bottom = DP_MIN(srows, (int)ceil(y1) + REGION_MARGIN);
    int right = DP_MIN(scols, (int)ceil(x1) + REGION_MARGIN);
    int region[4] = {top, left, bottom - top, right - left};
    int at[2];
    DP_TRY(dp__jpeg_decode_region(buf, len, name, channels, denom, region, img, at));
    /* The resize reads only the box's pixels (the crop's, as a full
     * decode's), clipped to the scaled image. */
    fbox[0] = y0 - at[0];
    fbox[1] = x0 - at[1];
    fbox[2] = DP_MIN(y1, (double)srows) - at[0];
    fbox[3] = DP_MIN(x1, (double)scols) - at[1];
    return 0;
}

int dp_transform_decode(const dp_transform_list *l, dp_jpeg_scale scale, const void *buf,
                        size_t len, const char *name, int channels, uint64_t seed, int64_t epoch,
                        int64_t index, float *out, size_t cap, int out_chw[3])
{
    DP_ASSERT(l && name && out && out_chw && (buf || len == 0));
    dp_image img = {0};
    dp_transform_draws d;
    bool fast =
        scale == DP_JPEG_SCALE_AUTO && l->n > 0 && is_jpeg(buf, len) &&
        (l->t[0].kind == DP_TRANSFORM_RESIZE || l->t[0].kind == DP_TRANSFORM_RANDOM_RESIZED_CROP);
    int rc;
    if (fast) {
        int rows, cols, have;
        DP_TRY(dp__jpeg_header(buf, len, name, &rows, &cols, &have));
        int c = channels ? channels : have;
        dp_transform_output_shape(l, c, rows, cols, out_chw);
        DP_TRY(check_cap(name, out_chw, cap));
        dp_transform_draw(l, seed, epoch, index, rows, cols, &d);
        double fbox[4];
        rc = decode_scaled(l, &d, buf, len, name, channels, rows, cols, &img, fbox);
        if (rc == 0)
            rc = dp__transform_apply_from(l, &d, 0, fbox, &img, out);
    } else {
        DP_TRY(dp_image_decode(buf, len, name, channels, &img));
        dp_transform_output_shape(l, img.channels, img.rows, img.cols, out_chw);
        rc = check_cap(name, out_chw, cap);
        if (rc == 0) {
            dp_transform_draw(l, seed, epoch, index, img.rows, img.cols, &d);
            rc = dp_transform_apply(l, &d, &img, out);
        }
    }
    dp_image_close(&img);
    return rc;
}
