/* The ONNX operators of graphs beyond a chain of layers, each one node in
 * a graph written with protobuf-c (onnxutil.c) on an input x and at most
 * one initializer w, run through the loader: PRelu (slopes (C, 1, 1) as
 * torch.onnx.export writes them in eval mode, and (1)), Softmax and
 * LogSoftmax (the channels; opset 11's matrix from the axis on; the last
 * axis), Add, Sub, Mul and Div broadcast
 * over the channels, GlobalMaxPool, MatMul, Transpose, Gemm with transA,
 * ConvTranspose (groups, strides, pads on each side, output_padding),
 * Gelu (exact and tanh) and Split (sizes as opset 11's attribute, and as
 * opset 13's input; along the channels, H, W, a 3-D tensor's axis 1 and a
 * vector) give what the dp_ op called directly on
 * the same x and w gives, and their gradients agree with finite
 * differences; settings dptrain cannot run are refused in one line naming
 * the node. */
#include "onnxutil.h"

#include "gradcheck.h"
#include "onnx/onnx_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*direct_fn)(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *w);

typedef struct op_case {
    const char *name, *op;
    int opset, xr;
    int64_t xs[4];
    int wr; /* 0: no initializer */
    int64_t ws[4];
    float w_offset; /* w drawn in offset +- 0.5 */
    void (*attrs)(ou_model *m, Onnx__NodeProto *n);
    direct_fn direct;
    bool kink;
} op_case;

static void graph_of(ou_model *m, const op_case *c)
{
    ou_begin(m, c->opset);
    int64_t in[4];
    memcpy(in, c->xs, sizeof in);
    in[0] = -1;
    ou_input(m, "x", c->xr, in);
    char ins[64] = "x";
    if (c->wr) {
        int64_t n = count(c->wr, c->ws);
        float *w = malloc((size_t)n * sizeof *w);
        ou_fill(5, w, n, 0.5f, c->w_offset);
        ou_init(m, "layer.weight", c->wr, c->ws, w);
        free(w);
        strcat(ins, ",layer.weight");
    }
    /* Split's second output is read by no node */
    Onnx__NodeProto *n =
        ou_node(m, c->op, "/layer/Op", ins, strcmp(c->op, "Split") == 0 ? "y,y2" : "y");
    if (c->attrs)
        c->attrs(m, n);
    ou_output(m, "y");
}

static void check_case(const op_case *c)
{
    ou_model m;
    graph_of(&m, c);
    dp__onnx_graph *g = ou_load(&m, c->name);
    assert_int_equal(g->nparams, c->wr ? 1 : 0);
    dp_tensor_t *params[1] = {NULL}, *x;
    ou_tensors(g, gc_dev, params, NULL);
    int64_t nx = count(c->xr, c->xs);
    float *xv = malloc((size_t)nx * sizeof *xv);
    ou_fill(3, xv, nx, 1.0f, 0.0f);
    x = upload(c->xr, c->xs, xv);
    int64_t n, shape[4];
    float *got = ou_run(g, gc_dev, &x, &n, shape, NULL);
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    dp_tensor_t *y;
    OK(c->direct(&y, x, params[0]));
    assert_int_equal(dp_tensor_numel(y), n);
    for (int d = 0; d < dp_tensor_ndim(y); d++)
        assert_int_equal(dp_tensor_dim(y, d), shape[d]);
    float *want = download(y);
    double diff = tu_max_diff("outputs", got, want, n);
    printf("%-36s %lld values: largest difference from the direct op %g\n", c->name, (long long)n,
           diff);
    assert_true(diff <= 1e-6);
    dp_tape_end(tape);
    dp_tape_reset(tape);
    dp_tape_close(tape);
    ou_gradcheck(g, c->name, c->xr, c->xs, 17, c->kink);
    free(got), free(want), free(xv);
    dp_tensor_free(x);
    ou_free_tensors(params, g->nparams);
    dp__onnx_graph_free(g);
}

/* ---- the direct calls -------------------------------------------------------- */

static int prelu_c11(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *w)
{
    int64_t c = dp_tensor_numel(w);
    int rc = dp_reshape(&w, w, 1, &c);
    return rc ? rc : dp_prelu(y, x, w);
}
static int prelu(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *w)
{
    return dp_prelu(y, x, w);
}
static int softmax(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *w)
{
    (void)w;
    return dp_softmax(y, x);
}
static int log_softmax(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *w)
{
    (void)w;
    return dp_log_softmax(y, x);
}
/* Softmax over x (2, 3, 4, 5) seen as a matrix of `cols` columns: ONNX's
 * axis 1 before opset 13 (60 columns), the last axis (5). */
static int softmax_rows(dp_tensor_t **y, dp_tensor_t *x, int64_t cols)
{
    int64_t m[2] = {dp_tensor_numel(x) / cols, cols}, s[4] = {2, 3, 4, 5};
    dp_tensor_t *xm, *ym;
    int rc = dp_reshape(&xm, x, 2, m);
    rc = rc ? rc : dp_softmax(&ym, xm);
    return rc ? rc : dp_reshape(y, ym, 4, s);
}
static int softmax_flat(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *w)
{
    (void)w;
    return softmax_rows(y, x, 60);
}
static int softmax_last(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *w)
{
    (void)w;
    return softmax_rows(y, x, 5);
}
static int add(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *w)
{
    return dp_binary(y, DP_BINARY_ADD, x, w);
}
static int sub(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *w)
{
    return dp_binary(y, DP_BINARY_SUB, x, w);
}
static int mul(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *w)
{
    return dp_binary(y, DP_BINARY_MUL, x, w);
}
static int div_(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *w)
{
    return dp_binary(y, DP_BINARY_DIV, x, w);
}
static int gmax(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *w)
{
    (void)w;
    return dp_global_max_pool2d(y, x);
}
static int matmul(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *w)
{
    return dp_matmul(y, x, w);
}
static int transpose(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *w)
{
    (void)w;
    return dp_transpose(y, x);
}
static int gemm_ta(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *w)
{
    dp_tensor_t *xt;
    int rc = dp_transpose(&xt, x);
    return rc ? rc : dp_linear(y, xt, w, NULL, DP_WEIGHT_IN_OUT);
}
static const dp_conv_transpose2d_params deconv_p = {.stride_h = 2,
                                                    .stride_w = 2,
                                                    .output_padding_h = 1,
                                                    .groups = 2,
                                                    .pad_top = 1,
                                                    .pad_left = 0,
                                                    .pad_bottom = 0,
                                                    .pad_right = 1};
static int deconv(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *w)
{
    return dp_conv_transpose2d(y, x, w, NULL, &deconv_p);
}
static int gelu(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *w)
{
    (void)w;
    return dp_activation(y, x, DP_ACT_GELU, 0, 0);
}
static int gelu_tanh(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *w)
{
    (void)w;
    return dp_activation(y, x, DP_ACT_GELU_TANH, 0, 0);
}
static int split_first(dp_tensor_t **y, dp_tensor_t *x, dp_tensor_t *w)
{
    (void)w;
    dp_tensor_t *ys[2];
    int rc = dp_split(ys, x, 2, (const int64_t[]){2, 4});
    *y = ys[0];
    return rc;
}

/* ---- attributes --------------------------------------------------------------- */

static void axis1(ou_model *m, Onnx__NodeProto *n)
{
    ou_attr_int(m, n, "axis", 1);
}
static void trans_a(ou_model *m, Onnx__NodeProto *n)
{
    ou_attr_int(m, n, "transA", 1);
}
static void deconv_attrs(ou_model *m, Onnx__NodeProto *n)
{
    ou_attr_ints(m, n, "strides", 2, (const int64_t[]){2, 2});
    ou_attr_ints(m, n, "pads", 4, (const int64_t[]){1, 0, 0, 1});
    ou_attr_ints(m, n, "output_padding", 2, (const int64_t[]){1, 0});
    ou_attr_int(m, n, "group", 2);
}
static void tanh_approx(ou_model *m, Onnx__NodeProto *n)
{
    ou_attr_string(m, n, "approximate", "tanh");
}
static void split_2_4(ou_model *m, Onnx__NodeProto *n)
{
    ou_attr_int(m, n, "axis", 1);
    ou_attr_ints(m, n, "split", 2, (const int64_t[]){2, 4});
}
static void split_h_2_4(ou_model *m, Onnx__NodeProto *n)
{
    ou_attr_int(m, n, "axis", 2);
    ou_attr_ints(m, n, "split", 2, (const int64_t[]){2, 4});
}

static void test_graph_ops(void **state)
{
    (void)state;
    /* clang-format off */
    static const op_case cases[] = {
        {"PRelu slope (C, 1, 1)", "PRelu", 13, 4, {2, 16, 3, 3}, 3, {16, 1, 1}, 0.8f, NULL, prelu_c11, true},
        {"PRelu slope (1)", "PRelu", 13, 4, {2, 3, 4, 5}, 1, {1}, 0.8f, NULL, prelu, true},
        {"Softmax (N, C) opset 13", "Softmax", 13, 2, {3, 7}, 0, {0}, 0, NULL, softmax, false},
        {"Softmax (N, C) opset 11", "Softmax", 11, 2, {3, 7}, 0, {0}, 0, NULL, softmax, false},
        {"Softmax opset 11 of (N, C, H, W): rows", "Softmax", 11, 4, {2, 3, 4, 5}, 0, {0}, 0, NULL, softmax_flat, false},
        {"Softmax last axis of (N, C, H, W)", "Softmax", 13, 4, {2, 3, 4, 5}, 0, {0}, 0, NULL, softmax_last, false},
        {"LogSoftmax axis 1 of (N, C, H, W)", "LogSoftmax", 13, 4, {2, 3, 4, 5}, 0, {0}, 0, axis1, log_softmax, false},
        {"Add (C, 1, 1)", "Add", 13, 4, {2, 3, 4, 5}, 3, {3, 1, 1}, 0, NULL, add, false},
        {"Sub (1, C, 1, 1)", "Sub", 13, 4, {2, 3, 4, 5}, 4, {1, 3, 1, 1}, 0, NULL, sub, false},
        {"Mul (C) on (N, C)", "Mul", 13, 2, {4, 3}, 1, {3}, 0, NULL, mul, false},
        {"Div by one value", "Div", 13, 4, {2, 3, 4, 5}, 1, {1}, 2.0f, NULL, div_, false},
        {"GlobalMaxPool", "GlobalMaxPool", 13, 4, {2, 3, 4, 5}, 0, {0}, 0, NULL, gmax, true},
        {"MatMul (3, 4) (4, 5)", "MatMul", 13, 2, {3, 4}, 2, {4, 5}, 0, NULL, matmul, false},
        {"Transpose (3, 4)", "Transpose", 13, 2, {3, 4}, 0, {0}, 0, NULL, transpose, false},
        {"Gemm transA", "Gemm", 13, 2, {4, 3}, 2, {4, 5}, 0, trans_a, gemm_ta, false},
        {"ConvTranspose g2 s2 pads 1,0,0,1 op 1,0", "ConvTranspose", 13, 4, {2, 4, 3, 4}, 4, {4, 2, 3, 3}, 0,
         deconv_attrs, deconv, false},
        {"Gelu", "Gelu", 13, 4, {2, 3, 4, 5}, 0, {0}, 0, NULL, gelu, false},
        {"Gelu approximate tanh", "Gelu", 13, 4, {2, 3, 4, 5}, 0, {0}, 0, tanh_approx, gelu_tanh, false},
        {"Split 2, 4 (opset 11)", "Split", 11, 4, {2, 6, 3, 3}, 0, {0}, 0, split_2_4, split_first, false},
    };
    /* clang-format on */
    for (size_t i = 0; i < COUNTOF(cases); i++)
        check_case(&cases[i]);
}

/* Split from opset 13 takes its sizes as an input (a Constant here): x
 * (2, 6, 3, 3) into 1, 3 and 2 channels; y is the last piece, and the
 * pieces before it are read by no node. */
static void test_split_input(void **state)
{
    (void)state;
    ou_model m;
    ou_begin(&m, 13);
    ou_input(&m, "x", 4, (const int64_t[]){-1, 6, 3, 3});
    ou_constant_i64(&m, "sizes", 3, (const int64_t[]){1, 3, 2});
    Onnx__NodeProto *n = ou_node(&m, "Split", "/split/Split", "x,sizes", "a,b,y");
    ou_attr_int(&m, n, "axis", 1);
    ou_output(&m, "y");
    dp__onnx_graph *g = ou_load(&m, "split13.onnx");
    static const int64_t xs[4] = {2, 6, 3, 3};
    float xv[108];
    ou_fill(4, xv, 108, 1.0f, 0.0f);
    dp_tensor_t *x = upload(4, xs, xv);
    int64_t ny, ys[4];
    float *y = ou_run(g, gc_dev, &x, &ny, ys, NULL);
    assert_int_equal(ys[1], 2);
    double worst = 0;
    for (int b = 0; b < 2; b++)
        for (int c = 0; c < 2; c++)
            for (int i = 0; i < 9; i++)
                worst = tu_worst_diff(worst, y[(b * 2 + c) * 9 + i], xv[(b * 6 + 4 + c) * 9 + i],
                                      "the last piece", i);
    printf("Split 1, 3, 2 (opset 13, sizes as an input): the last piece is channels 4 and 5 of "
           "x, largest difference %g\n",
           worst);
    assert_true(worst == 0.0);
    ou_gradcheck(g, "Split opset 13", 4, xs, 23, false);
    free(y);
    dp_tensor_free(x);
    dp__onnx_graph_free(g);
}

static void perm_021(ou_model *m, Onnx__NodeProto *n)
{
    ou_attr_ints(m, n, "perm", 3, (const int64_t[]){0, 2, 1});
}
static void alpha2(ou_model *m, Onnx__NodeProto *n)
{
    ou_attr_float(m, n, "alpha", 2.0f);
}
static void axis2(ou_model *m, Onnx__NodeProto *n)
{
    ou_attr_int(m, n, "axis", 2);
}
static void bad_output_shape(ou_model *m, Onnx__NodeProto *n)
{
    deconv_attrs(m, n);
    ou_attr_ints(m, n, "output_shape", 2, (const int64_t[]){9, 9});
}

/* Split along an axis other than the channels, and of a vector: x of
 * shape xs cut at `axis` into 2 and 3; y is the second piece, compared
 * with x's own values, then checked by finite differences. */
static void split_axis_case(int rank, const int64_t *xs, int axis)
{
    ou_model m;
    ou_begin(&m, 11);
    ou_input(&m, "x", rank, xs);
    Onnx__NodeProto *n = ou_node(&m, "Split", "/split/Split", "x", "a,y");
    ou_attr_int(&m, n, "axis", axis);
    ou_attr_ints(&m, n, "split", 2, (const int64_t[]){2, 3});
    ou_output(&m, "y");
    dp__onnx_graph *g = ou_load(&m, "split_axis.onnx");
    int64_t nx = count(rank, xs), outer = 1, inner = 1;
    for (int d = 0; d < rank; d++)
        if (d != axis)
            *(d < axis ? &outer : &inner) *= xs[d];
    float *xv = malloc((size_t)nx * sizeof *xv);
    ou_fill(rank, xv, nx, 1.0f, 0.0f);
    dp_tensor_t *x = upload(rank, xs, xv);
    int64_t ny, ys[4];
    float *y = ou_run(g, gc_dev, &x, &ny, ys, NULL);
    assert_int_equal(ny, outer * 3 * inner);
    assert_int_equal(ys[axis], 3);
    double worst = 0;
    for (int64_t o = 0; o < outer; o++) /* piece 2 is rows 2..4 of axis */
        for (int64_t c = 0; c < 3; c++)
            for (int64_t i = 0; i < inner; i++)
                worst = tu_worst_diff(worst, y[(o * 3 + c) * inner + i],
                                      xv[(o * 5 + 2 + c) * inner + i], "the second piece", i);
    printf("Split 2, 3 along axis %d of a rank-%d tensor: the second piece is x's, largest "
           "difference %g\n",
           axis, rank, worst);
    assert_true(worst == 0.0);
    ou_gradcheck(g, "Split along another axis", rank, xs, 29 + axis, false);
    free(y);
    free(xv);
    dp_tensor_free(x);
    dp__onnx_graph_free(g);
}

static void test_split_axes(void **state)
{
    (void)state;
    split_axis_case(4, (const int64_t[]){2, 3, 5, 4}, 2);
    split_axis_case(4, (const int64_t[]){2, 3, 4, 5}, 3);
    split_axis_case(3, (const int64_t[]){2, 5, 3}, 1);
    split_axis_case(1, (const int64_t[]){5}, 0);
}

/* Refused at load, or when the shapes are known, in one line naming the
 * node. */
static void test_graph_refusals(void **state)
{
    (void)state;
    ou_model m;
    op_case c = {"perm.onnx", "Transpose", 13, 3, {2, 3, 4}, 0, {0}, 0, perm_021, NULL, false};
    graph_of(&m, &c);
    ou_refused(&m, c.name, WORDS("node '/layer/Op' (Transpose)", "perm of 3 axes"));
    c = (op_case){"alpha.onnx", "Gemm", 13, 2, {4, 3}, 2, {3, 5}, 0, alpha2, NULL, false};
    graph_of(&m, &c);
    ou_refused(&m, c.name, WORDS("node '/layer/Op' (Gemm)", "alpha 2"));
    static const struct {
        op_case c;
        const char *error;
    } at_run[] = {
        {{"softmax.onnx", "Softmax", 13, 4, {2, 3, 4, 5}, 0, {0}, 0, axis2, NULL, false},
         "node '/layer/Op' (Softmax): axis 2 of [2, 3, 4, 5] (opset 13): dptrain's softmax runs "
         "over "
         "the channels (axis 1) or the last axis only"},
        {{"add.onnx", "Add", 13, 4, {2, 3, 4, 5}, 1, {5}, 0, NULL, NULL, false},
         "node '/layer/Op' (Add): [2, 3, 4, 5] and [5]: dptrain broadcasts"},
        {{"split.onnx", "Split", 11, 4, {2, 6, 4, 3}, 0, {0}, 0, split_h_2_4, NULL, false},
         "node '/layer/Op' (Split): its sizes sum to 6, not the 4 of axis 2 of [2, 6, 4, 3]"},
        {{"prelu.onnx", "PRelu", 13, 4, {2, 3, 4, 5}, 1, {2}, 0, NULL, NULL, false},
         "node '/layer/Op' (PRelu): a slope [2] is neither one per channel"},
        {{"deconv.onnx",
          "ConvTranspose",
          13,
          4,
          {2, 4, 3, 4},
          4,
          {4, 2, 3, 3},
          0,
          bad_output_shape,
          NULL,
          false},
         "node '/layer/Op' (ConvTranspose): output_shape 9 x 9 is not the 7 x 8"},
    };
    for (size_t i = 0; i < COUNTOF(at_run); i++) {
        const op_case *r = &at_run[i].c;
        graph_of(&m, r);
        dp__onnx_graph *g = ou_load(&m, r->name);
        int64_t nx = count(r->xr, r->xs);
        float *xv = calloc((size_t)nx, sizeof *xv);
        dp_tensor_t *x = upload(r->xr, r->xs, xv);
        ou_run(g, gc_dev, &x, NULL, NULL, at_run[i].error);
        free(xv);
        dp_tensor_free(x);
        dp__onnx_graph_free(g);
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_graph_ops, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_split_input, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_split_axes, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_graph_refusals, gc_open_device, gc_close_device),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
