/* Dataset "tar" trained end to end: a folder of images of assorted sizes
 * written as shards, read through RandomResizedCrop and flip in lanes,
 * trained with --split-invariant: 1 device, 2 devices and a run stopped
 * mid-epoch and resumed end with the same weights bit for bit, as they can
 * only if every step saw the same transformed batch. Two ranks, and the
 * accuracy against the folder's: tests/data/cli_tar_train.sh. */
#include "imageutil.h"
#include "testutil.h"

#include "dp/dp.h"
#include "dp/shards.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char shards[4096];

/* 2 classes x 12 training images (and 4 test ones), in shards of 3: 8
 * training shards, 4 lanes of 2 for a batch of 4 (1 row each): 6 steps
 * an epoch. */
static int setup(void **state)
{
    tu_setup_tmp(state);
    char path[4096];
    const int sizes[][2] = {{40, 30}, {23, 57}, {64, 64}, {31, 18}, {50, 90}, {33, 33},
                            {70, 41}, {19, 25}, {45, 60}, {28, 28}, {36, 52}, {61, 29}};
    for (int s = 0; s < 2; s++) {
        for (int c = 0; c < 2; c++) {
            snprintf(path, sizeof path, "mkdir -p %s/f/%s/c%d", tu_tmp, s ? "test" : "train", c);
            assert_int_equal(system(path), 0);
            for (size_t i = 0; i < (s ? 4 : COUNTOF(sizes)); i++) {
                int w = sizes[i][0], h = sizes[i][1];
                uint8_t *px = malloc((size_t)(3 * w * h));
                for (int k = 0; k < 3 * w * h; k++)
                    px[k] = (uint8_t)(c ? 200 - (k % 97) : 30 + (k * 13 + (int)i) % 90);
                snprintf(path, sizeof path, "%s/f/%s/c%d/%zu.%s", tu_tmp, s ? "test" : "train", c,
                         i, i % 3 == 1 ? "jpg" : "png");
                if (i % 3 == 1)
                    iu_write_jpeg(path, 3, w, h, px, 90);
                else
                    iu_write_png(path, 3, w, h, px);
                free(px);
            }
        }
    }
    snprintf(path, sizeof path, "%s/f", tu_tmp);
    snprintf(shards, sizeof shards, "%s/s", tu_tmp);
    dp_shard_write_options wo = {.shard_size = 3};
    assert_int_equal(dp_shards_from_folder(path, shards, &wo), 0);
    return 0;
}

static int64_t stop_at;
static bool stop_at_step(const dp_step_view *v, void *user)
{
    (void)user;
    return v->step == stop_at;
}

static void options(dp_train_options *o, const char *devices, const char *checkpoint)
{
    dp_train_options_default(o);
    o->data.dataset = "tar";
    o->data.data_dir = shards;
    assert_int_equal(dp_transform_parse("random-resized-crop:28,flip", &o->data.train_transform),
                     0);
    assert_int_equal(dp_transform_parse("resize:32,center-crop:28", &o->data.test_transform), 0);
    o->data.batch_size = 4;
    o->data.workers = 3;
    o->data.shuffle_buffer = 12; /* over the lanes (at most 4: they divide batch 4): 3+ each */
    o->run.epochs = 2;
    o->optim.lr = 0.05f;
    o->parallel.devices = devices;
    o->parallel.threads = 1;
    o->numerics.split_invariant = 2;
    o->output.progress = DP_PROGRESS_NEVER;
    o->checkpoint.checkpoint_path = checkpoint;
}

static void same_weights_on_any_split_and_resume(void **state)
{
    (void)state;
    dp_train_options o;
    dp_train_result r;
    char one[4096], two[4096], resumed[4096], other[4096];
    snprintf(one, sizeof one, "%s", tu_tmp_path("one.safetensors"));
    snprintf(two, sizeof two, "%s", tu_tmp_path("two.safetensors"));
    snprintf(resumed, sizeof resumed, "%s", tu_tmp_path("resumed.safetensors"));
    snprintf(other, sizeof other, "%s", tu_tmp_path("other.safetensors"));
    options(&o, "1", one);
    assert_int_equal(dp_train(&o, &r), 0);
    options(&o, "2", two);
    assert_int_equal(dp_train(&o, &r), 0);
    tu_assert_same_tensors(one, two);
    /* Stopped after step 9 of 12 (6 an epoch: batch 3 of epoch 2), then
     * resumed to the end. */
    options(&o, "1", resumed);
    stop_at = 9;
    o.on_step = stop_at_step;
    assert_int_equal(dp_train(&o, &r), DP_EINTR);
    options(&o, "1", resumed);
    o.checkpoint.resume_path = resumed;
    assert_int_equal(dp_train(&o, &r), 0);
    tu_assert_same_tensors(one, resumed);
    /* The shuffle buffer is part of the order: another one trains other
     * weights (the comparisons above can fail). */
    options(&o, "1", other);
    o.data.shuffle_buffer = 1;
    assert_int_equal(dp_train(&o, &r), 0);
    assert_true(tu_max_rel_diff(one, other) > 0);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(same_weights_on_any_split_and_resume)};
    return tu_run(argc, argv, tests, setup, tu_teardown_tmp);
}
