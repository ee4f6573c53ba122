/* dp_model_forward_layers, what a pipeline stage runs: for LeNet, ResNet-18
 * and nn.Sequential files, a training forward cut into two or three ranges
 * at the rows where dp_model_summary says a stage may start gives the
 * whole forward's logits bit for bit; a range out of bounds, one starting
 * or ending inside a residual block, and a definition without
 * forward_layers are refused. */
#include "testutil.h"

#include "dp/autograd.h"
#include "dp/core.h"
#include "dp/nn.h"
#include "dp/tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 2, CLASSES = 10, SEED = 7 };

static const int64_t mnist_chw[3] = {1, 28, 28};

/* Every module kind a file may use around the ones that hold parameters;
 * Dropout(0.5) in training draws a mask, Dropout(0) copies. */
static const char seq_text[] = "Conv2d(1, 6, kernel_size=5, padding=2)\n"
                               "BatchNorm2d(6)\n"
                               "ReLU()\n"
                               "MaxPool2d(2)\n"
                               "Conv2d(6, 8, 3)\n"
                               "ReLU()\n"
                               "Dropout(0.5)\n"
                               "Flatten()\n"
                               "Linear(8 * 12 * 12, 32)\n"
                               "ReLU()\n"
                               "Dropout(0)\n"
                               "Linear(32, 10)\n";
static const char *const seq_ops[] = {"conv2d", "batch_norm2d", "relu",    "max_pool2d",
                                      "conv2d", "relu",         "dropout", "reshape",
                                      "linear", "relu",         "dropout", "linear"};

/* Modules before the first with parameters record no op (their input needs
 * no gradient): rows start at the Conv2d, and the two before run in row 0. */
static const char lead_text[] = "ReLU()\n"
                                "MaxPool2d(2)\n"
                                "Conv2d(1, 4, 3, padding=1)\n"
                                "Sigmoid()\n"
                                "Dropout(0.25)\n"
                                "Flatten()\n"
                                "Linear(4 * 14 * 14, 10)\n";

static dp_device_t *cpu;

static int group_setup(void **state)
{
    (void)state;
    tu_quiet_log();
    return dp_device_open(&cpu, "cpu:0", 1);
}

static int group_teardown(void **state)
{
    (void)state;
    dp_device_close(cpu);
    return 0;
}

static void make_images(float *images, int64_t count)
{
    dp_rng rng;
    dp_rng_init(&rng, 5, 0);
    for (int64_t i = 0; i < count; i++)
        images[i] = dp_rng_uniform(&rng) - 0.5f;
}

/* The logits (N x CLASSES) of a training forward of m on `images`, run as
 * the ranges cuts[0..ncuts] split it into (no cut: dp_model_forward).
 * Batch norm's running statistics are put back afterwards, so that every
 * forward of m starts from the same state. */
static void forward_pieces(dp_model_t *m, const float *images, const int *cuts, int ncuts, int n,
                           float *logits)
{
    dp_params_t *B = dp_model_buffers(m);
    float *stats = NULL;
    if (B) {
        stats = malloc((size_t)dp_params_numel(B) * sizeof *stats);
        assert_non_null(stats);
        assert_int_equal(dp_params_get_all(B, stats), 0);
    }
    int64_t tracked = dp_model_batches_tracked(m);
    int64_t xs[4] = {N, mnist_chw[0], mnist_chw[1], mnist_chw[2]};
    dp_tensor_t *x, *h;
    assert_int_equal(dp_tensor_from_host(&x, cpu, DP_F32, 4, xs, images), 0);
    dp_tape_t *tape;
    assert_int_equal(dp_tape_init(&tape, true), 0);
    dp_tape_begin(tape);
    if (ncuts == 0) {
        assert_int_equal(dp_model_forward(m, x, true, &h), 0);
    } else {
        h = x;
        for (int k = 0; k <= ncuts; k++) {
            int first = k == 0 ? 0 : cuts[k - 1], last = k == ncuts ? n - 1 : cuts[k] - 1;
            int rc = dp_model_forward_layers(m, h, first, last, true, &h);
            if (rc != 0)
                fail_msg("%s: layers %d-%d: %s (%s)", dp_model_name(m), first, last,
                         dp_strerror(rc), dp_last_error());
        }
    }
    assert_int_equal(dp_tensor_ndim(h), 2);
    assert_int_equal(dp_tensor_dim(h, 0), N);
    assert_int_equal(dp_tensor_dim(h, 1), CLASSES);
    assert_int_equal(dp_tensor_to_host(h, logits, N * CLASSES * sizeof *logits), 0);
    /* The range from op 0 alone counts the batch. */
    if (B)
        assert_int_equal(dp_model_batches_tracked(m), tracked + 1);
    dp_tape_end(tape);
    dp_tape_reset(tape);
    dp_tape_close(tape);
    dp_tensor_free(x);
    if (B)
        assert_int_equal(dp_params_set(B, stats), 0);
    free(stats);
}

static void assert_same_logits(const char *name, const float *want, const float *got,
                               const int *cuts, int ncuts)
{
    for (int i = 0; i < N * CLASSES; i++)
        if (memcmp(&want[i], &got[i], sizeof want[i]) != 0)
            fail_msg("%s cut at %d%s: logit %d is %.9g, the whole forward's %.9g", name, cuts[0],
                     ncuts > 1 ? " and later" : "", i, (double)got[i], (double)want[i]);
}

/* Splits the forward of `def` at every row where a stage may start, in two
 * and then in three, comparing each with the whole forward of another
 * model of the same seed. Returns the number of two-way splits. */
static int check_splits(const dp_model_def *def, int want_rows)
{
    dp_layer_summary *rows;
    int n;
    assert_int_equal(dp_model_summary(def, mnist_chw, &rows, &n), 0);
    assert_int_equal(n, want_rows);
    assert_true(rows[0].can_start);
    int *starts = calloc((size_t)n, sizeof *starts), nstarts = 0;
    assert_non_null(starts);
    for (int s = 1; s < n; s++)
        if (rows[s].can_start)
            starts[nstarts++] = s;
    free(rows);
    assert_true(nstarts > 0);

    dp_model_t *whole, *split;
    assert_int_equal(dp_model_init(&whole, def, cpu, SEED), 0);
    assert_int_equal(dp_model_init(&split, def, cpu, SEED), 0);
    float images[N * 28 * 28], want[N * CLASSES], got[N * CLASSES];
    make_images(images, N * 28 * 28);
    forward_pieces(whole, images, NULL, 0, n, want);
    float spread = 0;
    for (int i = 0; i < N * CLASSES; i++)
        spread = spread > want[i] - want[0] ? spread : want[i] - want[0];
    assert_true(spread > 0); /* not a constant output */
    for (int i = 0; i < nstarts; i++) {
        forward_pieces(split, images, &starts[i], 1, n, got);
        assert_same_logits(def->name, want, got, &starts[i], 1);
    }
    /* Three stages: the cut points a third and two thirds along the starts. */
    if (nstarts >= 2) {
        int cuts[2] = {starts[nstarts / 3], starts[(2 * nstarts) / 3]};
        if (cuts[0] == cuts[1])
            cuts[1] = starts[nstarts - 1];
        forward_pieces(split, images, cuts, 2, n, got);
        assert_same_logits(def->name, want, got, cuts, 2);
    }
    printf("%s: %d layers, %d two-way splits and a three-way split = the whole forward\n",
           def->name, n, nstarts);
    dp_model_close(whole);
    dp_model_close(split);
    free(starts);
    return nstarts;
}

/* forward_layers(first, last) of m on a zero input of the model's input
 * shape (errors come before it is read); a refused range counts no batch. */
static int try_range(dp_model_t *m, int first, int last)
{
    int64_t xs[4] = {N, mnist_chw[0], mnist_chw[1], mnist_chw[2]};
    dp_tensor_t *x, *y = NULL;
    assert_int_equal(dp_tensor_new(&x, cpu, DP_F32, 4, xs), 0);
    assert_int_equal(dp_tensor_fill(x, 0.0f), 0);
    int64_t tracked = dp_model_batches_tracked(m);
    dp_tape_t *tape;
    assert_int_equal(dp_tape_init(&tape, false), 0);
    dp_tape_begin(tape);
    int rc = dp_model_forward_layers(m, x, first, last, true, &y);
    dp_tape_end(tape);
    dp_tape_reset(tape);
    dp_tape_close(tape);
    dp_tensor_free(x);
    if (rc != 0)
        assert_int_equal(dp_model_batches_tracked(m), tracked);
    return rc;
}

static dp_model_t *new_model(const dp_model_def *def)
{
    dp_model_t *m;
    assert_int_equal(dp_model_init(&m, def, cpu, SEED), 0);
    return m;
}

static void test_lenet(void **state)
{
    (void)state;
    const dp_model_def *def;
    assert_int_equal(dp_model_builtin(&def, "lenet", NULL), 0);
    /* every row but the first pool, which runs with its convolution */
    assert_int_equal(check_splits(def, 8), 6);
    dp_model_t *m = new_model(def);
    assert_int_equal(try_range(m, 1, 7), DP_EINVAL);
    tu_assert_error_mentions("lenet: layers 1-7: layers 0 and 1 (the first convolution and its "
                             "pool) run as one kernel, so no range starts at layer 1");
    assert_int_equal(try_range(m, 0, 0), DP_EINVAL);
    assert_int_equal(try_range(m, 3, 2), DP_EINVAL);
    assert_int_equal(try_range(m, 0, 8), DP_EINVAL);
    tu_assert_error_mentions("lenet: layers 0-8: the model has layers 0-7");
    assert_int_equal(try_range(m, -1, 3), DP_EINVAL);
    dp_model_close(m);
}

static void test_resnet18(void **state)
{
    (void)state;
    const dp_model_def *def;
    assert_int_equal(dp_model_builtin(&def, "resnet18", NULL), 0);
    /* The stem's 2 rows, each block's first op and final ReLU, the head's 3. */
    assert_int_equal(check_splits(def, 56), 1 + 2 * 8 + 3);
    dp_model_t *m = new_model(def);
    assert_int_equal(try_range(m, 4, 55), DP_EINVAL);
    tu_assert_error_mentions("resnet18: layer 4 is inside residual block resnet_block1.0 "
                             "(layers 2-7)");
    /* Ending before a block's sum would leave its shortcut to the next range. */
    assert_int_equal(try_range(m, 0, 16), DP_EINVAL);
    tu_assert_error_mentions("layer 16 is inside residual block resnet_block2.0 (layers 14-20)");
    assert_int_equal(try_range(m, 2, 1), DP_EINVAL);
    assert_int_equal(try_range(m, 0, 56), DP_EINVAL);
    tu_assert_error_mentions("resnet18: layers 0-56: the model has layers 0-55");
    /* Every row the summary marks as no stage start is refused as one. */
    dp_layer_summary *rows;
    int n, refused = 0;
    assert_int_equal(dp_model_summary(def, mnist_chw, &rows, &n), 0);
    for (int i = 0; i < n; i++)
        if (!rows[i].can_start) {
            if (try_range(m, i, n - 1) != DP_EINVAL)
                fail_msg("resnet18: a range starting at layer %d (%s) is accepted", i, rows[i].op);
            refused++;
        }
    free(rows);
    dp_model_close(m);
    assert_int_equal(refused, 56 - 21); /* the 20 splits and row 0 may start */
}

/* The splits compare a model with itself: a Dropout(0.5) that copied in
 * training would pass them. Its logits must differ from the same model's
 * with Dropout(0) there, drawn from the same seed. */
static void assert_dropout_acts(const dp_model_def *def)
{
    char text[sizeof seq_text];
    memcpy(text, seq_text, sizeof text);
    char *at = strstr(text, "Dropout(0.5)");
    assert_non_null(at);
    memcpy(at, "Dropout(0)  ", 12); /* the same length, spaces after ')' */
    dp_model_def *copy;
    assert_int_equal(dp_model_def_parse(&copy, text, "copy.txt", NULL), 0);
    dp_model_t *half, *none;
    assert_int_equal(dp_model_init(&half, def, cpu, SEED), 0);
    assert_int_equal(dp_model_init(&none, copy, cpu, SEED), 0);
    float images[N * 28 * 28], a[N * CLASSES], b[N * CLASSES];
    make_images(images, N * 28 * 28);
    int n = (int)(sizeof seq_ops / sizeof seq_ops[0]);
    forward_pieces(half, images, NULL, 0, n, a);
    forward_pieces(none, images, NULL, 0, n, b);
    int differ = 0;
    for (int i = 0; i < N * CLASSES; i++)
        differ += memcmp(&a[i], &b[i], sizeof a[i]) != 0;
    printf("Dropout(0.5) vs Dropout(0) in training: %d of %d logits differ\n", differ, N * CLASSES);
    assert_int_equal(differ, N * CLASSES);
    dp_model_close(half);
    dp_model_close(none);
    dp_model_def_free(copy);
}

static void test_sequential(void **state)
{
    (void)state;
    dp_model_def *def;
    assert_int_equal(dp_model_def_parse(&def, seq_text, "split.txt", NULL), 0);
    assert_dropout_acts(def);
    /* One op a module, in order. */
    dp_layer_summary *rows;
    int n;
    assert_int_equal(dp_model_summary(def, mnist_chw, &rows, &n), 0);
    assert_int_equal(n, (int)(sizeof seq_ops / sizeof seq_ops[0]));
    for (int i = 0; i < n; i++)
        assert_string_equal(rows[i].op, seq_ops[i]);
    free(rows);
    assert_int_equal(check_splits(def, n), n - 1);
    dp_model_t *m = new_model(def);
    assert_int_equal(try_range(m, 0, n), DP_EINVAL);
    tu_assert_error_mentions("split.txt: layers 0-12: the model has layers 0-11");
    assert_int_equal(try_range(m, 5, 4), DP_EINVAL);
    dp_model_close(m);
    dp_model_def_free(def);

    assert_int_equal(dp_model_def_parse(&def, lead_text, "lead.txt", NULL), 0);
    assert_int_equal(check_splits(def, 5), 4);
    m = new_model(def);
    assert_int_equal(try_range(m, 0, 5), DP_EINVAL);
    dp_model_close(m);
    dp_model_def_free(def);
}

static void test_not_splittable(void **state)
{
    (void)state;
    const dp_model_def *def;
    assert_int_equal(dp_model_builtin(&def, "tutorial", NULL), 0);
    assert_null(def->forward_layers);
    dp_model_t *m;
    assert_int_equal(dp_model_init(&m, def, cpu, SEED), 0);
    int64_t xs[2] = {N, 5};
    dp_tensor_t *x, *y = NULL;
    assert_int_equal(dp_tensor_new(&x, cpu, DP_F32, 2, xs), 0);
    assert_int_equal(dp_model_forward_layers(m, x, 0, 0, true, &y), DP_ENOTSUP);
    tu_assert_error_mentions("tutorial");
    assert_null(y);
    dp_tensor_free(x);
    dp_model_close(m);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lenet),
        cmocka_unit_test(test_resnet18),
        cmocka_unit_test(test_sequential),
        cmocka_unit_test(test_not_splittable),
    };
    return tu_run(argc, argv, tests, group_setup, group_teardown);
}
