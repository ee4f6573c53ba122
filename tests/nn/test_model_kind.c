/* A kind of model defined in this file alone, through dp_model_def's
 * entries (dp/nn.h): a forward, forward_layers over its blocks, its own
 * stage cuts (stage_starts), a declared input shape (input_chw) and a
 * release that frees what its maker allocated. Nothing else in dptrain
 * knows it, and it goes everywhere a built-in goes:
 *   - dp_model_summary lists its ops, and pipeline stages start only
 *     where its stage_starts says;
 *   - dp_model_forward_layers over its blocks gives the whole forward bit
 *     for bit, and a range inside a block is refused;
 *   - dp_train trains it on an in-memory dataset, on one device and as a
 *     2-stage pipeline on two, whose cut is one of its block starts;
 *   - dp_model_export_onnx writes it with the trained weights through the
 *     one traced exporter, and dptrain's ONNX loader reads the file back
 *     to the same eval outputs, the parameters by their names;
 *   - dp_model_def_free frees it through its release entry. */
#include "testutil.h"

#include "dp/dp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the kind: "tinynet" ----------------------------------------------------
 *
 * Three blocks over x (N, 1, H, W), H and W even:
 *   features: conv 1->4 3x3 pad 1, batch norm (ReLU fused)   rows 0-1
 *   pool:     max pool 2                                      row 2
 *   head:     flatten, linear (4 H W / 4 -> 16, weight (out, in)),
 *             relu, linear (16 -> 3, weight (in, out))       rows 3-6
 * A stage starts only at a block's first row. */

enum { CONV_W, CONV_B, BN_W, BN_B, FC1_W, FC1_B, FC2_W, FC2_B, NPARAMS };
enum { BN_MEAN, BN_VAR, NBUFFERS };
enum { ROWS = 7, NBLOCKS = 3, CLASSES = 3 };
static const int block_first[NBLOCKS + 1] = {0, 2, 3, ROWS};
static const char *const bn_names[] = {"features.1"};

/* What the maker allocates: the definition, its specs and its shape. */
typedef struct tinynet {
    dp_model_def def;
    dp_param_spec params[NPARAMS], buffers[NBUFFERS];
    int64_t chw[3];
} tinynet;

static int releases; /* how many definitions release freed */

/* Returns a failing call's code, as a program's forward does. */
#define TRY(call)                                                                                  \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ < 0)                                                                               \
            return rc_;                                                                            \
    } while (0)

static bool block_starts(int row)
{
    for (int b = 0; b <= NBLOCKS; b++)
        if (block_first[b] == row)
            return true;
    return false;
}

static int tinynet_forward_layers(dp_model_t *m, dp_tensor_t *x, int first, int last, bool train,
                                  dp_tensor_t **y)
{
    if (first < 0 || first > last || last >= ROWS || !block_starts(first) ||
        !block_starts(last + 1))
        return DP_EINVAL;
    dp_params_t *P = dp_model_params(m), *B = dp_model_buffers(m);
    dp_tensor_t *h = x;
    for (int row = first; row <= last; row++) {
        switch (row) {
        case 0:
            TRY(dp_conv2d(&h, h, dp_params_get(P, CONV_W), dp_params_get(P, CONV_B),
                          &(dp_conv2d_params){.pad_h = 1, .pad_w = 1}));
            break;
        case 1: {
            dp_batch_norm_params bn;
            dp_model_bn_params(m, 0, train, &bn);
            bn.relu = true;
            TRY(dp_batch_norm2d(&h, h, dp_params_get(P, BN_W), dp_params_get(P, BN_B),
                                dp_params_get(B, BN_MEAN), dp_params_get(B, BN_VAR), &bn));
            break;
        }
        case 2:
            TRY(dp_max_pool2d(&h, h, &(dp_pool2d_params){.kernel_h = 2, .kernel_w = 2}));
            break;
        case 3:
            TRY(dp_flatten(&h, h));
            break;
        case 4:
            TRY(dp_linear(&h, h, dp_params_get(P, FC1_W), dp_params_get(P, FC1_B),
                          DP_WEIGHT_OUT_IN));
            break;
        case 5:
            TRY(dp_relu(&h, h));
            break;
        case 6:
            TRY(dp_linear(&h, h, dp_params_get(P, FC2_W), dp_params_get(P, FC2_B),
                          DP_WEIGHT_IN_OUT));
            break;
        }
    }
    *y = h;
    return 0;
}

static int tinynet_forward(dp_model_t *m, dp_tensor_t *x, bool train, dp_tensor_t **logits)
{
    return tinynet_forward_layers(m, x, 0, ROWS - 1, train, logits);
}

static void tinynet_stage_starts(const dp_model_def *def, dp_layer_summary *rows, int n)
{
    (void)def;
    for (int r = 0; r < n; r++)
        rows[r].can_start = block_starts(r);
}

static int tinynet_input_chw(const dp_model_def *def, int64_t chw[3])
{
    memcpy(chw, ((const tinynet *)def->user)->chw, 3 * sizeof *chw);
    return 0;
}

static void tinynet_release(dp_model_def *def)
{
    releases++;
    free((tinynet *)def->user);
}

/* The kind's maker: a definition for inputs (1, h, w). */
static dp_model_def *tinynet_def(int64_t h, int64_t w)
{
    tinynet *t = calloc(1, sizeof *t);
    assert_non_null(t);
    int64_t flat = 4 * (h / 2) * (w / 2);
    const dp_param_spec params[NPARAMS] = {
        [CONV_W] = {"features.0.weight", 4, {4, 1, 3, 3}, DP_INIT_UNIFORM, 0.33f},
        [CONV_B] = {"features.0.bias", 1, {4}, DP_INIT_UNIFORM, 0.33f},
        [BN_W] = {"features.1.weight", 1, {4}, DP_INIT_ONES, 0},
        [BN_B] = {"features.1.bias", 1, {4}, DP_INIT_ZEROS, 0},
        [FC1_W] = {"head.1.weight", 2, {16, flat}, DP_INIT_UNIFORM, 0.1f},
        [FC1_B] = {"head.1.bias", 1, {16}, DP_INIT_UNIFORM, 0.1f},
        [FC2_W] = {"head.3.weight", 2, {16, CLASSES}, DP_INIT_UNIFORM, 0.25f},
        [FC2_B] = {"head.3.bias", 1, {CLASSES}, DP_INIT_UNIFORM, 0.25f},
    };
    const dp_param_spec buffers[NBUFFERS] = {
        [BN_MEAN] = {"features.1.running_mean", 1, {4}, DP_INIT_ZEROS, 0},
        [BN_VAR] = {"features.1.running_var", 1, {4}, DP_INIT_ONES, 0},
    };
    memcpy(t->params, params, sizeof params);
    memcpy(t->buffers, buffers, sizeof buffers);
    t->chw[0] = 1;
    t->chw[1] = h;
    t->chw[2] = w;
    t->def = (dp_model_def){.name = "tinynet",
                            .params = t->params,
                            .nparams = NPARAMS,
                            .buffers = t->buffers,
                            .nbuffers = NBUFFERS,
                            .bn_names = bn_names,
                            .nbn = 1,
                            .forward = tinynet_forward,
                            .forward_layers = tinynet_forward_layers,
                            .user = t,
                            .release = tinynet_release,
                            .input_chw = tinynet_input_chw,
                            .stage_starts = tinynet_stage_starts};
    return &t->def;
}

/* ---- the tests ------------------------------------------------------------ */

enum { SIDE = 8, SAMPLES = 96, BATCH = 16 };
static const int64_t chw[3] = {1, SIDE, SIDE};
static dp_device_t *cpu;

/* n samples whose class is the brightest third of the image. */
static void make_dataset(dp_dataset *ds, uint64_t seed, int64_t n)
{
    float *x = malloc((size_t)(n * SIDE * SIDE) * sizeof *x);
    int32_t *y = malloc((size_t)n * sizeof *y);
    tu_make_batch(seed, n, SIDE * SIDE, x, y);
    for (int64_t i = 0; i < n; i++) {
        float sum[CLASSES] = {0};
        for (int p = 0; p < SIDE * SIDE; p++)
            sum[p * CLASSES / (SIDE * SIDE)] += x[i * SIDE * SIDE + p];
        y[i] = 0;
        for (int c = 1; c < CLASSES; c++)
            if (sum[c] > sum[y[i]])
                y[i] = c;
    }
    assert_int_equal(dp_dataset_from_memory(ds, n, 1, SIDE, SIDE, x, NULL, y, CLASSES), 0);
    free(x);
    free(y);
}

static dp_tensor_t *input(uint64_t seed, int64_t n)
{
    float *v = malloc((size_t)(n * SIDE * SIDE) * sizeof *v);
    int32_t *labels = malloc((size_t)n * sizeof *labels);
    tu_make_batch(seed, n, SIDE * SIDE, v, labels);
    const int64_t shape[4] = {n, 1, SIDE, SIDE};
    dp_tensor_t *x;
    assert_int_equal(dp_tensor_from_host(&x, cpu, DP_F32, 4, shape, v), 0);
    free(v);
    free(labels);
    return x;
}

/* The eval (or training) output of m on x, or of its rows first..last. */
static float *run(dp_model_t *m, dp_tensor_t *x, int first, int last, bool train, int64_t *n)
{
    dp_tape_t *tape;
    assert_int_equal(dp_tape_init(&tape, false), 0);
    dp_tape_begin(tape);
    dp_tensor_t *y;
    if (first < 0)
        assert_int_equal(dp_model_forward(m, x, train, &y), 0);
    else
        assert_int_equal(dp_model_forward_layers(m, x, first, last, train, &y), 0);
    *n = dp_tensor_numel(y);
    float *v = malloc((size_t)*n * sizeof *v);
    assert_int_equal(dp_tensor_to_host(y, v, (size_t)*n * sizeof *v), 0);
    dp_tape_end(tape);
    dp_tape_reset(tape);
    dp_tape_close(tape);
    return v;
}

static void test_summary_and_stages(void **state)
{
    (void)state;
    dp_model_def *def = tinynet_def(SIDE, SIDE);
    int64_t declared[3];
    assert_int_equal(dp_model_def_input_chw(def, declared), 0);
    assert_memory_equal(declared, chw, sizeof declared);

    dp_layer_summary *rows;
    int n;
    assert_int_equal(dp_model_summary(def, chw, &rows, &n), 0);
    static const char *const ops[ROWS] = {"conv2d", "batch_norm2d", "max_pool2d", "reshape",
                                          "linear", "relu",         "linear"};
    assert_int_equal(n, ROWS);
    int64_t params = 0;
    for (int r = 0; r < n; r++) {
        printf("row %d: %-13s can_start %d\n", r, rows[r].op, rows[r].can_start);
        assert_string_equal(rows[r].op, ops[r]);
        assert_int_equal(rows[r].can_start, block_starts(r));
        params += rows[r].params;
    }
    assert_int_equal(rows[n - 1].shape[1], CLASSES);
    assert_int_equal(params, 4 * 9 + 4 + 4 + 4 + 16 * 64 + 16 + 16 * CLASSES + CLASSES);
    free(rows);

    /* Blocks run one by one give the whole training forward bit for bit. */
    dp_model_t *whole, *parts;
    assert_int_equal(dp_model_init(&whole, def, cpu, 11), 0);
    assert_int_equal(dp_model_init(&parts, def, cpu, 11), 0);
    dp_tensor_t *x = input(5, 6);
    int64_t nw, np;
    float *want = run(whole, x, -1, -1, true, &nw);
    dp_tape_t *tape;
    assert_int_equal(dp_tape_init(&tape, false), 0);
    dp_tape_begin(tape);
    dp_tensor_t *h = x;
    for (int b = 0; b < NBLOCKS; b++)
        assert_int_equal(
            dp_model_forward_layers(parts, h, block_first[b], block_first[b + 1] - 1, true, &h), 0);
    np = dp_tensor_numel(h);
    float *got = malloc((size_t)np * sizeof *got);
    assert_int_equal(dp_tensor_to_host(h, got, (size_t)np * sizeof *got), 0);
    dp_tape_end(tape);
    dp_tape_reset(tape);
    dp_tape_close(tape);
    assert_int_equal(np, nw);
    assert_memory_equal(want, got, (size_t)nw * sizeof *want);
    /* A range that starts inside the features block is the kind's to refuse. */
    dp_tensor_t *y;
    assert_int_equal(dp_model_forward_layers(parts, x, 1, 2, false, &y), DP_EINVAL);
    free(want);
    free(got);
    dp_tensor_free(x);
    dp_model_close(whole);
    dp_model_close(parts);
    int before = releases;
    dp_model_def_free(def);
    assert_int_equal(releases, before + 1);
}

/* Trained by dp_train, on one device or as a pipeline of `stages`. */
static dp_train_result train(const dp_model_def *def, const char *devices, int stages,
                             const char *checkpoint)
{
    dp_dataset train_set, test_set;
    make_dataset(&train_set, 1, SAMPLES);
    make_dataset(&test_set, 2, SAMPLES / 2);
    dp_train_options o;
    dp_train_options_default(&o);
    o.model_def = def;
    o.train_set = &train_set;
    o.test_set = &test_set;
    o.parallel.devices = devices;
    o.parallel.threads = 1;
    o.run.epochs = 2;
    o.data.batch_size = BATCH;
    o.optim.lr = 0.1f;
    o.run.seed = 3;
    o.parallel.pipeline = stages;
    o.checkpoint.checkpoint_path = checkpoint;
    dp_train_result r;
    assert_int_equal(dp_train(&o, &r), 0);
    printf("%s on %s%s: train loss %.4f, test acc %.3f\n", def->name, r.devices,
           stages ? " as a pipeline" : "", r.train_loss, r.test_acc);
    assert_true(isfinite(r.train_loss) && r.train_loss > 0);
    dp_dataset_close(&train_set);
    dp_dataset_close(&test_set);
    return r;
}

static void test_train_one_device_and_pipeline(void **state)
{
    (void)state;
    dp_model_def *def = tinynet_def(SIDE, SIDE);
    dp_train_result one = train(def, "cpu:0", 0, NULL);
    dp_train_result r = train(def, "cpu:0,cpu:1", 2, NULL);
    tu_assert_close(r.train_loss, one.train_loss, 1e-5, 0);
    assert_int_equal(r.pipeline_stages, 2);
    printf("stages: layers %d-%d and %d-%d\n", r.stage_first[0], r.stage_first[1] - 1,
           r.stage_first[1], r.stage_first[2] - 1);
    assert_int_equal(r.stage_first[0], 0);
    assert_true(block_starts(r.stage_first[1]) && r.stage_first[1] > 0 && r.stage_first[1] < ROWS);
    dp_model_def_free(def);
}

/* Trained, exported through the traced exporter, and read back by the ONNX
 * loader: the same eval outputs, the parameters by their names. */
static void test_export_loads_back(void **state)
{
    (void)state;
    dp_model_def *def = tinynet_def(SIDE, SIDE);
    const char *ckpt = tu_tmp_path("tinynet.safetensors"), *path = tu_tmp_path("tinynet.onnx");
    train(def, "cpu:0", 0, ckpt);
    dp_model_t *m;
    assert_int_equal(dp_model_init(&m, def, cpu, 0), 0);
    assert_int_equal(dp_checkpoint_load_weights(ckpt, m), 0);
    assert_int_equal(dp_model_export_onnx(m, chw, path), 0);

    dp_model_def *back;
    assert_int_equal(dp_model_def_load_onnx(&back, path, chw), 0);
    assert_int_equal(back->nparams, NPARAMS);
    assert_int_equal(back->nbuffers, NBUFFERS);
    for (int i = 0; i < NPARAMS; i++)
        assert_string_equal(back->params[i].name, def->params[i].name);
    for (int i = 0; i < NBUFFERS; i++)
        assert_string_equal(back->buffers[i].name, def->buffers[i].name);
    dp_model_t *mb;
    assert_int_equal(dp_model_init(&mb, back, cpu, 0), 0);
    dp_tensor_t *x = input(9, 7);
    int64_t n, nb;
    float *want = run(m, x, -1, -1, false, &n), *got = run(mb, x, -1, -1, false, &nb);
    assert_int_equal(nb, n);
    double big = 0, diff = 0;
    for (int64_t i = 0; i < n; i++) {
        big = fmax(big, fabs(want[i]));
        diff = fmax(diff, fabs((double)want[i] - got[i]));
    }
    printf("exported and read back: %lld outputs, largest difference %.3g of %.3g\n", (long long)n,
           diff, big);
    assert_true(big > 0 && diff <= 1e-6 * big);
    free(want);
    free(got);
    dp_tensor_free(x);
    dp_model_close(mb);
    dp_model_close(m);
    dp_model_def_free(back);
    dp_model_def_free(def);
}

static int setup(void **state)
{
    tu_quiet_log();
    TRY(dp_device_open(&cpu, "cpu:0", 1));
    return tu_setup_tmp(state);
}

static int teardown(void **state)
{
    dp_device_close(cpu);
    return tu_teardown_tmp(state);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_summary_and_stages),
        cmocka_unit_test(test_train_one_device_and_pipeline),
        cmocka_unit_test(test_export_loads_back),
    };
    return tu_run(argc, argv, tests, setup, teardown);
}
