/* The ONNX operators that move or join values, each in a graph written
 * with protobuf-c (onnxutil.c) and run through the loader: Concat of
 * device tensors along the channels (DenseNet's and SqueezeNet's blocks)
 * in either layout and of 2, 3 and 4 dimensions gives the inputs side by
 * side as computed here, its gradients agree with finite differences, and
 * what dptrain cannot join is refused in one line naming the node. */
#include "onnxutil.h"

#include "gradcheck.h"
#include "onnx/onnx_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static dp_tensor_t *input_of(int ndim, const int64_t *s, uint64_t seed, float **v)
{
    int64_t n = count(ndim, s);
    *v = malloc((size_t)n * sizeof **v);
    ou_fill(seed, *v, n, 1.0f, 0.0f);
    return upload(ndim, s, *v);
}

/* Concat(x, relu(x), conv1x1(x)) along the channels of x (2, 3, 4, 5): the
 * convolution (an identity weight) leaves its copy of x NHWC. y (2, 9, 4,
 * 5) is x, max(x, 0) and x, channel blocks in that order. */
static void test_concat_channels(void **state)
{
    (void)state;
    static const int64_t xs[4] = {2, 3, 4, 5};
    ou_model m;
    ou_begin(&m, 13);
    ou_input(&m, "x", 4, (const int64_t[]){-1, 3, 4, 5});
    float eye[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    ou_init(&m, "eye.weight", 4, (const int64_t[]){3, 3, 1, 1}, eye);
    ou_node(&m, "Relu", "relu", "x", "r");
    ou_node(&m, "Conv", "copy", "x,eye.weight", "c");
    Onnx__NodeProto *n = ou_node(&m, "Concat", "/cat/Concat", "x,r,c", "y");
    ou_attr_int(&m, n, "axis", 1);
    ou_output(&m, "y");
    dp__onnx_graph *g = ou_load(&m, "concat.onnx");
    float *xv;
    dp_tensor_t *x = input_of(4, xs, 5, &xv);
    int64_t count_y, ys[4];
    float *y = ou_run(g, gc_dev, &x, &count_y, ys, NULL);
    assert_int_equal(count_y, 2 * 9 * 20);
    assert_int_equal(ys[1], 9);
    for (int b = 0; b < 2; b++)
        for (int c = 0; c < 9; c++)
            for (int i = 0; i < 20; i++) {
                float v = xv[(b * 3 + c % 3) * 20 + i];
                float want = c / 3 == 1 ? fmaxf(v, 0.0f) : v;
                if (y[(b * 9 + c) * 20 + i] != want)
                    fail_msg("y[%d, %d, %d] = %g, want %g", b, c, i,
                             (double)y[(b * 9 + c) * 20 + i], (double)want);
            }
    printf("Concat of x, relu(x) and an NHWC copy: 360 values as the blocks side by side\n");
    ou_gradcheck(g, "Concat (N, C, H, W)", 4, xs, 6, true);
    free(xv);
    free(y);
    dp_tensor_free(x);
    dp__onnx_graph_free(g);
}

/* (N, C) and (N, C, L) inputs, axis given from the end: y is x and
 * tanh(x) side by side along axis 1. */
static void test_concat_ranks(void **state)
{
    (void)state;
    static const int64_t s2[2] = {3, 4}, s3[3] = {2, 3, 4};
    for (int rank = 2; rank <= 3; rank++) {
        const int64_t *s = rank == 2 ? s2 : s3;
        ou_model m;
        ou_begin(&m, 13);
        ou_input(&m, "x", rank, s);
        ou_node(&m, "Tanh", "tanh", "x", "t");
        Onnx__NodeProto *n = ou_node(&m, "Concat", "/cat/Concat", "x,t", "y");
        ou_attr_int(&m, n, "axis", 1 - rank);
        ou_output(&m, "y");
        dp__onnx_graph *g = ou_load(&m, rank == 2 ? "concat2d.onnx" : "concat3d.onnx");
        float *xv;
        dp_tensor_t *x = input_of(rank, s, 7, &xv);
        int64_t ny, ys[4];
        float *y = ou_run(g, gc_dev, &x, &ny, ys, NULL);
        int64_t N = s[0], C = s[1], L = rank == 3 ? s[2] : 1;
        assert_int_equal(ny, 2 * N * C * L);
        assert_int_equal(ys[1], 2 * C);
        double worst = 0;
        for (int64_t b = 0; b < N; b++)
            for (int64_t c = 0; c < 2 * C; c++)
                for (int64_t l = 0; l < L; l++) {
                    float v = xv[(b * C + c % C) * L + l];
                    double want = c < C ? v : tanh(v);
                    worst = tu_worst_diff(worst, y[(b * 2 * C + c) * L + l], want, "Concat", l);
                }
        printf("Concat of %d-D x and tanh(x) along axis %d: largest difference %g\n", rank,
               1 - rank, worst);
        assert_true(worst <= 1e-6);
        ou_gradcheck(g, rank == 2 ? "Concat (N, C)" : "Concat (N, C, L)", rank, s, 8, false);
        free(xv);
        free(y);
        dp_tensor_free(x);
        dp__onnx_graph_free(g);
    }
}

static void test_concat_refusals(void **state)
{
    (void)state;
    ou_model m;
    ou_begin(&m, 13);
    ou_input(&m, "x", 4, (const int64_t[]){-1, 3, 4, 5});
    Onnx__NodeProto *n = ou_node(&m, "Concat", "/cat/Concat", "x,x", "y");
    ou_attr_int(&m, n, "axis", 2);
    ou_output(&m, "y");
    dp__onnx_graph *g = ou_load(&m, "rows.onnx");
    float *xv;
    dp_tensor_t *x = input_of(4, (const int64_t[]){2, 3, 4, 5}, 1, &xv);
    ou_run(g, gc_dev, &x, NULL, NULL,
           "node '/cat/Concat' (Concat): axis 2: dptrain joins tensors along the channels");
    dp__onnx_graph_free(g);
    ou_begin(&m, 13);
    ou_input(&m, "x", 4, (const int64_t[]){-1, 3, 4, 5});
    ou_constant(&m, "k", 4, (const int64_t[]){2, 3, 4, 5}, xv);
    ou_node(&m, "Concat", "/cat/Concat", "x,k", "y");
    ou_output(&m, "y");
    ou_refused(&m, "mixed.onnx",
               WORDS("node '/cat/Concat' (Concat)", "input 1 ('k') is a constant where a tensor"));
    free(xv);
    dp_tensor_free(x);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_concat_channels, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_concat_ranks, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_concat_refusals, gc_open_device, gc_close_device),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
