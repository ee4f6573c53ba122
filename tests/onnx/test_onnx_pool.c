/* The ONNX pools with ceil_mode and count_include_pad, each in a graph
 * written with protobuf-c (onnxutil.c) and run through the loader: the
 * same values as dp_max_pool2d / dp_avg_pool2d called with the
 * parameters they stand for (ONNX's count_include_pad defaults to 0,
 * PyTorch's to True), gradients through the graph against finite
 * differences, torch.onnx.export's Pad before AveragePool (of nothing:
 * x passed on; of the pool's padding: that padding, counted), and the
 * settings refused naming the node. */
#include "onnxutil.h"

#include "gradcheck.h"
#include "onnx/onnx_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int64_t xs[4] = {2, 3, 8, 9};

/* x -> [Pad of pad_node rows and columns (-1: none) ->] TYPE(k, s, pads p, ceil_mode,
 * count_include_pad) -> y */
static void pool_graph(ou_model *m, const char *type, int k, int s, int p, int ceil_mode,
                       int include_pad, int pad_node)
{
    ou_begin(m, 13);
    ou_input(m, "x", 4, (const int64_t[]){-1, 3, 8, 9});
    const char *in = "x";
    if (pad_node >= 0) {
        int64_t q = pad_node;
        ou_constant_i64(m, "pads", 8, (const int64_t[]){0, 0, q, q, 0, 0, q, q});
        Onnx__NodeProto *n = ou_node(m, "Pad", "/pool/Pad", "x,pads", "xp");
        ou_attr_string(m, n, "mode", "constant");
        in = "xp";
    }
    char name[64];
    snprintf(name, sizeof name, "/pool/%s", type);
    Onnx__NodeProto *n = ou_node(m, type, name, in, "y");
    ou_attr_ints(m, n, "kernel_shape", 2, (const int64_t[]){k, k});
    ou_attr_ints(m, n, "strides", 2, (const int64_t[]){s, s});
    ou_attr_ints(m, n, "pads", 4, (const int64_t[]){p, p, p, p});
    ou_attr_int(m, n, "ceil_mode", ceil_mode);
    if (include_pad >= 0)
        ou_attr_int(m, n, "count_include_pad", include_pad);
    ou_output(m, "y");
}

static dp_tensor_t *input_x(void)
{
    float v[2 * 3 * 8 * 9];
    ou_fill(31, v, count(4, xs), 1.0f, 0.0f);
    return upload(4, xs, v);
}

static void check_pool(const char *name, const char *type, int k, int s, int p, int ceil_mode,
                       int include_pad, int pad_node, dp_pool2d_params want_p, int64_t P, int64_t Q)
{
    ou_model m;
    pool_graph(&m, type, k, s, p, ceil_mode, include_pad, pad_node);
    dp__onnx_graph *g = ou_load(&m, name);
    dp_tensor_t *x = input_x();
    int64_t n, shape[4];
    float *got = ou_run(g, gc_dev, &x, &n, shape, NULL);
    dp_tensor_t *y;
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    bool max = strcmp(type, "MaxPool") == 0;
    OK(max ? dp_max_pool2d(&y, x, &want_p) : dp_avg_pool2d(&y, x, &want_p));
    assert_int_equal(shape[2], P);
    assert_int_equal(shape[3], Q);
    assert_int_equal(dp_tensor_numel(y), n);
    float *want = download(y);
    printf("%-44s y [%lld, %lld, %lld, %lld]: largest difference from the op %g\n", name,
           (long long)shape[0], (long long)shape[1], (long long)shape[2], (long long)shape[3],
           tu_max_diff("outputs", got, want, n));
    assert_true(tu_max_diff("outputs", got, want, n) == 0.0);
    dp_tape_end(tape);
    dp_tape_reset(tape);
    dp_tape_close(tape);
    ou_gradcheck(g, name, 4, xs, 12, max);
    free(got);
    free(want);
    dp_tensor_free(x);
    dp__onnx_graph_free(g);
}

#define POOL(kk, ss, pp, ceil, excl)                                                               \
    (dp_pool2d_params)                                                                             \
    {                                                                                              \
        .kernel_h = kk, .kernel_w = kk, .stride_h = ss, .stride_w = ss, .pad_h = pp, .pad_w = pp,  \
        .ceil_mode = ceil, .exclude_pad = excl                                                     \
    }

/* 8 x 9 with k3 s2: floor gives 3 x 4, ceil 4 x 4 (SqueezeNet's pools);
 * with pads 1: 4 x 5 either way, the border means over 4 or 6 cells with
 * count_include_pad 0, over 9 with 1. */
static void test_pool_ceil_and_pads(void **state)
{
    (void)state;
    check_pool("MaxPool k3 s2 ceil_mode 1", "MaxPool", 3, 2, 0, 1, -1, -1,
               POOL(3, 2, 0, true, false), 4, 4);
    check_pool("AveragePool k3 s2 ceil_mode 1", "AveragePool", 3, 2, 0, 1, -1, -1,
               POOL(3, 2, 0, true, true), 4, 4);
    check_pool("AveragePool k3 s2 p1 count_include_pad 0", "AveragePool", 3, 2, 1, 0, 0, -1,
               POOL(3, 2, 1, false, true), 4, 5);
    check_pool("AveragePool k3 s2 p1 count_include_pad 1", "AveragePool", 3, 2, 1, 0, 1, -1,
               POOL(3, 2, 1, false, false), 4, 5);
    check_pool("Pad of nothing, AveragePool k2 s2", "AveragePool", 2, 2, 0, 0, -1, 0,
               POOL(2, 2, 0, false, false), 4, 4);
    /* torch's AvgPool2d(3, 1, padding=1): Pad of 1 then the pool, which is
     * the pool with pads 1 counted in the mean */
    check_pool("Pad of 1, AveragePool k3 s1", "AveragePool", 3, 1, 0, 0, -1, 1,
               POOL(3, 1, 1, false, false), 8, 9);
}

static void test_pool_refusals(void **state)
{
    (void)state;
    ou_model m;
    pool_graph(&m, "MaxPool", 3, 2, 0, 2, -1, -1);
    ou_refused(&m, "ceil2.onnx", WORDS("node '/pool/MaxPool' (MaxPool)", "ceil_mode 2"));
    /* Pads of 1 that count, and a ceil window past them: the op's refusal,
     * when the graph runs, naming the node. */
    pool_graph(&m, "AveragePool", 3, 2, 1, 1, 1, -1);
    dp__onnx_graph *g = ou_load(&m, "ceilpad.onnx");
    dp_tensor_t *x = input_x();
    ou_run(g, gc_dev, &x, NULL, NULL,
           "node '/pool/AveragePool' (AveragePool): ceil_mode 1 with pads counted in the mean");
    dp__onnx_graph_free(g);
    /* A Pad of one column left only: no pool's padding. */
    pool_graph(&m, "AveragePool", 2, 2, 0, 0, -1, 0);
    m.graph.node[0]->attribute[0]->t->int64_data[3] = 1;
    g = ou_load(&m, "pad.onnx");
    ou_run(g, gc_dev, &x, NULL, NULL,
           "node '/pool/Pad' (Pad): pads entry 3 is 1: dptrain runs Pad only where it pads "
           "nothing");
    dp__onnx_graph_free(g);
    dp_tensor_free(x);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pool_ceil_and_pads, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_pool_refusals, gc_open_device, gc_close_device),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
