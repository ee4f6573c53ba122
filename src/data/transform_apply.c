/* A transform list applied to one decoded image with its draws
 * (dp_transform_apply): bytes [channels, rows, cols] to floats in [0, 1]
 * [channels', rows', cols'].
 *
 * The image stays in bytes while the stages only move pixels (crops,
 * flips) or convert channels, so that gray is PIL's convert("L") on the
 * bytes as torchvision's Grayscale on a PIL image; the first resampling
 * stage turns it into floats x / 255.0f (ToTensor's scaling), and crop
 * and flip then move those floats as dp_augment_apply moves them. gray
 * after a resize is torchvision's tensor rgb_to_grayscale (0.299 R + 0.587
 * G + 0.114 B). */
#include "data/transform_internal.h"

#include "core/internal.h"

#include <string.h>

/* The image between stages: bytes b or floats f, [c, h, w]. */
typedef struct planes {
    int c, h, w;
    const uint8_t *b;
    float *f;
    void *owned; /* what to free: b or f when this file allocated it */
} planes;

static void planes_set(planes *p, int c, int h, int w, const uint8_t *b, float *f, void *owned)
{
    dp__free(p->owned);
    p->c = c;
    p->h = h;
    p->w = w;
    p->b = b;
    p->f = f;
    p->owned = owned;
}

/* The box (top, left, h, w) of p, zero outside p, flipped left to right
 * when `flip`: crop, CenterCrop's padding, RandomCrop's padding and
 * RandomHorizontalFlip in one. */
static int cut(planes *p, const int box[4], bool flip)
{
    size_t es = p->f ? sizeof(float) : 1;
    size_t n = (size_t)p->c * (size_t)box[2] * (size_t)box[3];
    uint8_t *dst = dp__malloc(n * es);
    if (!dst)
        return DP_ENOMEM;
    memset(dst, 0, n * es);
    const uint8_t *src = p->f ? (const uint8_t *)p->f : p->b;
    /* The columns of the box inside p: x0 .. x1 - 1 of the box. */
    int x0 = DP_MAX(0, -box[1]), x1 = DP_MIN(box[3], p->w - box[1]);
    for (int c = 0; c < p->c; c++) {
        for (int y = 0; y < box[2]; y++) {
            int sy = y + box[0];
            if (sy < 0 || sy >= p->h || x1 <= x0)
                continue;
            /* The row's start: box column x is row column box[1] + x, which
             * is inside the row for x0 <= x < x1 (a pointer to column
             * box[1] < 0 would be outside the buffer). */
            const uint8_t *row = src + ((size_t)c * p->h + sy) * p->w * es;
            uint8_t *out = dst + ((size_t)c * box[2] + y) * box[3] * es;
            if (!flip) {
                memcpy(out + x0 * es, row + (size_t)(box[1] + x0) * es, (size_t)(x1 - x0) * es);
                continue;
            }
            /* Output column x is the box's column w - 1 - x. */
            for (int x = box[3] - x1; x < box[3] - x0; x++)
                memcpy(out + x * es, row + (size_t)(box[1] + box[3] - 1 - x) * es, es);
        }
    }
    if (p->f)
        planes_set(p, p->c, box[2], box[3], NULL, (float *)dst, dst);
    else
        planes_set(p, p->c, box[2], box[3], dst, NULL, dst);
    return 0;
}

/* RandomHorizontalFlip of the whole of p, in place where p owns its
 * floats (after a resize): the same values as cut's copy, without it. */
static bool flip_in_place(planes *p, const int box[4])
{
    if (!p->f || p->owned != p->f || box[0] != 0 || box[1] != 0 || box[2] != p->h || box[3] != p->w)
        return false;
    for (size_t r = 0; r < (size_t)p->c * p->h; r++) {
        float *row = p->f + r * p->w;
        for (int a = 0, b = p->w - 1; a < b; a++, b--) {
            float t = row[a];
            row[a] = row[b];
            row[b] = t;
        }
    }
    return true;
}

static int to_float(planes *p)
{
    if (p->f)
        return 0;
    size_t n = (size_t)p->c * p->h * p->w;
    float *f = dp__malloc(n * sizeof *f);
    if (!f)
        return DP_ENOMEM;
    for (size_t i = 0; i < n; i++)
        f[i] = (float)p->b[i] / 255.0f;
    planes_set(p, p->c, p->h, p->w, NULL, f, f);
    return 0;
}

/* transform_resize.c's resampling of bytes, each read as x / 255.0f (as
 * to_float's): the same floats without the whole image's float copy.
 * (Belongs in transform_internal.h beside dp__transform_resample.) */
int dp__transform_resample_u8(const uint8_t *src, int channels, int rows, int cols,
                              const double box[4], int out_rows, int out_cols, float *dst);

static int resize(planes *p, const double box[4], int rows, int cols)
{
    float *f = dp__malloc((size_t)p->c * rows * cols * sizeof *f);
    if (!f)
        return DP_ENOMEM;
    int rc = p->f ? dp__transform_resample(p->f, p->c, p->h, p->w, box, rows, cols, f)
                  : dp__transform_resample_u8(p->b, p->c, p->h, p->w, box, rows, cols, f);
    if (rc < 0) {
        dp__free(f);
        return rc;
    }
    planes_set(p, p->c, rows, cols, NULL, f, f);
    return 0;
}

static int gray(planes *p)
{
    if (p->c == 1)
        return 0;
    size_t plane = (size_t)p->h * p->w;
    void *dst = dp__malloc(plane * (p->f ? sizeof(float) : 1));
    if (!dst)
        return DP_ENOMEM;
    if (p->f) {
        float *o = dst;
        for (size_t i = 0; i < plane; i++)
            o[i] = 0.299f * p->f[i] + 0.587f * p->f[plane + i] + 0.114f * p->f[2 * plane + i];
        planes_set(p, 1, p->h, p->w, NULL, o, o);
    } else {
        uint8_t *o = dst;
        for (size_t i = 0; i < plane; i++) { /* PIL's ITU-R 601-2 luma, as image.c's */
            uint32_t l = (uint32_t)p->b[i] * 19595 + (uint32_t)p->b[plane + i] * 38470 +
                         (uint32_t)p->b[2 * plane + i] * 7471;
            o[i] = (uint8_t)((l + 0x8000) >> 16);
        }
        planes_set(p, 1, p->h, p->w, o, NULL, o);
    }
    return 0;
}

static int rgb(planes *p)
{
    if (p->c == 3)
        return 0;
    size_t es = p->f ? sizeof(float) : 1, plane = (size_t)p->h * p->w * es;
    uint8_t *dst = dp__malloc(3 * plane);
    if (!dst)
        return DP_ENOMEM;
    const void *src = p->f ? (const void *)p->f : (const void *)p->b;
    for (int c = 0; c < 3; c++)
        memcpy(dst + c * plane, src, plane);
    if (p->f)
        planes_set(p, 3, p->h, p->w, NULL, (float *)dst, dst);
    else
        planes_set(p, 3, p->h, p->w, dst, NULL, dst);
    return 0;
}

static int apply_stage(const dp_transform *t, const int box[4], bool flip, const double *fbox,
                       planes *p)
{
    /* The size from the stage's box, the whole input for a resize: with
     * fbox, p is a scaled region and the box keeps the full image's. */
    int size[2];
    dp__transform_stage_size(t, box[2], box[3], size);
    switch (t->kind) {
    case DP_TRANSFORM_RESIZE:
    case DP_TRANSFORM_RANDOM_RESIZED_CROP:
        if (fbox)
            return resize(p, fbox, size[0], size[1]);
        /* torchvision's resized_crop: the crop, then the resize of it. */
        if (t->kind == DP_TRANSFORM_RANDOM_RESIZED_CROP)
            DP_TRY(cut(p, box, false));
        if (p->h == size[0] && p->w == size[1])
            return 0; /* F.resize returns an image of the size unchanged */
        return resize(p, (const double[4]){0, 0, p->h, p->w}, size[0], size[1]);
    case DP_TRANSFORM_CENTER_CROP:
    case DP_TRANSFORM_RANDOM_CROP:
        return cut(p, box, false);
    case DP_TRANSFORM_FLIP:
        return !flip || flip_in_place(p, box) ? 0 : cut(p, box, true);
    case DP_TRANSFORM_GRAY:
        return gray(p);
    case DP_TRANSFORM_RGB:
        return rgb(p);
    }
    return 0;
}

int dp__transform_apply_from(const dp_transform_list *l, const dp_transform_draws *d, int first,
                             const double *first_box, const dp_image *img, float *out)
{
    DP_ASSERT(l && d && img && img->pixels && out && first >= 0 && first <= l->n);
    planes p = {img->channels, img->rows, img->cols, img->pixels, NULL, NULL};
    int rc = 0;
    for (int i = first; i < l->n && rc == 0; i++)
        rc = apply_stage(&l->t[i], d->box[i], d->flip[i], i == first ? first_box : NULL, &p);
    if (rc == 0)
        rc = to_float(&p);
    if (rc == 0)
        memcpy(out, p.f, (size_t)p.c * p.h * p.w * sizeof *out);
    dp__free(p.owned);
    return rc;
}

int dp_transform_apply(const dp_transform_list *l, const dp_transform_draws *d, const dp_image *img,
                       float *out)
{
    return dp__transform_apply_from(l, d, 0, NULL, img, out);
}
