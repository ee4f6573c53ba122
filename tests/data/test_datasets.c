/* The datasets beside Fashion-MNIST: CIFAR-10's binary batches, MNIST, and
 * a program's own arrays, on small files written to a temp dir; and one
 * short dp_train run on an in-memory dataset. */
#include "testutil.h"

#include "dp/dp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

enum { CIFAR_PIX = 3 * 32 * 32, CIFAR_REC = 1 + CIFAR_PIX };

/* The byte of pixel k (0..1023) of plane c (0 R, 1 G, 2 B) of record r:
 * different in every plane and record. */
static uint8_t cifar_byte(int r, int c, int k)
{
    return (uint8_t)(r * 31 + c * 101 + k * 7);
}

/* `n` records labelled labels[0..n) into `path`, then `extra` more bytes. */
static void write_cifar(const char *path, int first, int n, const uint8_t *labels, size_t extra)
{
    size_t len = (size_t)n * CIFAR_REC + extra;
    uint8_t *buf = calloc(len ? len : 1, 1);
    assert_non_null(buf);
    for (int r = 0; r < n; r++) {
        uint8_t *rec = buf + (size_t)r * CIFAR_REC;
        rec[0] = labels[r];
        for (int c = 0; c < 3; c++)
            for (int k = 0; k < 1024; k++)
                rec[1 + c * 1024 + k] = cifar_byte(first + r, c, k);
    }
    assert_int_equal(tu_write_file(path, buf, len), 0);
    free(buf);
}

/* Sample r of ds is record r of the files: plane c in channel c. */
static void check_cifar_samples(const dp_dataset *ds, const uint8_t *labels, int n)
{
    assert_int_equal(ds->n, n);
    assert_int_equal(ds->channels, 3);
    assert_int_equal(ds->rows, 32);
    assert_int_equal(ds->cols, 32);
    for (int r = 0; r < n; r++) {
        assert_int_equal(ds->labels[r], labels[r]);
        for (int c = 0; c < 3; c++)
            for (int k = 0; k < 1024; k++) {
                float got = ds->images[((size_t)r * 3 + (size_t)c) * 1024 + (size_t)k];
                if (got != (float)cifar_byte(r, c, k) / 255.0f)
                    fail_msg("record %d channel %d pixel %d: %.9g, expected %d/255", r, c, k, got,
                             cifar_byte(r, c, k));
            }
    }
}

static void test_cifar10_test_split(void **state)
{
    (void)state;
    const uint8_t labels[] = {3, 0, 9};
    write_cifar(tu_tmp_path("test_batch.bin"), 0, 3, labels, 0);
    dp_dataset ds;
    int rc = dp_cifar10_load(tu_tmp, false, &ds);
    if (rc != 0)
        fail_msg("%s", dp_last_error());
    check_cifar_samples(&ds, labels, 3);
    assert_int_equal(dp_dataset_channels(&ds), 3);
    dp_dataset_close(&ds);
    assert_null(ds.images);
}

/* The train split from the tarball's folder: five files, read in order. */
static void test_cifar10_train_split_subfolder(void **state)
{
    (void)state;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/cifar-10-batches-bin", tu_tmp);
    assert_int_equal(mkdir(dir, 0755), 0);
    const uint8_t labels[] = {1, 2, 3, 4, 5, 6};
    const int counts[5] = {1, 1, 2, 1, 1};
    for (int i = 0, first = 0; i < 5; first += counts[i], i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/data_batch_%d.bin", dir, i + 1);
        write_cifar(path, first, counts[i], labels + first, 0);
    }
    dp_dataset ds;
    int rc = dp_cifar10_load(tu_tmp, true, &ds);
    if (rc != 0)
        fail_msg("%s", dp_last_error());
    check_cifar_samples(&ds, labels, 6);
    dp_dataset_close(&ds);
    /* By name, as the trainer loads it. */
    rc = dp_dataset_load("cifar10", tu_tmp, true, &ds);
    assert_int_equal(rc, 0);
    assert_int_equal(ds.n, 6);
    dp_dataset_close(&ds);
}

/* test_batch.bin of n records and `extra` bytes fails with `want`, naming
 * the file and saying `what`. */
static void expect_cifar_error(int n, const uint8_t *labels, size_t extra, int want,
                               const char *what)
{
    const char *path = tu_tmp_path("test_batch.bin");
    write_cifar(path, 0, n, labels, extra);
    dp_dataset ds;
    assert_int_equal(dp_cifar10_load(tu_tmp, false, &ds), want);
    tu_assert_error_mentions(path);
    tu_assert_error_mentions(what);
    assert_null(ds.images);
}

static void test_cifar10_errors(void **state)
{
    (void)state;
    tu_quiet_log();
    dp_dataset ds;
    const char *path = tu_tmp_path("test_batch.bin");

    /* Missing: the file looked for, and where to get it. */
    assert_int_equal(dp_cifar10_load(tu_tmp, false, &ds), DP_ENOENT);
    tu_assert_error_mentions(path);
    tu_assert_error_mentions("https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz");
    assert_null(ds.images);
    assert_int_equal(dp_cifar10_load(tu_tmp, true, &ds), DP_ENOENT);
    tu_assert_error_mentions("data_batch_1.bin");
    assert_int_equal(dp_cifar10_load(NULL, false, &ds), DP_EINVAL);
    tu_assert_error_mentions("cifar-10-binary.tar.gz");

    /* A record one byte short (3072 bytes); two whole records and a short
     * one; a label of 10 in record 1; an empty file. */
    const uint8_t labels[] = {4, 10, 2};
    expect_cifar_error(0, labels, CIFAR_REC - 1, DP_ETRUNC, "truncated record");
    expect_cifar_error(2, labels, 100, DP_ETRUNC, "truncated record");
    expect_cifar_error(3, labels, 0, DP_EFORMAT, "label 10 at record 1");
    expect_cifar_error(0, labels, 0, DP_ETRUNC, "truncated record");

    assert_int_equal(dp_dataset_load("cifar100", tu_tmp, false, &ds), DP_EINVAL);
    tu_assert_error_mentions("`dataset` cifar100 is unknown");
}

/* MNIST's test split as IDX files: images [4, 3, 2] gzipped, labels plain. */
static void write_mnist_t10k(const uint8_t *pixels, const uint8_t *labels)
{
    const uint32_t idims[] = {4, 3, 2}, ldims[] = {4};
    size_t len;
    uint8_t *file = tu_make_idx(3, idims, pixels, &len);
    gzFile f = gzopen(tu_tmp_path("t10k-images-idx3-ubyte.gz"), "wb");
    assert_non_null(f);
    assert_int_equal(gzwrite(f, file, (unsigned)len), (int)len);
    assert_int_equal(gzclose(f), Z_OK);
    free(file);
    file = tu_make_idx(1, ldims, labels, &len);
    assert_int_equal(tu_write_file(tu_tmp_path("t10k-labels-idx1-ubyte"), file, len), 0);
    free(file);
}

static void test_mnist(void **state)
{
    (void)state;
    tu_quiet_log();
    dp_dataset ds;
    /* No directory, and a directory without the files: where to get them. */
    assert_int_equal(dp_mnist_load(NULL, false, &ds), DP_EINVAL);
    tu_assert_error_mentions("https://yann.lecun.com/exdb/mnist/");
    assert_int_equal(dp_mnist_load(tu_tmp, false, &ds), DP_ENOENT);
    tu_assert_error_mentions(tu_tmp_path("t10k-images-idx3-ubyte.gz"));
    tu_assert_error_mentions("https://yann.lecun.com/exdb/mnist/");
    tu_assert_error_mentions("ossci-datasets");

    uint8_t pixels[24];
    for (int i = 0; i < 24; i++)
        pixels[i] = (uint8_t)(i * 11);
    const uint8_t labels[] = {7, 2, 1, 0};
    write_mnist_t10k(pixels, labels);
    int rc = dp_mnist_load(tu_tmp, false, &ds);
    if (rc != 0)
        fail_msg("%s", dp_last_error());
    assert_int_equal(ds.n, 4);
    assert_int_equal(ds.channels, 1);
    assert_int_equal(ds.rows, 3);
    assert_int_equal(ds.cols, 2);
    for (int i = 0; i < 24; i++)
        assert_true(ds.images[i] == (float)pixels[i] / 255.0f);
    for (int i = 0; i < 4; i++)
        assert_int_equal(ds.labels[i], labels[i]);
    dp_dataset_close(&ds);

    /* A label of 10 is refused, naming the file and the index. */
    const uint8_t bad[] = {7, 2, 1, 10};
    write_mnist_t10k(pixels, bad);
    assert_int_equal(dp_dataset_load("mnist", tu_tmp, false, &ds), DP_EFORMAT);
    tu_assert_error_mentions(tu_tmp_path("t10k-labels-idx1-ubyte"));
    tu_assert_error_mentions("index 3");
}

/* ---- in-memory datasets ----------------------------------------------------- */

enum { MN = 10, MC = 3, MH = 2, MW = 2, MPIX = MC * MH * MW };

/* Every batch of an epoch: row r is sample y[r] exactly (`want` [MN, MPIX]),
 * and each sample comes once. */
static void check_loader_gives_samples(const dp_dataset *ds, const float *want)
{
    dp_loader_t *l;
    dp_loader_options lo = {.batch_size = 4, .shuffle = true, .seed = 3};
    assert_int_equal(dp_loader_init(&l, ds, &lo), 0);
    assert_int_equal(dp_loader_num_batches(l), 3);
    for (int epoch = 0; epoch < 2; epoch++) {
        assert_int_equal(dp_loader_start_epoch(l, epoch, 0), 0);
        int seen[MN] = {0};
        dp_batch b;
        int64_t total = 0;
        while (dp_loader_next(l, &b) == 1) {
            for (int64_t r = 0; r < b.n; r++) {
                int32_t id = b.y[r];
                assert_true(id >= 0 && id < MN);
                seen[id]++;
                assert_memory_equal(b.x + r * MPIX, want + id * MPIX, MPIX * sizeof(float));
            }
            total += b.n;
        }
        assert_int_equal(total, MN);
        for (int i = 0; i < MN; i++)
            assert_int_equal(seen[i], 1);
    }
    dp_loader_close(l);
}

static void test_memory_float_and_bytes(void **state)
{
    (void)state;
    float images[MN * MPIX], scaled[MN * MPIX];
    uint8_t bytes[MN * MPIX];
    int32_t labels[MN];
    for (int i = 0; i < MN; i++) {
        labels[i] = i; /* the label names the sample */
        for (int k = 0; k < MPIX; k++) {
            images[i * MPIX + k] = (float)(i * 100 + k) - 0.5f;
            bytes[i * MPIX + k] = (uint8_t)(i * 20 + k);
            scaled[i * MPIX + k] = (float)(uint8_t)(i * 20 + k) / 255.0f;
        }
    }
    dp_dataset ds;
    int rc = dp_dataset_from_memory(&ds, MN, MC, MH, MW, images, NULL, labels, MN);
    if (rc != 0)
        fail_msg("%s", dp_last_error());
    assert_int_equal(ds.n, MN);
    assert_int_equal(ds.channels, MC);
    assert_int_equal(ds.rows, MH);
    assert_int_equal(ds.cols, MW);
    assert_true(ds.images != images); /* a copy */
    check_loader_gives_samples(&ds, images);
    dp_dataset_close(&ds);

    rc = dp_dataset_from_memory(&ds, MN, MC, MH, MW, NULL, bytes, labels, MN);
    assert_int_equal(rc, 0);
    check_loader_gives_samples(&ds, scaled);
    dp_dataset_close(&ds);
}

static void test_memory_refused(void **state)
{
    (void)state;
    tu_quiet_log();
    float images[4 * 2] = {0};
    int32_t labels[4] = {0, 1, 2, 1};
    dp_dataset ds;
    /* Label 2 of 2 classes, at index 2. */
    assert_int_equal(dp_dataset_from_memory(&ds, 4, 1, 1, 2, images, NULL, labels, 2), DP_EINVAL);
    tu_assert_error_mentions("label 2 at index 2");
    assert_null(ds.images);
    labels[2] = -1;
    assert_int_equal(dp_dataset_from_memory(&ds, 4, 1, 1, 2, images, NULL, labels, 3), DP_EINVAL);
    tu_assert_error_mentions("label -1 at index 2");
    labels[2] = 0;
    uint8_t bytes[8] = {0};
    assert_int_equal(dp_dataset_from_memory(&ds, 4, 1, 1, 2, images, bytes, labels, 3), DP_EINVAL);
    assert_int_equal(dp_dataset_from_memory(&ds, 4, 1, 1, 2, NULL, NULL, labels, 3), DP_EINVAL);
    assert_int_equal(dp_dataset_from_memory(&ds, 4, 0, 1, 2, images, NULL, labels, 3), DP_EINVAL);
    assert_int_equal(dp_dataset_from_memory(&ds, 4, 1, 1, 2, images, NULL, labels, 3), 0);
    dp_dataset_close(&ds);
}

/* ---- training on an in-memory dataset ---------------------------------------- */

enum { TN = 96, TEST_N = 40, SIDE = 28 };

/* Class c (0..9): a bright 6x6 square at a place of its own, on noise. */
static void make_digits(int n, uint32_t seed, uint8_t *bytes, int32_t *labels)
{
    for (int i = 0; i < n; i++) {
        int c = (int)((uint32_t)i * 7 + seed) % 10;
        labels[i] = c;
        uint8_t *img = bytes + (size_t)i * SIDE * SIDE;
        for (int p = 0; p < SIDE * SIDE; p++)
            img[p] = (uint8_t)((p * 13 + i * 29 + (int)seed) % 40);
        int y0 = 2 + (c / 5) * 12, x0 = 2 + (c % 5) * 5;
        for (int y = 0; y < 6; y++)
            for (int x = 0; x < 6 && x0 + x < SIDE; x++)
                img[(y0 + y) * SIDE + x0 + x] = 250;
    }
}

static void test_train_in_memory(void **state)
{
    (void)state;
    static uint8_t train_px[TN * SIDE * SIDE], test_px[TEST_N * SIDE * SIDE];
    int32_t train_y[TN], test_y[TEST_N];
    make_digits(TN, 0, train_px, train_y);
    make_digits(TEST_N, 5, test_px, test_y);
    dp_dataset train, test;
    assert_int_equal(dp_dataset_from_memory(&train, TN, 1, SIDE, SIDE, NULL, train_px, train_y, 10),
                     0);
    assert_int_equal(
        dp_dataset_from_memory(&test, TEST_N, 1, SIDE, SIDE, NULL, test_px, test_y, 10), 0);

    /* dptrain train --model lenet, on the program's data: 3 steps. */
    dp_train_options o;
    dp_train_options_default(&o);
    o.net.model = "lenet";
    o.parallel.devices = "1";
    o.parallel.threads = 1;
    o.data.batch_size = 32;
    o.optim.lr = 0.1f;
    o.run.epochs = 1;
    o.run.seed = 2;
    o.data.data_dir = "/nonexistent-dptrain-data"; /* never read */
    o.train_set = &train;
    o.test_set = &test;
    dp_train_result r;
    int rc = dp_train(&o, &r);
    if (rc != 0)
        fail_msg("dp_train: %s", dp_last_error());
    printf("in-memory lenet: train loss %.4f, train acc %.4f, test acc %.4f\n", r.train_loss,
           r.train_acc, r.test_acc);
    assert_int_equal(r.epochs_done, 1);
    assert_true(isfinite(r.train_loss));
    /* Near ln 10 = 2.303 at the start; anything this side of 10 is sane. */
    assert_true(r.train_loss > 0.1 && r.train_loss < 10);
    assert_true(r.train_acc >= 0 && r.train_acc <= 1);
    /* Counted over the 40 test samples: a whole number of them. */
    double correct = r.test_acc * TEST_N;
    assert_true(r.test_acc >= 0 && r.test_acc <= 1);
    tu_assert_close(correct, round(correct), 0, 1e-6);
    /* The training set is untouched. */
    assert_true(train.images[0] == (float)train_px[0] / 255.0f);

    /* Only one of the two sets, or sets of different sample shapes. */
    tu_quiet_log();
    o.test_set = NULL;
    assert_int_equal(dp_train(&o, &r), DP_EINVAL);
    tu_assert_error_mentions("both a training and a test set");
    dp_dataset small;
    assert_int_equal(dp_dataset_from_memory(&small, 2, 1, 27, 27, NULL, test_px, test_y, 10), 0);
    o.test_set = &small;
    assert_int_equal(dp_train(&o, &r), DP_EINVAL);
    tu_assert_error_mentions("[1, 27, 27]");
    tu_assert_error_mentions("[1, 28, 28]");
    dp_dataset_close(&small);
    dp_dataset_close(&train);
    dp_dataset_close(&test);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cifar10_test_split, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_cifar10_train_split_subfolder, tu_setup_tmp,
                                        tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_cifar10_errors, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_mnist, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test(test_memory_float_and_bytes),
        cmocka_unit_test(test_memory_refused),
        cmocka_unit_test(test_train_in_memory),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
