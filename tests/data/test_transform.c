/* Transform lists (src/data/transform*.c) without files: the syntax and its
 * errors, the output sizes, the draws as a pure function of (seed, epoch,
 * index) with RandomResizedCrop replayed from the numbers drawn as
 * torchvision's get_params draws them (fallback included), the crop and
 * flip drawing what dp_augment_draw_for draws, and the pixels of known
 * small images (PIL's bilinear weights by hand, CenterCrop's rounding and
 * padding, PIL's luma). tests/tools/test_transforms_torchvision.py holds
 * the same to torchvision on real files; test_transform_decode the JPEG
 * decoding. */
#include "testutil.h"

#include "data/transform_internal.h"
#include "dp/core.h"
#include "dp/data.h"
#include "dp/transform.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static dp_transform_list parse_ok(const char *spec)
{
    dp_transform_list l;
    memset(&l, 0, sizeof l);
    if (dp_transform_parse(spec, &l) != 0)
        fail_msg("'%s' refused: %s", spec, dp_last_error());
    return l;
}

static void parse_and_str_round_trip(void **state)
{
    (void)state;
    static const char *cases[][2] = {
        {"none", "none"},
        {"imagenet", "random-resized-crop:224,flip"},
        {"imagenet-test", "resize:256,center-crop:224"},
        {"resize:256", "resize:256"},
        {"resize:100x80", "resize:100x80"},
        {"center-crop:32x32", "center-crop:32"},
        {"center-crop:40x60,flip", "center-crop:40x60,flip"},
        {"random-resized-crop:224:0.08-1", "random-resized-crop:224"},
        {"random-resized-crop:96x64:0.2-0.9", "random-resized-crop:96x64:0.2-0.9"},
        {"random-resized-crop:64:0.08-1:0.5-2", "random-resized-crop:64:0.08-1:0.5-2"},
        {"crop:4,flip,gray,rgb", "crop:4,flip,gray,rgb"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dp_transform_list a = parse_ok(cases[i][0]), b;
        char buf[256];
        dp_transform_str(&a, buf, sizeof buf);
        if (strcmp(buf, cases[i][1]) != 0)
            fail_msg("'%s' prints as '%s', expected '%s'", cases[i][0], buf, cases[i][1]);
        b = parse_ok(buf);
        if (memcmp(&a, &b, sizeof a) != 0)
            fail_msg("'%s' printed as '%s' parses to another list", cases[i][0], buf);
    }
    dp_transform_list l = parse_ok("imagenet");
    assert_int_equal(l.n, 2);
    assert_int_equal(l.t[0].kind, DP_TRANSFORM_RANDOM_RESIZED_CROP);
    assert_true(l.t[0].scale[0] == 0.08f && l.t[0].scale[1] == 1.0f);
    assert_true(l.t[0].ratio[0] == 0.75f && l.t[0].ratio[1] == 4.0f / 3.0f);
    assert_int_equal(l.t[1].kind, DP_TRANSFORM_FLIP);
}

static void parse_errors_name_the_stage(void **state)
{
    (void)state;
    tu_quiet_log();
    static const char *bad[][2] = {
        {"resize:0", "resize:0"},
        {"resize:256,center-crop:", "center-crop:"},
        {"flip,flop", "flop"},
        {"resize:20000", "resize:20000"},
        {"crop:0", "crop:0"},
        {"random-resized-crop:224:1-0.5", "random-resized-crop:224:1-0.5"},
        {"random-resized-crop:224:0.08-1.5", "random-resized-crop:224:0.08-1.5"},
        {"random-resized-crop:224:0.08-1:0-2", "random-resized-crop:224:0.08-1:0-2"},
        {"resize:12x", "resize:12x"},
        {"", "''"},
        {"flip,", "''"},
        {"imagenet,flip", "imagenet"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dp_transform_list l = parse_ok("flip"), before = l;
        if (dp_transform_parse(bad[i][0], &l) != DP_EINVAL)
            fail_msg("'%s' accepted", bad[i][0]);
        tu_assert_error_mentions(bad[i][1]);
        assert_memory_equal(&l, &before, sizeof l);
    }
}

static void output_sizes_as_torchvision(void **state)
{
    (void)state;
    int chw[3], rows, cols;
    dp_transform_list l = parse_ok("resize:256");
    /* Shorter side to 256, the longer int(256 * 500 / 300) = 426. */
    dp_transform_output_shape(&l, 3, 300, 500, chw);
    assert_true(chw[0] == 3 && chw[1] == 256 && chw[2] == 426);
    dp_transform_output_shape(&l, 1, 500, 300, chw);
    assert_true(chw[0] == 1 && chw[1] == 426 && chw[2] == 256);
    assert_false(dp_transform_fixed_size(&l, &rows, &cols));
    l = parse_ok("resize:256,center-crop:224,gray");
    dp_transform_output_shape(&l, 3, 333, 499, chw);
    assert_true(chw[0] == 1 && chw[1] == 224 && chw[2] == 224);
    assert_true(dp_transform_fixed_size(&l, &rows, &cols) && rows == 224 && cols == 224);
    l = parse_ok("random-resized-crop:96x64,flip,crop:4");
    assert_true(dp_transform_fixed_size(&l, &rows, &cols) && rows == 96 && cols == 64);
    l = parse_ok("gray,rgb,flip");
    assert_false(dp_transform_fixed_size(&l, NULL, NULL));
    dp_transform_output_shape(&l, 1, 7, 9, chw);
    assert_true(chw[0] == 3 && chw[1] == 7 && chw[2] == 9);
}

/* torchvision's RandomResizedCrop.get_params, written again from its
 * source, fed the numbers the trace recorded for stage `stage`. */
static void replay_get_params(const dp__transform_trace *tr, int stage, int rows, int cols,
                              const float scale[2], const float ratio[2], int box[4], int *used)
{
    int k = 0;
    while (k < tr->n && tr->draw[k].stage != stage)
        k++;
    int first = k;
    double area = (double)rows * cols;
    float lr0 = (float)log(ratio[0]), lr1 = (float)log(ratio[1]);
    for (int attempt = 0; attempt < 10; attempt++) {
        assert_int_equal(tr->draw[k].bound, 0);
        float s = (float)(scale[0] + ((double)scale[1] - scale[0]) * tr->draw[k++].value);
        assert_int_equal(tr->draw[k].bound, 0);
        float r = (float)(lr0 + ((double)lr1 - lr0) * tr->draw[k++].value);
        double target = area * s, aspect = (float)exp(r);
        double w = nearbyint(sqrt(target * aspect)), h = nearbyint(sqrt(target / aspect));
        if (w > 0 && w <= cols && h > 0 && h <= rows) {
            assert_int_equal(tr->draw[k].bound, rows - (int)h + 1);
            box[0] = (int)tr->draw[k++].value;
            assert_int_equal(tr->draw[k].bound, cols - (int)w + 1);
            box[1] = (int)tr->draw[k++].value;
            box[2] = (int)h;
            box[3] = (int)w;
            *used = k - first;
            return;
        }
    }
    double in_ratio = (double)cols / rows;
    int w = cols, h = rows;
    if (in_ratio < ratio[0])
        h = (int)nearbyint(cols / (double)ratio[0]);
    else if (in_ratio > ratio[1])
        w = (int)nearbyint(rows * (double)ratio[1]);
    box[0] = (rows - h) / 2;
    box[1] = (cols - w) / 2;
    box[2] = h;
    box[3] = w;
    *used = k - first;
}

static void draws_are_pure_and_replay_get_params(void **state)
{
    (void)state;
    dp_transform_list l = parse_ok("random-resized-crop:224,flip,crop:4");
    static const int sizes[][2] = {{375, 500}, {500, 375}, {37, 53}, {224, 224}, {120, 1000}};
    int differ = 0;
    for (int s = 0; s < 5; s++) {
        int rows = sizes[s][0], cols = sizes[s][1];
        for (int64_t index = 0; index < 200; index++) {
            dp_transform_draws a, b, c;
            static dp__transform_trace tr;
            dp__transform_draw_traced(&l, 42, 3, index, rows, cols, &a, &tr);
            dp_transform_draw(&l, 42, 3, index, rows, cols, &b);
            assert_memory_equal(&a, &b, sizeof a);
            dp_transform_draw(&l, 42, 3, index + 1, rows, cols, &c);
            differ += memcmp(a.box[0], c.box[0], sizeof a.box[0]) != 0;
            const int *box = a.box[0];
            assert_true(box[0] >= 0 && box[1] >= 0 && box[2] >= 1 && box[3] >= 1);
            assert_true(box[0] + box[2] <= rows && box[1] + box[3] <= cols);
            int want[4], used;
            replay_get_params(&tr, 0, rows, cols, l.t[0].scale, l.t[0].ratio, want, &used);
            if (memcmp(box, want, sizeof want) != 0)
                fail_msg("%dx%d index %lld: box %d,%d %dx%d, get_params' %d,%d %dx%d", rows, cols,
                         (long long)index, box[0], box[1], box[2], box[3], want[0], want[1],
                         want[2], want[3]);
            /* The crop after the resized crop: 224 x 224, padding 4. */
            assert_true(a.box[2][0] >= -4 && a.box[2][0] <= 4 && a.box[2][2] == 224);
        }
    }
    assert_true(differ > 900); /* neighbouring samples draw other boxes */
}

static void fallback_is_the_central_crop(void **state)
{
    (void)state;
    /* Ratios 4 to 5 with 90% of the area never fit a square image: 10
     * tries of 2 uniforms, no randint, then the central crop at ratio 4. */
    dp_transform_list l = parse_ok("random-resized-crop:32:0.9-1:4-5");
    dp_transform_draws d;
    static dp__transform_trace tr;
    dp__transform_draw_traced(&l, 1, 0, 5, 100, 100, &d, &tr);
    assert_int_equal(tr.n, 20);
    for (int i = 0; i < tr.n; i++)
        assert_int_equal(tr.draw[i].bound, 0);
    assert_int_equal(d.box[0][0], 37); /* (100 - round(100 / 4)) // 2 */
    assert_int_equal(d.box[0][1], 0);
    assert_int_equal(d.box[0][2], 25);
    assert_int_equal(d.box[0][3], 100);
    /* Ratios 0.1 to 0.2: the width cut to round(100 * 0.2) = 20. */
    l = parse_ok("random-resized-crop:32:0.9-1:0.1-0.2");
    dp_transform_draw(&l, 1, 0, 5, 100, 100, &d);
    assert_int_equal(d.box[0][0], 0);
    assert_int_equal(d.box[0][1], 40);
    assert_int_equal(d.box[0][2], 100);
    assert_int_equal(d.box[0][3], 20);
}

static void crop_and_flip_draw_what_augment_draws(void **state)
{
    (void)state;
    dp_transform_list l = parse_ok("crop:4,flip");
    dp_augment_options o = {.crop_pad = 4, .flip = true};
    int flips = 0;
    for (int64_t index = 0; index < 500; index++) {
        dp_transform_draws d;
        dp_augment_draw a;
        dp_transform_draw(&l, 9, 2, index, 28, 28, &d);
        dp_augment_draw_for(&o, 9, 2, index, &a);
        assert_int_equal(d.box[0][0], a.top - 4);
        assert_int_equal(d.box[0][1], a.left - 4);
        assert_int_equal(d.flip[1], a.flip);
        flips += a.flip;
    }
    assert_true(flips > 200 && flips < 300);
}

/* A [c, rows, cols] image of bytes. */
static dp_image image_of(int c, int rows, int cols, const uint8_t *px)
{
    return (dp_image){.channels = c, .rows = rows, .cols = cols, .pixels = (uint8_t *)px};
}

static void apply(const char *spec, const dp_image *img, float *out, int out_chw[3])
{
    dp_transform_list l = parse_ok(spec);
    dp_transform_draws d;
    dp_transform_draw(&l, 1, 0, 0, img->rows, img->cols, &d);
    dp_transform_output_shape(&l, img->channels, img->rows, img->cols, out_chw);
    assert_int_equal(dp_transform_apply(&l, &d, img, out), 0);
}

static void resize_of_known_images(void **state)
{
    (void)state;
    static float out[3 * 40 * 60];
    int chw[3];
    /* A constant image stays that constant at any size. */
    static uint8_t flat[3 * 37 * 53];
    memset(flat, 200, sizeof flat);
    dp_image img = image_of(3, 37, 53, flat);
    const char *specs[] = {"resize:20", "resize:10x7", "resize:40x60", "random-resized-crop:31"};
    for (int s = 0; s < 4; s++) {
        apply(specs[s], &img, out, chw);
        for (int i = 0; i < chw[0] * chw[1] * chw[2]; i++)
            if (!(fabsf(out[i] - 200.0f / 255.0f) <= 1e-6f))
                fail_msg("%s: pixel %d is %.9g, not 200/255", specs[s], i, (double)out[i]);
    }
    /* One row 0 1 2 3 halved: support 2 (the triangle widened by the scale
     * 2), outputs at centres 1 and 3: weights 0.75 0.75 0.25 over the
     * first three and 0.25 0.75 0.75 over the last three, normalised by
     * 1.75: 1.25 / 1.75 and 4 / 1.75 (PIL rounds them to 1 and 2). */
    static const uint8_t row[4] = {0, 1, 2, 3};
    img = image_of(1, 1, 4, row);
    apply("resize:1x2", &img, out, chw);
    assert_true(chw[1] == 1 && chw[2] == 2);
    assert_float_equal(out[0] * 255.0f, 1.25f / 1.75f, 1e-5f);
    assert_float_equal(out[1] * 255.0f, 4.0f / 1.75f, 1e-5f);
    /* Doubled: support 1, centres 0.25, 0.75, 1.25, 1.75 of [0, 3]: the
     * edge pixels alone at both ends, 0.75 / 0.25 mixes between. */
    static const uint8_t two[2] = {0, 100};
    img = image_of(1, 1, 2, two);
    apply("resize:1x4", &img, out, chw);
    static const float want[4] = {0, 25, 75, 100};
    for (int i = 0; i < 4; i++)
        assert_float_equal(out[i] * 255.0f, want[i], 1e-4f);
}

static void center_crop_rounds_and_pads_as_torchvision(void **state)
{
    (void)state;
    float out[64];
    int chw[3];
    /* Rows 0..4, columns 0..4: pixel y * 10 + x + 1. */
    uint8_t px[25];
    for (int i = 0; i < 25; i++)
        px[i] = (uint8_t)(i / 5 * 10 + i % 5 + 1);
    dp_image img = image_of(1, 5, 5, px);
    /* (5 - 2) / 2 = 1.5 rounds half to even: offset 2, as int(round(1.5)). */
    apply("center-crop:2", &img, out, chw);
    static const uint8_t two[4] = {23, 24, 33, 34};
    for (int i = 0; i < 4; i++)
        assert_true(out[i] == (float)two[i] / 255.0f);
    /* (5 - 4) / 2 = 0.5 rounds to 0. */
    apply("center-crop:4x3", &img, out, chw);
    assert_true(out[0] == 2.0f / 255.0f); /* row 0, column round(1.0) = 1 */
    /* 5 to 8: padded (8 - 5) // 2 = 1 before, 2 after. */
    apply("center-crop:8", &img, out, chw);
    assert_true(chw[1] == 8 && chw[2] == 8);
    for (int y = 0; y < 8; y++)
        for (int x = 0; x < 8; x++) {
            bool in = y >= 1 && y < 6 && x >= 1 && x < 6;
            float want = in ? (float)((y - 1) * 10 + (x - 1) + 1) / 255.0f : 0.0f;
            assert_true(out[y * 8 + x] == want);
        }
}

static void gray_is_pil_luma_and_rgb_copies(void **state)
{
    (void)state;
    /* Two pixels: (255, 0, 0) and (10, 200, 30): PIL's L is (R 19595 + G
     * 38470 + B 7471 + 0x8000) >> 16: 76 and 124. */
    static const uint8_t px[6] = {255, 10, 0, 200, 0, 30};
    dp_image img = image_of(3, 1, 2, px);
    float out[6];
    int chw[3];
    apply("gray", &img, out, chw);
    assert_int_equal(chw[0], 1);
    assert_true(out[0] == 76.0f / 255.0f && out[1] == 124.0f / 255.0f);
    apply("gray,rgb", &img, out, chw);
    assert_int_equal(chw[0], 3);
    for (int c = 0; c < 3; c++)
        assert_true(out[2 * c] == 76.0f / 255.0f && out[2 * c + 1] == 124.0f / 255.0f);
}

static void crop_and_flip_apply_as_augment(void **state)
{
    (void)state;
    enum { C = 3, H = 9, W = 11 };
    uint8_t px[C * H * W];
    float src[C * H * W], want[C * H * W], got[C * H * W];
    for (int i = 0; i < C * H * W; i++) {
        px[i] = (uint8_t)(i * 37 % 251);
        src[i] = (float)px[i] / 255.0f;
    }
    dp_image img = image_of(C, H, W, px);
    dp_transform_list l = parse_ok("crop:3,flip");
    dp_augment_options o = {.crop_pad = 3, .flip = true};
    for (int64_t index = 0; index < 50; index++) {
        dp_transform_draws d;
        dp_augment_draw a;
        dp_transform_draw(&l, 5, 1, index, H, W, &d);
        dp_augment_draw_for(&o, 5, 1, index, &a);
        assert_int_equal(dp_transform_apply(&l, &d, &img, got), 0);
        dp_augment_apply(&o, &a, C, H, W, src, want);
        assert_memory_equal(got, want, sizeof got);
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_and_str_round_trip),
        cmocka_unit_test(parse_errors_name_the_stage),
        cmocka_unit_test(output_sizes_as_torchvision),
        cmocka_unit_test(draws_are_pure_and_replay_get_params),
        cmocka_unit_test(fallback_is_the_central_crop),
        cmocka_unit_test(crop_and_flip_draw_what_augment_draws),
        cmocka_unit_test(resize_of_known_images),
        cmocka_unit_test(center_crop_rounds_and_pads_as_torchvision),
        cmocka_unit_test(gray_is_pil_luma_and_rgb_copies),
        cmocka_unit_test(crop_and_flip_apply_as_augment),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
