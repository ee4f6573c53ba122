/* .npy files (dp_npy_read, --dataset npy, predict on a .npy batch): every
 * dtype and shape np.save writes for images and labels read exactly, and
 * written as np.save writes them (dp_npy_write); a
 * bad header, dtype, order, size or label each refused with one line
 * naming the file; a run on .npy files of bytes the same, bit for bit, as
 * one on the same data handed over as floats. */
#include "imageutil.h"
#include "testutil.h"

#include "dp/dp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The images as np.save writes them: every dtype and shape read. */
static void reads_what_numpy_writes(void **state)
{
    (void)state;
    const char *p = tu_tmp_path("a.npy");
    uint8_t u8[2 * 3 * 4];
    float f32[2 * 3 * 4];
    for (int i = 0; i < 24; i++) {
        u8[i] = (uint8_t)(i * 11);
        f32[i] = (float)i / 7;
    }
    int64_t s3[3] = {2, 3, 4}, s4[4] = {2, 1, 3, 4}, s0[1] = {0};
    dp_npy a;
    iu_write_npy(p, "|u1", 3, s3, u8, sizeof u8);
    assert_int_equal(dp_npy_read(p, &a), 0);
    assert_int_equal(a.dtype, DP_NPY_U8);
    assert_int_equal(a.ndim, 3);
    assert_true(a.shape[0] == 2 && a.shape[1] == 3 && a.shape[2] == 4);
    assert_memory_equal(a.data, u8, sizeof u8);
    dp_npy_close(&a);
    iu_write_npy(p, "<f4", 4, s4, f32, sizeof f32);
    assert_int_equal(dp_npy_read(p, &a), 0);
    assert_int_equal(a.dtype, DP_NPY_F32);
    assert_int_equal(a.ndim, 4);
    assert_memory_equal(a.data, f32, sizeof f32);
    dp_npy_close(&a);
    /* a 1-tuple, an empty array, keys in another order, double quotes */
    int64_t lab[2] = {3, (int64_t)1 << 40 | 1}; /* the high word too */
    iu_write_npy(p, "<i8", 1, s3, lab, sizeof lab);
    assert_int_equal(dp_npy_read(p, &a), 0);
    assert_true(a.ndim == 1 && a.shape[0] == 2 && a.dtype == DP_NPY_I64);
    assert_int_equal(a.size, sizeof lab);
    assert_memory_equal(a.data, lab, sizeof lab);
    dp_npy_close(&a);
    int32_t lab32[3] = {9, 0, 7};
    iu_write_npy(p, "<i4", 1, (int64_t[]){3}, lab32, sizeof lab32);
    assert_int_equal(dp_npy_read(p, &a), 0);
    assert_true(a.ndim == 1 && a.shape[0] == 3 && a.dtype == DP_NPY_I32);
    assert_memory_equal(a.data, lab32, sizeof lab32);
    dp_npy_close(&a);
    iu_write_npy(p, "<i4", 1, s0, NULL, 0);
    assert_int_equal(dp_npy_read(p, &a), 0);
    assert_true(a.ndim == 1 && a.shape[0] == 0 && a.size == 0);
    dp_npy_close(&a);
    iu_write_npy_raw(p, "{\"shape\": (2, 3, 4), \"fortran_order\": False, \"descr\": \"|u1\"}", u8,
                     sizeof u8);
    assert_int_equal(dp_npy_read(p, &a), 0);
    assert_memory_equal(a.data, u8, sizeof u8);
    dp_npy_close(&a);
}

/* One line naming the file and saying `what`. */
static void expect_npy_error(const char *p, const char *what)
{
    dp_npy a;
    assert_true(dp_npy_read(p, &a) < 0);
    const char *e = dp_last_error();
    if (strncmp(e, p, strlen(p)) != 0 || !strstr(e, what) || strchr(e, '\n'))
        fail_msg("expected one line '%s: ...%s...', got: %s", p, what, e);
}

static void bad_headers(void **state)
{
    (void)state;
    tu_quiet_log();
    const char *p = tu_tmp_path("bad.npy");
    uint8_t d[24] = {0};
    int64_t s3[3] = {2, 3, 4};
    static const struct {
        const char *dict;
        size_t bytes;
        const char *what;
    } cases[] = {
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (6,), }", 24, "dtype '>f4'"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", 24, "dtype '<f8'"},
        {"{'descr': '|u1', 'fortran_order': True, 'shape': (2, 12), }", 24, "Fortran order"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (24), }", 24, "needs its comma"},
        {"{'descr': '|u1', 'fortran_order': False}", 24, "all required"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (24,), 'x': 1}", 24, "other than"},
        {"{'descr': '|u1', 'descr': '|u1', 'fortran_order': False, 'shape': (24,)}", 24,
         "given twice"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (-24,), }", 24, "expected a size"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (25,), }", 24, "truncated"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (23,), }", 24, "1 bytes after"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (99999999999, 99999999999), }", 24,
         "more than"},
        {"['descr', '|u1']", 24, "expected '{'"},
    };
    for (size_t i = 0; i < COUNTOF(cases); i++) {
        iu_write_npy_raw(p, cases[i].dict, d, cases[i].bytes);
        expect_npy_error(p, cases[i].what);
    }
    /* the preamble: magic, version, a header without its newline */
    iu_write_npy(p, "|u1", 3, s3, d, sizeof d);
    size_t n;
    uint8_t *f = iu_read_file(p, &n);
    f[0] = 'x';
    assert_int_equal(tu_write_file(p, f, n), 0);
    expect_npy_error(p, "not a .npy file");
    f[0] = 0x93;
    f[6] = 4;
    assert_int_equal(tu_write_file(p, f, n), 0);
    expect_npy_error(p, "version 4.0");
    f[6] = 1;
    f[8 + 2 + (f[8] | f[9] << 8) - 1] = ' ';
    assert_int_equal(tu_write_file(p, f, n), 0);
    expect_npy_error(p, "does not end in a newline");
    assert_int_equal(tu_write_file(p, f, 9), 0);
    expect_npy_error(p, "preamble");
    free(f);
}

/* DIR/SPLIT/images.npy and labels.npy. */
static void write_split(const char *dir, const char *split, const char *idescr, int ndim,
                        const int64_t *shape, const void *im, size_t im_bytes, const char *ldescr,
                        const void *lb, size_t lb_bytes)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, split);
    mkdir(dir, 0755);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/%s/images.npy", dir, split);
    iu_write_npy(p, idescr, ndim, shape, im, im_bytes);
    snprintf(p, sizeof p, "%s/%s/labels.npy", dir, split);
    int64_t ls[1] = {shape[0]};
    iu_write_npy(p, ldescr, 1, ls, lb, lb_bytes);
}

enum { N = 64, SIDE = 16 };

/* dp_train on .npy files of bytes (held as bytes, scaled per batch) and on
 * the same bytes given with dp_dataset_from_memory: the same weights, bit
 * for bit, and the same test accuracy. */
static void npy_run_equals_memory(void **state)
{
    (void)state;
    static uint8_t im[N * SIDE * SIDE];
    int64_t lb64[N];
    int32_t lb32[N];
    for (int i = 0; i < N; i++) {
        lb64[i] = lb32[i] = i % 3;
        for (int k = 0; k < SIDE * SIDE; k++)
            im[i * SIDE * SIDE + k] = (uint8_t)((k * 5 + i * 3) % 64 + 90 * (i % 3));
    }
    char dir[512];
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("npyset"));
    int64_t shape[3] = {N, SIDE, SIDE};
    write_split(dir, "train", "|u1", 3, shape, im, sizeof im, "<i8", lb64, sizeof lb64);
    write_split(dir, "test", "|u1", 3, shape, im, sizeof im, "<i8", lb64, sizeof lb64);
    dp_dataset ds;
    assert_int_equal(dp_dataset_load("npy", dir, true, &ds), 0);
    assert_true(ds.pixels && !ds.images && ds.channels == 1 && ds.classes == 3);
    dp_dataset_close(&ds);

    dp_train_options o;
    dp_train_options_default(&o);
    o.run.epochs = 2;
    o.data.batch_size = 16;
    o.data.dataset = "npy";
    o.data.data_dir = dir;
    o.numerics.deterministic = true;
    o.numerics.conv_algo = DP_CONV_ALGO_DIRECT;
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/a.safetensors", dir);
    snprintf(b, sizeof b, "%s/b.safetensors", dir);
    o.checkpoint.checkpoint_path = a;
    dp_train_result ra, rb;
    assert_int_equal(dp_train(&o, &ra), 0);
    dp_dataset train, test;
    assert_int_equal(dp_dataset_from_memory(&train, N, 1, SIDE, SIDE, NULL, im, lb32, 3), 0);
    assert_int_equal(dp_dataset_from_memory(&test, N, 1, SIDE, SIDE, NULL, im, lb32, 3), 0);
    o.data.dataset = NULL;
    o.data.data_dir = NULL;
    o.train_set = &train;
    o.test_set = &test;
    o.checkpoint.checkpoint_path = b;
    assert_int_equal(dp_train(&o, &rb), 0);
    assert_true(ra.test_acc == rb.test_acc && ra.train_loss == rb.train_loss);
    tu_assert_same_tensors(a, b);
    dp_dataset_close(&train);
    dp_dataset_close(&test);

    /* predict on the .npy batch of the training images */
    char p[600];
    snprintf(p, sizeof p, "%s/train/images.npy", dir);
    const char *inputs[] = {p};
    dp_predict_options po = {.checkpoint = a, .inputs = inputs, .ninputs = 1};
    dp_predictions pr;
    assert_int_equal(dp_predict(&po, &pr), 0);
    assert_int_equal(pr.n, N);
    assert_int_equal(pr.outputs, 10);
    assert_int_equal(pr.classes, 0); /* .npy labels have no names */
    double sum = 0;
    for (int k = 0; k < 10; k++)
        sum += pr.probs[5 * 10 + k];
    tu_assert_close(sum, 1.0, 1e-5, 0);
    char want[700];
    snprintf(want, sizeof want, "%s[5]", p);
    assert_string_equal(pr.names[5], want);
    dp_predictions_close(&pr);
}

/* Each bad split: one line naming the file. */
static void bad_splits(void **state)
{
    (void)state;
    tu_quiet_log();
    char dir[512];
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("badset"));
    static uint8_t im[4 * 8 * 8 * 3];
    uint8_t lb[4] = {0, 1, 2, 1};
    int64_t nhwc[4] = {4, 8, 8, 3}, nhw[3] = {4, 8, 8};
    const struct {
        const char *idescr, *ldescr;
        int ndim;
        const int64_t *shape;
        size_t lbytes;
        const char *file, *what;
    } cases[] = {
        {"|u1", "|u1", 4, nhwc, 4, "images.npy", "look channels-last"},
        {"<i4", "|u1", 3, nhw, 4, "images.npy", "uint8 or float32"},
        {"|u1", "<f4", 3, nhw, 16, "labels.npy", "not float32"},
    };
    dp_dataset ds;
    for (size_t i = 0; i < COUNTOF(cases); i++) {
        size_t ib = (size_t)(cases[i].ndim == 4 ? 4 * 8 * 8 * 3 : 4 * 8 * 8) *
                    (strcmp(cases[i].idescr, "<i4") == 0 ? 4 : 1);
        static uint8_t big[4 * 8 * 8 * 4];
        write_split(dir, "train", cases[i].idescr, cases[i].ndim, cases[i].shape,
                    ib > sizeof im ? big : im, ib, cases[i].ldescr, big, cases[i].lbytes);
        assert_true(dp_npy_dataset_load(dir, true, &ds) < 0);
        char want[700];
        snprintf(want, sizeof want, "%s/train/%s: ", dir, cases[i].file);
        const char *e = dp_last_error();
        if (strncmp(e, want, strlen(want)) != 0 || !strstr(e, cases[i].what))
            fail_msg("expected '%s...%s', got: %s", want, cases[i].what, e);
    }
    /* a negative label, and one count too few */
    int64_t neg[4] = {0, 1, -1, 2};
    write_split(dir, "train", "|u1", 3, nhw, im, 4 * 64, "<i8", neg, sizeof neg);
    assert_true(dp_npy_dataset_load(dir, true, &ds) < 0);
    assert_non_null(strstr(dp_last_error(), "labels.npy: label -1 at index 2 is outside"));
    char p[700];
    snprintf(p, sizeof p, "%s/train/labels.npy", dir);
    int64_t three[1] = {3};
    iu_write_npy(p, "|u1", 1, three, lb, 3);
    assert_true(dp_npy_dataset_load(dir, true, &ds) < 0);
    assert_non_null(strstr(dp_last_error(), "labels.npy: labels of shape [3]: expected (4,)"));
}

/* The whole file at path (malloc'd) and its size. */
static uint8_t *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t *buf = malloc(4096);
    assert_non_null(buf);
    *size = fread(buf, 1, 4096, f);
    fclose(f);
    return buf;
}

/* dp_npy_write (dptrain predict --logits) writes the bytes np.save writes:
 * the header np.save made for these arrays (numpy 1.24: the dict, spaces
 * and '\n', 118 bytes, so that the data start at byte 128), then the
 * data; dp_npy_read reads them back. A size that does not match the
 * shape, and a directory, are refused naming the file. */
static void writes_what_numpy_writes(void **state)
{
    (void)state;
    const char *p = tu_tmp_path("w.npy");
    float f[12];
    for (int i = 0; i < 12; i++)
        f[i] = (float)i / 3 - 1;
    int64_t l[5] = {3, 1, 4, 1, 5};
    const struct {
        dp_npy a;
        const char *dict;
    } cases[] = {
        {{DP_NPY_F32, 2, {3, 4}, f, sizeof f},
         "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }"},
        {{DP_NPY_I64, 1, {5}, l, sizeof l},
         "{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }"},
    };
    for (size_t c = 0; c < COUNTOF(cases); c++) {
        assert_int_equal(dp_npy_write(p, &cases[c].a), 0);
        size_t size;
        uint8_t *got = slurp(p, &size);
        assert_int_equal(size, 128 + cases[c].a.size);
        assert_memory_equal(got, "\x93NUMPY\x01\x00\x76\x00", 10);
        size_t dl = strlen(cases[c].dict);
        assert_memory_equal(got + 10, cases[c].dict, dl);
        for (size_t i = 10 + dl; i < 127; i++)
            assert_int_equal(got[i], ' ');
        assert_int_equal(got[127], '\n');
        assert_memory_equal(got + 128, cases[c].a.data, cases[c].a.size);
        free(got);
        dp_npy a;
        assert_int_equal(dp_npy_read(p, &a), 0);
        assert_true(a.dtype == cases[c].a.dtype && a.ndim == cases[c].a.ndim);
        assert_memory_equal(a.shape, cases[c].a.shape, (size_t)a.ndim * sizeof *a.shape);
        assert_memory_equal(a.data, cases[c].a.data, a.size);
        dp_npy_close(&a);
    }
    dp_npy short_one = {DP_NPY_F32, 2, {3, 5}, f, sizeof f};
    assert_int_equal(dp_npy_write(p, &short_one), DP_EINVAL);
    char want[700];
    snprintf(want, sizeof want, "%s: an array of 48 bytes does not fit its dtype and shape", p);
    assert_string_equal(dp_last_error(), want);
    const char *dir = tu_tmp_path("");
    assert_int_equal(dp_npy_write(dir, &cases[0].a), DP_EIO);
    snprintf(want, sizeof want, "%s: cannot write: Is a directory", dir);
    assert_string_equal(dp_last_error(), want);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_what_numpy_writes), cmocka_unit_test(bad_headers),
        cmocka_unit_test(npy_run_equals_memory), cmocka_unit_test(bad_splits),
        cmocka_unit_test(writes_what_numpy_writes)};
    return tu_run(argc, argv, tests, tu_setup_tmp, tu_teardown_tmp);
}
