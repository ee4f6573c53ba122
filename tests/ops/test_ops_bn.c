/* batch_norm2d on cpu:0: forward values against references computed here
 * in double (the output, and the running statistics after one and after
 * two training calls), error cases (and adaptive_avg_pool2d's), and
 * finite-difference gradient checks, in both activation layouts. An NHWC
 * input is made as gradcheck.h's in_layout makes it: a 1x1 convolution with
 * the identity (its output is stored NHWC and holds exactly the input's
 * values).
 *
 * The gradient checker is tests/util/gradcheck.h's: L = sum_i r_i y_i for a fixed
 * random r, analytic gradients through dp_backward against central
 * differences summed in double, each check also required to be sensitive
 * to a gradient scaled by 1.1. In training mode every finite-difference
 * forward recomputes the batch statistics (and moves the running ones,
 * which the output does not depend on). */
#include "gradcheck.h"

#include "dp/autograd.h"
#include "dp/core.h"
#include "dp/ops.h"
#include "dp/tensor.h"
/* Only to check that the output keeps the input's physical layout. */
#include "device/device.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each test gets its own device, so that a sticky device error stays in the
 * test that caused it. */

/* ---- host data ------------------------------------------------------------ */

/* ---- references (double, logical NCHW) ------------------------------------------ */

/* BatchNorm2d of x (N, C, H, W). Training: the batch's mean and biased var,
 * and rm, rv (C) updated as PyTorch (unbiased var); eval: rm, rv. */
static double *bn_ref(const float *x, const int64_t *s, const float *gamma, const float *beta,
                      double *rm, double *rv, bool training, double momentum, double eps, bool relu)
{
    int64_t N = s[0], C = s[1], HW = s[2] * s[3], n = N * HW;
    double *y = malloc((size_t)(N * C * HW) * sizeof *y);
    for (int64_t c = 0; c < C; c++) {
        double mean = rm[c], var = rv[c];
        if (training) {
            double sum = 0.0, sq = 0.0;
            for (int64_t i = 0; i < N; i++)
                for (int64_t j = 0; j < HW; j++)
                    sum += x[(i * C + c) * HW + j];
            mean = sum / (double)n;
            for (int64_t i = 0; i < N; i++)
                for (int64_t j = 0; j < HW; j++) {
                    double d = x[(i * C + c) * HW + j] - mean;
                    sq += d * d;
                }
            var = sq / (double)n;
            rm[c] = (1.0 - momentum) * rm[c] + momentum * mean;
            rv[c] = (1.0 - momentum) * rv[c] + momentum * var * (double)n / (double)(n - 1);
        }
        double inv = 1.0 / sqrt(var + eps);
        for (int64_t i = 0; i < N; i++)
            for (int64_t j = 0; j < HW; j++) {
                int64_t k = (i * C + c) * HW + j;
                double v = gamma[c] * (x[k] - mean) * inv + beta[c];
                y[k] = relu && v < 0.0 ? 0.0 : v;
            }
    }
    return y;
}

/* ---- batch_norm2d forward ---------------------------------------------------------- */

#define BN_EPS 1e-5f

/* x with a different offset and scale per channel, so that the statistics
 * differ from channel to channel and from 0 and 1. */
static float *channel_array(dp_rng *rng, const int64_t *s)
{
    int64_t N = s[0], C = s[1], HW = s[2] * s[3];
    float *v = malloc((size_t)(N * C * HW) * sizeof *v);
    for (int64_t i = 0; i < N; i++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t j = 0; j < HW; j++)
                v[(i * C + c) * HW + j] =
                    (float)c - 1.0f + (0.5f + 0.5f * (float)c) * dp_rng_normal(rng);
    return v;
}

static float *positive_array(dp_rng *rng, int64_t n)
{
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = 0.5f + fabsf(dp_rng_normal(rng));
    return v;
}

/* Two calls on two batches; y, running_mean and running_var after each
 * against the reference. In eval the running statistics must not move. */
static void bn_forward_case(const char *name, const int64_t *xs, bool nhwc, bool training,
                            bool relu, float momentum, uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 2);
    int64_t C = xs[1], n = count(4, xs), ws[4] = {C, C, 1, 1};
    float *gv = normal_array(&rng, C, 1.0f), *bv = normal_array(&rng, C, 0.5f);
    float *rm0 = normal_array(&rng, C, 0.5f), *rv0 = positive_array(&rng, C);
    float *wv = identity_1x1(C);
    dp_tensor_t *gamma = upload(1, &C, gv), *beta = upload(1, &C, bv), *rmt = upload(1, &C, rm0),
                *rvt = upload(1, &C, rv0), *w = upload(4, ws, wv);
    double *rm = to_double(rm0, C), *rv = to_double(rv0, C);
    dp_batch_norm_params p = {.training = training, .momentum = momentum, .relu = relu};
    double m = momentum == 0.0f ? (double)0.1f : (double)momentum;
    char what[128];
    for (int call = 0; call < 2; call++) {
        float *xv = channel_array(&rng, xs);
        dp_tensor_t *x = upload(4, xs, xv);
        dp_tape_t *tape;
        OK(dp_tape_init(&tape, false));
        dp_tape_begin(tape);
        dp_tensor_t *in = in_layout(x, w, nhwc), *y;
        OK(dp_batch_norm2d(&y, in, gamma, beta, rmt, rvt, &p));
        assert_int_equal(dp_tensor_ndim(y), 4);
        for (int i = 0; i < 4; i++)
            assert_int_equal(dp_tensor_dim(y, i), xs[i]);
        assert_int_equal(y->nhwc, nhwc);
        float *yv = download(y);
        dp_tape_end(tape);
        dp_tape_close(tape);
        double *want = bn_ref(xv, xs, gv, bv, rm, rv, training, m, BN_EPS, relu);
        snprintf(what, sizeof what, "%s call %d y", name, call + 1);
        assert_values(what, yv, want, n, 1e-5, 1e-5);
        float *rmv = download(rmt), *rvv = download(rvt);
        snprintf(what, sizeof what, "%s call %d running_mean", name, call + 1);
        assert_values(what, rmv, rm, C, training ? 1e-5 : 0, training ? 1e-6 : 0);
        snprintf(what, sizeof what, "%s call %d running_var", name, call + 1);
        assert_values(what, rvv, rv, C, training ? 1e-5 : 0, training ? 1e-6 : 0);
        free(yv), free(want), free(rmv), free(rvv), free(xv);
        dp_tensor_free(x);
    }
    free(gv), free(bv), free(rm0), free(rv0), free(wv), free(rm), free(rv);
    dp_tensor_free(gamma), dp_tensor_free(beta), dp_tensor_free(rmt), dp_tensor_free(rvt);
    dp_tensor_free(w);
}

static void test_bn_forward_training(void **state)
{
    (void)state;
    for (int nhwc = 0; nhwc < 2; nhwc++) {
        bn_forward_case(nhwc ? "bn train NHWC" : "bn train NCHW", (int64_t[]){3, 4, 5, 6}, nhwc,
                        true, false, 0.1f, 1);
        bn_forward_case(nhwc ? "bn train relu NHWC" : "bn train relu NCHW", (int64_t[]){2, 3, 4, 4},
                        nhwc, true, true, 0.1f, 2);
        /* momentum 0 means PyTorch's 0.1; another momentum, and one channel */
        bn_forward_case("bn train default momentum", (int64_t[]){2, 5, 3, 3}, nhwc, true, false,
                        0.0f, 3);
        bn_forward_case("bn train momentum 0.3", (int64_t[]){4, 2, 2, 3}, nhwc, true, false, 0.3f,
                        4);
        bn_forward_case("bn train one channel", (int64_t[]){3, 1, 4, 5}, nhwc, true, true, 0.1f, 5);
        /* two values per channel, the fewest training accepts */
        bn_forward_case("bn train N H W = 2", (int64_t[]){2, 3, 1, 1}, nhwc, true, false, 0.1f, 6);
    }
}

static void test_bn_forward_eval(void **state)
{
    (void)state;
    for (int nhwc = 0; nhwc < 2; nhwc++) {
        bn_forward_case(nhwc ? "bn eval NHWC" : "bn eval NCHW", (int64_t[]){3, 4, 5, 6}, nhwc,
                        false, false, 0.1f, 11);
        bn_forward_case(nhwc ? "bn eval relu NHWC" : "bn eval relu NCHW", (int64_t[]){2, 3, 4, 4},
                        nhwc, false, true, 0.1f, 12);
        /* one value per channel is fine in eval */
        bn_forward_case("bn eval N H W = 1", (int64_t[]){1, 3, 1, 1}, nhwc, false, false, 0.1f, 13);
    }
}

/* ---- errors ----------------------------------------------------------------------- */

static void test_errors(void **state)
{
    (void)state;
    int64_t C = 3, C4 = 4, xs[4] = {2, 3, 4, 4}, x3[3] = {2, 3, 4}, x1[4] = {1, 3, 1, 1};
    int64_t x0[4] = {1, 2, 0, 3};
    float v[96] = {0}, ones[4] = {1, 1, 1, 1};
    dp_tensor_t *x = upload(4, xs, v), *xb = upload(3, x3, v), *xone = upload(4, x1, v),
                *xempty = upload(4, x0, v);
    dp_tensor_t *g = upload(1, &C, ones), *b = upload(1, &C, v), *rm = upload(1, &C, v),
                *rv = upload(1, &C, ones), *g4 = upload(1, &C4, ones);
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    dp_tensor_t *y;
    dp_batch_norm_params train = {.training = true}, eval = {0};
    tu_quiet_log();
    assert_int_equal(dp_batch_norm2d(&y, xb, g, b, rm, rv, &train), DP_ESHAPE);
    assert_int_equal(dp_batch_norm2d(&y, x, g4, b, rm, rv, &train), DP_ESHAPE);
    assert_int_equal(dp_batch_norm2d(&y, x, g, g4, rm, rv, &train), DP_ESHAPE);
    assert_int_equal(dp_batch_norm2d(&y, x, g, b, rm, g4, &eval), DP_ESHAPE);
    assert_int_equal(dp_batch_norm2d(&y, x, g, b, g4, rv, &eval), DP_ESHAPE);
    assert_int_equal(dp_batch_norm2d(&y, x, NULL, b, rm, rv, &train), DP_EINVAL);
    assert_int_equal(dp_batch_norm2d(&y, x, g, b, rm, NULL, &eval), DP_EINVAL);
    dp_batch_norm_params bad = {.training = true, .momentum = -0.5f};
    assert_int_equal(dp_batch_norm2d(&y, x, g, b, rm, rv, &bad), DP_EINVAL);
    bad = (dp_batch_norm_params){.eps = -1e-3f};
    assert_int_equal(dp_batch_norm2d(&y, x, g, b, rm, rv, &bad), DP_EINVAL);
    /* one value per channel: PyTorch's error in training, fine in eval */
    assert_int_equal(dp_batch_norm2d(&y, xone, g, b, rm, rv, &train), DP_EINVAL);
    assert_non_null(
        strstr(dp_last_error(), "Expected more than 1 value per channel when training"));
    dp_log_set(NULL, NULL);
    OK(dp_batch_norm2d(&y, xone, g, b, rm, rv, &eval));
    tu_quiet_log();
    assert_int_equal(dp_adaptive_avg_pool2d(&y, x, 0, 2), DP_EINVAL);
    assert_int_equal(dp_adaptive_avg_pool2d(&y, x, 2, -1), DP_EINVAL);
    assert_int_equal(dp_adaptive_avg_pool2d(&y, xb, 2, 2), DP_ESHAPE);
    assert_int_equal(dp_adaptive_avg_pool2d(&y, xempty, 1, 1), DP_ESHAPE);
    assert_int_equal(dp_adaptive_avg_pool2d(&y, NULL, 1, 1), DP_EINVAL);
    dp_log_set(NULL, NULL);
    dp_tape_end(tape);
    dp_tape_close(tape);
    /* the failed training call left the running statistics alone */
    float got[3];
    OK(dp_tensor_to_host(rv, got, sizeof got));
    for (int c = 0; c < 3; c++)
        assert_true(got[c] == 1.0f);
    dp_tensor_t *ts[] = {x, xb, xone, xempty, g, b, rm, rv, g4};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        dp_tensor_free(ts[i]);
}

/* ---- gradient checks ------------------------------------------------------------ */

typedef enum bn_pool { BN_POOL_NONE, BN_POOL_ADAPTIVE, BN_POOL_AVG2 } bn_pool;

/* Inputs: x, gamma, beta, then the identity (C, C, 1, 1) when nhwc; with
 * `shared`, x2 after them: y = bn(x) + bn(x2) with one gamma and beta. */
typedef struct bn_ctx {
    dp_batch_norm_params p;
    dp_tensor_t *rm, *rv; /* running statistics (C), not checked */
    bool nhwc;
    bool shared;
    bn_pool pool;
    int pool_h, pool_w;
} bn_ctx;

static int build_bn(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const bn_ctx *c = ctx;
    dp_tensor_t *x = in[0], *y;
    int rc = 0;
    if (c->nhwc)
        rc = dp_conv2d(&x, in[0], in[3], NULL, NULL);
    if (rc == 0)
        rc = dp_batch_norm2d(&y, x, in[1], in[2], c->rm, c->rv, &c->p);
    if (rc == 0 && c->shared) {
        dp_tensor_t *x2 = in[c->nhwc ? 4 : 3], *y2;
        if (c->nhwc)
            rc = dp_conv2d(&x2, x2, in[3], NULL, NULL);
        if (rc == 0)
            rc = dp_batch_norm2d(&y2, x2, in[1], in[2], c->rm, c->rv, &c->p);
        if (rc == 0)
            rc = dp_add(&y, y, y2);
    }
    if (rc)
        return rc;
    if (c->pool == BN_POOL_ADAPTIVE)
        return dp_adaptive_avg_pool2d(out, y, c->pool_h, c->pool_w);
    if (c->pool == BN_POOL_AVG2) {
        dp_pool2d_params pp = {.kernel_h = 2, .kernel_w = 2};
        return dp_avg_pool2d(out, y, &pp);
    }
    *out = y;
    return 0;
}

/* Whether some pre-activation of the batch norm of x is within `margin` of
 * the ReLU's kink. */
static bool near_kink(const float *x, const int64_t *xs, const float *gv, const float *bv,
                      const dp_tensor_t *rmt, const dp_tensor_t *rvt, bool training, double margin)
{
    int64_t C = xs[1], n = count(4, xs);
    float *rmf = download(rmt), *rvf = download(rvt);
    double *rm = to_double(rmf, C), *rv = to_double(rvf, C);
    double *z = bn_ref(x, xs, gv, bv, rm, rv, training, 0.1, BN_EPS, false);
    bool near = false;
    for (int64_t i = 0; i < n; i++)
        near = near || fabs(z[i]) < margin;
    free(rmf), free(rvf), free(rm), free(rv), free(z);
    return near;
}

typedef struct bn_grad_opts {
    bool training, relu, nhwc, shared;
    bool diff_x, diff_gb; /* which inputs are checked (and need gradients) */
    bn_pool pool;
    int pool_h, pool_w;
} bn_grad_opts;

static void bn_grad_case(const char *name, const int64_t *xs, bn_grad_opts o, uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 1);
    int64_t C = xs[1], n = count(4, xs), ws[4] = {C, C, 1, 1};
    float *rm0 = normal_array(&rng, C, 0.5f), *rv0 = positive_array(&rng, C);
    bn_ctx c = {.p = {.training = o.training, .relu = o.relu},
                .rm = upload(1, &C, rm0),
                .rv = upload(1, &C, rv0),
                .nhwc = o.nhwc,
                .shared = o.shared,
                .pool = o.pool,
                .pool_h = o.pool_h,
                .pool_w = o.pool_w};
    gc_problem g = {.name = name, .build = build_bn, .ctx = &c, .seed = seed, .kink = o.relu};
    if (o.relu && o.pool != BN_POOL_NONE) {
        /* Pooled, the kink test on output signs cannot see a ReLU flip:
         * keep the step well inside the margin drawn below. */
        g.kink = false;
        g.eps = 2e-3;
        g.atol = 2e-3;
    }
    /* With a ReLU, draw again until every pre-activation is 1e-2 away from
     * the kink (eval: the gradient check steps move none of them by more
     * than |gamma| / sqrt(var) eps). */
    float *xv = NULL, *x2v = NULL, *gv = NULL, *bv = NULL;
    for (int attempt = 0;; attempt++) {
        assert_true(attempt < 200);
        xv = normal_array(&rng, n, 1.0f);
        x2v = o.shared ? normal_array(&rng, n, 1.0f) : NULL;
        gv = normal_array(&rng, C, 0.3f);
        for (int64_t i = 0; i < C; i++)
            gv[i] += gv[i] < 0 ? -0.7f : 0.7f; /* |gamma| in 0.7 .. ~1.6 */
        bv = normal_array(&rng, C, 0.5f);
        if (!o.relu || (!near_kink(xv, xs, gv, bv, c.rm, c.rv, o.training, 1e-2) &&
                        (!x2v || !near_kink(x2v, xs, gv, bv, c.rm, c.rv, o.training, 1e-2))))
            break;
        free(xv), free(x2v), free(gv), free(bv);
    }
    g.in[g.nin++] = input("x", 4, xs, xv, o.diff_x);
    g.in[g.nin++] = input("g", 1, &C, gv, o.diff_gb);
    g.in[g.nin++] = input("b", 1, &C, bv, o.diff_gb);
    if (o.nhwc)
        g.in[g.nin++] = input("w", 4, ws, identity_1x1(C), false);
    if (o.shared)
        g.in[g.nin++] = input("x2", 4, xs, x2v, o.diff_x);
    gc_run(&g);
    free(rm0), free(rv0);
    dp_tensor_free(c.rm), dp_tensor_free(c.rv);
}

static void test_bn_grad_training(void **state)
{
    (void)state;
    bn_grad_case("bn train NCHW", (int64_t[]){2, 3, 4, 5},
                 (bn_grad_opts){.training = true, .diff_x = true, .diff_gb = true}, 1);
    bn_grad_case("bn train NHWC", (int64_t[]){2, 3, 3, 4},
                 (bn_grad_opts){.training = true, .nhwc = true, .diff_x = true, .diff_gb = true},
                 2);
    bn_grad_case("bn train N H W = 3", (int64_t[]){3, 2, 1, 1},
                 (bn_grad_opts){.training = true, .diff_x = true, .diff_gb = true}, 3);
    /* one of the two sides needs no gradient: oneDNN's goes to scratch */
    bn_grad_case("bn train x only", (int64_t[]){2, 3, 3, 3},
                 (bn_grad_opts){.training = true, .nhwc = true, .diff_x = true}, 4);
    bn_grad_case("bn train gamma beta only", (int64_t[]){2, 3, 3, 3},
                 (bn_grad_opts){.training = true, .diff_gb = true}, 5);
    /* gamma and beta used twice in a step: their gradients accumulate */
    bn_grad_case("bn train shared gamma beta", (int64_t[]){2, 2, 3, 3},
                 (bn_grad_opts){.training = true, .shared = true, .diff_x = true, .diff_gb = true},
                 6);
    bn_grad_case(
        "bn train shared NHWC", (int64_t[]){2, 2, 3, 3},
        (bn_grad_opts){
            .training = true, .nhwc = true, .shared = true, .diff_x = true, .diff_gb = true},
        7);
}

static void test_bn_relu_grad(void **state)
{
    (void)state;
    bn_grad_case("bn train relu NCHW", (int64_t[]){2, 3, 4, 4},
                 (bn_grad_opts){.training = true, .relu = true, .diff_x = true, .diff_gb = true},
                 11);
    bn_grad_case("bn train relu NHWC", (int64_t[]){2, 3, 4, 4},
                 (bn_grad_opts){
                     .training = true, .relu = true, .nhwc = true, .diff_x = true, .diff_gb = true},
                 12);
    /* The pools after a fused ReLU apply its mask in their own backward pass. */
    bn_grad_case("bn relu -> adaptive 2x2 (tiles)", (int64_t[]){2, 3, 4, 4},
                 (bn_grad_opts){.training = true,
                                .relu = true,
                                .nhwc = true,
                                .diff_x = true,
                                .diff_gb = true,
                                .pool = BN_POOL_ADAPTIVE,
                                .pool_h = 2,
                                .pool_w = 2},
                 13);
    bn_grad_case("bn relu -> adaptive 7x5 to 3x2", (int64_t[]){2, 2, 7, 5},
                 (bn_grad_opts){.training = true,
                                .relu = true,
                                .nhwc = true,
                                .diff_x = true,
                                .diff_gb = true,
                                .pool = BN_POOL_ADAPTIVE,
                                .pool_h = 3,
                                .pool_w = 2},
                 14);
    bn_grad_case("bn relu -> adaptive NCHW 3x2", (int64_t[]){2, 2, 7, 5},
                 (bn_grad_opts){.training = true,
                                .relu = true,
                                .diff_x = true,
                                .diff_gb = true,
                                .pool = BN_POOL_ADAPTIVE,
                                .pool_h = 3,
                                .pool_w = 2},
                 15);
    bn_grad_case("bn relu -> avg_pool2d 2x2", (int64_t[]){2, 3, 4, 4},
                 (bn_grad_opts){.training = true,
                                .relu = true,
                                .nhwc = true,
                                .diff_x = true,
                                .diff_gb = true,
                                .pool = BN_POOL_AVG2},
                 16);
}

static void test_bn_grad_eval(void **state)
{
    (void)state;
    bn_grad_case("bn eval NCHW", (int64_t[]){2, 3, 4, 5},
                 (bn_grad_opts){.diff_x = true, .diff_gb = true}, 21);
    bn_grad_case("bn eval NHWC", (int64_t[]){2, 3, 3, 4},
                 (bn_grad_opts){.nhwc = true, .diff_x = true, .diff_gb = true}, 22);
    bn_grad_case("bn eval relu", (int64_t[]){2, 3, 4, 4},
                 (bn_grad_opts){.relu = true, .diff_x = true, .diff_gb = true}, 23);
    bn_grad_case("bn eval N H W = 1", (int64_t[]){1, 3, 1, 1},
                 (bn_grad_opts){.diff_x = true, .diff_gb = true}, 24);
}

int main(int argc, char **argv)
{
    printf("gradient checks on cpu:0 with %d kernel thread(s)\n", gc_threads());
#define T(f) cmocka_unit_test_setup_teardown(f, gc_open_device, gc_close_device)
    const struct CMUnitTest tests[] = {
        T(test_bn_forward_training), T(test_bn_forward_eval), T(test_errors),
        T(test_bn_grad_training),    T(test_bn_relu_grad),    T(test_bn_grad_eval),
    };
#undef T
    return tu_run(argc, argv, tests, NULL, NULL);
}
