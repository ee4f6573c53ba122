/* The forward values of every op of dp/ops.h on cpu:0 (conv2d with and
 * without bias and ReLU, pooling in both layouts, linear in both weight
 * layouts, relu, add, flatten, reshape, cross-entropy and accuracy) against
 * a naive reference computed here in double. */
#include "gradcheck.h"

#include "dp/autograd.h"
#include "dp/core.h"
#include "dp/ops.h"
#include "dp/tensor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each test gets its own device, so that a sticky device error stays in the
 * test that caused it. */

/* ---- naive references (double, logical NCHW) --------------------------------- */

/* Pooling of x (N, C, H, W) given in double; avg counts the padding. */
static double *pool_ref(const double *x, int64_t N, int64_t C, int64_t H, int64_t W,
                        const dp_pool2d_params *pp, bool max, int64_t *P_out, int64_t *Q_out)
{
    int sh = pp->stride_h ? pp->stride_h : pp->kernel_h;
    int sw = pp->stride_w ? pp->stride_w : pp->kernel_w;
    int64_t P = (H + 2 * pp->pad_h - pp->kernel_h) / sh + 1;
    int64_t Q = (W + 2 * pp->pad_w - pp->kernel_w) / sw + 1;
    double *y = malloc((size_t)(N * C * P * Q) * sizeof *y);
    for (int64_t nc = 0; nc < N * C; nc++)
        for (int64_t p = 0; p < P; p++)
            for (int64_t q = 0; q < Q; q++) {
                double s = 0.0, m = -INFINITY;
                for (int r = 0; r < pp->kernel_h; r++)
                    for (int t = 0; t < pp->kernel_w; t++) {
                        int64_t h = p * sh - pp->pad_h + r, w = q * sw - pp->pad_w + t;
                        if (h < 0 || h >= H || w < 0 || w >= W)
                            continue;
                        double v = x[(nc * H + h) * W + w];
                        s += v;
                        m = v > m ? v : m;
                    }
                y[(nc * P + p) * Q + q] = max ? m : s / (pp->kernel_h * pp->kernel_w);
            }
    *P_out = P;
    *Q_out = Q;
    return y;
}

/* y (N, Dout) = x (N, Din) w + b, w as `layout` says. */
static double *linear_ref(const float *x, const float *w, const float *b, int64_t N, int64_t Din,
                          int64_t Dout, dp_weight_layout layout)
{
    double *y = malloc((size_t)(N * Dout) * sizeof *y);
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < Dout; o++) {
            double s = b ? b[o] : 0.0;
            for (int64_t i = 0; i < Din; i++)
                s += (double)x[n * Din + i] *
                     (layout == DP_WEIGHT_OUT_IN ? w[o * Din + i] : w[i * Dout + o]);
            y[n * Dout + o] = s;
        }
    return y;
}

static double xent_ref(const float *z, const int32_t *labels, int64_t N, int64_t K, bool mean)
{
    double total = 0.0;
    for (int64_t n = 0; n < N; n++) {
        double m = z[n * K];
        for (int64_t k = 1; k < K; k++)
            m = fmax(m, z[n * K + k]);
        double s = 0.0;
        for (int64_t k = 0; k < K; k++)
            s += exp(z[n * K + k] - m);
        total += m + log(s) - z[n * K + labels[n]];
    }
    return mean ? total / (double)N : total;
}

/* ---- forward values --------------------------------------------------------------- */

static void conv_forward_case(const conv_geom *g, bool bias, bool relu, uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 2);
    int64_t xs[4] = {g->N, g->C, g->H, g->W}, ws[4] = {g->K, g->C, g->R, g->S};
    float *xv = normal_array(&rng, count(4, xs), 1.0f),
          *wv = normal_array(&rng, count(4, ws), 0.5f);
    float *bv = normal_array(&rng, g->K, 0.5f);
    dp_tensor_t *x = upload(4, xs, xv), *w = upload(4, ws, wv), *b = upload(1, &g->K, bv);
    dp_conv2d_params p = {
        .stride_h = g->sh, .stride_w = g->sw, .pad_h = g->ph, .pad_w = g->pw, .relu = relu};
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    dp_tensor_t *y, *f;
    OK(dp_conv2d(&y, x, w, bias ? b : NULL, &p));
    assert_int_equal(dp_tensor_ndim(y), 4);
    assert_int_equal(dp_tensor_dim(y, 0), g->N);
    assert_int_equal(dp_tensor_dim(y, 1), g->K);
    assert_int_equal(dp_tensor_dim(y, 2), g->P);
    assert_int_equal(dp_tensor_dim(y, 3), g->Q);
    OK(dp_flatten(&f, y));
    assert_int_equal(dp_tensor_dim(f, 1), g->K * g->P * g->Q);
    float *yv = download(y), *fv = download(f);
    dp_tape_end(tape);
    dp_tape_close(tape);
    double *want = conv_ref(g, xv, wv, bias ? bv : NULL, relu);
    int64_t n = g->N * g->K * g->P * g->Q;
    char what[96];
    snprintf(what, sizeof what, "conv2d %lldx%lld s%dx%d p%dx%d%s%s y", (long long)g->H,
             (long long)g->W, g->sh, g->sw, g->ph, g->pw, bias ? " bias" : "", relu ? " relu" : "");
    assert_values(what, yv, want, n, 1e-5, 1e-5);
    snprintf(what, sizeof what, "flatten(conv2d %lldx%lld)", (long long)g->H, (long long)g->W);
    assert_values(what, fv, want, n, 1e-5, 1e-5);
    free(want), free(yv), free(fv), free(xv), free(wv), free(bv);
    dp_tensor_free(x), dp_tensor_free(w), dp_tensor_free(b);
}

static void test_conv2d_forward(void **state)
{
    (void)state;
    conv_geom g1 = make_geom(2, 3, 6, 5, 4, 3, 2, 1, 1, 0, 0);
    conv_geom g2 = make_geom(2, 3, 5, 5, 4, 3, 3, 1, 1, 1, 1);
    conv_geom g3 = make_geom(2, 3, 7, 8, 5, 3, 3, 2, 2, 1, 1);
    conv_geom g4 = make_geom(2, 2, 6, 7, 3, 2, 3, 1, 2, 0, 1);
    conv_geom g5 = make_geom(1, 2, 10, 9, 3, 3, 3, 2, 2, 0, 0);
    conv_geom g6 = make_geom(3, 1, 28, 28, 6, 5, 5, 1, 1, 2, 2); /* LeNet's first layer */
    conv_forward_case(&g1, true, false, 1);
    conv_forward_case(&g2, false, false, 2);
    conv_forward_case(&g3, true, false, 3);
    conv_forward_case(&g4, true, false, 4);
    conv_forward_case(&g5, true, false, 5);
    conv_forward_case(&g2, true, true, 6);
    conv_forward_case(&g3, false, true, 7);
    conv_forward_case(&g6, true, true, 8);
}

static void pool_forward_case(const char *name, const int64_t *xs, dp_pool2d_params pp, bool nhwc,
                              uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 2);
    int64_t n = count(4, xs);
    float *xv = normal_array(&rng, n, 1.0f);
    dp_tensor_t *x = upload(4, xs, xv);
    int64_t C = xs[1];
    float *wv = identity_1x1(C);
    int64_t ws[4] = {C, C, 1, 1};
    dp_tensor_t *w = upload(4, ws, wv);
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    dp_tensor_t *in = x, *ya, *ym;
    if (nhwc)
        OK(dp_conv2d(&in, x, w, NULL, NULL)); /* the same values, stored NHWC */
    OK(dp_avg_pool2d(&ya, in, &pp));
    OK(dp_max_pool2d(&ym, in, &pp));
    float *av = download(ya), *mv = download(ym);
    int64_t P, Q, P2, Q2;
    double *xd = to_double(xv, n);
    double *wa = pool_ref(xd, xs[0], C, xs[2], xs[3], &pp, false, &P, &Q);
    double *wm = pool_ref(xd, xs[0], C, xs[2], xs[3], &pp, true, &P2, &Q2);
    assert_int_equal(dp_tensor_dim(ya, 2), P);
    assert_int_equal(dp_tensor_dim(ya, 3), Q);
    assert_int_equal(dp_tensor_dim(ym, 2), P);
    assert_int_equal(dp_tensor_dim(ym, 3), Q);
    dp_tape_end(tape);
    dp_tape_close(tape);
    char what[96];
    snprintf(what, sizeof what, "avg_pool2d %s", name);
    assert_values(what, av, wa, xs[0] * C * P * Q, 1e-5, 1e-6);
    snprintf(what, sizeof what, "max_pool2d %s", name);
    assert_values(what, mv, wm, xs[0] * C * P * Q, 0, 0);
    free(av), free(mv), free(xd), free(wa), free(wm), free(xv), free(wv);
    dp_tensor_free(x), dp_tensor_free(w);
}

static void test_pool2d_forward(void **state)
{
    (void)state;
    for (int nhwc = 0; nhwc < 2; nhwc++) {
        pool_forward_case(nhwc ? "k3 s2 p1 NHWC" : "k3 s2 p1", (int64_t[]){2, 3, 7, 7},
                          (dp_pool2d_params){3, 3, 2, 2, 1, 1, false, false, 1, 1}, nhwc, 1);
        pool_forward_case(nhwc ? "k2 NHWC" : "k2", (int64_t[]){2, 3, 6, 6},
                          (dp_pool2d_params){2, 2, 0, 0, 0, 0, false, false, 1, 1}, nhwc, 2);
        pool_forward_case(nhwc ? "k2x3 s1x2 NHWC" : "k2x3 s1x2", (int64_t[]){2, 2, 5, 8},
                          (dp_pool2d_params){2, 3, 1, 2, 0, 0, false, false, 1, 1}, nhwc, 3);
        pool_forward_case(nhwc ? "k3x2 s1x2 p1x1 NHWC" : "k3x2 s1x2 p1x1", (int64_t[]){1, 2, 6, 7},
                          (dp_pool2d_params){3, 2, 1, 2, 1, 1, false, false, 1, 1}, nhwc, 4);
        pool_forward_case(nhwc ? "k3 s2 uneven NHWC" : "k3 s2 uneven", (int64_t[]){1, 2, 10, 9},
                          (dp_pool2d_params){3, 3, 2, 2, 0, 0, false, false, 1, 1}, nhwc, 5);
    }
}

static void test_linear_forward(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 3, 2);
    int64_t N = 4, Din = 6, Dout = 3;
    for (int l = 0; l < 2; l++) {
        dp_weight_layout layout = l ? DP_WEIGHT_IN_OUT : DP_WEIGHT_OUT_IN;
        int64_t xs[2] = {N, Din}, ws[2] = {Dout, Din};
        if (l)
            ws[0] = Din, ws[1] = Dout;
        float *xv = normal_array(&rng, N * Din, 1.0f), *wv = normal_array(&rng, Din * Dout, 1.0f);
        float *bv = normal_array(&rng, Dout, 1.0f);
        dp_tensor_t *x = upload(2, xs, xv), *w = upload(2, ws, wv), *b = upload(1, &Dout, bv);
        for (int bias = 0; bias < 2; bias++) {
            dp_tape_t *tape;
            OK(dp_tape_init(&tape, false));
            dp_tape_begin(tape);
            dp_tensor_t *y;
            OK(dp_linear(&y, x, w, bias ? b : NULL, layout));
            assert_int_equal(dp_tensor_dim(y, 0), N);
            assert_int_equal(dp_tensor_dim(y, 1), Dout);
            float *yv = download(y);
            dp_tape_end(tape);
            dp_tape_close(tape);
            double *want = linear_ref(xv, wv, bias ? bv : NULL, N, Din, Dout, layout);
            assert_values(l ? "linear IN_OUT" : "linear OUT_IN", yv, want, N * Dout, 1e-5, 1e-5);
            free(yv), free(want);
        }
        /* the wrong layout for a non-square weight is a shape error */
        dp_tape_t *tape;
        OK(dp_tape_init(&tape, false));
        dp_tape_begin(tape);
        dp_tensor_t *y;
        tu_quiet_log();
        assert_int_equal(dp_linear(&y, x, w, NULL, l ? DP_WEIGHT_OUT_IN : DP_WEIGHT_IN_OUT),
                         DP_ESHAPE);
        dp_log_set(NULL, NULL);
        dp_tape_end(tape);
        dp_tape_close(tape);
        free(xv), free(wv), free(bv);
        dp_tensor_free(x), dp_tensor_free(w), dp_tensor_free(b);
    }
}

static void test_eltwise_reshape_forward(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 4, 2);
    int64_t s[4] = {2, 3, 2, 2}, n = 24, s2[2] = {4, 6};
    float *av = normal_array(&rng, n, 1.0f), *bv = normal_array(&rng, n, 1.0f);
    dp_tensor_t *a = upload(4, s, av), *b = upload(4, s, bv);
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    dp_tensor_t *r, *z, *f, *re;
    OK(dp_relu(&r, a));
    OK(dp_add(&z, a, b));
    OK(dp_flatten(&f, a));
    OK(dp_reshape(&re, a, 2, s2));
    assert_int_equal(dp_tensor_ndim(f), 2);
    assert_int_equal(dp_tensor_dim(f, 1), 12);
    assert_int_equal(dp_tensor_dim(f, 0), 2);
    assert_int_equal(dp_tensor_dim(re, 0), 4);
    assert_int_equal(dp_tensor_dim(re, 1), 6);
    float *rv = download(r), *zv = download(z), *fv = download(f), *rev = download(re);
    dp_tape_end(tape);
    dp_tape_close(tape);
    double want_r[24], want_z[24], want_f[24];
    for (int i = 0; i < n; i++) {
        want_r[i] = av[i] > 0 ? av[i] : 0.0;
        want_z[i] = (double)av[i] + bv[i];
        want_f[i] = av[i];
    }
    assert_values("relu", rv, want_r, n, 0, 0);
    assert_values("add", zv, want_z, n, 1e-7, 0);
    assert_values("flatten", fv, want_f, n, 0, 0);
    assert_values("reshape", rev, want_f, n, 0, 0);
    free(rv), free(zv), free(fv), free(rev), free(av), free(bv);
    dp_tensor_free(a), dp_tensor_free(b);
}

static void test_cross_entropy_forward(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 5, 2);
    int64_t N = 6, K = 5, zs[2] = {N, K};
    float *zv = normal_array(&rng, N * K, 2.0f);
    /* a row of large logits: the loss must not overflow */
    for (int k = 0; k < K; k++)
        zv[2 * K + k] += 80.0f;
    zv[4 * K + 1] = 95.0f;
    int32_t labels[6] = {0, 3, 4, 1, 1, 2};
    dp_tensor_t *z = upload(2, zs, zv), *lab = upload_labels(N, labels);
    for (int mean = 0; mean < 2; mean++) {
        dp_tape_t *tape;
        OK(dp_tape_init(&tape, false));
        dp_tape_begin(tape);
        dp_tensor_t *loss;
        OK(dp_cross_entropy(&loss, z, lab, mean ? DP_REDUCE_MEAN : DP_REDUCE_SUM));
        assert_int_equal(dp_tensor_numel(loss), 1);
        float got;
        OK(dp_tensor_to_host(loss, &got, sizeof got));
        dp_tape_end(tape);
        dp_tape_close(tape);
        double want = xent_ref(zv, labels, N, K, mean);
        tu_assert_close(got, want, 1e-6, 1e-6);
    }
    free(zv);
    dp_tensor_free(z), dp_tensor_free(lab);
}

static void test_accuracy_forward(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 6, 2);
    int64_t N = 7, K = 4, zs[2] = {N, K}, one = 1;
    float *zv = distinct_array(&rng, N * K, 0.25f);
    int32_t labels[7];
    int correct = 0;
    for (int n = 0; n < N; n++) {
        int best = 0;
        for (int k = 1; k < K; k++)
            if (zv[n * K + k] > zv[n * K + best])
                best = k;
        labels[n] = n % 3 == 0 ? (best + 1) % (int)K : best; /* rows 0, 3, 6 wrong */
        correct += labels[n] == best;
    }
    assert_int_equal(correct, 4);
    float start = 1.5f, got;
    dp_tensor_t *z = upload(2, zs, zv), *lab = upload_labels(N, labels),
                *acc = upload(1, &one, &start);
    OK(dp_accuracy_accumulate(acc, z, lab));
    OK(dp_tensor_to_host(acc, &got, sizeof got));
    assert_true(got == start + (float)correct);
    OK(dp_accuracy_accumulate(acc, z, lab));
    OK(dp_tensor_to_host(acc, &got, sizeof got));
    assert_true(got == start + 2.0f * (float)correct);
    free(zv);
    dp_tensor_free(z), dp_tensor_free(lab), dp_tensor_free(acc);
}

int main(int argc, char **argv)
{
    printf("forward values on cpu:0 with %d kernel thread(s)\n", gc_threads());
#define T(f) cmocka_unit_test_setup_teardown(f, gc_open_device, gc_close_device)
    const struct CMUnitTest tests[] = {
        T(test_conv2d_forward),          T(test_pool2d_forward),        T(test_linear_forward),
        T(test_eltwise_reshape_forward), T(test_cross_entropy_forward), T(test_accuracy_forward),
    };
#undef T
    return tu_run(argc, argv, tests, NULL, NULL);
}
