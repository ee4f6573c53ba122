/* Augmentation and normalisation (src/data/augment.c): the crop, the flip
 * and the normalisation of known images against arrays written out by
 * hand, the options' syntax, the draws as a function of (seed, epoch,
 * index) alone, and the loader applying them whatever the batch split.
 * tests/data/cli_augment_torchvision.sh holds the same transforms to
 * torchvision's; test_augment_train trains with them. */
#include "testutil.h"

#include "dp/core.h"
#include "dp/data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { C = 2, H = 3, W = 4, PIX = C * H * W };

/* Channel c, row y, column x holds c * 100 + y * 10 + x + 1: never 0, so
 * padding shows, and each value says where it came from. */
static void known_image(float *img)
{
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                img[(c * H + y) * W + x] = (float)(c * 100 + y * 10 + x + 1);
}

static void assert_image(const float *got, const float *want)
{
    for (int i = 0; i < PIX; i++)
        if (got[i] != want[i])
            fail_msg("pixel %d (channel %d, row %d, column %d): %g, expected %g", i, i / (H * W),
                     i / W % H, i % W, (double)got[i], (double)want[i]);
}

static void crop_and_flip_by_hand(void **state)
{
    (void)state;
    float src[PIX], out[PIX];
    known_image(src);
    dp_augment_options o = {.crop_pad = 1, .flip = true};

    /* Padded by 1, cropped at (top 0, left 2): one row down, one column
     * left, zeros where the padding comes in. */
    static const float shifted[PIX] = {0, 0, 0, 0, 2,   3,   4,   0, 12,  13,  14,  0,
                                       0, 0, 0, 0, 102, 103, 104, 0, 112, 113, 114, 0};
    dp_augment_apply(&o, &(dp_augment_draw){.top = 0, .left = 2}, C, H, W, src, out);
    assert_image(out, shifted);
    /* The same crop, then flipped: each row reversed. */
    static const float flipped[PIX] = {0, 0, 0, 0, 0, 4,   3,   2,   0, 14,  13,  12,
                                       0, 0, 0, 0, 0, 104, 103, 102, 0, 114, 113, 112};
    dp_augment_apply(&o, &(dp_augment_draw){.top = 0, .left = 2, .flip = true}, C, H, W, src, out);
    assert_image(out, flipped);
    /* Padding 2 at (top 4, left 0): two rows up, two columns right. */
    o.crop_pad = 2;
    static const float corner[PIX] = {0, 0, 21,  22,  0, 0, 0, 0, 0, 0, 0, 0,
                                      0, 0, 121, 122, 0, 0, 0, 0, 0, 0, 0, 0};
    dp_augment_apply(&o, &(dp_augment_draw){.top = 4, .left = 0}, C, H, W, src, out);
    assert_image(out, corner);
    /* The crop at (pad, pad) unflipped is the image; no draw is too. */
    dp_augment_apply(&o, &(dp_augment_draw){.top = 2, .left = 2}, C, H, W, src, out);
    assert_image(out, src);
    dp_augment_apply(&o, NULL, C, H, W, src, out);
    assert_image(out, src);
    /* A flip alone reverses the rows of the whole image. */
    static const float mirror[PIX] = {4,   3,   2,   1,   14,  13,  12,  11,  24,  23,  22,  21,
                                      104, 103, 102, 101, 114, 113, 112, 111, 124, 123, 122, 121};
    dp_augment_options f = {.flip = true};
    dp_augment_apply(&f, &(dp_augment_draw){.flip = true}, C, H, W, src, out);
    assert_image(out, mirror);
}

static void normalisation_is_exact(void **state)
{
    (void)state;
    float src[PIX], out[PIX], want[PIX];
    known_image(src);
    /* Means and stds whose (x - m) / s is exact in float. */
    dp_augment_options o = {.norm_channels = 2, .mean = {0.5f, 100}, .std = {0.25f, 4}};
    dp_augment_apply(&o, NULL, C, H, W, src, out);
    for (int i = 0; i < PIX; i++)
        want[i] = i < H * W ? (src[i] - 0.5f) * 4 : (src[i] - 100) / 4;
    assert_image(out, want);
    /* After the crop: the padding is a zero pixel, normalised like any. */
    o.crop_pad = 1;
    dp_augment_apply(&o, &(dp_augment_draw){.top = 0, .left = 2}, C, H, W, src, out);
    assert_true(out[0] == -2.0f && out[H * W] == -25.0f);
    assert_true(out[4] == (2 - 0.5f) * 4 && out[H * W + 4] == (102 - 100) / 4.0f);
    /* One pair for every channel, as Normalize((m,), (s,)) broadcasts. */
    dp_augment_options one = {.norm_channels = 1, .mean = {1}, .std = {2}};
    dp_augment_apply(&one, NULL, C, H, W, src, out);
    for (int i = 0; i < PIX; i++)
        assert_true(out[i] == (src[i] - 1) / 2);
}

static void options_parse_and_check(void **state)
{
    (void)state;
    tu_quiet_log();
    dp_augment_options o;
    memset(&o, 0, sizeof o);
    char buf[256];
    assert_int_equal(dp_augment_parse("crop:4,flip", &o), 0);
    assert_true(o.crop_pad == 4 && o.flip);
    assert_int_equal(dp_augment_parse("flip", &o), 0);
    assert_true(o.crop_pad == 0 && o.flip);
    assert_int_equal(dp_augment_parse("crop:2", &o), 0);
    assert_true(o.crop_pad == 2 && !o.flip);
    assert_int_equal(dp_augment_parse("flip,crop:3", &o), 0);
    assert_string_equal(dp_augment_str(&o, buf, sizeof buf), "crop:3,flip");
    const char *bad[] = {"",         "crop", "crop:", "crop:0",    "crop:-1",       "crop: 4",
                         "crop:4x",  "flop", "flip,", "flip,flip", "crop:1,crop:2", "crop:1025",
                         "none,flip"};
    for (size_t i = 0; i < COUNTOF(bad); i++) {
        dp_augment_options before = o;
        if (dp_augment_parse(bad[i], &o) != DP_EINVAL)
            fail_msg("--augment '%s' was taken", bad[i]);
        assert_memory_equal(&o, &before, sizeof o);
    }
    assert_int_equal(dp_augment_parse("none", &o), 0);
    assert_true(o.crop_pad == 0 && !o.flip);

    assert_int_equal(dp_normalize_parse("0.4914,0.4822,0.4465,0.2470,0.2435,0.2616", &o), 0);
    assert_int_equal(o.norm_channels, 3);
    assert_true(o.mean[0] == 0.4914f && o.mean[2] == 0.4465f && o.std[0] == 0.2470f &&
                o.std[2] == 0.2616f);
    assert_int_equal(dp_augment_check(&o, 3), 0);
    assert_int_equal(dp_augment_check(&o, 1), DP_EINVAL);
    tu_assert_error_mentions("3 means and standard deviations for samples of 1 channel");
    assert_string_equal(dp_normalize_str(&o, buf, sizeof buf),
                        "0.4914,0.4822,0.4465,0.247,0.2435,0.2616");
    dp_augment_options back = {0};
    assert_int_equal(dp_normalize_parse(buf, &back), 0);
    assert_memory_equal(back.mean, o.mean, sizeof o.mean);
    assert_memory_equal(back.std, o.std, sizeof o.std);
    const char *badn[] = {"",         "0.5",      "0.5,0", "0.5,-1",
                          "0.5,,0.5", "0.5,0.5,", "nan,1", "0.1,0.2,0.3"};
    for (size_t i = 0; i < COUNTOF(badn); i++)
        if (dp_normalize_parse(badn[i], &o) != DP_EINVAL)
            fail_msg("--normalize '%s' was taken", badn[i]);
    assert_int_equal(dp_normalize_parse("0.2860,0.3530", &o), 0);
    assert_true(o.norm_channels == 1 && o.mean[0] == 0.2860f && o.std[0] == 0.3530f);
    assert_int_equal(dp_augment_check(&o, 3), 0); /* broadcast */
    o.std[0] = 0;
    assert_int_equal(dp_augment_check(&o, 1), DP_EINVAL);
    tu_assert_error_mentions("the std above 0");
    o = (dp_augment_options){.crop_pad = -1};
    assert_int_equal(dp_augment_check(&o, 1), DP_EINVAL);
    tu_assert_error_mentions("padding -1");
    assert_string_equal(dp_augment_str(&(dp_augment_options){0}, buf, sizeof buf), "none");
    assert_string_equal(dp_normalize_str(&(dp_augment_options){0}, buf, sizeof buf), "none");
    o.norm_channels = 1;
    assert_int_equal(dp_normalize_parse("none", &o), 0);
    assert_int_equal(o.norm_channels, 0);
}

enum { NDRAW = 2000 };

static void draws_are_a_function_of_seed_epoch_and_index(void **state)
{
    (void)state;
    dp_augment_options o = {.crop_pad = 4, .flip = true};
    int seen[9] = {0}, flips = 0, same_epoch = 0, same_seed = 0;
    for (int64_t i = 0; i < NDRAW; i++) {
        dp_augment_draw a, b, e, s;
        dp_augment_draw_for(&o, 7, 3, i, &a);
        dp_augment_draw_for(&o, 7, 3, i, &b);
        assert_memory_equal(&a, &b, sizeof a);
        assert_true(a.top >= 0 && a.top <= 8 && a.left >= 0 && a.left <= 8);
        seen[a.top]++;
        flips += a.flip;
        dp_augment_draw_for(&o, 7, 4, i, &e);
        same_epoch += a.top == e.top && a.left == e.left && a.flip == e.flip;
        dp_augment_draw_for(&o, 8, 3, i, &s);
        same_seed += a.top == s.top && a.left == s.left && a.flip == s.flip;
    }
    /* Uniform: each of the 9 offsets near 2000 / 9, the flip near half;
     * another epoch or seed draws anew (the same three draws by chance:
     * 1 in 162). */
    for (int k = 0; k < 9; k++)
        if (seen[k] < 150 || seen[k] > 300)
            fail_msg("top %d drawn %d times of %d", k, seen[k], NDRAW);
    assert_in_range(flips, 900, 1100);
    printf("draws: the next epoch repeats %d of %d samples' draws, another seed %d\n", same_epoch,
           NDRAW, same_seed);
    assert_true(same_epoch < 50 && same_seed < 50);
    /* What is off draws nothing. */
    dp_augment_options flip_only = {.flip = true};
    dp_augment_draw d;
    dp_augment_draw_for(&flip_only, 7, 3, 5, &d);
    assert_true(d.top == 0 && d.left == 0);
}

enum { N = 53 };

/* Sample i holds i * 1000 + k in its pixel k and label i, so a batch row
 * says which sample it is. */
static dp_dataset make_ds(void)
{
    dp_dataset ds = {.n = N, .channels = C, .rows = H, .cols = W};
    ds.images = malloc((size_t)N * PIX * sizeof(float));
    ds.labels = malloc((size_t)N * sizeof(int32_t));
    for (int64_t i = 0; i < N; i++) {
        for (int k = 0; k < PIX; k++)
            ds.images[i * PIX + k] = (float)(i * 1000 + k);
        ds.labels[i] = (int32_t)i;
    }
    return ds;
}

/* Every sample of epoch `epoch` (from batch `first` on) is sample
 * label's image with the draws for (seed, epoch, label): whatever the
 * batch size, prefetch depth or order the thread filled them in. */
static int64_t check_epoch(dp_loader_t *l, const dp_dataset *ds, const dp_augment_options *o,
                           uint64_t seed, int64_t epoch, int64_t first)
{
    assert_int_equal(dp_loader_start_epoch(l, epoch, first), 0);
    dp_batch b;
    int64_t rows = 0;
    float want[PIX];
    while (dp_loader_next(l, &b) == 1) {
        for (int64_t r = 0; r < b.n; r++) {
            int32_t id = b.y[r];
            dp_augment_draw d;
            dp_augment_draw_for(o, seed, epoch, id, &d);
            dp_augment_apply(o, &d, C, H, W, ds->images + (size_t)id * PIX, want);
            assert_memory_equal(b.x + r * PIX, want, sizeof want);
        }
        rows += b.n;
    }
    return rows;
}

static void loader_applies_the_draws_whatever_the_split(void **state)
{
    (void)state;
    dp_dataset ds = make_ds();
    dp_augment_options o = {
        .crop_pad = 1, .flip = true, .norm_channels = 2, .mean = {3, 5}, .std = {2, 0.5f}};
    int64_t sizes[] = {1, 7, 16, N};
    for (size_t k = 0; k < COUNTOF(sizes); k++) {
        dp_loader_t *l;
        dp_loader_options lo = {.batch_size = sizes[k],
                                .shuffle = true,
                                .seed = 11,
                                .prefetch = 1 + (int)k,
                                .augment = o};
        assert_int_equal(dp_loader_init(&l, &ds, &lo), 0);
        for (int64_t e = 0; e < 3; e++)
            assert_int_equal(check_epoch(l, &ds, &o, 11, e, 0), N);
        /* A resumed epoch: from batch 1 on, the same images. */
        assert_int_equal(check_epoch(l, &ds, &o, 11, 1, 1), N - sizes[k]);
        dp_loader_close(l);
    }
    /* The test set's loader: normalised, neither cropped nor flipped. */
    dp_augment_options norm = {.norm_channels = 2, .mean = {3, 5}, .std = {2, 0.5f}};
    dp_loader_t *l;
    dp_loader_options lo = {.batch_size = 10, .augment = norm};
    assert_int_equal(dp_loader_init(&l, &ds, &lo), 0);
    assert_int_equal(check_epoch(l, &ds, &norm, 0, 0, 0), N);
    dp_loader_close(l);
    /* A normalisation for other channels is refused at the start. */
    tu_quiet_log();
    lo.augment = (dp_augment_options){.norm_channels = 3, .mean = {0, 0, 0}, .std = {1, 1, 1}};
    assert_int_equal(dp_loader_init(&l, &ds, &lo), DP_EINVAL);
    tu_assert_error_mentions("3 means and standard deviations for samples of 2 channels");
    free(ds.images);
    free(ds.labels);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(crop_and_flip_by_hand),
        cmocka_unit_test(normalisation_is_exact),
        cmocka_unit_test(options_parse_and_check),
        cmocka_unit_test(draws_are_a_function_of_seed_epoch_and_index),
        cmocka_unit_test(loader_applies_the_draws_whatever_the_split),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
