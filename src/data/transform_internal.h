/* What the transforms' files share (transform*.c), and the pieces of
 * augment.c and image.c they build on: the per-sample RNG stream and the
 * draws of RandomCrop and RandomHorizontalFlip (one place for each, so
 * "crop:4,flip" draws here exactly what dp_augment_draw_for draws), and
 * the JPEG decoder's header read and scaled, partial decode. */
#ifndef DP_DATA_TRANSFORM_INTERNAL_H
#define DP_DATA_TRANSFORM_INTERNAL_H

#include "dp/core.h"
#include "dp/transform.h"

/* ---- augment.c ----------------------------------------------------------- */

/* Sample `index`'s stream in `epoch`: (1 << 62) | epoch << 40 | index. */
void dp__augment_stream(dp_rng *rng, uint64_t seed, int64_t epoch, int64_t index);
/* RandomCrop(padding=pad)'s corner in the padded image, each in 0..2 pad:
 * torch.randint(0, 2 pad + 1) for the top, then for the left. */
void dp__augment_draw_crop(dp_rng *rng, int pad, int *top, int *left);
/* RandomHorizontalFlip(p=0.5): torch.rand(1) < 0.5, one uniform. */
bool dp__augment_draw_flip(dp_rng *rng);

/* ---- transform_draw.c ---------------------------------------------------- */

/* The numbers one sample's draws consumed, in order, for a test to replay
 * them through torchvision: `bound` 0 for a uniform in [0, 1) (`value` is
 * it), else a torch.randint(0, bound) (`value` is the integer drawn). */
#define DP__TRANSFORM_TRACE_MAX 256
typedef struct dp__transform_trace {
    int n; /* how many were drawn; only the first DP__TRANSFORM_TRACE_MAX recorded */
    struct {
        int stage;
        int64_t bound;
        double value;
    } draw[DP__TRANSFORM_TRACE_MAX];
} dp__transform_trace;

/* dp_transform_draw, recording what it drew into *trace (NULL: nothing). */
void dp__transform_draw_traced(const dp_transform_list *l, uint64_t seed, int64_t epoch,
                               int64_t index, int rows, int cols, dp_transform_draws *d,
                               dp__transform_trace *trace);
/* The size stage `t` gives an input of rows x cols ([0] rows, [1] cols). */
void dp__transform_stage_size(const dp_transform *t, int rows, int cols, int out[2]);

/* ---- transform_resize.c -------------------------------------------------- */

/* Resamples planes [channels, rows, cols] (float) to [channels, out_rows,
 * out_cols], as PIL's Image.resize(size, BILINEAR, box) and torchvision's
 * Resize(antialias=True): a triangle filter whose support is widened by
 * the downscale factor, weights normalised, rows first then columns. The
 * source box (y0, x0, y1, x1, fractional, in the planes' pixels) is what
 * is resized; the filter reads only pixels inside the planes. */
int dp__transform_resample(const float *src, int channels, int rows, int cols, const double box[4],
                           int out_rows, int out_cols, float *dst);

/* ---- transform_apply.c --------------------------------------------------- */

/* dp_transform_apply starting at stage `first`, with stage `first`'s cut
 * given as a fractional box in img's pixels (y0, x0, y1, x1) when
 * first_box is not NULL (a JPEG decoded at a DCT scale, or only its rows
 * and columns that the box covers): the first stage must then be a
 * resize or a random resized crop. */
int dp__transform_apply_from(const dp_transform_list *l, const dp_transform_draws *d, int first,
                             const double *first_box, const dp_image *img, float *out);

/* ---- image.c ------------------------------------------------------------- */

/* A JPEG's size and channels from its header alone (errors as
 * dp_image_decode's). */
int dp__jpeg_header(const void *buf, size_t len, const char *name, int *rows, int *cols,
                    int *channels);
/* Decodes the JPEG at 1/denom of its size (denom 1, 2, 4 or 8, as
 * libjpeg-turbo's scale_denom: rows ceil(rows / denom)), only the rows
 * region[0] .. region[0] + region[2] and, as far as the iMCU columns
 * allow, the columns region[1] .. region[1] + region[3] of that scaled
 * image (jpeg_crop_scanline, jpeg_skip_scanlines). *out gets those rows
 * and the columns that were decoded; at[0], at[1] are out's top-left
 * corner in the scaled image. channels as dp_image_decode's. */
int dp__jpeg_decode_region(const void *buf, size_t len, const char *name, int channels, int denom,
                           const int region[4], dp_image *out, int at[2]);

#endif
