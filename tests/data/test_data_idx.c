/* IDX reading (plain, gzip, and every kind of broken file), and
 * Fashion-MNIST loading from its IDX files. */
#include "testutil.h"

#include "dp/core.h"
#include "dp/data.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* ---- helpers -------------------------------------------------------------- */

/* An IDX image of unsigned bytes: header then `data`. Caller frees. */
static void write_gz(const char *path, const void *data, size_t n)
{
    gzFile f = gzopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(gzwrite(f, data, (unsigned)n), (int)n);
    assert_int_equal(gzclose(f), Z_OK);
}

static uint8_t *read_whole(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)len);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return buf;
}

/* Bytes that deflate cannot shrink, so gzip stores them and a flipped byte
 * is only caught by the CRC. */
static void fill_random(uint8_t *p, size_t n, uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 0);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)dp_rng_u64(&rng);
}

/* Reads `path` expecting failure `want`, with the file's name in the log. */
static void expect_idx_error(const char *path, int want)
{
    dp_idx idx;
    int rc = dp_idx_read(path, &idx);
    if (rc != want)
        fail_msg("%s: got %d (%s), wanted %d (%s); log: %s", path, rc, dp_strerror(rc), want,
                 dp_strerror(want), dp_last_error());
    assert_null(idx.data);
    tu_assert_error_mentions(path);
}

/* ---- IDX ------------------------------------------------------------------ */

static void check_idx(const char *path, int ndims, const uint32_t *dims, const uint8_t *data)
{
    dp_idx idx;
    int rc = dp_idx_read(path, &idx);
    if (rc != 0)
        fail_msg("%s: %s: %s", path, dp_strerror(rc), dp_last_error());
    assert_int_equal(idx.type, 0x08);
    assert_int_equal(idx.ndims, ndims);
    size_t n = 1;
    for (int i = 0; i < ndims; i++) {
        assert_int_equal(idx.dims[i], dims[i]);
        n *= dims[i];
    }
    assert_int_equal(idx.size, n);
    assert_memory_equal(idx.data, data, n);
    dp_idx_close(&idx);
    assert_null(idx.data);
    assert_int_equal(idx.size, 0);
}

static void test_idx_plain_roundtrip(void **state)
{
    (void)state;
    uint8_t data[2 * 3 * 4];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 37 + 5);
    const uint32_t dims3[] = {2, 3, 4};
    size_t len;
    uint8_t *file = tu_make_idx(3, dims3, data, &len);
    assert_int_equal(tu_write_file(tu_tmp_path("a-idx3"), file, len), 0);
    check_idx(tu_tmp_path("a-idx3"), 3, dims3, data);
    free(file);

    const uint32_t dims1[] = {24};
    file = tu_make_idx(1, dims1, data, &len);
    assert_int_equal(tu_write_file(tu_tmp_path("a-idx1"), file, len), 0);
    check_idx(tu_tmp_path("a-idx1"), 1, dims1, data);
    free(file);

    const uint32_t dims4[] = {1, 2, 3, 4};
    file = tu_make_idx(4, dims4, data, &len);
    assert_int_equal(tu_write_file(tu_tmp_path("a-idx4"), file, len), 0);
    check_idx(tu_tmp_path("a-idx4"), 4, dims4, data);
    free(file);
}

static void test_idx_gz_roundtrip(void **state)
{
    (void)state;
    enum { N = 5000 };
    uint8_t *data = malloc(N);
    fill_random(data, N, 1);
    const uint32_t dims[] = {50, 10, 10};
    size_t len;
    uint8_t *file = tu_make_idx(3, dims, data, &len);
    write_gz(tu_tmp_path("b-idx3.gz"), file, len);
    check_idx(tu_tmp_path("b-idx3.gz"), 3, dims, data);
    /* Told apart by the magic, not the name. */
    write_gz(tu_tmp_path("b-noext"), file, len);
    check_idx(tu_tmp_path("b-noext"), 3, dims, data);
    free(file);
    free(data);
}

static void test_idx_truncated_plain(void **state)
{
    (void)state;
    tu_quiet_log();
    uint8_t data[24] = {0};
    const uint32_t dims[] = {2, 3, 4};
    size_t len;
    uint8_t *file = tu_make_idx(3, dims, data, &len);
    assert_int_equal(tu_write_file(tu_tmp_path("short-idx3"), file, len - 4), 0);
    expect_idx_error(tu_tmp_path("short-idx3"), DP_ETRUNC);
    tu_assert_error_mentions("expected 24");
    tu_assert_error_mentions("found 20");
    /* Cut inside the sizes, and inside the magic. */
    assert_int_equal(tu_write_file(tu_tmp_path("short-hdr"), file, 9), 0);
    expect_idx_error(tu_tmp_path("short-hdr"), DP_ETRUNC);
    assert_int_equal(tu_write_file(tu_tmp_path("short-magic"), file, 2), 0);
    expect_idx_error(tu_tmp_path("short-magic"), DP_ETRUNC);
    assert_int_equal(tu_write_file(tu_tmp_path("empty"), file, 0), 0);
    expect_idx_error(tu_tmp_path("empty"), DP_ETRUNC);
    free(file);
}

static void test_idx_truncated_gz(void **state)
{
    (void)state;
    tu_quiet_log();
    enum { N = 20000 };
    uint8_t *data = malloc(N);
    fill_random(data, N, 2);
    const uint32_t dims[] = {N};
    size_t len;
    uint8_t *file = tu_make_idx(1, dims, data, &len);
    write_gz(tu_tmp_path("full.gz"), file, len);
    size_t gz_len;
    uint8_t *gz = read_whole(tu_tmp_path("full.gz"), &gz_len);

    /* Cut in half. */
    assert_int_equal(tu_write_file(tu_tmp_path("half.gz"), gz, gz_len / 2), 0);
    dp_idx idx;
    int rc = dp_idx_read(tu_tmp_path("half.gz"), &idx);
    assert_true(rc == DP_ETRUNC || rc == DP_EFORMAT);
    tu_assert_error_mentions("half.gz");
    assert_null(idx.data);

    /* Only the 8-byte trailer (CRC, length) missing: all data is there. */
    assert_int_equal(tu_write_file(tu_tmp_path("notrailer.gz"), gz, gz_len - 8), 0);
    expect_idx_error(tu_tmp_path("notrailer.gz"), DP_ETRUNC);

    /* Cut inside the gzip header. */
    assert_int_equal(tu_write_file(tu_tmp_path("gzhdr.gz"), gz, 5), 0);
    rc = dp_idx_read(tu_tmp_path("gzhdr.gz"), &idx);
    assert_true(rc == DP_ETRUNC || rc == DP_EFORMAT);
    tu_assert_error_mentions("gzhdr.gz");

    /* One byte flipped in the (stored) data: the CRC catches it. */
    gz[gz_len / 2] ^= 0x5a;
    assert_int_equal(tu_write_file(tu_tmp_path("corrupt.gz"), gz, gz_len), 0);
    expect_idx_error(tu_tmp_path("corrupt.gz"), DP_EFORMAT);
    tu_assert_error_mentions("corrupt");

    /* A gzip magic followed by garbage. */
    const uint8_t junk[] = {0x1f, 0x8b, 0x77, 0x00, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    assert_int_equal(tu_write_file(tu_tmp_path("junk.gz"), junk, sizeof junk), 0);
    rc = dp_idx_read(tu_tmp_path("junk.gz"), &idx);
    assert_true(rc == DP_ETRUNC || rc == DP_EFORMAT);
    tu_assert_error_mentions("junk.gz");

    free(gz);
    free(file);
    free(data);
}

static void test_idx_bad_header(void **state)
{
    (void)state;
    tu_quiet_log();
    const uint8_t wrong_magic[] = {0x01, 0x02, 0x08, 0x01, 0, 0, 0, 1, 7};
    assert_int_equal(tu_write_file(tu_tmp_path("magic"), wrong_magic, sizeof wrong_magic), 0);
    expect_idx_error(tu_tmp_path("magic"), DP_EFORMAT);
    tu_assert_error_mentions("magic");
    tu_assert_error_mentions("expected 00 00 08");
    tu_assert_error_mentions("found 01 02 08 01");

    const uint8_t bad_type[] = {0, 0, 0x0d, 0x01, 0, 0, 0, 1, 7, 7, 7, 7};
    assert_int_equal(tu_write_file(tu_tmp_path("type"), bad_type, sizeof bad_type), 0);
    expect_idx_error(tu_tmp_path("type"), DP_EFORMAT);
    tu_assert_error_mentions("0x0d");

    const uint8_t zero_dims[] = {0, 0, 0x08, 0x00, 7};
    assert_int_equal(tu_write_file(tu_tmp_path("dims0"), zero_dims, sizeof zero_dims), 0);
    expect_idx_error(tu_tmp_path("dims0"), DP_EFORMAT);
    tu_assert_error_mentions("dimensions");

    const uint8_t five_dims[] = {0, 0, 0x08, 0x05, 0, 0, 0, 1, 0, 0, 0, 1, 0,
                                 0, 0, 1,    0,    0, 0, 1, 0, 0, 0, 1, 7};
    assert_int_equal(tu_write_file(tu_tmp_path("dims5"), five_dims, sizeof five_dims), 0);
    expect_idx_error(tu_tmp_path("dims5"), DP_EFORMAT);

    /* 2^32-1 squared: absurd, and must not overflow. */
    const uint8_t huge[] = {0, 0, 0x08, 0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1};
    assert_int_equal(tu_write_file(tu_tmp_path("huge"), huge, sizeof huge), 0);
    expect_idx_error(tu_tmp_path("huge"), DP_EFORMAT);
    /* 2 GiB in one dimension. */
    const uint8_t big[] = {0, 0, 0x08, 0x01, 0x80, 0, 0, 0, 1};
    assert_int_equal(tu_write_file(tu_tmp_path("big"), big, sizeof big), 0);
    expect_idx_error(tu_tmp_path("big"), DP_EFORMAT);

    const uint8_t trailing[] = {0, 0, 0x08, 0x01, 0, 0, 0, 2, 7, 8, 9};
    assert_int_equal(tu_write_file(tu_tmp_path("trailing"), trailing, sizeof trailing), 0);
    expect_idx_error(tu_tmp_path("trailing"), DP_EFORMAT);
    tu_assert_error_mentions("trailing");
    write_gz(tu_tmp_path("trailing.gz"), trailing, sizeof trailing);
    expect_idx_error(tu_tmp_path("trailing.gz"), DP_EFORMAT);

    /* Wrong magic inside a valid gzip stream. */
    write_gz(tu_tmp_path("magic.gz"), wrong_magic, sizeof wrong_magic);
    expect_idx_error(tu_tmp_path("magic.gz"), DP_EFORMAT);
    tu_assert_error_mentions("found 01 02 08 01");
}

static void test_idx_missing(void **state)
{
    (void)state;
    tu_quiet_log();
    expect_idx_error(tu_tmp_path("does-not-exist.gz"), DP_ENOENT);
    expect_idx_error("/nonexistent-dir-dptrain/x-idx1-ubyte", DP_ENOENT);
    dp_idx_close(NULL);
}

/* ---- Fashion-MNIST ---------------------------------------------------------- */

static void write_split(const char *dir, const char *split, uint32_t n_images, uint32_t n_labels,
                        const uint8_t *labels, bool gz)
{
    char path[512];
    const uint32_t idims[] = {n_images, 2, 3};
    uint8_t *pixels = malloc(n_images * 6);
    for (uint32_t i = 0; i < n_images * 6; i++)
        pixels[i] = (uint8_t)(i * 51);
    size_t len;
    uint8_t *file = tu_make_idx(3, idims, pixels, &len);
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte%s", dir, split, gz ? ".gz" : "");
    if (gz)
        write_gz(path, file, len);
    else
        assert_int_equal(tu_write_file(path, file, len), 0);
    free(file);
    free(pixels);
    const uint32_t ldims[] = {n_labels};
    file = tu_make_idx(1, ldims, labels, &len);
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, split);
    assert_int_equal(tu_write_file(path, file, len), 0);
    free(file);
}

static void test_fashion_mnist_missing(void **state)
{
    (void)state;
    tu_quiet_log();
    dp_dataset ds;
    assert_int_equal(dp_fashion_mnist_load("/nonexistent-dir-dptrain", true, &ds), DP_ENOENT);
    tu_assert_error_mentions("/nonexistent-dir-dptrain: no such directory");
    assert_null(ds.images);
    /* A directory without the files. */
    assert_int_equal(dp_fashion_mnist_load(tu_tmp, true, &ds), DP_ENOENT);
    tu_assert_error_mentions("train-images-idx3-ubyte");
    assert_int_equal(dp_fashion_mnist_load(tu_tmp, false, &ds), DP_ENOENT);
    tu_assert_error_mentions("t10k-images-idx3-ubyte");
}

static void test_fashion_mnist_synthetic(void **state)
{
    (void)state;
    tu_quiet_log();
    const uint8_t labels[] = {3, 0, 9, 1, 5};
    write_split(tu_tmp, "t10k", 5, 5, labels, false);
    dp_dataset ds;
    int rc = dp_fashion_mnist_load(tu_tmp, false, &ds);
    if (rc != 0)
        fail_msg("%s", dp_last_error());
    assert_int_equal(ds.n, 5);
    assert_int_equal(ds.rows, 2);
    assert_int_equal(ds.cols, 3);
    for (int i = 0; i < 30; i++)
        assert_true(ds.images[i] == (float)(uint8_t)(i * 51) / 255.0f);
    assert_true(ds.images[5] == 1.0f);
    assert_true(ds.images[0] == 0.0f);
    for (int i = 0; i < 5; i++)
        assert_int_equal(ds.labels[i], labels[i]);
    dp_dataset_close(&ds);
    assert_null(ds.images);
    assert_null(ds.labels);
    dp_dataset_close(&ds);
    dp_dataset_close(NULL);

    /* Train split: images gzipped, labels plain; counts disagree. */
    write_split(tu_tmp, "train", 4, 5, labels, true);
    assert_int_equal(dp_fashion_mnist_load(tu_tmp, true, &ds), DP_EFORMAT);
    tu_assert_error_mentions("train-labels-idx1-ubyte");
    assert_null(ds.images);

    /* A label of 10. */
    const uint8_t bad[] = {1, 2, 10, 3};
    write_split(tu_tmp, "train", 4, 4, bad, true);
    assert_int_equal(dp_fashion_mnist_load(tu_tmp, true, &ds), DP_EFORMAT);
    tu_assert_error_mentions("train-labels-idx1-ubyte");
    tu_assert_error_mentions("index 2");

    /* Images with the wrong number of dimensions. */
    const uint32_t dims[] = {4};
    size_t len;
    uint8_t *file = tu_make_idx(1, dims, bad, &len);
    write_gz(tu_tmp_path("train-images-idx3-ubyte.gz"), file, len);
    free(file);
    assert_int_equal(dp_fashion_mnist_load(tu_tmp, true, &ds), DP_EFORMAT);
    tu_assert_error_mentions("train-images-idx3-ubyte.gz");
}

static void test_fashion_mnist_labels(void **state)
{
    (void)state;
    assert_string_equal(dp_fashion_mnist_label(0), "t-shirt");
    assert_string_equal(dp_fashion_mnist_label(1), "trouser");
    assert_string_equal(dp_fashion_mnist_label(2), "pullover");
    assert_string_equal(dp_fashion_mnist_label(3), "dress");
    assert_string_equal(dp_fashion_mnist_label(4), "coat");
    assert_string_equal(dp_fashion_mnist_label(5), "sandal");
    assert_string_equal(dp_fashion_mnist_label(6), "shirt");
    assert_string_equal(dp_fashion_mnist_label(7), "sneaker");
    assert_string_equal(dp_fashion_mnist_label(8), "bag");
    assert_string_equal(dp_fashion_mnist_label(9), "ankle boot");
    assert_non_null(dp_fashion_mnist_label(10));
    assert_non_null(dp_fashion_mnist_label(-1));
}

static void test_fashion_mnist_real(void **state)
{
    (void)state;
    if (!tu_have_fashion_mnist()) {
        tu_skip("Fashion-MNIST not found in " DP_FASHION_MNIST_DIR
                " (apt-get install dataset-fashion-mnist)");
    }
    const struct {
        bool train;
        int64_t n;
    } splits[] = {{true, 60000}, {false, 10000}};
    for (size_t s = 0; s < 2; s++) {
        dp_dataset ds;
        int rc = dp_fashion_mnist_load(NULL, splits[s].train, &ds);
        if (rc != 0)
            fail_msg("%s", dp_last_error());
        assert_int_equal(ds.n, splits[s].n);
        assert_int_equal(ds.rows, 28);
        assert_int_equal(ds.cols, 28);
        float lo = 1, hi = 0;
        for (int64_t i = 0; i < ds.n * 28 * 28; i++) {
            lo = ds.images[i] < lo ? ds.images[i] : lo;
            hi = ds.images[i] > hi ? ds.images[i] : hi;
        }
        assert_true(lo == 0.0f);
        assert_true(hi == 1.0f);
        int64_t count[10] = {0};
        for (int64_t i = 0; i < ds.n; i++) {
            assert_in_range(ds.labels[i], 0, 9);
            count[ds.labels[i]]++;
        }
        /* Fashion-MNIST is balanced. */
        for (int c = 0; c < 10; c++)
            assert_int_equal(count[c], ds.n / 10);

        /* One shuffled epoch over the real data sees every sample once. */
        dp_loader_t *l;
        dp_loader_options opt = {.batch_size = 256, .shuffle = true, .seed = 7};
        assert_int_equal(dp_loader_init(&l, &ds, &opt), 0);
        assert_int_equal(dp_loader_start_epoch(l, 0, 0), 0);
        int64_t seen = 0, seen_count[10] = {0};
        dp_batch b;
        while (dp_loader_next(l, &b) == 1) {
            seen += b.n;
            for (int64_t i = 0; i < b.n; i++)
                seen_count[b.y[i]]++;
        }
        assert_int_equal(seen, ds.n);
        assert_memory_equal(seen_count, count, sizeof count);
        dp_loader_close(l);
        dp_dataset_close(&ds);
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_idx_plain_roundtrip, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_idx_gz_roundtrip, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_idx_truncated_plain, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_idx_truncated_gz, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_idx_bad_header, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_idx_missing, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_fashion_mnist_missing, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_fashion_mnist_synthetic, tu_setup_tmp,
                                        tu_teardown_tmp),
        cmocka_unit_test(test_fashion_mnist_labels),
        cmocka_unit_test(test_fashion_mnist_real),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
