/* Augmentation and normalisation of one sample, as torchvision's
 * RandomCrop(size, padding=P), RandomHorizontalFlip() and Normalize(mean,
 * std) do it, and the draws that decide them.
 *
 * The draws come from the counter-based RNG (core/rng.c) on a stream of
 * their own per sample, (1 << 62) | epoch << 40 | index: a pure function of
 * (seed, epoch, index), so the loader may fill batches in any order, and
 * any split of them gives every sample the same image. Bit 62 keeps these
 * streams apart from the shuffle's (the epoch), the weights' (the tensor's
 * number) and dropout's (bit 63 set). */
#include "dp/data.h"

#include "core/internal.h"
#include "data/transform_internal.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AUGMENT_STREAM (1ULL << 62)

int dp_augment_parse(const char *spec, dp_augment_options *o)
{
    DP_ASSERT(spec && o);
    if (strcmp(spec, "none") == 0) {
        o->crop_pad = 0;
        o->flip = false;
        return 0;
    }
    long pad = 0;
    bool crop = false, flip = false;
    const char *p = spec;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 4 && strncmp(p, "flip", 4) == 0 && !flip) {
            flip = true;
        } else if (len > 5 && strncmp(p, "crop:", 5) == 0 && !crop) {
            char *stop;
            pad = strtol(p + 5, &stop, 10);
            if (!isdigit((unsigned char)p[5]) || stop != p + len || pad < 1 ||
                pad > DP_AUGMENT_MAX_PAD)
                return DP_EINVAL;
            crop = true;
        } else {
            return DP_EINVAL;
        }
        if (!end)
            break;
        p = end + 1;
    }
    o->crop_pad = (int)pad;
    o->flip = flip;
    return 0;
}

int dp_normalize_parse(const char *spec, dp_augment_options *o)
{
    DP_ASSERT(spec && o);
    if (strcmp(spec, "none") == 0) {
        o->norm_channels = 0;
        return 0;
    }
    float v[2 * DP_AUGMENT_MAX_CHANNELS];
    int n = 0;
    const char *p = spec;
    for (;;) {
        char *end;
        if (n == 2 * DP_AUGMENT_MAX_CHANNELS || *p == '\0' || *p == ',')
            return DP_EINVAL;
        double x = strtod(p, &end);
        if (end == p || (*end != ',' && *end != '\0') || !isfinite(x) || fabs(x) > 1e30)
            return DP_EINVAL;
        v[n++] = (float)x;
        if (*end == '\0')
            break;
        p = end + 1;
    }
    if (n % 2)
        return DP_EINVAL;
    for (int c = n / 2; c < n; c++)
        if (!(v[c] > 0))
            return DP_EINVAL;
    o->norm_channels = n / 2;
    for (int c = 0; c < n / 2; c++) {
        o->mean[c] = v[c];
        o->std[c] = v[n / 2 + c];
    }
    return 0;
}

int dp_augment_check(const dp_augment_options *o, int channels)
{
    DP_ASSERT(o);
    if (o->crop_pad < 0 || o->crop_pad > DP_AUGMENT_MAX_PAD) {
        DP_ERROR("`augment`: the crop's padding %d is outside 0..%d", o->crop_pad,
                 DP_AUGMENT_MAX_PAD);
        return DP_EINVAL;
    }
    int k = o->norm_channels;
    if (k < 0 || k > DP_AUGMENT_MAX_CHANNELS || (k > 1 && k != channels)) {
        DP_ERROR("`normalize`: %d means and standard deviations for samples of %d channel%s: "
                 "give one pair per channel, or one for all",
                 k, channels, channels == 1 ? "" : "s");
        return DP_EINVAL;
    }
    for (int c = 0; c < k; c++) {
        if (!isfinite(o->mean[c]) || !(o->std[c] > 0) || !isfinite(o->std[c])) {
            DP_ERROR("`normalize`: channel %d's mean %g and std %g: the mean must be finite "
                     "and the std above 0",
                     c, (double)o->mean[c], (double)o->std[c]);
            return DP_EINVAL;
        }
    }
    return 0;
}

bool dp_augment_random(const dp_augment_options *o)
{
    return o->crop_pad > 0 || o->flip;
}

bool dp_augment_any(const dp_augment_options *o)
{
    return dp_augment_random(o) || o->norm_channels > 0;
}

/* The shortest %g that reads back as x: 0.247, not 0.247000003. */
static void float_str(float x, char *buf, size_t size)
{
    for (int digits = 6; digits < 9; digits++) {
        snprintf(buf, size, "%.*g", digits, (double)x);
        if (strtof(buf, NULL) == x)
            return;
    }
    snprintf(buf, size, "%.9g", (double)x);
}

/* Appends to buf[*len..size), keeping it terminated when it does not fit. */
static void put(char *buf, size_t size, size_t *len, const char *s)
{
    int w = snprintf(buf + *len, size - *len, "%s", s);
    *len = w < 0 ? *len : DP_MIN(size - 1, *len + (size_t)w);
}

const char *dp_augment_str(const dp_augment_options *o, char *buf, size_t size)
{
    DP_ASSERT(o && buf && size > 0);
    char crop[32];
    snprintf(crop, sizeof crop, "crop:%d", o->crop_pad);
    snprintf(buf, size, "%s%s%s", o->crop_pad > 0 ? crop : "",
             o->crop_pad > 0 && o->flip ? "," : "", o->flip ? "flip" : "");
    if (!buf[0])
        snprintf(buf, size, "none");
    return buf;
}

const char *dp_normalize_str(const dp_augment_options *o, char *buf, size_t size)
{
    DP_ASSERT(o && buf && size > 0);
    buf[0] = '\0';
    size_t len = 0;
    int k = DP_MIN(o->norm_channels, DP_AUGMENT_MAX_CHANNELS);
    for (int i = 0; i < 2 * k; i++) {
        char num[32];
        float_str(i < k ? o->mean[i] : o->std[i - k], num, sizeof num);
        put(buf, size, &len, i ? "," : "");
        put(buf, size, &len, num);
    }
    if (k <= 0)
        snprintf(buf, size, "none");
    return buf;
}

void dp__augment_stream(dp_rng *rng, uint64_t seed, int64_t epoch, int64_t index)
{
    /* Epochs and indices past the stream's fields (2^22 epochs, 2^40
     * samples) would share streams, never exceed them: refuse outright. */
    DP_ASSERT(epoch >= 0 && index >= 0 && epoch < (1LL << 22) && index < (1LL << 40));
    dp_rng_init(rng, seed, AUGMENT_STREAM | (uint64_t)epoch << 40 | (uint64_t)index);
}

void dp__augment_draw_crop(dp_rng *rng, int pad, int *top, int *left)
{
    uint64_t span = 2 * (uint64_t)pad + 1;
    *top = (int)dp_rng_below(rng, span); /* torch.randint(0, h - th + 1) */
    *left = (int)dp_rng_below(rng, span);
}

bool dp__augment_draw_flip(dp_rng *rng)
{
    return dp_rng_uniform(rng) < 0.5f; /* torch.rand(1) < p */
}

void dp_augment_draw_for(const dp_augment_options *o, uint64_t seed, int64_t epoch, int64_t index,
                         dp_augment_draw *d)
{
    DP_ASSERT(o && d);
    memset(d, 0, sizeof *d);
    dp_rng rng;
    dp__augment_stream(&rng, seed, epoch, index);
    if (o->crop_pad > 0)
        dp__augment_draw_crop(&rng, o->crop_pad, &d->top, &d->left);
    if (o->flip)
        d->flip = dp__augment_draw_flip(&rng);
}

void dp_augment_apply(const dp_augment_options *o, const dp_augment_draw *d, int channels, int rows,
                      int cols, const float *src, float *dst)
{
    DP_ASSERT(o && src && dst && src != dst);
    /* Shifts from an output pixel to its source pixel: the padded image's
     * (y + top, x + left) is the source's (y + top - pad, x + left - pad). */
    int pad = d ? o->crop_pad : 0;
    int dy = d ? d->top - pad : 0, dx = d ? d->left - pad : 0;
    bool flip = d && d->flip;
    for (int c = 0; c < channels; c++) {
        int k = o->norm_channels == 1 ? 0 : c;
        bool norm = o->norm_channels > 0;
        float mean = norm ? o->mean[k] : 0, std = norm ? o->std[k] : 1;
        const float *plane = src + (size_t)c * rows * cols;
        for (int y = 0; y < rows; y++) {
            int sy = y + dy;
            float *out = dst + ((size_t)c * rows + y) * cols;
            for (int x = 0; x < cols; x++) {
                /* Flipped after the crop: output column x is the crop's
                 * column cols - 1 - x. */
                int sx = (flip ? cols - 1 - x : x) + dx;
                float v = sy >= 0 && sy < rows && sx >= 0 && sx < cols
                              ? plane[(size_t)sy * cols + sx]
                              : 0.0f;
                out[x] = norm ? (v - mean) / std : v;
            }
        }
    }
}
