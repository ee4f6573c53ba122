/* Convolutions as ONNX and PyTorch have them: groups (depthwise among
 * them), dilation and padding that differs between the sides. Values
 * against a direct loop written here, in either input layout; gradients
 * against finite differences with every CPU implementation the chooser can
 * pick for each shape, forced through the choice table and seen in the
 * trace; the chooser never picks one that does not serve a shape; the
 * reference bf16 path; the FLOPs of a grouped convolution; and a model
 * file of depthwise separable blocks (MobileNet's) that trains. */
#include "gradcheck.h"

#include "dp/nn.h"
#include "dp/optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct conv_case {
    const char *name;
    int64_t xs[4], ws[4]; /* x (N, C, H, W), w (K, C / groups, R, S) */
    dp_conv2d_params p;
} conv_case;

static const conv_case cases[] = {
    {"groups 3", {2, 6, 7, 6}, {9, 2, 3, 3}, {.pad_h = 1, .pad_w = 1, .groups = 3}},
    {"depthwise stride 2",
     {2, 8, 9, 8},
     {8, 1, 3, 3},
     {.stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1, .groups = 8}},
    {"depthwise x2 channels", {2, 4, 6, 6}, {8, 1, 3, 3}, {.pad_h = 1, .pad_w = 1, .groups = 4}},
    {"dilation 2",
     {2, 5, 9, 8},
     {6, 5, 3, 3},
     {.pad_h = 2, .pad_w = 1, .dilation_h = 2, .dilation_w = 2}},
    {"dilation (3, 1) stride 2",
     {2, 4, 11, 7},
     {5, 4, 3, 2},
     {.stride_h = 2, .stride_w = 1, .dilation_h = 3, .dilation_w = 1}},
    {"pads 0, 1, 2, 1 stride 2",
     {2, 4, 8, 7},
     {6, 4, 3, 3},
     {.stride_h = 2, .stride_w = 2, .pad_top = 0, .pad_left = 1, .pad_bottom = 2, .pad_right = 1}},
    {"same 4x4 (pads 1, 1, 2, 2)",
     {2, 3, 6, 6},
     {4, 3, 4, 4},
     {.pad_top = 1, .pad_left = 1, .pad_bottom = 2, .pad_right = 2}},
    {"all: groups 2 dilation 2 pads 2, 0, 1, 3",
     {2, 4, 8, 7},
     {6, 2, 3, 2},
     {.groups = 2,
      .dilation_h = 2,
      .dilation_w = 2,
      .pad_top = 2,
      .pad_bottom = 1,
      .pad_right = 3}},
};
enum { NCASES = sizeof cases / sizeof cases[0] };

/* The geometry with defaults filled in, as the op resolves it. */
typedef struct geom {
    int64_t N, C, H, W, K, R, S, P, Q, G;
    int sh, sw, dh, dw, pt, pl, pb, pr;
} geom;

static geom geom_of(const conv_case *c)
{
    const dp_conv2d_params *p = &c->p;
    bool sides = p->pad_top || p->pad_left || p->pad_bottom || p->pad_right;
    geom g = {.N = c->xs[0],
              .C = c->xs[1],
              .H = c->xs[2],
              .W = c->xs[3],
              .K = c->ws[0],
              .R = c->ws[2],
              .S = c->ws[3],
              .G = p->groups ? p->groups : 1,
              .sh = p->stride_h ? p->stride_h : 1,
              .sw = p->stride_w ? p->stride_w : 1,
              .dh = p->dilation_h ? p->dilation_h : 1,
              .dw = p->dilation_w ? p->dilation_w : 1,
              .pt = sides ? p->pad_top : p->pad_h,
              .pl = sides ? p->pad_left : p->pad_w,
              .pb = sides ? p->pad_bottom : p->pad_h,
              .pr = sides ? p->pad_right : p->pad_w};
    g.P = (g.H + g.pt + g.pb - g.dh * (g.R - 1) - 1) / g.sh + 1;
    g.Q = (g.W + g.pl + g.pr - g.dw * (g.S - 1) - 1) / g.sw + 1;
    return g;
}

/* The definition, in double: output channel k of group k / (K / G) sums
 * over that group's C / G input channels, tap (r, s) reading row
 * p sh - pt + r dh and column q sw - pl + s dw, zero outside. */
static double *reference(const geom *g, const float *x, const float *w, const float *b)
{
    int64_t cg = g->C / g->G, kg = g->K / g->G;
    double *y = malloc((size_t)(g->N * g->K * g->P * g->Q) * sizeof *y);
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t k = 0; k < g->K; k++)
            for (int64_t p = 0; p < g->P; p++)
                for (int64_t q = 0; q < g->Q; q++) {
                    double sum = b ? b[k] : 0.0;
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t r = 0; r < g->R; r++)
                            for (int64_t s = 0; s < g->S; s++) {
                                int64_t h = p * g->sh - g->pt + r * g->dh;
                                int64_t v = q * g->sw - g->pl + s * g->dw;
                                if (h < 0 || h >= g->H || v < 0 || v >= g->W)
                                    continue;
                                int64_t ci = k / kg * cg + c;
                                sum += (double)x[((n * g->C + ci) * g->H + h) * g->W + v] *
                                       w[((k * cg + c) * g->R + r) * g->S + s];
                            }
                    y[((n * g->K + k) * g->P + p) * g->Q + q] = sum;
                }
    return y;
}

static void test_values(void **state)
{
    (void)state;
    for (int i = 0; i < NCASES; i++) {
        const conv_case *c = &cases[i];
        geom g = geom_of(c);
        dp_rng rng;
        dp_rng_init(&rng, 40, (uint64_t)i);
        float *xv = normal_array(&rng, count(4, c->xs), 1.0f);
        float *wv = normal_array(&rng, count(4, c->ws), 0.5f);
        float *bv = normal_array(&rng, g.K, 0.5f);
        double *want = reference(&g, xv, wv, bv);
        int64_t is[4] = {g.C, g.C, 1, 1};
        float *idv = identity_1x1(g.C);
        for (int nhwc = 0; nhwc < 2; nhwc++) {
            dp_tape_t *tape;
            OK(dp_tape_init(&tape, false));
            dp_tape_begin(tape);
            dp_tensor_t *x = upload(4, c->xs, xv), *w = upload(4, c->ws, wv);
            dp_tensor_t *b = upload(1, &g.K, bv), *id = upload(4, is, idv), *y;
            OK(dp_conv2d(&y, in_layout(x, id, nhwc), w, b, &c->p));
            assert_int_equal(dp_tensor_dim(y, 2), g.P);
            assert_int_equal(dp_tensor_dim(y, 3), g.Q);
            float *got = download(y);
            char what[128];
            snprintf(what, sizeof what, "conv2d %s (%s input)", c->name, nhwc ? "NHWC" : "NCHW");
            assert_values(what, got, want, g.N * g.K * g.P * g.Q, 1e-5, 1e-5);
            printf("%-44s %s input: %lld outputs (%lld x %lld) equal the loop's\n", c->name,
                   nhwc ? "NHWC" : "NCHW", (long long)(g.N * g.K * g.P * g.Q), (long long)g.P,
                   (long long)g.Q);
            free(got);
            dp_tape_end(tape);
            dp_tape_close(tape);
            dp_tensor_free(x), dp_tensor_free(w), dp_tensor_free(b), dp_tensor_free(id);
        }
        free(xv), free(wv), free(bv), free(want), free(idv);
    }
}

/* in: x (NCHW), w, b, the identity 1x1 weight, which puts x in NHWC as
 * every convolution after a network's first sees it. */
static int build(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const conv_case *c = ctx;
    dp_tensor_t *x;
    int rc = dp_conv2d(&x, in[0], in[3], NULL, NULL);
    return rc ? rc : dp_conv2d(out, x, in[1], in[2], &c->p);
}

/* The gradient check of case c, with `forced` in the choice table for all
 * three passes, or (forced < 0) an empty table, filled by measurement.
 * Returns the implementation the three passes ran, -2 when they ran
 * different ones. */
static int check(const conv_case *c, int forced, uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 3);
    int64_t bs = c->ws[0], is[4] = {c->xs[1], c->xs[1], 1, 1};
    char name[96];
    snprintf(name, sizeof name, "%s %s", forced < 0 ? "auto" : dp__conv_impl_name(forced), c->name);
    gc_problem g = {.name = name, .build = build, .ctx = c, .seed = seed, .checks = 40};
    g.in[g.nin++] = input("x", 4, c->xs, normal_array(&rng, count(4, c->xs), 1.0f), true);
    g.in[g.nin++] = input("w", 4, c->ws, normal_array(&rng, count(4, c->ws), 0.5f), true);
    g.in[g.nin++] = input("b", 1, &bs, normal_array(&rng, bs, 0.5f), true);
    g.in[g.nin++] = input("id", 4, is, identity_1x1(c->xs[1]), false);
    dp__conv_shape s = gc_conv_shape(c->xs, c->ws, &c->p, DP_PRECISION_FP32);
    dp_conv_choices_clear();
    if (forced >= 0)
        gc_force_conv_impl(&s, (dp__conv_impl)forced);
    dp__conv_trace(true);
    dp_set_conv_algo(DP_CONV_ALGO_AUTO);
    gc_run(&g);
    int ran = dp__conv_trace_find(gc_dev, &s, DP__CONV_FORWARD);
    for (int pass = 1; pass < DP__CONV_PASSES; pass++)
        if (dp__conv_trace_find(gc_dev, &s, (dp__conv_pass)pass) != ran)
            ran = -2;
    dp__conv_trace(false);
    dp_set_conv_algo(DP_CONV_ALGO_DIRECT);
    return ran;
}

/* Direct and blocked serve every shape; im2col + matrix product every
 * shape without groups (dilation and one-sided padding are its columns'
 * offsets). */
static void test_gradients_every_implementation(void **state)
{
    (void)state;
    for (int i = 0; i < NCASES; i++) {
        const conv_case *c = &cases[i];
        dp__conv_impl impls[] = {DP__CONV_DIRECT, DP__CONV_BLOCKED, DP__CONV_GEMM};
        int n = c->p.groups > 1 ? 2 : 3;
        for (int j = 0; j < n; j++) {
            int ran = check(c, impls[j], 300 + (uint64_t)(10 * i + j));
            if (ran != (int)impls[j])
                fail_msg("%s: the %s implementation did not run (%d did)", c->name,
                         dp__conv_impl_name(impls[j]), ran);
        }
    }
    dp_conv_choices_clear();
}

/* Under DP_CONV_ALGO_AUTO the chooser times only the implementations that
 * serve a shape (direct and blocked for groups; not Winograd for
 * dilation), and a loaded choice that does not serve it (gemm for groups,
 * Winograd for dilation) runs direct. */
static void test_chooser_offers_what_serves(void **state)
{
    (void)state;
    const conv_case *shapes[2] = {&cases[0], &cases[3]}; /* groups 3, dilation 2 */
    for (int k = 0; k < 2; k++) {
        const conv_case *c = shapes[k];
        check(c, -1, 500 + (uint64_t)k);
        dp__conv_shape s = gc_conv_shape(c->xs, c->ws, &c->p, DP_PRECISION_FP32);
        for (int pass = 0; pass < DP__CONV_PASSES; pass++) {
            int impl = dp__conv_choice_find(&s, (dp__conv_pass)pass);
            printf("%s: %s measured and chose %s\n", c->name,
                   dp__conv_pass_name((dp__conv_pass)pass), dp__conv_impl_name(impl));
            bool serves = impl == DP__CONV_DIRECT || impl == DP__CONV_BLOCKED ||
                          (impl == DP__CONV_GEMM && c->p.groups <= 1);
            if (!serves)
                fail_msg("%s: the chooser picked %s", c->name, dp__conv_impl_name(impl));
        }
        dp__conv_impl bad = c->p.groups > 1 ? DP__CONV_GEMM : DP__CONV_WINOGRAD;
        int ran = check(c, bad, 510 + (uint64_t)k);
        printf("%s: a loaded choice of %s ran %s\n", c->name, dp__conv_impl_name(bad),
               dp__conv_impl_name(ran));
        assert_int_equal(ran, DP__CONV_DIRECT);
    }
    dp_conv_choices_clear();
}

/* The reference bf16 path runs the grouped, dilated, one-sided direct
 * kernel on operands rounded to bf16: within bf16's rounding of the
 * float32 result. */
static void test_bf16_reference(void **state)
{
    (void)state;
    if (!dp_device_has(gc_dev, DP_DEVICE_BF16))
        tu_skip("cpu:0 has no bf16 support on %s", tu_cpu_name());
    const conv_case *c = &cases[NCASES - 1];
    geom g = geom_of(c);
    dp_rng rng;
    dp_rng_init(&rng, 41, 0);
    float *xv = normal_array(&rng, count(4, c->xs), 1.0f);
    float *wv = normal_array(&rng, count(4, c->ws), 0.5f);
    double *want = reference(&g, xv, wv, NULL);
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    dp_set_precision(DP_PRECISION_BF16_REFERENCE);
    dp_tensor_t *x = upload(4, c->xs, xv), *w = upload(4, c->ws, wv), *y, *y32;
    OK(dp_conv2d(&y, x, w, NULL, &c->p));
    dp_set_precision(DP_PRECISION_FP32);
    assert_int_equal(dp_tensor_dtype(y), DP_BF16);
    OK(dp_cast(&y32, y, DP_F32));
    float *got = download(y32);
    /* inputs and output each rounded to 8 bits: a few 2^-8 of the sums */
    assert_values("bf16 reference conv2d", got, want, g.N * g.K * g.P * g.Q, 2e-2, 3e-2);
    printf("bf16 reference path, %s: within bf16 rounding of the loop\n", c->name);
    free(got), free(xv), free(wv), free(want);
    dp_tape_end(tape);
    dp_tape_close(tape);
    dp_tensor_free(x), dp_tensor_free(w);
}

/* MobileNet's depthwise separable blocks, as an nn.Sequential file:
 * depthwise 3x3 (groups = channels), pointwise 1x1, ReLU6; then grouped
 * convolutions, one with padding='same' for an even kernel (one row more
 * below than above), one dilated. */
static const char model_text[] = "nn.Conv2d(1, 8, 3, stride=2, padding=1, bias=False)\n"
                                 "nn.BatchNorm2d(8)\n"
                                 "nn.ReLU6(inplace=True)\n"
                                 "nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)\n"
                                 "nn.BatchNorm2d(8)\n"
                                 "nn.ReLU6(inplace=True)\n"
                                 "nn.Conv2d(8, 16, kernel_size=1, bias=False)\n"
                                 "nn.BatchNorm2d(16)\n"
                                 "nn.ReLU6()\n"
                                 "nn.Conv2d(16, 16, (3, 3), stride=(2, 2), padding=(1, 1), "
                                 "groups=16)\n"
                                 "nn.Conv2d(16, 16, 1)\n"
                                 "nn.ReLU6()\n"
                                 "nn.Conv2d(16, 16, 2, padding='same', groups=4)\n"
                                 "nn.ReLU6()\n"
                                 "nn.Conv2d(16, 16, 3, padding=2, dilation=2, groups=4)\n"
                                 "nn.AdaptiveAvgPool2d(1)\n"
                                 "nn.Flatten()\n"
                                 "nn.Linear(16, 3)\n";

static void test_depthwise_separable_model_trains(void **state)
{
    (void)state;
    const char *path = tu_tmp_path("mobilenet_style.txt");
    assert_int_equal(tu_write_file(path, model_text, strlen(model_text)), 0);
    const int64_t chw[3] = {1, 12, 12};
    const dp_model_def *def;
    OK(dp_model_def_load(&def, path, chw));
    dp_layer_summary *rows;
    int nrows;
    OK(dp_model_summary(def, chw, &rows, &nrows));
    /* FLOPs per sample: 2 per multiply-add, C / groups R S of them an
     * output element; the depthwise 3x3 on 8 x 6 x 6: 2 x 288 x 9 */
    int64_t want[] = {2 * 8 * 36 * 9,  2 * 288 * 9,        2 * 16 * 36 * 8,   2 * 16 * 9 * 9,
                      2 * 16 * 9 * 16, 2 * 16 * 9 * 4 * 4, 2 * 16 * 9 * 4 * 9};
    int convs = 0;
    for (int i = 0; i < nrows; i++) {
        if (strcmp(rows[i].op, "conv2d") != 0)
            continue;
        printf("%-8s (%lld, %lld, %lld) params %6lld FLOPs %8lld\n", rows[i].op,
               (long long)rows[i].shape[1], (long long)rows[i].shape[2],
               (long long)rows[i].shape[3], (long long)rows[i].params, (long long)rows[i].flops);
        assert_true(convs < 7);
        assert_int_equal(rows[i].flops, want[convs]);
        convs++;
    }
    free(rows);
    assert_int_equal(convs, 7);
    enum { N = 24, STEPS = 120 };
    dp_model_t *m;
    OK(dp_model_init(&m, def, gc_dev, 7));
    /* the depthwise weight is PyTorch's (C, 1, 3, 3) */
    int at = dp_params_find(dp_model_params(m), "3.weight");
    assert_true(at >= 0);
    dp_tensor_t *dw = dp_params_get(dp_model_params(m), at);
    assert_int_equal(dp_tensor_dim(dw, 0), 8);
    assert_int_equal(dp_tensor_dim(dw, 1), 1);
    float images[N * 144];
    int32_t labels[N];
    dp_rng rng;
    dp_rng_init(&rng, 3, 0);
    for (int i = 0; i < N; i++) {
        labels[i] = i % 3;
        for (int j = 0; j < 144; j++) /* each class lights its own band of rows */
            images[i * 144 + j] =
                0.3f * dp_rng_normal(&rng) + (j / 12 / 4 == labels[i] ? 1.0f : 0.0f);
    }
    int64_t xs[4] = {N, 1, 12, 12}, n = N;
    dp_tensor_t *x, *y;
    OK(dp_tensor_from_host(&x, gc_dev, DP_F32, 4, xs, images));
    OK(dp_tensor_from_host(&y, gc_dev, DP_I32, 1, &n, labels));
    dp_optimizer_options o;
    dp_optimizer_options_default(&o, DP_OPTIMIZER_ADAM, 0.01f);
    gc_train_falls(m, x, y, &o, STEPS, 0.25f, "depthwise separable model file");
    dp_tensor_free(x);
    dp_tensor_free(y);
    dp_model_close(m);
}

/* Groups that do not divide the channels, and padding given both ways,
 * are refused with one line. */
static void test_refusals(void **state)
{
    (void)state;
    int64_t xs[4] = {1, 6, 5, 5}, ws[4] = {4, 3, 3, 3};
    float v[150] = {0};
    dp_tensor_t *x = upload(4, xs, v), *w = upload(4, ws, v), *y;
    tu_quiet_log();
    assert_int_equal(dp_conv2d(&y, x, w, NULL, &(dp_conv2d_params){.groups = 4}), DP_ESHAPE);
    tu_assert_error_mentions("groups 4 must divide");
    assert_int_equal(dp_conv2d(&y, x, w, NULL, &(dp_conv2d_params){.groups = 1}), DP_ESHAPE);
    tu_assert_error_mentions("does not fit weight");
    assert_int_equal(
        dp_conv2d(&y, x, w, NULL, &(dp_conv2d_params){.groups = 2, .pad_h = 1, .pad_bottom = 1}),
        DP_EINVAL);
    tu_assert_error_mentions("padding given both ways");
    assert_int_equal(dp_conv2d(&y, x, w, NULL, &(dp_conv2d_params){.groups = 2, .dilation_h = 3}),
                     DP_ESHAPE);
    tu_assert_error_mentions("the 3 x 3 kernel dilated by 3 x 1 spans 7 x 3, more than input");
    dp_log_set(NULL, NULL);
    dp_tensor_free(x), dp_tensor_free(w);
}

static int open_device_and_tmp(void **state)
{
    return tu_setup_tmp(state) || gc_open_device(state);
}

static int close_device_and_tmp(void **state)
{
    return gc_close_device(state) | tu_teardown_tmp(state);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_gradients_every_implementation),
        cmocka_unit_test(test_chooser_offers_what_serves),
        cmocka_unit_test(test_bf16_reference),
        cmocka_unit_test(test_depthwise_separable_model_trains),
        cmocka_unit_test(test_refusals),
    };
    return tu_run(argc, argv, tests, open_device_and_tmp, close_device_and_tmp);
}
