/* The streaming loader's per-sample path (fuzz_entry.h says what an input
 * means): an image file's bytes through dp_transform_decode, with a
 * transform list, the channels and the JPEG scale drawn from the input's
 * first four bytes. A decoded sample must have the list's output shape (the
 * same with --jpeg-scale auto as off, when both decode) and floats in
 * [0, 1]; a refused one, one error naming the file. */
#include "fuzz_entry.h"

#include "dp/dp.h"
#include "dp/transform.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for 3 x 256 x 256 floats: every fixed-size list below fits (its
 * sides are at most 64); a size-keeping list on a larger image is refused. */
enum { FZ_TRANSFORM_CAP = 3 * 256 * 256 };

/* The list that bytes b[0..3) name, in dp_transform_parse's syntax:
 * b[0] & 7 the sizing stage, b[0] bit 3 a flip after it, bits 4-5 a gray or
 * rgb stage first; b[1] and b[2] the sides (1 to 64), b[2] bit 7 a square
 * size. */
static void transform_spec(const uint8_t *b, char *spec, size_t size)
{
    int rows = b[1] % 64 + 1, cols = b[2] % 64 + 1;
    char hw[32];
    if (b[2] & 0x80)
        snprintf(hw, sizeof hw, "%d", rows);
    else
        snprintf(hw, sizeof hw, "%dx%d", rows, cols);
    static const char *const color[] = {"", "gray,", "rgb,", "gray,rgb,"};
    const char *flip = b[0] & 8 ? ",flip" : "";
    const char *pre = color[(b[0] >> 4) & 3];
    switch (b[0] & 7) {
    case 0: snprintf(spec, size, "%srandom-resized-crop:%s%s", pre, hw, flip); break;
    case 1: snprintf(spec, size, "%sresize:%d,center-crop:%s%s", pre, rows, hw, flip); break;
    case 2: snprintf(spec, size, "%sresize:%s%s", pre, hw, flip); break;
    case 3: snprintf(spec, size, "%sresize:%d%s", pre, rows, flip); break;
    case 4: snprintf(spec, size, "%scenter-crop:%s%s", pre, hw, flip); break;
    case 5: snprintf(spec, size, "%sresize:%s,crop:%d%s", pre, hw, b[1] % 4 + 1, flip); break;
    case 6: snprintf(spec, size, "%srandom-resized-crop:%s,center-crop:%d%s", pre, hw, cols, flip);
            break;
    default: /* the colour stages alone (their trailing comma cut), else none */
        snprintf(spec, size, "%s%s", pre, b[0] & 8 ? "flip" : "");
        if (!spec[0])
            snprintf(spec, size, "none");
        else if (spec[strlen(spec) - 1] == ',')
            spec[strlen(spec) - 1] = 0;
        break;
    }
}

/* One decode; 0 decoded, 1 refused with one line naming the file, -1 a
 * broken promise (said on stderr). */
static int decode_once(const dp_transform_list *l, dp_jpeg_scale scale, const uint8_t *file,
                       size_t len, int channels, uint64_t seed, int64_t index, float *out,
                       int chw[3], const char *spec)
{
    const char *mode = scale == DP_JPEG_SCALE_AUTO ? "auto" : "off";
    fz_capture_begin();
    int rc = dp_transform_decode(l, scale, file, len, "in.img", channels, seed, 0, index, out,
                                 FZ_TRANSFORM_CAP, chw);
    fz_capture_end();
    if (rc < 0) {
        if (fz_errors != 1 || strncmp(fz_last_error, "in.img: ", 8) != 0 ||
            strchr(fz_last_error, '\n'))
            return fz_bad("transform", "%s, scale %s: failed (%d) without one line naming the "
                          "input: %s", spec, mode, rc, fz_last_error);
        return 1;
    }
    /* The channels asked for, then each gray or rgb stage's. */
    int want = channels;
    for (int k = 0; k < l->n; k++)
        if (l->t[k].kind == DP_TRANSFORM_GRAY || l->t[k].kind == DP_TRANSFORM_RGB)
            want = l->t[k].kind == DP_TRANSFORM_GRAY ? 1 : 3;
    if ((want && chw[0] != want) || (chw[0] != 1 && chw[0] != 3) || chw[1] < 1 ||
        chw[2] < 1 || (size_t)chw[0] * (size_t)chw[1] * (size_t)chw[2] > FZ_TRANSFORM_CAP)
        return fz_bad("transform", "%s, scale %s: decoded [%d, %d, %d], %d channels wanted",
                      spec, mode, chw[0], chw[1], chw[2], want);
    int rows, cols;
    if (dp_transform_fixed_size(l, &rows, &cols) && (chw[1] != rows || chw[2] != cols))
        return fz_bad("transform", "%s, scale %s: decoded %dx%d, the list fixes %dx%d", spec, mode,
                      chw[1], chw[2], rows, cols);
    /* Every float is read (ASan sees one that is not there) and is
     * ToTensor's: in [0, 1] up to the float rounding of a resize's
     * weights (non-negative, summing to 1 within an ulp or two), never
     * NaN. */
    size_t n = (size_t)chw[0] * (size_t)chw[1] * (size_t)chw[2];
    for (size_t i = 0; i < n; i++)
        if (!(out[i] >= -1e-6f && out[i] <= 1.0f + 1e-6f))
            return fz_bad("transform", "%s, scale %s: float %zu of [%d, %d, %d] is %.9g", spec, mode,
                          i, chw[0], chw[1], chw[2], (double)out[i]);
    return 0;
}

int fuzz_transform_input(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    char spec[128];
    transform_spec(data, spec, sizeof spec);
    dp_transform_list l;
    fz_capture_begin();
    int rc = dp_transform_parse(spec, &l);
    fz_capture_end();
    if (rc < 0)
        return fz_bad("transform", "the list %s did not parse: %s", spec, fz_last_error);
    static const int modes[] = {0, 1, 3};
    int channels = modes[data[3] % 3];
    uint64_t seed = data[3] >> 2;
    int64_t index = data[1] ^ data[2];
    const uint8_t *file = data + 4;
    size_t len = size - 4;
    static float out_auto[FZ_TRANSFORM_CAP], out_off[FZ_TRANSFORM_CAP];
    int chw_auto[3], chw_off[3];
    int a = decode_once(&l, DP_JPEG_SCALE_AUTO, file, len, channels, seed, index, out_auto,
                        chw_auto, spec);
    int o = decode_once(&l, DP_JPEG_SCALE_OFF, file, len, channels, seed, index, out_off, chw_off,
                        spec);
    if (a < 0 || o < 0)
        return -1;
    /* The scale changes the pixels a decoder reads, never the sample's
     * shape. */
    if (a == 0 && o == 0 && memcmp(chw_auto, chw_off, sizeof chw_auto) != 0)
        return fz_bad("transform", "%s: scale auto gave [%d, %d, %d], off [%d, %d, %d]", spec,
                      chw_auto[0], chw_auto[1], chw_auto[2], chw_off[0], chw_off[1], chw_off[2]);
    /* A list that does not begin by resizing decodes at full size either
     * way: the same floats. */
    bool resizes = l.n > 0 && (l.t[0].kind == DP_TRANSFORM_RESIZE ||
                               l.t[0].kind == DP_TRANSFORM_RANDOM_RESIZED_CROP);
    if (a == 0 && o == 0 && !resizes &&
        memcmp(out_auto, out_off, sizeof(float) * (size_t)chw_off[0] * chw_off[1] * chw_off[2]))
        return fz_bad("transform", "%s: scale auto and off decoded other floats", spec);
    if (!resizes && a != o)
        return fz_bad("transform", "%s: scale auto %s, off %s", spec, a ? "refused" : "decoded",
                      o ? "refused" : "decoded");
    return 0;
}
