/* dp_transform_decode (src/data/transform_decode.c, image.c's JPEG header
 * and region decode) on JPEG and PNG files written with libjpeg-turbo and
 * libpng: --jpeg-scale off is the whole decode and then the transforms;
 * auto at full scale (the box needs every pixel of its rows) gives the same
 * floats bit for bit from the rows and iMCU columns it decodes; auto at a
 * DCT scale stays within the bound docs/transforms.md states (mean
 * |auto - off| <= 0.6/255, largest <= 16/255, what bench/jpeg_scale.sh
 * measured with room); a sample larger than the buffer and a cut JPEG are
 * one-line errors naming the file. Under the fast path, image.c's region
 * decode: inside a margin of 4 pixels from its cut edges, its pixels are
 * those of the whole image decoded at the same scale (libjpeg-turbo's
 * fancy upsampling differs at the cut edges, and leaves the last columns
 * of a crop unwritten). */
#include "testutil.h"

#include "imageutil.h"

#include "core/internal.h"
#include "data/transform_internal.h"

#include "dp/core.h"
#include "dp/data.h"
#include "dp/transform.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAP (3 * 512 * 512)

/* Photograph-like rows x cols x channels bytes: smooth waves, a disc with
 * sharp edges, a little noise. */
static uint8_t *photo(int rows, int cols, int channels, unsigned seed)
{
    uint8_t *p = malloc((size_t)rows * cols * channels);
    assert_non_null(p);
    srand(seed);
    for (int y = 0; y < rows; y++)
        for (int x = 0; x < cols; x++)
            for (int c = 0; c < channels; c++) {
                double v = 128 + 60 * sin(0.02 * y * (c + 1) + c) * cos(0.03 * x - c);
                double dy = y - rows * 0.4, dx = x - cols * 0.6;
                v += dy * dy + dx * dx < rows * rows / 9.0 ? 60 : 0;
                v += rand() % 17 - 8;
                p[((size_t)y * cols + x) * channels + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
    return p;
}

static uint8_t *jpeg_file(const char *name, int rows, int cols, int channels, size_t *len)
{
    uint8_t *hwc = photo(rows, cols, channels, (unsigned)rows);
    const char *path = tu_tmp_path(name);
    iu_write_jpeg(path, channels, cols, rows, hwc, 90);
    free(hwc);
    return iu_read_file(path, len);
}

static void decode(const char *spec, dp_jpeg_scale scale, const uint8_t *buf, size_t len,
                   int64_t index, float *out, int chw[3])
{
    dp_transform_list l;
    assert_int_equal(dp_transform_parse(spec, &l), 0);
    if (dp_transform_decode(&l, scale, buf, len, "photo.jpg", 0, 11, 2, index, out, CAP, chw) != 0)
        fail_msg("%s: %s", spec, dp_last_error());
}

static void off_is_the_whole_decode_then_the_transforms(void **state)
{
    (void)state;
    size_t len;
    uint8_t *jpg = jpeg_file("a.jpg", 333, 499, 3, &len);
    static float got[CAP], want[CAP];
    const char *specs[] = {"imagenet", "imagenet-test", "resize:64,gray", "crop:4,flip"};
    for (int s = 0; s < 4; s++) {
        dp_transform_list l;
        assert_int_equal(dp_transform_parse(specs[s], &l), 0);
        dp_image img;
        assert_int_equal(dp_image_decode(jpg, len, "a.jpg", 0, &img), 0);
        dp_transform_draws d;
        dp_transform_draw(&l, 11, 2, 7, img.rows, img.cols, &d);
        assert_int_equal(dp_transform_apply(&l, &d, &img, want), 0);
        int chw[3], shape[3];
        dp_transform_output_shape(&l, 3, 333, 499, shape);
        decode(specs[s], DP_JPEG_SCALE_OFF, jpg, len, 7, got, chw);
        assert_memory_equal(chw, shape, sizeof chw);
        assert_memory_equal(got, want, (size_t)chw[0] * chw[1] * chw[2] * sizeof(float));
        dp_image_close(&img);
    }
    free(jpg);
}

/* mean and largest |a - b| over n floats (NaN counts as the largest). */
static void differences(const float *a, const float *b, size_t n, double *mean, double *max)
{
    double sum = 0, worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        worst = !(d <= worst) ? d : worst;
        sum += d;
    }
    *mean = sum / (double)n;
    *max = worst;
}

static void auto_at_full_scale_equals_off(void **state)
{
    (void)state;
    /* 300 x 400 with 224-pixel targets: no DCT scale keeps a box at 224
     * (1/2 of 400 is 200), so auto decodes at 1/1, only the box's rows and
     * iMCU columns: those pixels are the whole decode's. */
    const int channels[2] = {3, 1};
    for (int k = 0; k < 2; k++) {
        size_t len;
        uint8_t *jpg = jpeg_file(k ? "g.jpg" : "c.jpg", 300, 400, channels[k], &len);
        static float a[CAP], b[CAP];
        for (int64_t index = 0; index < 40; index++) {
            int chw[3];
            decode("random-resized-crop:224,flip", DP_JPEG_SCALE_OFF, jpg, len, index, a, chw);
            decode("random-resized-crop:224,flip", DP_JPEG_SCALE_AUTO, jpg, len, index, b, chw);
            size_t n = (size_t)chw[0] * chw[1] * chw[2];
            double mean, max;
            differences(a, b, n, &mean, &max);
            if (max != 0)
                fail_msg("%d channels, sample %lld: auto differs from off by up to %g/255",
                         channels[k], (long long)index, max * 255);
        }
        free(jpg);
    }
}

static void auto_scaled_within_the_bound(void **state)
{
    (void)state;
    size_t len;
    uint8_t *jpg = jpeg_file("big.jpg", 1300, 1700, 3, &len);
    static float a[CAP], b[CAP];
    const char *specs[] = {"random-resized-crop:224", "resize:256,center-crop:224", "resize:64"};
    double total = 0, worst = 0;
    int n_samples = 0;
    for (int s = 0; s < 3; s++)
        for (int64_t index = 0; index < 12; index++) {
            int chw[3];
            decode(specs[s], DP_JPEG_SCALE_OFF, jpg, len, index, a, chw);
            decode(specs[s], DP_JPEG_SCALE_AUTO, jpg, len, index, b, chw);
            double mean, max;
            differences(a, b, (size_t)chw[0] * chw[1] * chw[2], &mean, &max);
            total += mean;
            worst = !(max <= worst) ? max : worst;
            n_samples++;
            if (!(mean <= 0.6 / 255 && max <= 16.0 / 255))
                fail_msg("%s sample %lld: auto - off mean %.3f/255, max %.3f/255", specs[s],
                         (long long)index, mean * 255, max * 255);
        }
    printf("auto - off at DCT scales: mean %.3f/255, largest %.3f/255 over %d samples\n",
           total / n_samples * 255, worst * 255, n_samples);
    /* The scaled decode did happen: not bit for bit. */
    assert_true(worst > 0);
    free(jpg);
}

static void region_inside_its_margin_is_the_whole_decode(void **state)
{
    (void)state;
    size_t len;
    /* 4:2:0 (libjpeg's default for RGB), sides not multiples of 16. */
    uint8_t *jpg = jpeg_file("r.jpg", 517, 389, 3, &len);
    srand(38);
    for (int denom = 1; denom <= 8; denom *= 2) {
        int rows = (517 + denom - 1) / denom, cols = (389 + denom - 1) / denom, at[2];
        dp_image whole, part;
        int all[4] = {0, 0, rows, cols};
        assert_int_equal(dp__jpeg_decode_region(jpg, len, "r.jpg", 0, denom, all, &whole, at), 0);
        assert_true(whole.rows == rows && whole.cols == cols && at[0] == 0 && at[1] == 0);
        for (int t = 0; t < 40; t++) {
            int y = rand() % rows, x = rand() % cols;
            int want[4] = {y, x, 1 + rand() % (rows - y), 1 + rand() % (cols - x)};
            int m[4] = {DP_MAX(0, y - 4), DP_MAX(0, x - 4), 0, 0};
            m[2] = DP_MIN(rows, want[0] + want[2] + 4) - m[0];
            m[3] = DP_MIN(cols, want[1] + want[3] + 4) - m[1];
            assert_int_equal(dp__jpeg_decode_region(jpg, len, "r.jpg", 0, denom, m, &part, at), 0);
            assert_true(at[0] == m[0] && at[1] <= m[1] && part.rows == m[2]);
            assert_true(at[1] + part.cols >= m[1] + m[3]);
            for (int c = 0; c < 3; c++)
                for (int yy = want[0]; yy < want[0] + want[2]; yy++)
                    for (int xx = want[1]; xx < want[1] + want[3]; xx++) {
                        int a = part.pixels[((size_t)c * part.rows + yy - at[0]) * part.cols + xx -
                                            at[1]];
                        int b = whole.pixels[((size_t)c * rows + yy) * cols + xx];
                        if (a != b)
                            fail_msg("1/%d, region %d,%d %dx%d: pixel %d,%d,%d is %d, the whole "
                                     "decode's %d",
                                     denom, want[0], want[1], want[2], want[3], c, yy, xx, a, b);
                    }
            dp_image_close(&part);
        }
        dp_image_close(&whole);
    }
    free(jpg);
}

static void errors_name_the_file(void **state)
{
    (void)state;
    tu_quiet_log();
    size_t len;
    uint8_t *jpg = jpeg_file("e.jpg", 300, 400, 3, &len);
    dp_transform_list l;
    assert_int_equal(dp_transform_parse("resize:64", &l), 0);
    static float out[CAP];
    int chw[3];
    for (int scale = 0; scale < 2; scale++) {
        /* resize:64 of 300 x 400 is 64 x 85: 16320 floats. */
        assert_int_equal(dp_transform_decode(&l, (dp_jpeg_scale)scale, jpg, len, "e.jpg", 0, 1, 0,
                                             0, out, 1000, chw),
                         DP_EINVAL);
        tu_assert_error_mentions("e.jpg");
        tu_assert_error_mentions("16320");
        /* Cut in the middle of the scan: the rows below are missing. */
        assert_int_equal(dp_transform_decode(&l, (dp_jpeg_scale)scale, jpg, len / 2, "cut.jpg", 0,
                                             1, 0, 0, out, CAP, chw),
                         DP_EFORMAT);
        tu_assert_error_mentions("cut.jpg");
        static const char text[] = "not an image\n";
        assert_int_equal(dp_transform_decode(&l, (dp_jpeg_scale)scale, text, sizeof text - 1,
                                             "text.jpg", 0, 1, 0, 0, out, CAP, chw),
                         DP_EFORMAT);
        tu_assert_error_mentions("text.jpg");
    }
    free(jpg);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(off_is_the_whole_decode_then_the_transforms, tu_setup_tmp,
                                        tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(auto_at_full_scale_equals_off, tu_setup_tmp,
                                        tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(auto_scaled_within_the_bound, tu_setup_tmp,
                                        tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(region_inside_its_margin_is_the_whole_decode, tu_setup_tmp,
                                        tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(errors_name_the_file, tu_setup_tmp, tu_teardown_tmp),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
