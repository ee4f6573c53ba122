/* dp_conv_transpose2d, F.conv_transpose2d: values against the scatter loop
 * written here (each input element adds w times itself into the outputs
 * its taps reach), in either input layout, with stride, padding per side,
 * output padding, groups and dilation; gradients against finite
 * differences; its FLOPs; and an nn.Sequential file with ConvTranspose2d
 * (an encoder-decoder) that trains. */
#include "gradcheck.h"

#include "dp/nn.h"
#include "dp/optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tcase {
    const char *name;
    int64_t xs[4], ws[4]; /* x (N, C, H, W), w (C, K / groups, R, S) */
    dp_conv_transpose2d_params p;
} tcase;

static const tcase cases[] = {
    {"3x3", {2, 3, 4, 5}, {3, 4, 3, 3}, {0}},
    {"stride 2 pad 1 output_padding 1",
     {2, 4, 4, 3},
     {4, 3, 3, 3},
     {.stride_h = 2,
      .stride_w = 2,
      .pad_h = 1,
      .pad_w = 1,
      .output_padding_h = 1,
      .output_padding_w = 1}},
    {"4x4 stride 2 pad 1 (DCGAN's)",
     {2, 5, 3, 3},
     {5, 2, 4, 4},
     {.stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1}},
    {"groups 2 dilation 2",
     {2, 4, 4, 4},
     {4, 3, 3, 2},
     {.groups = 2, .dilation_h = 2, .dilation_w = 2}},
    {"depthwise stride 3 output_padding (2, 0)",
     {2, 3, 3, 4},
     {3, 1, 2, 3},
     {.stride_h = 3, .stride_w = 2, .output_padding_h = 2, .groups = 3}},
    {"pads 0, 1, 2, 1 stride 2",
     {2, 3, 4, 4},
     {3, 2, 3, 3},
     {.stride_h = 2, .stride_w = 2, .pad_left = 1, .pad_bottom = 2, .pad_right = 1}},
};
enum { NCASES = sizeof cases / sizeof cases[0] };

typedef struct geom {
    int64_t N, C, H, W, K, R, S, P, Q, G;
    int sh, sw, dh, dw, pt, pl;
} geom;

static geom geom_of(const tcase *c)
{
    const dp_conv_transpose2d_params *p = &c->p;
    bool sides = p->pad_top || p->pad_left || p->pad_bottom || p->pad_right;
    int pb = sides ? p->pad_bottom : p->pad_h, pr = sides ? p->pad_right : p->pad_w;
    geom g = {.N = c->xs[0],
              .C = c->xs[1],
              .H = c->xs[2],
              .W = c->xs[3],
              .R = c->ws[2],
              .S = c->ws[3],
              .G = p->groups ? p->groups : 1,
              .sh = p->stride_h ? p->stride_h : 1,
              .sw = p->stride_w ? p->stride_w : 1,
              .dh = p->dilation_h ? p->dilation_h : 1,
              .dw = p->dilation_w ? p->dilation_w : 1,
              .pt = sides ? p->pad_top : p->pad_h,
              .pl = sides ? p->pad_left : p->pad_w};
    g.K = c->ws[1] * g.G;
    g.P = (g.H - 1) * g.sh - g.pt - pb + g.dh * (g.R - 1) + p->output_padding_h + 1;
    g.Q = (g.W - 1) * g.sw - g.pl - pr + g.dw * (g.S - 1) + p->output_padding_w + 1;
    return g;
}

/* The definition, in double: x[n, c, h, w] adds x w[c, k', r, s] into
 * y[n, g K / G + k', h sh - pt + r dh, w sw - pl + s dw] for c's group g,
 * where that lies inside y. */
static double *reference(const geom *g, const float *x, const float *w, const float *b)
{
    int64_t cg = g->C / g->G, kg = g->K / g->G, ny = g->N * g->K * g->P * g->Q;
    double *y = malloc((size_t)ny * sizeof *y);
    for (int64_t i = 0; i < ny; i++)
        y[i] = b ? b[i / (g->P * g->Q) % g->K] : 0.0;
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t c = 0; c < g->C; c++)
            for (int64_t h = 0; h < g->H; h++)
                for (int64_t v = 0; v < g->W; v++)
                    for (int64_t k = 0; k < kg; k++)
                        for (int64_t r = 0; r < g->R; r++)
                            for (int64_t s = 0; s < g->S; s++) {
                                int64_t p = h * g->sh - g->pt + r * g->dh;
                                int64_t q = v * g->sw - g->pl + s * g->dw;
                                if (p < 0 || p >= g->P || q < 0 || q >= g->Q)
                                    continue;
                                int64_t ko = c / cg * kg + k;
                                y[((n * g->K + ko) * g->P + p) * g->Q + q] +=
                                    (double)x[((n * g->C + c) * g->H + h) * g->W + v] *
                                    w[((c * kg + k) * g->R + r) * g->S + s];
                            }
    return y;
}

static void test_values(void **state)
{
    (void)state;
    for (int i = 0; i < NCASES; i++) {
        const tcase *c = &cases[i];
        geom g = geom_of(c);
        dp_rng rng;
        dp_rng_init(&rng, 60, (uint64_t)i);
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
            OK(dp_conv_transpose2d(&y, in_layout(x, id, nhwc), w, b, &c->p));
            assert_int_equal(dp_tensor_dim(y, 1), g.K);
            assert_int_equal(dp_tensor_dim(y, 2), g.P);
            assert_int_equal(dp_tensor_dim(y, 3), g.Q);
            float *got = download(y);
            char what[128];
            snprintf(what, sizeof what, "conv_transpose2d %s (%s input)", c->name,
                     nhwc ? "NHWC" : "NCHW");
            assert_values(what, got, want, g.N * g.K * g.P * g.Q, 1e-5, 1e-5);
            printf("%-42s %s input: y (%lld, %lld, %lld) equals the loop's\n", c->name,
                   nhwc ? "NHWC" : "NCHW", (long long)g.K, (long long)g.P, (long long)g.Q);
            free(got);
            dp_tape_end(tape);
            dp_tape_close(tape);
            dp_tensor_free(x), dp_tensor_free(w), dp_tensor_free(b), dp_tensor_free(id);
        }
        free(xv), free(wv), free(bv), free(want), free(idv);
    }
}

/* in: x (NCHW), w, b, the identity 1x1 weight (x in NHWC, as after a
 * convolution). */
static int build(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const tcase *c = ctx;
    dp_tensor_t *x;
    int rc = dp_conv2d(&x, in[0], in[3], NULL, NULL);
    return rc ? rc : dp_conv_transpose2d(out, x, in[1], in[2], &c->p);
}

static void test_gradients(void **state)
{
    (void)state;
    for (int i = 0; i < NCASES; i++) {
        const tcase *c = &cases[i];
        dp_rng rng;
        dp_rng_init(&rng, 70, (uint64_t)i);
        int64_t bs = c->ws[1] * (c->p.groups ? c->p.groups : 1);
        int64_t is[4] = {c->xs[1], c->xs[1], 1, 1};
        char name[96];
        snprintf(name, sizeof name, "conv_transpose2d %s", c->name);
        gc_problem g = {
            .name = name, .build = build, .ctx = c, .seed = 80 + (uint64_t)i, .checks = 40};
        g.in[g.nin++] = input("x", 4, c->xs, normal_array(&rng, count(4, c->xs), 1.0f), true);
        g.in[g.nin++] = input("w", 4, c->ws, normal_array(&rng, count(4, c->ws), 0.5f), true);
        g.in[g.nin++] = input("b", 1, &bs, normal_array(&rng, bs, 0.5f), true);
        g.in[g.nin++] = input("id", 4, is, identity_1x1(c->xs[1]), false);
        gc_run(&g);
    }
}

/* An encoder-decoder: two strided convolutions down, two transposed ones
 * back up (PyTorch's weight (in, out / groups, R, S)), the classifier
 * reading the decoder's output. */
static const char model_text[] = "nn.Conv2d(1, 8, 3, stride=2, padding=1)\n"
                                 "nn.ReLU()\n"
                                 "nn.Conv2d(8, 16, 3, stride=2, padding=1)\n"
                                 "nn.ReLU()\n"
                                 "nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1, "
                                 "output_padding=1)\n"
                                 "nn.ReLU()\n"
                                 "nn.ConvTranspose2d(8, 4, kernel_size=4, stride=2, padding=1, "
                                 "groups=4, bias=False)\n"
                                 "nn.Flatten()\n"
                                 "nn.Linear(4 * 12 * 12, 3)\n";

static void test_model_file_trains(void **state)
{
    (void)state;
    const char *path = tu_tmp_path("encoder_decoder.txt");
    assert_int_equal(tu_write_file(path, model_text, strlen(model_text)), 0);
    const int64_t chw[3] = {1, 12, 12};
    const dp_model_def *def;
    OK(dp_model_def_load(&def, path, chw));
    dp_layer_summary *rows;
    int nrows, seen = 0;
    OK(dp_model_summary(def, chw, &rows, &nrows));
    /* 2 per multiply-add: each input element times K / groups R S; the
     * first from (16, 3, 3) to (8, 6, 6), the second from (8, 6, 6) to
     * (4, 12, 12) */
    const int64_t want_flops[2] = {2 * 16 * 9 * 8 * 9, 2 * 8 * 36 * 1 * 16};
    const int64_t want_params[2] = {16 * 8 * 9 + 8, 8 * 1 * 16};
    for (int i = 0; i < nrows; i++) {
        if (strcmp(rows[i].op, "conv_transpose2d") != 0)
            continue;
        printf("conv_transpose2d (%lld, %lld, %lld): params %lld, FLOPs %lld\n",
               (long long)rows[i].shape[1], (long long)rows[i].shape[2],
               (long long)rows[i].shape[3], (long long)rows[i].params, (long long)rows[i].flops);
        assert_true(seen < 2);
        assert_int_equal(rows[i].flops, want_flops[seen]);
        assert_int_equal(rows[i].params, want_params[seen]);
        seen++;
    }
    free(rows);
    assert_int_equal(seen, 2);
    enum { N = 24, STEPS = 100 };
    dp_model_t *m;
    OK(dp_model_init(&m, def, gc_dev, 11));
    int at = dp_params_find(dp_model_params(m), "6.weight");
    assert_true(at >= 0);
    dp_tensor_t *w6 = dp_params_get(dp_model_params(m), at);
    assert_int_equal(dp_tensor_dim(w6, 0), 8);
    assert_int_equal(dp_tensor_dim(w6, 1), 1);
    assert_true(dp_params_find(dp_model_params(m), "6.bias") < 0);
    float images[N * 144];
    int32_t labels[N];
    dp_rng rng;
    dp_rng_init(&rng, 4, 0);
    for (int i = 0; i < N; i++) {
        labels[i] = i % 3;
        for (int j = 0; j < 144; j++) /* each class lights its own band of columns */
            images[i * 144 + j] =
                0.3f * dp_rng_normal(&rng) + (j % 12 / 4 == labels[i] ? 1.0f : 0.0f);
    }
    int64_t xs[4] = {N, 1, 12, 12}, n = N;
    dp_tensor_t *x, *y;
    OK(dp_tensor_from_host(&x, gc_dev, DP_F32, 4, xs, images));
    OK(dp_tensor_from_host(&y, gc_dev, DP_I32, 1, &n, labels));
    dp_optimizer_options o;
    dp_optimizer_options_default(&o, DP_OPTIMIZER_ADAM, 0.005f);
    gc_train_falls(m, x, y, &o, STEPS, 0.25f, "encoder-decoder model file");
    dp_tensor_free(x);
    dp_tensor_free(y);
    dp_model_close(m);
}

static void test_refusals(void **state)
{
    (void)state;
    int64_t xs[4] = {1, 4, 3, 3}, ws[4] = {4, 2, 3, 3};
    float v[72] = {0};
    dp_tensor_t *x = upload(4, xs, v), *w = upload(4, ws, v), *y;
    tu_quiet_log();
    dp_conv_transpose2d_params p = {.stride_h = 2, .stride_w = 2, .output_padding_h = 2};
    assert_int_equal(dp_conv_transpose2d(&y, x, w, NULL, &p), DP_EINVAL);
    tu_assert_error_mentions("below the stride");
    p = (dp_conv_transpose2d_params){.groups = 3};
    assert_int_equal(dp_conv_transpose2d(&y, x, w, NULL, &p), DP_ESHAPE);
    tu_assert_error_mentions("does not fit weight");
    p = (dp_conv_transpose2d_params){.pad_h = 3};
    assert_int_equal(dp_conv_transpose2d(&y, x, w, NULL, &p), DP_ESHAPE);
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
        cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_model_file_trains),
        cmocka_unit_test(test_refusals),
    };
    return tu_run(argc, argv, tests, open_device_and_tmp, close_device_and_tmp);
}
