/* Dataset "tar" through the loader: a folder written as shards by
 * dp_shards_from_folder, its batches made of B/L rows of each lane, each
 * row the lane's sample decoded; the same batches bit for bit for 1 or 8
 * workers, split over 2 ranks (each opening only its lanes' shards) and
 * resumed mid-epoch; layouts the ranks cannot read refused; a shard cut
 * after the index pass stopping the epoch with its line, or skipped and
 * counted, never hanging. */
#include "imageutil.h"
#include "shardsutil.h"
#include "testutil.h"

#include "dp/core.h"
#include "dp/data.h"
#include "dp/shards.h"
#include "dp/transform.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* iu_make_folder's 2 x 23 training images of 16 x 14, in shards of 4:
 * 11 of 4 and one of 2. Lanes 4, batch 8: 2 rows of each lane a batch;
 * every lane holds 3 shards, at least 2 + 4 + 4 samples: 5 batches. */
enum { TRAIN = 23, SHARD = 4, SHARDS = 12, BATCH = 8, LANES = 4, BATCHES = 5 };
enum { SAMPLE = 3 * 14 * 16, ROWS = BATCHES * BATCH };

static char shards[4096];

static char logged[8192];
static void keep_errors(dp_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level == DP_LOG_ERROR && strlen(logged) + strlen(msg) + 2 < sizeof logged) {
        strcat(logged, msg);
        strcat(logged, "\n");
    }
}

static int setup(void **state)
{
    tu_setup_tmp(state);
    char folder[4096];
    snprintf(folder, sizeof folder, "%s/folder", tu_tmp);
    snprintf(shards, sizeof shards, "%s/shards", tu_tmp);
    iu_make_folder(folder, TRAIN, 3);
    dp_shard_write_options wo = {.shard_size = SHARD};
    assert_int_equal(dp_shards_from_folder(folder, shards, &wo), 0);
    return 0;
}

static void open_tar(dp_dataset *ds, const dp_transform_list *t, int64_t buffer, bool train)
{
    dp_shard_dataset_options so = {.transform = t,
                                   .shuffle_buffer = buffer,
                                   .lanes = train ? LANES : 0,
                                   .every_sample = !train};
    assert_int_equal(dp_shard_dataset_open(shards, train, &so, ds), 0);
    assert_int_equal(ds->n, train ? 2 * TRAIN : 6);
    assert_int_equal(ds->channels, 3);
    assert_int_equal(ds->classes, 2);
    assert_string_equal(ds->class_names[0], "bright");
    assert_int_equal(dp_dataset_files_opened(ds), 0);
}

/* One rank's rows of every batch from `first` on; returns the rows. */
static int64_t epoch_rows(const dp_dataset *ds, const dp_loader_options *lo, int64_t epoch,
                          int64_t first, float *x, int32_t *y, int64_t *skipped)
{
    dp_loader_t *l;
    assert_int_equal(dp_loader_init(&l, ds, lo), 0);
    assert_int_equal(dp_loader_start_epoch(l, epoch, first), 0);
    dp_batch b;
    int64_t rows = 0, expect = first;
    int rc;
    *skipped = 0;
    while ((rc = dp_loader_next(l, &b)) == 1) {
        assert_int_equal(b.index, expect++);
        memcpy(x + rows * SAMPLE, b.x, (size_t)(b.rows * SAMPLE) * sizeof *x);
        memcpy(y + rows, b.y, (size_t)b.rows * sizeof *y);
        rows += b.rows;
        *skipped += b.skipped;
    }
    assert_int_equal(rc, 0);
    dp_loader_close(l);
    return rows;
}

/* Each batch's rows [j*2, j*2 + 2) are lane j's next two samples as
 * dp_shard_lane_next emits them, decoded: the set's shuffle buffer of 11
 * split over the 4 lanes, ceil(11 / 4) = 3 a lane (not 11, nor 2); the
 * epoch is 5 batches, the remaining samples of each lane left out.
 * Shuffle off: the lanes in shard order. */
static void batches_are_the_lanes(void **state)
{
    (void)state;
    dp_dataset ds;
    open_tar(&ds, NULL, 11, true);
    dp_shard_set_t *set;
    assert_int_equal(dp_shard_set_open(&set, shards, "train"), 0);
    float *x = malloc(ROWS * SAMPLE * sizeof *x), *want = malloc(SAMPLE * sizeof *want);
    int32_t y[ROWS];
    dp_transform_list none = {0};
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        dp_loader_options lo = {.batch_size = BATCH, .shuffle = shuffle, .seed = 7, .workers = 3};
        int64_t skipped;
        dp_loader_t *l;
        assert_int_equal(dp_loader_init(&l, &ds, &lo), 0);
        assert_int_equal(dp_loader_num_batches(l), BATCHES);
        assert_int_equal(dp_loader_num_samples(l), ROWS);
        dp_loader_close(l);
        assert_int_equal(epoch_rows(&ds, &lo, 1, 0, x, y, &skipped), ROWS);
        for (int j = 0; j < LANES; j++) {
            dp_shard_lane_args a = {.seed = 7,
                                    .epoch = 1,
                                    .lane = j,
                                    .lanes = LANES,
                                    .shuffle_buffer = shuffle ? 3 : 1,
                                    .shuffle = shuffle};
            dp_shard_lane_t *lane;
            assert_int_equal(dp_shard_lane_open(&lane, set, &a), 0);
            for (int64_t k = 0; k < BATCHES * 2; k++) {
                dp_shard_sample s;
                assert_int_equal(dp_shard_lane_next(lane, &s), 1);
                int chw[3];
                assert_int_equal(dp_transform_decode(&none, DP_JPEG_SCALE_AUTO, s.image,
                                                     s.image_size, s.member, 3, 7, 1, s.id, want,
                                                     SAMPLE, chw),
                                 0);
                int64_t row = k / 2 * BATCH + j * 2 + k % 2;
                assert_int_equal(y[row], s.label);
                assert_memory_equal(x + row * SAMPLE, want, SAMPLE * sizeof *want);
            }
            dp_shard_lane_close(lane);
        }
    }
    free(x);
    free(want);
    dp_shard_set_close(set);
    dp_dataset_close(&ds);
}

static dp_loader_options shuffled(int workers, int prefetch)
{
    dp_loader_options lo = {
        .batch_size = BATCH, .shuffle = true, .seed = 11, .workers = workers, .prefetch = prefetch};
    assert_int_equal(dp_normalize_parse("0.5,0.25", &lo.augment), 0);
    return lo;
}

/* Random crops and flips drawn per sample: 1, 3 and 8 workers give the
 * same batches; two ranks' rows are the one-rank batches, each rank
 * opening only its two lanes' shards; resumed at batch 3, the epoch goes
 * on with the same batches. */
static void same_batches_workers_ranks_resume(void **state)
{
    (void)state;
    dp_transform_list t;
    assert_int_equal(dp_transform_parse("random-resized-crop:14x16,flip", &t), 0);
    float *ref = malloc(ROWS * SAMPLE * sizeof *ref), *x = malloc(ROWS * SAMPLE * sizeof *x);
    int32_t yref[ROWS], y[ROWS];
    int64_t skipped;
    dp_dataset ds;
    open_tar(&ds, &t, 5, true);
    dp_loader_options lo = shuffled(1, 1);
    assert_int_equal(epoch_rows(&ds, &lo, 2, 0, ref, yref, &skipped), ROWS);
    assert_int_equal(dp_dataset_files_opened(&ds), SHARDS);
    const int workers[] = {3, 8}, prefetch[] = {1, 5};
    for (size_t k = 0; k < COUNTOF(workers); k++) {
        lo = shuffled(workers[k], prefetch[k]);
        memset(x, 0xff, ROWS * SAMPLE * sizeof *x);
        assert_int_equal(epoch_rows(&ds, &lo, 2, 0, x, y, &skipped), ROWS);
        assert_memory_equal(y, yref, sizeof y);
        assert_memory_equal(x, ref, ROWS * SAMPLE * sizeof *x);
    }
    /* Another epoch is another order. */
    epoch_rows(&ds, &lo, 3, 0, x, y, &skipped);
    assert_true(memcmp(x, ref, ROWS * SAMPLE * sizeof *x) != 0);
    /* Resumed: batches 3 and 4 as the whole epoch had them. */
    lo = shuffled(4, 2);
    assert_int_equal(epoch_rows(&ds, &lo, 2, 3, x, y, &skipped), 2 * BATCH);
    assert_memory_equal(x, ref + 3 * BATCH * SAMPLE, 2 * BATCH * SAMPLE * sizeof *x);
    assert_memory_equal(y, yref + 3 * BATCH, 2 * BATCH * sizeof *y);
    dp_dataset_close(&ds);

    dp_shard_set_t *set;
    assert_int_equal(dp_shard_set_open(&set, shards, "train"), 0);
    for (int r = 0; r < 2; r++) {
        open_tar(&ds, &t, 5, true);
        lo = shuffled(3, 2);
        lo.rank = r;
        lo.ranks = 2;
        assert_int_equal(epoch_rows(&ds, &lo, 2, 0, x, y, &skipped), ROWS / 2);
        for (int b = 0; b < BATCHES; b++) {
            int64_t at = b * BATCH + r * BATCH / 2;
            assert_memory_equal(x + b * BATCH / 2 * SAMPLE, ref + at * SAMPLE,
                                BATCH / 2 * SAMPLE * sizeof *x);
            assert_memory_equal(y + b * BATCH / 2, yref + at, BATCH / 2 * sizeof *y);
        }
        /* Its lanes 2r and 2r + 1: 3 shards each, and no other. */
        int mine = 0, got[SHARDS];
        for (int j = 2 * r; j < 2 * r + 2; j++) {
            dp_shard_lane_args a = {.seed = 11,
                                    .epoch = 2,
                                    .lane = j,
                                    .lanes = LANES,
                                    .shuffle_buffer = 5,
                                    .shuffle = true};
            mine += dp_shard_lane_shards(set, &a, got);
        }
        assert_int_equal(mine, SHARDS / 2);
        assert_int_equal(dp_dataset_files_opened(&ds), mine);
        dp_dataset_close(&ds);
    }
    dp_shard_set_close(set);
    free(ref);
    free(x);
}

/* The test split: one lane in set order, every sample, two ranks each
 * keeping its chunk of each batch. */
static void test_split_every_sample(void **state)
{
    (void)state;
    dp_dataset ds;
    open_tar(&ds, NULL, 0, false);
    float x[6 * SAMPLE], part[6 * SAMPLE], want[SAMPLE];
    int32_t y[6], py[6];
    int64_t written[6]; /* the test files (3 a class) in the shards' order */
    dp_shards_write_order(0, written, 6);
    int64_t skipped;
    dp_loader_options lo = {.batch_size = 4, .workers = 2};
    assert_int_equal(epoch_rows(&ds, &lo, 0, 0, x, y, &skipped), 6);
    /* A lane is read once an epoch: a sample asked for again is refused. */
    logged[0] = '\0';
    dp_log_set(keep_errors, NULL);
    for (int64_t i = 0; i < 6; i++) {
        assert_int_equal(dp_dataset_read(&ds, i, 0, 0, want), DP_EINVAL);
        assert_int_equal(y[i], written[i] < 3 ? 0 : 1);
    }
    dp_log_set(NULL, NULL);
    assert_non_null(strstr(logged, "lane 0's sample 5 asked for again in epoch 0"));
    /* Batches of 4 and 2: rank 0 rows 0, 1, 4; rank 1 rows 2, 3, 5. */
    const int64_t rows[2][3] = {{0, 1, 4}, {2, 3, 5}};
    for (int r = 0; r < 2; r++) {
        lo.rank = r;
        lo.ranks = 2;
        assert_int_equal(epoch_rows(&ds, &lo, 0, 0, part, py, &skipped), 3);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(py[i], y[rows[r][i]]);
            assert_memory_equal(part + i * SAMPLE, x + rows[r][i] * SAMPLE, sizeof want);
        }
    }
    dp_dataset_close(&ds);
}

/* What the ranks cannot read as whole lanes, or a batch not made of
 * them, is one line at the loader's start; the default lanes are the
 * largest L <= 8 dividing the batch (8) and the shards (12) that keeps
 * 9/10 of one lane's batches: 4, 3 shards each, 5 batches; for a batch of
 * 6, 6 lanes (1 row each) would keep 6 of one lane's 7 batches, so 3
 * lanes of 4 shards (2 rows each): 7 batches. */
static void layouts_refused(void **state)
{
    (void)state;
    dp_dataset ds;
    open_tar(&ds, NULL, 3, true);
    dp_loader_t *l;
    struct {
        int64_t batch;
        int ranks;
        const char *line;
    } bad[] = {{6, 1, "`batch_size` 6 is not a multiple of `shard_lanes` 4"},
               {8, 3, "3 ranks do not divide `shard_lanes` 4"},
               {400, 1, "fewer than batch_size / shard_lanes = 100"}};
    for (size_t k = 0; k < COUNTOF(bad); k++) {
        dp_loader_options lo = {.batch_size = bad[k].batch, .ranks = bad[k].ranks};
        logged[0] = '\0';
        dp_log_set(keep_errors, NULL);
        assert_int_equal(dp_loader_init(&l, &ds, &lo), DP_EINVAL);
        dp_log_set(NULL, NULL);
        assert_non_null(strstr(logged, bad[k].line));
    }
    dp_dataset_close(&ds);
    dp_shard_dataset_options so = {.lanes = 13};
    assert_int_equal(dp_shard_dataset_open(shards, true, &so, &ds), 0);
    dp_loader_options lo = {.batch_size = 13};
    logged[0] = '\0';
    dp_log_set(keep_errors, NULL);
    assert_int_equal(dp_loader_init(&l, &ds, &lo), DP_EINVAL);
    dp_log_set(NULL, NULL);
    assert_non_null(strstr(logged, "`shard_lanes` 13: the set has 12 shards"));
    dp_dataset_close(&ds);
    so.lanes = 0;
    assert_int_equal(dp_shard_dataset_open(shards, true, &so, &ds), 0);
    const int64_t batch[] = {8, 6}, batches[] = {BATCHES, 7};
    for (int k = 0; k < 2; k++) {
        lo.batch_size = batch[k];
        assert_int_equal(dp_loader_init(&l, &ds, &lo), 0);
        assert_int_equal(dp_loader_num_batches(l), batches[k]);
        dp_loader_close(l);
    }
    dp_dataset_close(&ds);
}

/* A shard cut after the index pass: stop ends the epoch at the first
 * batch that meets the cut, with the shard's line; skip leaves the rest
 * of that lane out, counted; 4 workers, no hang. */
static void cut_shard_stops_or_is_skipped(void **state)
{
    (void)state;
    dp_dataset ds;
    open_tar(&ds, NULL, 1, true);
    char path[4200];
    snprintf(path, sizeof path, "%s/train-000005.tar", shards);
    su_truncate(path, 3000);
    float *x = malloc(ROWS * SAMPLE * sizeof *x);
    int32_t y[ROWS];
    dp_loader_options lo = {.batch_size = BATCH, .workers = 4, .prefetch = 3};
    dp_loader_t *l;
    assert_int_equal(dp_loader_init(&l, &ds, &lo), 0);
    assert_int_equal(dp_loader_start_epoch(l, 0, 0), 0);
    dp_batch b;
    int rc, good = 0;
    logged[0] = '\0';
    dp_log_set(keep_errors, NULL);
    while ((rc = dp_loader_next(l, &b)) == 1)
        good++;
    dp_log_set(NULL, NULL);
    assert_true(rc < 0);
    assert_true(good < BATCHES);
    assert_non_null(strstr(logged, "train-000005.tar"));
    assert_int_equal(dp_loader_next(l, &b), 0);
    dp_loader_close(l);

    lo.bad_images = DP_BAD_IMAGES_SKIP;
    int64_t skipped;
    int64_t rows = epoch_rows(&ds, &lo, 0, 0, x, y, &skipped);
    assert_true(skipped > 0);
    assert_int_equal(rows + skipped, ROWS);
    free(x);
    dp_dataset_close(&ds);
}

int main(int argc, char **argv)
{
    alarm(300); /* a hang is a failure */
    const struct CMUnitTest tests[] = {cmocka_unit_test(batches_are_the_lanes),
                                       cmocka_unit_test(same_batches_workers_ranks_resume),
                                       cmocka_unit_test(test_split_every_sample),
                                       cmocka_unit_test(layouts_refused),
                                       cmocka_unit_test(cut_shard_stops_or_is_skipped)};
    return tu_run(argc, argv, tests, setup, tu_teardown_tmp);
}
