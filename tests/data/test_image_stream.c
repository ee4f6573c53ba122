/* Streamed image folders through the loader's decoder workers: the same
 * batches bit for bit whatever the workers, the prefetch, a resume or the
 * split over ranks (each rank opening only its files), streamed or cached;
 * bad images stop the epoch at their batch or are skipped and counted,
 * under several workers, never hanging. */
#include "imageutil.h"
#include "testutil.h"

#include "dp/core.h"
#include "dp/data.h"
#include "dp/transform.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { TRAIN = 23, SAMPLE = 3 * 14 * 16, BATCH = 5 };

/* The errors logged, whichever thread logged them (a worker's). */
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
    (void)state;
    tu_setup_tmp(state);
    iu_make_folder(tu_tmp, TRAIN, 2);
    return 0;
}

/* Every batch of `epoch` from batch `first` on: rows [total, SAMPLE]
 * floats and labels, for one rank's loader; returns the rows. */
static int64_t epoch_rows(const dp_dataset *ds, const dp_loader_options *lo, int64_t epoch,
                          int64_t first, float *x, int32_t *y, int64_t *skipped)
{
    dp_loader_t *l;
    assert_int_equal(dp_loader_init(&l, ds, lo), 0);
    assert_int_equal(dp_loader_start_epoch(l, epoch, first), 0);
    dp_batch b;
    int64_t rows = 0, expect = first;
    int rc;
    if (skipped)
        *skipped = 0;
    while ((rc = dp_loader_next(l, &b)) == 1) {
        assert_int_equal(b.index, expect++);
        memcpy(x + rows * SAMPLE, b.x, (size_t)(b.rows * SAMPLE) * sizeof *x);
        memcpy(y + rows, b.y, (size_t)b.rows * sizeof *y);
        rows += b.rows;
        if (skipped)
            *skipped += b.skipped;
    }
    assert_int_equal(rc, 0);
    dp_loader_close(l);
    return rows;
}

static void open_folder(dp_dataset *ds, bool cache)
{
    dp_folder_options fo = {.cache = cache};
    assert_int_equal(dp_image_folder_open(tu_tmp, true, &fo, ds), 0);
    assert_int_equal(ds->n, 2 * TRAIN);
    assert_int_equal(ds->channels, 3);
    assert_int_equal(ds->rows, 14);
    assert_int_equal(ds->cols, 16);
    assert_null(ds->pixels);
    assert_null(ds->images);
}

static dp_loader_options shuffled(int workers)
{
    dp_loader_options lo = {.batch_size = BATCH, .shuffle = true, .seed = 7, .workers = workers};
    assert_int_equal(dp_augment_parse("crop:3,flip", &lo.augment), 0);
    assert_int_equal(dp_normalize_parse("0.5,0.25", &lo.augment), 0);
    return lo;
}

/* Nothing is decoded up front but the first image, whose look is not a
 * sample's read; 1, 3 and 8 workers, prefetch 1 and 5, give the same
 * batches bit for bit, as does the cached set. */
static void same_batches_any_workers(void **state)
{
    (void)state;
    dp_dataset ds, cached;
    open_folder(&ds, false);
    assert_int_equal(dp_dataset_files_opened(&ds), 0);
    open_folder(&cached, true);
    size_t total = 2 * TRAIN;
    float *ref = malloc(total * SAMPLE * sizeof *ref), *x = malloc(total * SAMPLE * sizeof *x);
    int32_t yref[2 * TRAIN], y[2 * TRAIN];
    dp_loader_options lo = shuffled(1);
    assert_int_equal(epoch_rows(&ds, &lo, 2, 0, ref, yref, NULL), 2 * TRAIN);
    /* Read once each, and by then every file (the first one's bytes the
     * look's). */
    assert_int_equal(dp_dataset_files_opened(&ds), 2 * TRAIN);
    const int workers[] = {3, 8, 2};
    const int prefetch[] = {1, 5, 0};
    for (size_t k = 0; k < COUNTOF(workers); k++) {
        lo = shuffled(workers[k]);
        lo.prefetch = prefetch[k];
        memset(x, 0xff, total * SAMPLE * sizeof *x);
        assert_int_equal(epoch_rows(k == 2 ? &cached : &ds, &lo, 2, 0, x, y, NULL), 2 * TRAIN);
        assert_memory_equal(y, yref, sizeof y);
        assert_memory_equal(x, ref, total * SAMPLE * sizeof *x);
    }
    /* Another epoch is another draw. */
    lo = shuffled(4);
    epoch_rows(&ds, &lo, 3, 0, x, y, NULL);
    assert_true(memcmp(x, ref, total * SAMPLE * sizeof *x) != 0);
    free(ref);
    free(x);
    dp_dataset_close(&ds);
    dp_dataset_close(&cached);
}

/* Two ranks: rank 0's rows then rank 1's of each batch are the one-rank
 * batch, each rank opening only the files of its rows; a resumed epoch
 * goes on with the same batches. */
static void ranks_read_their_share(void **state)
{
    (void)state;
    size_t total = 2 * TRAIN;
    float *ref = malloc(total * SAMPLE * sizeof *ref), *x[2];
    int32_t yref[2 * TRAIN], y[2][2 * TRAIN];
    dp_dataset one;
    open_folder(&one, false);
    dp_loader_options lo = shuffled(3);
    assert_int_equal(epoch_rows(&one, &lo, 1, 0, ref, yref, NULL), 2 * TRAIN);
    int64_t rows[2], opened[2];
    for (int r = 0; r < 2; r++) {
        dp_dataset ds;
        open_folder(&ds, false);
        x[r] = malloc(total * SAMPLE * sizeof *x[r]);
        lo.rank = r;
        lo.ranks = 2;
        rows[r] = epoch_rows(&ds, &lo, 1, 0, x[r], y[r], NULL);
        opened[r] = dp_dataset_files_opened(&ds);
        dp_dataset_close(&ds);
    }
    /* torch.chunk(5, 2): 3 and 2 rows of each whole batch; the last batch
     * of 46 - 45 = 1 row: 1 and 0. */
    assert_int_equal(rows[0], 9 * 3 + 1);
    assert_int_equal(rows[1], 9 * 2);
    assert_int_equal(opened[0], rows[0]);
    assert_int_equal(opened[1], rows[1]);
    int64_t at[2] = {0, 0}, pos = 0;
    for (int64_t b = 0; b * BATCH < (int64_t)total; b++) {
        int64_t n = b * BATCH + BATCH <= (int64_t)total ? BATCH : (int64_t)total - b * BATCH;
        int64_t size = (n + 1) / 2, part[2] = {size < n ? size : n, n - (size < n ? size : n)};
        for (int r = 0; r < 2; r++) {
            assert_memory_equal(x[r] + at[r] * SAMPLE, ref + pos * SAMPLE,
                                (size_t)(part[r] * SAMPLE) * sizeof(float));
            assert_memory_equal(y[r] + at[r], yref + pos, (size_t)part[r] * sizeof(int32_t));
            at[r] += part[r];
            pos += part[r];
        }
    }
    /* Resumed at batch 4: batches 4.. as the whole epoch had them. */
    lo = shuffled(2);
    int64_t got = epoch_rows(&one, &lo, 1, 4, x[0], y[0], NULL);
    assert_int_equal(got, (int64_t)total - 4 * BATCH);
    assert_memory_equal(x[0], ref + 4 * BATCH * SAMPLE, (size_t)got * SAMPLE * sizeof(float));
    free(ref);
    free(x[0]);
    free(x[1]);
    dp_dataset_close(&one);
}

/* A truncated JPEG and a text file named .jpg among the files, 4 workers:
 * stop ends the epoch at the first batch holding one (the batches before
 * it whole), skip leaves them out and counts them; the loader closes
 * without hanging either way. */
static void bad_images_stop_or_skip(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/train/bright/zz-text.jpg", tu_tmp);
    assert_int_equal(tu_write_file(path, "not a jpeg\n", 11), 0);
    size_t n;
    snprintf(path, sizeof path, "%s/train/bright/2.jpg", tu_tmp);
    uint8_t *jpeg = iu_read_file(path, &n);
    snprintf(path, sizeof path, "%s/train/dark/zz-cut.jpg", tu_tmp);
    assert_int_equal(tu_write_file(path, jpeg, n / 2), 0);
    free(jpeg);

    dp_dataset ds;
    dp_folder_options fo = {0};
    assert_int_equal(dp_image_folder_open(tu_tmp, true, &fo, &ds), 0);
    int64_t total = ds.n;
    assert_int_equal(total, 2 * TRAIN + 2);
    dp_loader_options lo = {.batch_size = BATCH, .shuffle = false, .workers = 4, .prefetch = 3};
    float *x = malloc((size_t)total * SAMPLE * sizeof *x);
    int32_t *y = malloc((size_t)total * sizeof *y);
    /* In file order the text file is the last of class bright (index
     * TRAIN), in batch TRAIN / BATCH. */
    dp_loader_t *l;
    assert_int_equal(dp_loader_init(&l, &ds, &lo), 0);
    assert_int_equal(dp_loader_start_epoch(l, 0, 0), 0);
    dp_batch b;
    int rc;
    int64_t good = 0;
    logged[0] = '\0';
    dp_log_set(keep_errors, NULL);
    while ((rc = dp_loader_next(l, &b)) == 1)
        good++;
    dp_log_set(NULL, NULL);
    assert_int_equal(rc, DP_EFORMAT);
    assert_int_equal(good, TRAIN / BATCH);
    assert_non_null(strstr(logged, "zz-text.jpg: not a PNG or JPEG"));
    /* The end stays the end; a new epoch starts cleanly. */
    assert_int_equal(dp_loader_next(l, &b), 0);
    assert_int_equal(dp_loader_start_epoch(l, 0, 0), 0);
    assert_int_equal(dp_loader_next(l, &b), 1);
    dp_loader_close(l); /* with workers mid-epoch */

    lo.bad_images = DP_BAD_IMAGES_SKIP;
    int64_t skipped;
    int64_t rows = epoch_rows(&ds, &lo, 0, 0, x, y, &skipped);
    assert_int_equal(skipped, 2);
    assert_int_equal(rows, total - 2);
    /* The good samples are all there, in order: labels 0 then 1. */
    for (int64_t i = 0; i < rows; i++)
        assert_int_equal(y[i], i < TRAIN ? 0 : 1);
    free(x);
    free(y);
    dp_dataset_close(&ds);
    remove(path);
    snprintf(path, sizeof path, "%s/train/bright/zz-text.jpg", tu_tmp);
    remove(path);
}

/* Images of another size than the first, without a stage that fixes the
 * size: an error when the sample is read, naming the file and what to
 * add; with a fixed-size list the sample has its size. */
static void sizes_need_a_fixing_stage(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/train/dark/zz-small.png", tu_tmp);
    uint8_t px[3 * 12 * 10] = {0};
    iu_write_png(path, 3, 12, 10, px);
    dp_dataset ds;
    dp_folder_options fo = {0};
    assert_int_equal(dp_image_folder_open(tu_tmp, true, &fo, &ds), 0);
    float *out = malloc(SAMPLE * sizeof *out);
    assert_int_equal(dp_dataset_read(&ds, 0, 0, 0, out), 0);
    int rc = dp_dataset_read(&ds, ds.n - 1, 0, 0, out);
    assert_true(rc < 0);
    assert_non_null(strstr(dp_last_error(), "zz-small.png"));
    assert_non_null(strstr(dp_last_error(), "random-resized-crop"));
    dp_dataset_close(&ds);

    dp_transform_list tl;
    assert_int_equal(dp_transform_parse("resize:12,center-crop:10", &tl), 0);
    fo.transform = &tl;
    assert_int_equal(dp_image_folder_open(tu_tmp, true, &fo, &ds), 0);
    assert_int_equal(ds.rows, 10);
    assert_int_equal(ds.cols, 10);
    float *small = malloc(3 * 10 * 10 * sizeof *small);
    assert_int_equal(dp_dataset_read(&ds, ds.n - 1, 0, 0, small), 0);
    free(small);
    free(out);
    dp_dataset_close(&ds);
    remove(path);
}

/* Images of assorted sizes through RandomResizedCrop and flip: the same
 * batches for 1, 3 and 8 workers, and streamed or cached (JPEGs at full
 * size: --jpeg-scale off), whatever the thread timing. */
static void transforms_same_any_workers(void **state)
{
    (void)state;
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/sizes", tu_tmp);
    const int sizes[][2] = {{40, 30}, {23, 57}, {64, 64}, {31, 18}, {50, 90}, {17, 17}};
    for (int c = 0; c < 2; c++) {
        snprintf(path, sizeof path, "%s/train/c%d", dir, c);
        char cmd[4300];
        snprintf(cmd, sizeof cmd, "mkdir -p %s", path);
        assert_int_equal(system(cmd), 0);
        for (size_t i = 0; i < COUNTOF(sizes); i++) {
            int w = sizes[i][0], h = sizes[i][1];
            uint8_t *px = malloc((size_t)(3 * w * h));
            for (int k = 0; k < 3 * w * h; k++)
                px[k] = (uint8_t)(k * 7 + c * 50 + (int)i * 13);
            snprintf(path, sizeof path, "%s/train/c%d/%zu.%s", dir, c, i, i % 2 ? "jpg" : "png");
            if (i % 2)
                iu_write_jpeg(path, 3, w, h, px, 90);
            else
                iu_write_png(path, 3, w, h, px);
            free(px);
        }
    }
    dp_transform_list tl;
    assert_int_equal(dp_transform_parse("random-resized-crop:12,flip", &tl), 0);
    dp_dataset streamed, cached;
    dp_folder_options fo = {.transform = &tl, .jpeg_scale = DP_JPEG_SCALE_OFF};
    assert_int_equal(dp_image_folder_open(dir, true, &fo, &streamed), 0);
    fo.cache = true;
    assert_int_equal(dp_image_folder_open(dir, true, &fo, &cached), 0);
    assert_int_equal(streamed.rows, 12);
    assert_int_equal(streamed.cols, 12);
    enum { N = 12, S = 3 * 12 * 12 };
    float ref[N * S], x[N * S];
    int32_t yref[N], y[N];
    const int workers[] = {1, 3, 8, 2};
    for (size_t k = 0; k < COUNTOF(workers); k++) {
        dp_loader_options lo = {.batch_size = 5, .shuffle = true, .seed = 3, .workers = workers[k]};
        dp_loader_t *l;
        assert_int_equal(dp_loader_init(&l, k == 3 ? &cached : &streamed, &lo), 0);
        assert_int_equal(dp_loader_start_epoch(l, 1, 0), 0);
        dp_batch b;
        int64_t rows = 0;
        while (dp_loader_next(l, &b) == 1) {
            memcpy((k ? x : ref) + rows * S, b.x, (size_t)(b.rows * S) * sizeof(float));
            memcpy((k ? y : yref) + rows, b.y, (size_t)b.rows * sizeof(int32_t));
            rows += b.rows;
        }
        dp_loader_close(l);
        assert_int_equal(rows, N);
        if (k) {
            assert_memory_equal(x, ref, sizeof x);
            assert_memory_equal(y, yref, sizeof y);
        }
    }
    dp_dataset_close(&streamed);
    dp_dataset_close(&cached);
}

/* The first file is opened once in an epoch, as every other: the look
 * at it when the folder opens (the samples' shape) keeps its bytes for
 * sample 0's first read. Written over after the open, it reads in epoch
 * 0 as it was, and its new bytes are met in epoch 1, naming it. */
static void first_file_read_once(void **state)
{
    (void)state;
    size_t total = 2 * TRAIN;
    float *ref = malloc(total * SAMPLE * sizeof *ref), *x = malloc(total * SAMPLE * sizeof *x);
    int32_t yref[2 * TRAIN], y[2 * TRAIN];
    dp_dataset before, ds;
    open_folder(&before, false);
    dp_loader_options lo = shuffled(3);
    assert_int_equal(epoch_rows(&before, &lo, 0, 0, ref, yref, NULL), 2 * TRAIN);
    open_folder(&ds, false);
    char path[4096];
    snprintf(path, sizeof path, "%s/train/bright/0.png", tu_tmp); /* the list's first */
    size_t n;
    uint8_t *kept = iu_read_file(path, &n);
    assert_int_equal(tu_write_file(path, "not an image\n", 13), 0);
    assert_int_equal(epoch_rows(&ds, &lo, 0, 0, x, y, NULL), 2 * TRAIN);
    assert_memory_equal(x, ref, total * SAMPLE * sizeof *x);
    assert_memory_equal(y, yref, sizeof y);
    assert_int_equal(dp_dataset_files_opened(&ds), 2 * TRAIN);
    dp_loader_t *l;
    assert_int_equal(dp_loader_init(&l, &ds, &lo), 0);
    assert_int_equal(dp_loader_start_epoch(l, 1, 0), 0);
    dp_batch b;
    int rc;
    while ((rc = dp_loader_next(l, &b)) == 1)
        ;
    assert_int_equal(rc, DP_EFORMAT);
    assert_non_null(strstr(dp_last_error(), "bright/0.png"));
    dp_loader_close(l);
    assert_int_equal(tu_write_file(path, kept, n), 0);
    free(kept);
    dp_dataset_close(&ds);
    dp_dataset_close(&before);
    free(ref);
    free(x);
}

int main(int argc, char **argv)
{
    /* A hang is a failure, not a stuck suite. */
    alarm(300);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_batches_any_workers), cmocka_unit_test(ranks_read_their_share),
        cmocka_unit_test(bad_images_stop_or_skip), cmocka_unit_test(sizes_need_a_fixing_stage),
        cmocka_unit_test(transforms_same_any_workers), cmocka_unit_test(first_file_read_once)};
    return tu_run(argc, argv, tests, setup, tu_teardown_tmp);
}
