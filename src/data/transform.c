/* Transform lists: their syntax (dp_transform_parse, dp_transform_str) and
 * the sizes they give (dp_transform_fixed_size, dp_transform_output_shape).
 *
 *   stage  := resize:SIZE | center-crop:SIZE | random-resized-crop:SIZE[:S0-S1[:R0-R1]]
 *           | crop:P | flip | gray | rgb
 *   SIZE   := N | HxW       (one N: Resize's shorter side; the crops' square)
 *   list   := stage[,stage...] | none | imagenet | imagenet-test
 *
 * S0-S1 is RandomResizedCrop's scale (default 0.08-1), R0-R1 its ratio
 * (default 0.75-1.3333334, 3/4 and 4/3 as floats). */
#include "data/transform_internal.h"

#include "core/internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RRC_SCALE0 0.08f
#define RRC_SCALE1 1.0f
#define RRC_RATIO0 (3.0f / 4.0f)
#define RRC_RATIO1 (4.0f / 3.0f)

/* A stage's text, for messages: at most 64 of its bytes, printable. */
static void stage_text(const char *p, size_t len, char *buf, size_t size)
{
    size_t n = 0;
    for (size_t i = 0; i < len && i < 64 && n + 5 < size; i++) {
        unsigned char c = (unsigned char)p[i];
        n += (size_t)snprintf(buf + n, size - n, isprint(c) ? "%c" : "\\x%02x", c);
    }
    snprintf(buf + n, size - n, "%s", len > 64 ? "..." : "");
}

/* A positive side at p[0..len): digits only, 1..DP_IMAGE_MAX_SIDE. */
static bool parse_side(const char *p, size_t len, int *out)
{
    if (len == 0 || len > 5)
        return false;
    int v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)p[i]))
            return false;
        v = v * 10 + (p[i] - '0');
    }
    if (v < 1 || v > DP_IMAGE_MAX_SIDE)
        return false;
    *out = v;
    return true;
}

/* "N" (cols 0 when `square` is false: Resize's shorter side; else N x N)
 * or "HxW". */
static bool parse_size(const char *p, size_t len, bool square, int *rows, int *cols)
{
    const char *x = memchr(p, 'x', len);
    if (!x) {
        if (!parse_side(p, len, rows))
            return false;
        *cols = square ? *rows : 0;
        return true;
    }
    return parse_side(p, (size_t)(x - p), rows) &&
           parse_side(x + 1, len - (size_t)(x - p) - 1, cols);
}

/* "A-B": two finite floats, 0 < A <= B (and B <= 1 when `fraction`). */
static bool parse_range(const char *p, size_t len, bool fraction, float out[2])
{
    char tmp[64];
    if (len == 0 || len >= sizeof tmp)
        return false;
    memcpy(tmp, p, len);
    tmp[len] = '\0';
    char *dash = strchr(tmp + 1, '-'), *end;
    if (!dash)
        return false;
    *dash = '\0';
    errno = 0;
    float a = strtof(tmp, &end);
    if (end == tmp || *end || errno)
        return false;
    float b = strtof(dash + 1, &end);
    if (end == dash + 1 || *end || errno)
        return false;
    if (!(a > 0) || !(a <= b) || !isfinite(b) || (fraction && b > 1) || b > 1e6f)
        return false;
    out[0] = a;
    out[1] = b;
    return true;
}

/* One stage at p[0..len) into *t; false if it is not one. */
static bool parse_stage(const char *p, size_t len, dp_transform *t)
{
    memset(t, 0, sizeof *t);
#define IS(word) (len == sizeof word - 1 && memcmp(p, word, len) == 0)
#define HAS(prefix) (len > sizeof prefix - 1 && memcmp(p, prefix, sizeof prefix - 1) == 0)
    if (IS("flip")) {
        t->kind = DP_TRANSFORM_FLIP;
        return true;
    }
    if (IS("gray") || IS("rgb")) {
        t->kind = p[0] == 'g' ? DP_TRANSFORM_GRAY : DP_TRANSFORM_RGB;
        return true;
    }
    if (HAS("crop:")) {
        t->kind = DP_TRANSFORM_RANDOM_CROP;
        int pad;
        if (!parse_side(p + 5, len - 5, &pad) || pad > DP_AUGMENT_MAX_PAD)
            return false;
        t->padding = pad;
        return true;
    }
    if (HAS("resize:")) {
        t->kind = DP_TRANSFORM_RESIZE;
        return parse_size(p + 7, len - 7, false, &t->rows, &t->cols);
    }
    if (HAS("center-crop:")) {
        t->kind = DP_TRANSFORM_CENTER_CROP;
        return parse_size(p + 12, len - 12, true, &t->rows, &t->cols);
    }
    if (HAS("random-resized-crop:")) {
        t->kind = DP_TRANSFORM_RANDOM_RESIZED_CROP;
        t->scale[0] = RRC_SCALE0;
        t->scale[1] = RRC_SCALE1;
        t->ratio[0] = RRC_RATIO0;
        t->ratio[1] = RRC_RATIO1;
        const char *q = p + 20, *end = p + len;
        const char *c1 = memchr(q, ':', (size_t)(end - q));
        const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(end - c1 - 1)) : NULL;
        if (!parse_size(q, (size_t)((c1 ? c1 : end) - q), true, &t->rows, &t->cols))
            return false;
        if (c1 && !parse_range(c1 + 1, (size_t)((c2 ? c2 : end) - c1 - 1), true, t->scale))
            return false;
        if (c2 && !parse_range(c2 + 1, (size_t)(end - c2 - 1), false, t->ratio))
            return false;
        return true;
    }
#undef IS
#undef HAS
    return false;
}

int dp_transform_parse(const char *spec, dp_transform_list *out)
{
    DP_ASSERT(spec && out);
    if (strcmp(spec, "imagenet") == 0)
        spec = "random-resized-crop:224,flip";
    else if (strcmp(spec, "imagenet-test") == 0)
        spec = "resize:256,center-crop:224";
    dp_transform_list l = {0};
    if (strcmp(spec, "none") == 0) {
        *out = l;
        return 0;
    }
    const char *p = spec;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char text[300];
        stage_text(p, len, text, sizeof text);
        if (l.n == DP_TRANSFORM_MAX) {
            DP_ERROR("transform '%s': more than %d stages", text, DP_TRANSFORM_MAX);
            return DP_EINVAL;
        }
        if (!parse_stage(p, len, &l.t[l.n])) {
            DP_ERROR("transform stage '%s': not one of resize:N|HxW, center-crop:N|HxW, "
                     "random-resized-crop:N|HxW[:S0-S1[:R0-R1]], crop:P, flip, gray, rgb "
                     "(sides 1..%d, padding 1..%d, 0 < S0 <= S1 <= 1, 0 < R0 <= R1), or the "
                     "whole list none, imagenet or imagenet-test",
                     text, DP_IMAGE_MAX_SIDE, DP_AUGMENT_MAX_PAD);
            return DP_EINVAL;
        }
        l.n++;
        if (!end)
            break;
        p = end + 1;
    }
    *out = l;
    return 0;
}

/* The shortest %g that reads back as x (augment.c's float_str). */
static void float_str(float x, char *buf, size_t size)
{
    for (int digits = 6; digits < 9; digits++) {
        snprintf(buf, size, "%.*g", digits, (double)x);
        if (strtof(buf, NULL) == x)
            return;
    }
    snprintf(buf, size, "%.9g", (double)x);
}

static void size_str(const dp_transform *t, bool square, char *buf, size_t size)
{
    if ((square && t->rows == t->cols) || (!square && t->cols == 0))
        snprintf(buf, size, "%d", t->rows);
    else
        snprintf(buf, size, "%dx%d", t->rows, t->cols);
}

static void stage_str(const dp_transform *t, char *buf, size_t size)
{
    char sz[32], a[32], b[32], c[32], d[32];
    switch (t->kind) {
    case DP_TRANSFORM_RESIZE:
        size_str(t, false, sz, sizeof sz);
        snprintf(buf, size, "resize:%s", sz);
        break;
    case DP_TRANSFORM_CENTER_CROP:
        size_str(t, true, sz, sizeof sz);
        snprintf(buf, size, "center-crop:%s", sz);
        break;
    case DP_TRANSFORM_RANDOM_RESIZED_CROP: {
        size_str(t, true, sz, sizeof sz);
        float_str(t->scale[0], a, sizeof a);
        float_str(t->scale[1], b, sizeof b);
        float_str(t->ratio[0], c, sizeof c);
        float_str(t->ratio[1], d, sizeof d);
        bool ratio = t->ratio[0] != RRC_RATIO0 || t->ratio[1] != RRC_RATIO1;
        bool scale = ratio || t->scale[0] != RRC_SCALE0 || t->scale[1] != RRC_SCALE1;
        int n = snprintf(buf, size, "random-resized-crop:%s", sz);
        if (scale && n >= 0 && (size_t)n < size)
            n += snprintf(buf + n, size - (size_t)n, ":%s-%s", a, b);
        if (ratio && n >= 0 && (size_t)n < size)
            snprintf(buf + n, size - (size_t)n, ":%s-%s", c, d);
        break;
    }
    case DP_TRANSFORM_RANDOM_CROP:
        snprintf(buf, size, "crop:%d", t->padding);
        break;
    case DP_TRANSFORM_FLIP:
        snprintf(buf, size, "flip");
        break;
    case DP_TRANSFORM_GRAY:
        snprintf(buf, size, "gray");
        break;
    case DP_TRANSFORM_RGB:
        snprintf(buf, size, "rgb");
        break;
    }
}

const char *dp_transform_str(const dp_transform_list *l, char *buf, size_t size)
{
    DP_ASSERT(l && buf && size > 0);
    buf[0] = '\0';
    size_t len = 0;
    for (int i = 0; i < l->n && len + 1 < size; i++) {
        char stage[160];
        stage_str(&l->t[i], stage, sizeof stage);
        int w = snprintf(buf + len, size - len, "%s%s", i ? "," : "", stage);
        len = w < 0 ? len : DP_MIN(size - 1, len + (size_t)w);
    }
    if (l->n == 0)
        snprintf(buf, size, "none");
    return buf;
}

void dp__transform_stage_size(const dp_transform *t, int rows, int cols, int out[2])
{
    out[0] = rows;
    out[1] = cols;
    switch (t->kind) {
    case DP_TRANSFORM_RESIZE:
        if (t->cols == 0) {
            /* torchvision's _compute_resized_output_size: the shorter side
             * to the size, the longer int(size * long / short). */
            int s = rows <= cols ? rows : cols, lg = rows <= cols ? cols : rows;
            int other = (int)((double)((int64_t)t->rows * lg) / s);
            if (cols <= rows) {
                out[0] = other;
                out[1] = t->rows;
            } else {
                out[0] = t->rows;
                out[1] = other;
            }
        } else {
            out[0] = t->rows;
            out[1] = t->cols;
        }
        break;
    case DP_TRANSFORM_CENTER_CROP:
    case DP_TRANSFORM_RANDOM_RESIZED_CROP:
        out[0] = t->rows;
        out[1] = t->cols;
        break;
    default:
        break;
    }
}

bool dp_transform_fixed_size(const dp_transform_list *l, int *rows, int *cols)
{
    DP_ASSERT(l);
    bool fixed = false;
    int r = 0, c = 0;
    for (int i = 0; i < l->n; i++) {
        const dp_transform *t = &l->t[i];
        if (t->kind == DP_TRANSFORM_RESIZE && t->cols == 0) {
            fixed = false;
        } else if (t->kind == DP_TRANSFORM_RESIZE || t->kind == DP_TRANSFORM_CENTER_CROP ||
                   t->kind == DP_TRANSFORM_RANDOM_RESIZED_CROP) {
            fixed = true;
            r = t->rows;
            c = t->cols;
        }
    }
    if (fixed && rows)
        *rows = r;
    if (fixed && cols)
        *cols = c;
    return fixed;
}

void dp_transform_output_shape(const dp_transform_list *l, int channels, int rows, int cols,
                               int out_chw[3])
{
    DP_ASSERT(l && out_chw);
    int size[2] = {rows, cols};
    for (int i = 0; i < l->n; i++) {
        if (l->t[i].kind == DP_TRANSFORM_GRAY)
            channels = 1;
        else if (l->t[i].kind == DP_TRANSFORM_RGB)
            channels = 3;
        dp__transform_stage_size(&l->t[i], size[0], size[1], size);
    }
    out_chw[0] = channels;
    out_chw[1] = size[0];
    out_chw[2] = size[1];
}
