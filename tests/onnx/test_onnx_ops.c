/* The ONNX operators of windows over images, each in a graph written with
 * protobuf-c (onnxutil.c) and run through the loader: Conv with groups,
 * depthwise with a channel multiplier, dilations, strides and pads on
 * each side gives what dp_conv2d gives called directly with the same
 * weights, auto_pad SAME_UPPER / SAME_LOWER / VALID what the pads they
 * stand for give, and the gradients through each graph agree with finite
 * differences; torch.onnx.export's Identity nodes that share one
 * initializer among convolutions make one parameter; settings dptrain
 * cannot run are refused in one line naming the node. */
#include "onnxutil.h"

#include "gradcheck.h"
#include "onnx/onnx_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One Conv node on x (N, C, H, W) with weight (K, C / group, R, S) and
 * bias (K) drawn from seed; attributes as given (pads NULL: none). */
typedef struct conv_case {
    const char *name;
    int64_t N, C, H, W, K, R, S;
    int group, sh, sw, dh, dw;
    int64_t pads[4]; /* top, left, bottom, right */
    const char *auto_pad;
} conv_case;

static void conv_graph(ou_model *m, const conv_case *c, uint64_t seed, bool with_pads)
{
    int64_t ws[4] = {c->K, c->C / c->group, c->R, c->S}, wn = ws[0] * ws[1] * ws[2] * ws[3];
    float *w = malloc((size_t)wn * sizeof *w), b[64];
    ou_fill(seed, w, wn, 0.5f, 0.0f);
    ou_fill(seed + 1, b, c->K, 0.2f, 0.0f);
    ou_begin(m, 13);
    ou_input(m, "x", 4, (const int64_t[]){-1, c->C, c->H, c->W});
    ou_init(m, "conv.weight", 4, ws, w);
    ou_init(m, "conv.bias", 1, &c->K, b);
    Onnx__NodeProto *n = ou_node(m, "Conv", "/conv/Conv", "x,conv.weight,conv.bias", "y");
    ou_attr_ints(m, n, "kernel_shape", 2, (const int64_t[]){c->R, c->S});
    ou_attr_ints(m, n, "strides", 2, (const int64_t[]){c->sh, c->sw});
    ou_attr_ints(m, n, "dilations", 2, (const int64_t[]){c->dh, c->dw});
    ou_attr_int(m, n, "group", c->group);
    if (with_pads)
        ou_attr_ints(m, n, "pads", 4, c->pads);
    if (c->auto_pad)
        ou_attr_string(m, n, "auto_pad", c->auto_pad);
    ou_output(m, "y");
    free(w);
}

static dp_tensor_t *random_input(int64_t N, int64_t C, int64_t H, int64_t W, uint64_t seed)
{
    int64_t s[4] = {N, C, H, W}, n = N * C * H * W;
    float *v = malloc((size_t)n * sizeof *v);
    ou_fill(seed, v, n, 1.0f, 0.0f);
    dp_tensor_t *x = upload(4, s, v);
    free(v);
    return x;
}

/* The graph against dp_conv2d with params p on the same x, w, b. */
static void check_conv(const conv_case *c, const dp_conv2d_params *p)
{
    ou_model m;
    conv_graph(&m, c, 7, c->auto_pad == NULL);
    dp__onnx_graph *g = ou_load(&m, c->name);
    assert_int_equal(g->nparams, 2);
    assert_string_equal(g->params[0].name, "conv.weight");
    dp_tensor_t *x = random_input(c->N, c->C, c->H, c->W, 3), *params[2];
    ou_tensors(g, gc_dev, params, NULL);
    int64_t n, shape[4];
    float *got = ou_run(g, gc_dev, &x, &n, shape, NULL);
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    dp_tensor_t *y;
    OK(dp_conv2d(&y, x, params[0], params[1], p));
    assert_int_equal(dp_tensor_numel(y), n);
    for (int d = 0; d < 4; d++)
        assert_int_equal(dp_tensor_dim(y, d), shape[d]);
    float *want = download(y);
    printf("%-28s y [%lld, %lld, %lld, %lld]: largest difference from dp_conv2d %g\n", c->name,
           (long long)shape[0], (long long)shape[1], (long long)shape[2], (long long)shape[3],
           tu_max_diff("outputs", got, want, n));
    assert_true(tu_max_diff("outputs", got, want, n) == 0.0);
    dp_tape_end(tape);
    dp_tape_reset(tape);
    dp_tape_close(tape);
    ou_gradcheck(g, c->name, 4, (const int64_t[]){c->N, c->C, c->H, c->W}, 11, false);
    free(got);
    free(want);
    dp_tensor_free(x);
    ou_free_tensors(params, 2);
    dp__onnx_graph_free(g);
}

/* Groups, depthwise (a multiplier of 2), dilation, strides and pads on
 * each side, as torch.onnx.export writes nn.Conv2d's. */
static void test_conv_geometry(void **state)
{
    (void)state;
    static const conv_case cases[] = {
        {"groups 2", 2, 4, 7, 6, 6, 3, 2, 2, 1, 1, 1, 1, {1, 0, 1, 0}, NULL},
        {"depthwise x2, stride 2", 2, 3, 8, 7, 6, 3, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, NULL},
        {"dilation 2x3", 1, 2, 9, 10, 3, 3, 3, 1, 1, 1, 2, 3, {2, 3, 2, 3}, NULL},
        {"pads 1, 0, 2, 1", 2, 3, 6, 5, 4, 3, 3, 1, 1, 2, 1, 1, {1, 0, 2, 1}, NULL},
        {"grouped, dilated, one-sided", 1, 4, 7, 7, 4, 2, 3, 2, 2, 1, 2, 1, {0, 2, 1, 0}, NULL},
    };
    for (size_t i = 0; i < COUNTOF(cases); i++) {
        const conv_case *c = &cases[i];
        dp_conv2d_params p = {.stride_h = c->sh,
                              .stride_w = c->sw,
                              .groups = c->group,
                              .dilation_h = c->dh,
                              .dilation_w = c->dw,
                              .pad_top = (int)c->pads[0],
                              .pad_left = (int)c->pads[1],
                              .pad_bottom = (int)c->pads[2],
                              .pad_right = (int)c->pads[3]};
        check_conv(c, &p);
    }
}

/* auto_pad: ceil(H / stride) rows out; SAME_UPPER puts the odd row of
 * padding below (and column right), SAME_LOWER above (left); VALID none.
 * H = 7, stride 2, kernel 4: 4 rows out need 3 + 4 - 7 = 3 rows of pads,
 * 1 above and 2 below (UPPER) or 2 and 1 (LOWER); W = 6, stride 1, kernel
 * 3, dilation 2: 6 columns need 5 + 5 - 6 = 4, 2 and 2. */
static void test_auto_pad(void **state)
{
    (void)state;
    conv_case c = {"auto_pad SAME_UPPER", 2, 2, 7, 6, 3, 4, 3, 1, 2, 1, 1, 2, {0}, "SAME_UPPER"};
    dp_conv2d_params p = {.stride_h = 2,
                          .stride_w = 1,
                          .dilation_w = 2,
                          .pad_top = 1,
                          .pad_left = 2,
                          .pad_bottom = 2,
                          .pad_right = 2};
    check_conv(&c, &p);
    c.name = "auto_pad SAME_LOWER";
    c.auto_pad = "SAME_LOWER";
    p.pad_top = 2;
    p.pad_bottom = 1;
    check_conv(&c, &p);
    c.name = "auto_pad VALID";
    c.auto_pad = "VALID";
    p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 0;
    check_conv(&c, &p);
}

/* torch.onnx.export in eval mode folds batch norm into the convolutions
 * and, where two folded biases are equal, writes one initializer that
 * Identity nodes hand to each: one parameter, read by both, whose
 * gradient is the sum of both uses. */
static void test_identity_shares_initializer(void **state)
{
    (void)state;
    ou_model m;
    float w1[2 * 2 * 9], w2[2 * 2 * 9], b[2] = {0.25f, -0.5f};
    ou_fill(1, w1, 36, 0.5f, 0.0f);
    ou_fill(2, w2, 36, 0.5f, 0.0f);
    ou_begin(&m, 13);
    ou_input(&m, "x", 4, (const int64_t[]){-1, 2, 5, 5});
    ou_init(&m, "onnx::Conv_1", 4, (const int64_t[]){2, 2, 3, 3}, w1);
    ou_init(&m, "onnx::Conv_2", 4, (const int64_t[]){2, 2, 3, 3}, w2);
    ou_init(&m, "onnx::Conv_3", 1, (const int64_t[]){2}, b);
    ou_node(&m, "Identity", "id1", "onnx::Conv_3", "b1");
    ou_node(&m, "Identity", "id2", "b1", "b2");
    Onnx__NodeProto *n = ou_node(&m, "Conv", "c1", "x,onnx::Conv_1,b1", "h");
    ou_attr_ints(&m, n, "pads", 4, (const int64_t[]){1, 1, 1, 1});
    n = ou_node(&m, "Conv", "c2", "h,onnx::Conv_2,b2", "y");
    ou_attr_ints(&m, n, "pads", 4, (const int64_t[]){1, 1, 1, 1});
    ou_output(&m, "y");
    dp__onnx_graph *g = ou_load(&m, "identity.onnx");
    assert_int_equal(g->nparams, 3);
    assert_string_equal(g->params[2].name, "onnx::Conv_3");
    dp_tensor_t *x = random_input(2, 2, 5, 5, 4), *params[3];
    ou_tensors(g, gc_dev, params, NULL);
    int64_t n_out;
    float *got = ou_run(g, gc_dev, &x, &n_out, NULL, NULL);
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    dp_conv2d_params p = {.pad_h = 1, .pad_w = 1};
    dp_tensor_t *h, *y;
    OK(dp_conv2d(&h, x, params[0], params[2], &p));
    OK(dp_conv2d(&y, h, params[1], params[2], &p));
    float *want = download(y);
    printf("two convolutions sharing a bias through Identity: largest difference %g\n",
           tu_max_diff("outputs", got, want, n_out));
    assert_true(tu_max_diff("outputs", got, want, n_out) == 0.0);
    dp_tape_end(tape);
    dp_tape_reset(tape);
    dp_tape_close(tape);
    ou_gradcheck(g, "Identity-shared bias", 4, (const int64_t[]){2, 2, 5, 5}, 5, false);
    free(got);
    free(want);
    dp_tensor_free(x);
    ou_free_tensors(params, 3);
    dp__onnx_graph_free(g);
}

/* Settings dptrain cannot run: refused at load, or, where the input's
 * shape decides, when the graph runs; one line naming the node. */
static void test_conv_refusals(void **state)
{
    (void)state;
    conv_case c = {"bad", 1, 4, 6, 6, 4, 3, 3, 2, 1, 1, 1, 1, {0}, NULL};
    ou_model m;
    conv_graph(&m, &c, 1, false);
    ou_attr_string(&m, m.graph.node[0], "auto_pad", "SAME_MIDDLE");
    ou_refused(&m, "auto.onnx", WORDS("node '/conv/Conv' (Conv)", "auto_pad 'SAME_MIDDLE'"));
    conv_graph(&m, &c, 1, true);
    ou_attr_string(&m, m.graph.node[0], "auto_pad", "VALID");
    ou_refused(&m, "both.onnx", WORDS("node '/conv/Conv' (Conv)", "both auto_pad VALID and pads"));
    conv_graph(&m, &c, 1, false);
    m.graph.node[0]->attribute[2]->ints[1] = 0; /* dilations 1, 0 */
    ou_refused(&m, "dil.onnx", WORDS("(Conv)", "dilations 1, 0: each must be 1 to 1048576"));
    conv_graph(&m, &c, 1, false);
    ou_attr_ints(&m, m.graph.node[0], "pads", 4, (const int64_t[]){0, -1, 0, 0});
    ou_refused(&m, "neg.onnx", WORDS("(Conv)", "pads 0, -1, 0, 0: each must be 0 to 1048576"));
    /* A weight of 2 input channels per group, 3 groups: 6 channels, the
     * input has 4; known when it runs. */
    c.group = 3;
    c.K = 3;
    c.C = 6;
    conv_graph(&m, &c, 1, false);
    m.graph.input[0]->type->tensor_type->shape->dim[1]->dim_value = 4;
    dp__onnx_graph *g = ou_load(&m, "groups.onnx");
    dp_tensor_t *x = random_input(1, 4, 6, 6, 1);
    ou_run(g, gc_dev, &x, NULL, NULL,
           "node '/conv/Conv' (Conv): a weight [3, 2, 3, 3] does not "
           "fit input [1, 4, 6, 6] in 3 group(s)");
    dp_tensor_free(x);
    dp__onnx_graph_free(g);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_conv_geometry, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_auto_pad, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_identity_shares_initializer, gc_open_device,
                                        gc_close_device),
        cmocka_unit_test_setup_teardown(test_conv_refusals, gc_open_device, gc_close_device),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
