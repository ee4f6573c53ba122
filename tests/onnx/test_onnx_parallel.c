/* ONNX graphs cut into pipeline stages (src/onnx/onnx_stages.c): torchvision's
 * ResNet-18 written with protobuf-c (onnxutil.c) may start a stage at the
 * stem's rows, at each BasicBlock's first op and final ReLU (the cut after
 * its Add) and at the head's rows, and nowhere inside a block; every such
 * two-way split, and a three-way one, gives the whole forward's logits bit
 * for bit; a range that starts or ends inside a block is refused in one
 * line naming the node and how many tensors cross. */
#include "onnxutil.h"

#include "dp/autograd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OK(x) assert_int_equal((x), 0)

enum { N = 2, CLASSES = 10 };
static const int64_t chw[3] = {1, 28, 28};
static dp_device_t *cpu;

static int setup(void **state)
{
    tu_setup_tmp(state);
    ou_capture();
    return dp_device_open(&cpu, "cpu:0", 1);
}

static int teardown(void **state)
{
    dp_device_close(cpu);
    return tu_teardown_tmp(state);
}

static dp_model_def *load_resnet(void)
{
    ou_model om;
    ou_resnet18(&om, 11, chw, CLASSES);
    const char *path = tu_tmp_path("resnet18.onnx");
    ou_write(&om, path);
    ou_free(&om);
    dp_model_def *def = NULL;
    OK(dp_model_def_load_onnx(&def, path, chw));
    return def;
}

/* The rows where a stage may start, derived from the structure rather than
 * read from the graph: the stem's conv, bn, relu and maxpool (rows 0-3),
 * then per BasicBlock its first op and its final ReLU (the Add's output is
 * the one tensor crossing before it), a block of 7 rows (conv, bn, relu,
 * conv, bn, add, relu) or 9 with the downsample's conv and bn (first of
 * layer2..4), then the head's GlobalAveragePool, Flatten and Gemm. */
static int expected_starts(int *starts, int *nrows)
{
    int n = 0, row = 0;
    for (; row < 4; row++)
        starts[n++] = row;
    for (int layer = 1; layer <= 4; layer++)
        for (int block = 0; block < 2; block++) {
            int len = layer > 1 && block == 0 ? 9 : 7;
            starts[n++] = row;
            starts[n++] = row + len - 1;
            row += len;
        }
    for (int k = 0; k < 3; k++)
        starts[n++] = row++;
    *nrows = row;
    return n;
}

/* The logits (N x CLASSES) of a training forward of m, run as the ranges
 * that `cuts` (ncuts rows where a stage starts) split its nrows rows into;
 * the running statistics are put back, so every forward starts alike. */
static void forward_pieces(dp_model_t *m, const int64_t *in, int classes, const int *cuts,
                           int ncuts, int nrows, float *logits)
{
    dp_params_t *B = dp_model_buffers(m); /* NULL: no batch norm */
    float *stats = B ? malloc((size_t)dp_params_numel(B) * sizeof *stats) : NULL;
    if (B) {
        assert_non_null(stats);
        OK(dp_params_get_all(B, stats));
    }
    float images[N * 28 * 28];
    int64_t xs[4] = {N, in[0], in[1], in[2]};
    dp_rng rng;
    dp_rng_init(&rng, 5, 0);
    for (int i = 0; i < N * in[0] * in[1] * in[2]; i++)
        images[i] = dp_rng_uniform(&rng) - 0.5f;
    dp_tensor_t *x, *h;
    OK(dp_tensor_from_host(&x, cpu, DP_F32, 4, xs, images));
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, true));
    dp_tape_begin(tape);
    h = x;
    for (int k = 0; k <= ncuts; k++) {
        int first = k == 0 ? 0 : cuts[k - 1], last = k == ncuts ? nrows - 1 : cuts[k] - 1;
        int rc = dp_model_forward_layers(m, h, first, last, true, &h);
        if (rc != 0)
            fail_msg("layers %d-%d: %s (%s)", first, last, dp_strerror(rc), ou_last_error);
    }
    assert_int_equal(dp_tensor_dim(h, 0), N);
    assert_int_equal(dp_tensor_dim(h, 1), classes);
    OK(dp_tensor_to_host(h, logits, N * classes * sizeof *logits));
    dp_tape_end(tape);
    dp_tape_reset(tape);
    dp_tape_close(tape);
    dp_tensor_free(x);
    if (B)
        OK(dp_params_set(B, stats));
    free(stats);
}

/* A graph on 1x8x8 inputs with 3 classes and nrows rows, a stage may start
 * at each: every two-way split gives the whole forward's logits. */
static void check_all_splits(const char *path, int nrows)
{
    static const int64_t small[3] = {1, 8, 8};
    dp_model_def *def;
    OK(dp_model_def_load_onnx(&def, path, small));
    dp_layer_summary *rows;
    int n;
    OK(dp_model_summary(def, small, &rows, &n));
    assert_int_equal(n, nrows);
    assert_string_equal(rows[n - 2].op, "reshape");
    for (int i = 0; i < n; i++)
        assert_true(rows[i].can_start);
    free(rows);
    dp_model_t *m;
    OK(dp_model_init(&m, def, cpu, 1));
    float whole[N * 3], split[N * 3];
    forward_pieces(m, small, 3, NULL, 0, n, whole);
    for (int c = 1; c < n; c++) {
        forward_pieces(m, small, 3, &c, 1, n, split);
        if (memcmp(whole, split, sizeof whole) != 0)
            fail_msg("split at row %d: logit 0 %.9g, the whole forward's %.9g", c, (double)split[0],
                     (double)whole[0]);
    }
    printf("%s: %d two-way splits give the whole forward's logits (logit 0 %.6f)\n",
           strrchr(path, '/') + 1, n - 1, (double)whole[0]);
    dp_model_close(m);
    dp_model_def_free(def);
}

static void test_resnet18_cuts(void **state)
{
    (void)state;
    dp_model_def *def = load_resnet();
    int want[64], nrows_want, nwant = expected_starts(want, &nrows_want);
    dp_layer_summary *rows;
    int n;
    OK(dp_model_summary(def, chw, &rows, &n));
    assert_int_equal(ou_errors, 0);
    int got[128], ngot = 0;
    printf("resnet18.onnx: %d layers, stages may start at", n);
    for (int i = 0; i < n; i++)
        if (rows[i].can_start) {
            printf(" %d", i);
            got[ngot++] = i;
        }
    printf("\n");
    assert_int_equal(n, nrows_want);
    assert_int_equal(ngot, nwant);
    for (int i = 0; i < nwant; i++)
        if (got[i] != want[i])
            fail_msg("start %d is row %d (%s), expected row %d (%s)", i, got[i], rows[got[i]].op,
                     want[i], rows[want[i]].op);
    /* The starts inside the stages are the blocks' first convs and final ReLUs. */
    for (int i = 4; i < nwant - 3; i++)
        assert_string_equal(rows[want[i]].op, i % 2 ? "relu" : "conv2d");
    free(rows);

    /* Every two-way split and a three-way one: the whole forward's logits. */
    dp_model_t *m;
    OK(dp_model_init(&m, def, cpu, 1));
    float whole[N * CLASSES], split[N * CLASSES];
    forward_pieces(m, chw, CLASSES, NULL, 0, n, whole);
    for (int i = 1; i < nwant; i++) {
        forward_pieces(m, chw, CLASSES, &want[i], 1, n, split);
        if (memcmp(whole, split, sizeof whole) != 0)
            fail_msg("split at row %d: logit 0 %.9g, the whole forward's %.9g", want[i],
                     (double)split[0], (double)whole[0]);
    }
    int three[2] = {want[7], want[16]};
    forward_pieces(m, chw, CLASSES, three, 2, n, split);
    assert_memory_equal(whole, split, sizeof whole);
    printf("%d two-way splits and rows 0-%d, %d-%d, %d-%d: the whole forward's logits "
           "bit for bit (logit 0 %.6f)\n",
           nwant - 1, three[0] - 1, three[0], three[1] - 1, three[1], n - 1, (double)whole[0]);

    /* Inside layer1.0 (rows 4-10): its input and its branch cross the cut. */
    dp_tensor_t *x, *y;
    OK(dp_tensor_new(&x, cpu, DP_F32, 4, (const int64_t[]){N, 64, 7, 7}));
    OK(dp_tensor_fill(x, 0.0f));
    assert_int_equal(dp_model_forward_layers(m, x, 5, n - 1, true, &y), DP_EINVAL);
    printf("start at 5: %s\n", ou_last_error);
    assert_non_null(strstr(ou_last_error, "a stage cannot start at layer 5 (node "
                                          "'/layer1/layer1.0/bn1/BatchNormalization'"));
    assert_non_null(strstr(ou_last_error, "2 tensors cross"));
    assert_int_equal(dp_model_forward_layers(m, x, 0, 8, true, &y), DP_EINVAL);
    printf("end at 8: %s\n", ou_last_error);
    assert_non_null(strstr(ou_last_error, "a stage cannot end at layer 8"));
    assert_int_equal(dp_model_forward_layers(m, x, 0, n, true, &y), DP_EINVAL);
    assert_non_null(strstr(ou_last_error, "the model has layers 0-68"));
    dp_tensor_free(x);
    dp_model_close(m);
    dp_model_def_free(def);
}

/* The test net's Flatten as x.view(x.size(0), -1): Shape, Gather, Squeeze,
 * Unsqueeze and Concat run on the host from the MaxPool's output, which is
 * the one tensor crossing into the Reshape's stage. Rows: conv, bn, relu,
 * maxpool, reshape, linear; a stage may start at each. */
static void test_shape_chain_cuts(void **state)
{
    (void)state;
    ou_model om;
    ou_test_net(&om, 3, true);
    const char *path = tu_tmp_path("chain.onnx");
    ou_write(&om, path);
    ou_free(&om);
    check_all_splits(path, 6);
}

/* A Reshape's target made first, on the host, from constants (Concat of
 * two int64 initializers), read after the cut: the later stage makes it
 * again. Rows: conv, relu, maxpool, reshape, linear. */
static void test_host_value_before_cut(void **state)
{
    (void)state;
    ou_model om;
    ou_begin(&om, 17);
    ou_input(&om, "x", 4, (const int64_t[]){-1, 1, 8, 8});
    float w[36], fw[3 * 64];
    for (int i = 0; i < 36; i++)
        w[i] = (float)((i * 7) % 11 - 5) * 0.1f;
    for (int i = 0; i < 3 * 64; i++)
        fw[i] = (float)((i * 5) % 13 - 6) * 0.05f;
    ou_init(&om, "0.weight", 4, (const int64_t[]){4, 1, 3, 3}, w);
    ou_init(&om, "4.weight", 2, (const int64_t[]){3, 64}, fw);
    ou_init_i64(&om, "minus_one", 1, (const int64_t[]){-1});
    ou_init_i64(&om, "features", 1, (const int64_t[]){64});
    ou_node(&om, "Concat", "target", "minus_one,features", "shape");
    ou_attr_int(&om, om.graph.node[om.graph.n_node - 1], "axis", 0);
    Onnx__NodeProto *n = ou_node(&om, "Conv", "conv", "x,0.weight", "c");
    ou_attr_ints(&om, n, "kernel_shape", 2, (const int64_t[]){3, 3});
    ou_attr_ints(&om, n, "pads", 4, (const int64_t[]){1, 1, 1, 1});
    ou_node(&om, "Relu", "relu", "c", "r");
    n = ou_node(&om, "MaxPool", "pool", "r", "p");
    ou_attr_ints(&om, n, "kernel_shape", 2, (const int64_t[]){2, 2});
    ou_attr_ints(&om, n, "strides", 2, (const int64_t[]){2, 2});
    ou_node(&om, "Reshape", "flat", "p,shape", "f");
    n = ou_node(&om, "Gemm", "fc", "f,4.weight", "logits");
    ou_attr_int(&om, n, "transB", 1);
    ou_output(&om, "logits");
    const char *path = tu_tmp_path("target_first.onnx");
    ou_write(&om, path);
    ou_free(&om);
    check_all_splits(path, 5);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resnet18_cuts),
        cmocka_unit_test(test_shape_chain_cuts),
        cmocka_unit_test(test_host_value_before_cut),
    };
    return tu_run(argc, argv, tests, setup, teardown);
}
