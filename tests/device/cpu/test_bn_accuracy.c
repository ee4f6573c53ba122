/* Batch normalisation's training pass against float64 on cpu:0.
 *
 * A convolution with a bias, then batch norm, on image-like input (60% of
 * the pixels exactly 0, as Fashion-MNIST's background): the gradient of
 * L = sum r y with respect to the convolution's weight against one
 * computed here in double (conv_ref, the batch statistics in two passes,
 * the backward formula). The gradient of the bias, 0 in exact arithmetic
 * (batch norm subtracts the mean), is printed: it is the convolution's own
 * float sum of dx. Then batch norm alone on x whose mean is 50 times its
 * spread, NCHW and NHWC: y and dx against double, and sum dx per channel
 * (0 in exact arithmetic) against sum |dx|.
 *
 * With oneDNN's training primitives, which sum in float, the weight
 * gradient was 9.2e-06 off, and in NHWC y 6.7e-06 and dx 1.2e-06 off; on
 * a whole net the error compounds (tests/device/cpu/bn_float64.py compares the first
 * step's gradients with PyTorch's in float64). */
#include "gradcheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct bn_ctx {
    dp_tensor_t *running_mean, *running_var;
    bool conv;
    bool nhwc;
    dp_tensor_t *identity;
} bn_ctx;

/* in: x, then with conv: w, b; then gamma, beta. */
static int build(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const bn_ctx *c = ctx;
    dp_tensor_t *z = in[0];
    int k = 1;
    dp_batch_norm_params bn = {.training = true};
    if (c->conv) {
        dp_conv2d_params p = {.pad_h = 1, .pad_w = 1};
        int rc = dp_conv2d(&z, in[0], in[1], in[2], &p);
        if (rc)
            return rc;
        k = 3;
    } else if (c->nhwc) {
        z = in_layout(in[0], c->identity, true);
    }
    return dp_batch_norm2d(out, z, in[k], in[k + 1], c->running_mean, c->running_var, &bn);
}

/* Batch norm of z (N, C, HW) in double, training, then ReLU with `relu`:
 * y, and dz for dL/dy = r. */
static void bn_ref(const double *z, const float *gamma, const float *beta, const double *r,
                   bool relu, int64_t N, int64_t C, int64_t HW, double *y, double *dz)
{
    double n = (double)(N * HW);
    for (int64_t c = 0; c < C; c++) {
        double mean = 0, var = 0, sr = 0, srx = 0;
        for (int64_t b = 0; b < N; b++)
            for (int64_t i = 0; i < HW; i++)
                mean += z[(b * C + c) * HW + i];
        mean /= n;
        for (int64_t b = 0; b < N; b++)
            for (int64_t i = 0; i < HW; i++) {
                double d = z[(b * C + c) * HW + i] - mean;
                var += d * d;
            }
        double inv_std = 1.0 / sqrt(var / n + 1e-5);
        for (int64_t b = 0; b < N; b++)
            for (int64_t i = 0; i < HW; i++) {
                int64_t k = (b * C + c) * HW + i;
                double xhat = (z[k] - mean) * inv_std;
                y[k] = gamma[c] * xhat + beta[c];
                if (relu && y[k] <= 0)
                    y[k] = 0;
                double g = relu && y[k] <= 0 ? 0 : r[k];
                sr += g;
                srx += g * xhat;
            }
        for (int64_t b = 0; b < N; b++)
            for (int64_t i = 0; i < HW; i++) {
                int64_t k = (b * C + c) * HW + i;
                double xhat = (z[k] - mean) * inv_std;
                double g = relu && y[k] <= 0 ? 0 : r[k];
                dz[k] = gamma[c] * inv_std * (g - sr / n - xhat * srx / n);
            }
    }
}

static double max_abs_d(const double *v, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        m = tu_worst_abs(m, v[i], "float64 reference", i);
    return m;
}

/* max |got - want| / max |want| */
static double rel_err(const float *got, const double *want, int64_t n)
{
    double d = 0;
    for (int64_t i = 0; i < n; i++)
        d = tu_worst_diff(d, got[i], want[i], "float32 vs float64", i);
    return d / max_abs_d(want, n);
}

static double *projection(dp_rng *rng, int64_t n)
{
    float *f = normal_array(rng, n, 1.0f);
    double *r = to_double(f, n);
    free(f);
    return r;
}

static void test_conv_bn_gradient(void **state)
{
    (void)state;
    conv_geom g = make_geom(32, 1, 28, 28, 16, 3, 3, 1, 1, 1, 1);
    dp_rng rng;
    dp_rng_init(&rng, 41, 1);
    int64_t xs[4] = {g.N, 1, g.H, g.W}, ws[4] = {g.K, 1, 3, 3}, cs = g.K;
    int64_t nx = count(4, xs), ny = g.N * g.K * g.P * g.Q, HW = g.P * g.Q;
    float *x = malloc((size_t)nx * sizeof *x);
    for (int64_t i = 0; i < nx; i++) { /* 60% background */
        float u = dp_rng_uniform(&rng);
        x[i] = u < 0.6f ? 0.0f : (u - 0.6f) / 0.4f;
    }
    float *w = normal_array(&rng, count(4, ws), 0.3f), *b = normal_array(&rng, cs, 0.1f);
    float *gamma = normal_array(&rng, cs, 0.1f), *beta = normal_array(&rng, cs, 0.1f);
    for (int64_t c = 0; c < cs; c++)
        gamma[c] += 1.0f;
    double *r = projection(&rng, ny);
    /* the reference */
    double *z = conv_ref(&g, x, w, b, false), *yref = malloc((size_t)ny * sizeof *yref);
    double *dz = malloc((size_t)ny * sizeof *dz), dw[144] = {0};
    bn_ref(z, gamma, beta, r, false, g.N, g.K, HW, yref, dz);
    for (int64_t n = 0; n < g.N; n++)
        for (int64_t k = 0; k < g.K; k++)
            for (int64_t p = 0; p < g.P; p++)
                for (int64_t q = 0; q < g.Q; q++)
                    for (int64_t u = 0; u < 3; u++)
                        for (int64_t v = 0; v < 3; v++) {
                            int64_t h = p + u - 1, ww = q + v - 1;
                            if (h >= 0 && h < g.H && ww >= 0 && ww < g.W)
                                dw[k * 9 + u * 3 + v] += dz[((n * g.K + k) * g.P + p) * g.Q + q] *
                                                         x[(n * g.H + h) * g.W + ww];
                        }
    /* dptrain */
    float *rm = calloc((size_t)cs, sizeof *rm), *rv = malloc((size_t)cs * sizeof *rv);
    for (int64_t c = 0; c < cs; c++)
        rv[c] = 1.0f;
    bn_ctx ctx = {upload(1, &cs, rm), upload(1, &cs, rv), true, false, NULL};
    gc_problem pb = {.name = "conv + batch_norm2d", .build = build, .ctx = &ctx};
    pb.in[pb.nin++] = input("x", 4, xs, x, false);
    pb.in[pb.nin++] = input("w", 4, ws, w, true);
    pb.in[pb.nin++] = input("b", 1, &cs, b, true);
    pb.in[pb.nin++] = input("gamma", 1, &cs, gamma, true);
    pb.in[pb.nin++] = input("beta", 1, &cs, beta, true);
    float *grads[GC_MAX_IN];
    gc_analytic(&pb, r, ny, grads);
    double dw_err = rel_err(grads[1], dw, 144), db = 0;
    for (int64_t c = 0; c < cs; c++)
        db = tu_worst_abs(db, grads[2][c], "bias gradient", c);
    db /= max_abs_d(dw, 144);
    printf("conv + batch norm: the weight gradient %.2e off float64's (max |difference| / "
           "max |value|); the bias gradient (0 in exact arithmetic) %.2e of the weight's\n",
           dw_err, db);
    assert_true(dw_err < 4e-6);
    for (int i = 0; i < pb.nin; i++) {
        free(grads[i]);
        free(pb.in[i].v);
    }
    dp_tensor_free(ctx.running_mean);
    dp_tensor_free(ctx.running_var);
    free(rm), free(rv), free(r), free(z), free(yref), free(dz);
}

/* Batch norm alone on x of mean 50 and spread 1 per channel. */
static void bn_offset_case(bool nhwc)
{
    dp_rng rng;
    dp_rng_init(&rng, 43, 1);
    int64_t xs[4] = {6, 16, 9, 9}, cs = 16, N = 6, C = 16, HW = 81;
    int64_t nx = count(4, xs);
    float *x = normal_array(&rng, nx, 1.0f);
    for (int64_t i = 0; i < nx; i++)
        x[i] += 50.0f;
    float *gamma = normal_array(&rng, cs, 0.1f), *beta = normal_array(&rng, cs, 0.1f);
    for (int64_t c = 0; c < cs; c++)
        gamma[c] += 1.0f;
    double *r = projection(&rng, nx), *xd = to_double(x, nx);
    double *yref = malloc((size_t)nx * sizeof *yref), *dx = malloc((size_t)nx * sizeof *dx);
    bn_ref(xd, gamma, beta, r, false, N, C, HW, yref, dx);
    float *rm = calloc((size_t)cs, sizeof *rm), *rv = malloc((size_t)cs * sizeof *rv);
    for (int64_t c = 0; c < cs; c++)
        rv[c] = 1.0f;
    bn_ctx ctx = {upload(1, &cs, rm), upload(1, &cs, rv), false, nhwc, NULL};
    float *id = identity_1x1(C);
    int64_t is[4] = {C, C, 1, 1};
    ctx.identity = upload(4, is, id);
    gc_problem pb = {.name = "batch_norm2d", .build = build, .ctx = &ctx};
    pb.in[pb.nin++] = input("x", 4, xs, x, true);
    pb.in[pb.nin++] = input("gamma", 1, &cs, gamma, true);
    pb.in[pb.nin++] = input("beta", 1, &cs, beta, true);
    dp_tensor_t *in[3] = {upload(4, xs, x), upload(1, &cs, gamma), upload(1, &cs, beta)}, *yt;
    dp_tape_t *tape; /* owns the layout's copy and y */
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    OK(build(&yt, in, &ctx));
    float *y = download(yt);
    dp_tape_end(tape);
    dp_tape_close(tape);
    for (int i = 0; i < 3; i++)
        dp_tensor_free(in[i]);
    float *grads[GC_MAX_IN];
    gc_analytic(&pb, r, nx, grads);
    double y_err = rel_err(y, yref, nx), dx_err = rel_err(grads[0], dx, nx), drift = 0;
    for (int64_t c = 0; c < C; c++) {
        double s = 0, sa = 0;
        for (int64_t b = 0; b < N; b++)
            for (int64_t i = 0; i < HW; i++) {
                s += grads[0][(b * C + c) * HW + i];
                sa += fabs(grads[0][(b * C + c) * HW + i]);
            }
        drift = tu_worst_rel(drift, s, 0, sa, "sum dx", c);
    }
    printf("batch norm of x with mean 50, spread 1%s: y %.2e and dx %.2e off float64's; "
           "|sum dx| / sum |dx| per channel at most %.2e\n",
           nhwc ? " (NHWC)" : "", y_err, dx_err, drift);
    assert_true(y_err < 2e-6);
    assert_true(dx_err < 5e-7);
    assert_true(drift < 5e-7);
    for (int i = 0; i < pb.nin; i++) {
        free(grads[i]);
        free(pb.in[i].v);
    }
    dp_tensor_free(ctx.running_mean);
    dp_tensor_free(ctx.running_var);
    dp_tensor_free(ctx.identity);
    free(id), free(y), free(rm), free(rv), free(r), free(xd), free(yref), free(dx);
}

static void test_bn_offset_nchw(void **state)
{
    (void)state;
    bn_offset_case(false);
}

static void test_bn_offset_nhwc(void **state)
{
    (void)state;
    bn_offset_case(true);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_conv_bn_gradient, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_bn_offset_nchw, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_bn_offset_nhwc, gc_open_device, gc_close_device),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
