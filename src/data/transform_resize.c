/* Bilinear resampling with antialias, as PIL's Image.resize(size,
 * Image.BILINEAR, box) (libImaging/Resample.c, precompute_coeffs and
 * ImagingResampleHorizontal/Vertical) and torchvision's Resize(...,
 * antialias=True) (ATen's _upsample_bilinear2d_aa, the same weights):
 *
 *   scale = (box end - box start) / out size; filterscale = max(scale, 1)
 *   support = 1 * filterscale (the triangle's, widened when shrinking)
 *   output pixel x: center = box start + (x + 0.5) * scale,
 *     inputs xmin = int(center - support + 0.5) .. int(center + support + 0.5),
 *     clipped to the box's pixels; weight of input k = tri((k - center + 0.5) / filterscale),
 *     tri(t) = max(0, 1 - |t|), the weights divided by their sum.
 *
 * PIL rounds to bytes after each pass and at the end; here the passes stay
 * in float (ToTensor's x / 255 is taken before), which is where the small
 * difference from torchvision's PIL path comes from (tests/tools/
 * test_transforms_torchvision.py bounds it). Columns first, then rows, as
 * PIL. */
#include "data/transform_internal.h"

#include "core/internal.h"

#include <math.h>
#include <string.h>

/* One axis's weights: output i reads inputs start[i] .. start[i] +
 * count[i] - 1 with weights w[i * ksize ..]. */
typedef struct axis_coeffs {
    int ksize;
    int *start, *count;
    float *w;
} axis_coeffs;

static void coeffs_free(axis_coeffs *c)
{
    dp__free(c->start);
    dp__free(c->count);
    dp__free(c->w);
}

static double triangle(double t)
{
    t = t < 0 ? -t : t;
    return t < 1 ? 1 - t : 0;
}

/* Weights for out outputs from the box [b0, b1) of an axis of in_size
 * pixels; the filter reads pixels floor(b0) .. ceil(b1) - 1 only (the crop
 * torchvision resizes, when the box is whole pixels). */
static int coeffs_make(int in_size, double b0, double b1, int out, axis_coeffs *c)
{
    double scale = (b1 - b0) / out;
    double filterscale = scale < 1 ? 1 : scale;
    double support = 1.0 * filterscale;
    c->ksize = (int)ceil(support) * 2 + 1;
    c->start = dp__malloc((size_t)out * sizeof *c->start);
    c->count = dp__malloc((size_t)out * sizeof *c->count);
    c->w = dp__malloc((size_t)out * (size_t)c->ksize * sizeof *c->w);
    if (!c->start || !c->count || !c->w) {
        coeffs_free(c);
        return DP_ENOMEM;
    }
    int lo = (int)floor(b0), hi = (int)ceil(b1);
    lo = lo < 0 ? 0 : lo;
    hi = hi > in_size ? in_size : hi;
    for (int x = 0; x < out; x++) {
        /* In the coordinates of the pixels lo .., as PIL's in a crop. */
        double center = b0 - lo + (x + 0.5) * scale;
        int xmin = (int)(center - support + 0.5);
        int xmax = (int)(center + support + 0.5);
        xmin = xmin < 0 ? 0 : xmin;
        xmax = xmax > hi - lo ? hi - lo : xmax;
        int n = xmax - xmin;
        n = n > c->ksize ? c->ksize : n;
        n = n < 0 ? 0 : n;
        float *w = c->w + (size_t)x * c->ksize;
        double sum = 0;
        for (int k = 0; k < n; k++)
            sum += triangle((k + xmin - center + 0.5) / filterscale);
        /* Normalised in double, as PIL, then kept as float. */
        for (int k = 0; k < n; k++) {
            double v = triangle((k + xmin - center + 0.5) / filterscale);
            w[k] = (float)(sum != 0 ? v / sum : v);
        }
        c->start[x] = lo + xmin;
        c->count[x] = n;
    }
    return 0;
}

/* One row of the horizontal pass: out[x] = sum_k in[start[x] + k] * w[x][k]. */
static void row_pass_f(const float *in, const axis_coeffs *cx, int out_cols, float *out)
{
    for (int x = 0; x < out_cols; x++) {
        const float *w = cx->w + (size_t)x * cx->ksize;
        const float *p = in + cx->start[x];
        float s = 0;
        for (int k = 0; k < cx->count[x]; k++)
            s += p[k] * w[k];
        out[x] = s;
    }
}

/* The same on bytes, each read as lut[b] = b / 255.0f: the sums, in the
 * same order, of the same floats that ToTensor's scaling then the float
 * pass add, so the result is bit for bit the same without the image's
 * float copy. */
static void row_pass_u8(const uint8_t *in, const float *lut, const axis_coeffs *cx, int out_cols,
                        float *out)
{
    for (int x = 0; x < out_cols; x++) {
        const float *w = cx->w + (size_t)x * cx->ksize;
        const uint8_t *p = in + cx->start[x];
        float s = 0;
        for (int k = 0; k < cx->count[x]; k++)
            s += lut[p[k]] * w[k];
        out[x] = s;
    }
}

/* src is floats (srcf) or bytes (src8), [channels, rows, cols]. */
static int resample(const float *srcf, const uint8_t *src8, int channels, int rows, int cols,
                    const double box[4], int out_rows, int out_cols, float *dst)
{
    DP_ASSERT((srcf || src8) && dst && out_rows > 0 && out_cols > 0);
    axis_coeffs cy = {0}, cx = {0};
    int rc = coeffs_make(rows, box[0], box[2], out_rows, &cy);
    if (rc == 0)
        rc = coeffs_make(cols, box[1], box[3], out_cols, &cx);
    if (rc < 0) {
        coeffs_free(&cy);
        return rc;
    }
    /* The rows the vertical pass reads: y0 .. y1 - 1. */
    int y0 = rows, y1 = 0;
    for (int y = 0; y < out_rows; y++) {
        if (cy.count[y] == 0)
            continue;
        y0 = DP_MIN(y0, cy.start[y]);
        y1 = DP_MAX(y1, cy.start[y] + cy.count[y]);
    }
    y1 = DP_MAX(y1, y0);
    /* Horizontal pass: tmp [channels, y1 - y0, out_cols]. */
    float *tmp =
        dp__malloc((size_t)channels * (size_t)(y1 - y0 + 1) * (size_t)out_cols * sizeof *tmp);
    if (!tmp) {
        coeffs_free(&cy);
        coeffs_free(&cx);
        return DP_ENOMEM;
    }
    float lut[256];
    for (int b = 0; b < 256; b++)
        lut[b] = (float)b / 255.0f; /* transform_apply.c's to_float */
    for (int c = 0; c < channels; c++) {
        for (int y = y0; y < y1; y++) {
            size_t at = ((size_t)c * rows + y) * cols;
            float *out = tmp + ((size_t)c * (y1 - y0) + (y - y0)) * out_cols;
            if (src8)
                row_pass_u8(src8 + at, lut, &cx, out_cols, out);
            else
                row_pass_f(srcf + at, &cx, out_cols, out);
        }
    }
    /* Vertical pass into dst [channels, out_rows, out_cols]. */
    for (int c = 0; c < channels; c++) {
        for (int y = 0; y < out_rows; y++) {
            float *out = dst + ((size_t)c * out_rows + y) * out_cols;
            const float *w = cy.w + (size_t)y * cy.ksize;
            for (int x = 0; x < out_cols; x++)
                out[x] = 0;
            for (int k = 0; k < cy.count[y]; k++) {
                const float *in = tmp + ((size_t)c * (y1 - y0) + (cy.start[y] + k - y0)) * out_cols;
                for (int x = 0; x < out_cols; x++)
                    out[x] += in[x] * w[k];
            }
        }
    }
    dp__free(tmp);
    coeffs_free(&cy);
    coeffs_free(&cx);
    return 0;
}

int dp__transform_resample(const float *src, int channels, int rows, int cols, const double box[4],
                           int out_rows, int out_cols, float *dst)
{
    return resample(src, NULL, channels, rows, cols, box, out_rows, out_cols, dst);
}

int dp__transform_resample_u8(const uint8_t *src, int channels, int rows, int cols,
                              const double box[4], int out_rows, int out_cols, float *dst)
{
    return resample(NULL, src, channels, rows, cols, box, out_rows, out_cols, dst);
}
