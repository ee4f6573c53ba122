/* adaptive_avg_pool2d on cpu:0: forward values against a reference
 * computed here in double with PyTorch's windows (also written out for one
 * case), and finite-difference gradient checks, in both activation
 * layouts. An NHWC input is made as gradcheck.h's in_layout makes it: a 1x1
 * convolution with the identity (its output is stored NHWC and holds
 * exactly the input's values). Its error cases are in test_ops_bn.c's
 * test_errors.
 *
 * The gradient checker is tests/util/gradcheck.h's: L = sum_i r_i y_i for a fixed
 * random r, analytic gradients through dp_backward against central
 * differences summed in double, each check also required to be sensitive
 * to a gradient scaled by 1.1. */
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

/* ---- references (double, logical NCHW) ------------------------------------------ */

/* PyTorch's adaptive window of output i: [floor(i in / out), ceil((i + 1) in / out)). */
static int64_t win_start(int64_t i, int64_t in, int64_t out)
{
    return (int64_t)floor((double)(i * in) / (double)out);
}

static int64_t win_end(int64_t i, int64_t in, int64_t out)
{
    return (int64_t)ceil((double)((i + 1) * in) / (double)out);
}

static double *adaptive_ref(const float *x, const int64_t *s, int64_t P, int64_t Q)
{
    int64_t NC = s[0] * s[1], H = s[2], W = s[3];
    double *y = malloc((size_t)(NC * P * Q) * sizeof *y);
    for (int64_t nc = 0; nc < NC; nc++)
        for (int64_t p = 0; p < P; p++)
            for (int64_t q = 0; q < Q; q++) {
                double sum = 0.0;
                int64_t h0 = win_start(p, H, P), h1 = win_end(p, H, P);
                int64_t w0 = win_start(q, W, Q), w1 = win_end(q, W, Q);
                for (int64_t h = h0; h < h1; h++)
                    for (int64_t w = w0; w < w1; w++)
                        sum += x[(nc * H + h) * W + w];
                y[(nc * P + p) * Q + q] = sum / (double)((h1 - h0) * (w1 - w0));
            }
    return y;
}

/* ---- adaptive_avg_pool2d forward -------------------------------------------------- */

static void adaptive_forward_case(const int64_t *xs, int P, int Q, bool nhwc, uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 2);
    int64_t C = xs[1], ws[4] = {C, C, 1, 1};
    float *xv = normal_array(&rng, count(4, xs), 1.0f), *wv = identity_1x1(C);
    dp_tensor_t *x = upload(4, xs, xv), *w = upload(4, ws, wv);
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    dp_tensor_t *in = in_layout(x, w, nhwc), *y;
    OK(dp_adaptive_avg_pool2d(&y, in, P, Q));
    assert_int_equal(dp_tensor_dim(y, 0), xs[0]);
    assert_int_equal(dp_tensor_dim(y, 1), C);
    assert_int_equal(dp_tensor_dim(y, 2), P);
    assert_int_equal(dp_tensor_dim(y, 3), Q);
    assert_int_equal(y->nhwc, nhwc);
    float *yv = download(y);
    dp_tape_end(tape);
    dp_tape_close(tape);
    double *want = adaptive_ref(xv, xs, P, Q);
    char what[96];
    snprintf(what, sizeof what, "adaptive_avg_pool2d %lldx%lld -> %dx%d%s", (long long)xs[2],
             (long long)xs[3], P, Q, nhwc ? " NHWC" : "");
    assert_values(what, yv, want, xs[0] * C * P * Q, 1e-5, 1e-6);
    free(yv), free(want), free(xv), free(wv);
    dp_tensor_free(x), dp_tensor_free(w);
}

static void test_adaptive_forward(void **state)
{
    (void)state;
    for (int nhwc = 0; nhwc < 2; nhwc++) {
        adaptive_forward_case((int64_t[]){2, 3, 4, 4}, 1, 1, nhwc, 1); /* global average */
        adaptive_forward_case((int64_t[]){2, 3, 4, 4}, 2, 2, nhwc, 2); /* windows tile x */
        adaptive_forward_case((int64_t[]){2, 3, 7, 5}, 3, 2, nhwc, 3); /* uneven, overlapping */
        adaptive_forward_case((int64_t[]){1, 4, 6, 9}, 4, 3, nhwc, 4); /* rows uneven only */
        adaptive_forward_case((int64_t[]){2, 2, 3, 2}, 5, 3, nhwc, 5); /* output over input */
    }
}

/* PyTorch's windows, written out for 7 -> 3 and 5 -> 2. */
static void test_adaptive_windows(void **state)
{
    (void)state;
    int64_t xs[4] = {1, 1, 7, 5};
    float xv[35];
    for (int i = 0; i < 35; i++)
        xv[i] = (float)i;
    dp_tensor_t *x = upload(4, xs, xv);
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    dp_tensor_t *y;
    OK(dp_adaptive_avg_pool2d(&y, x, 3, 2));
    float *yv = download(y);
    dp_tape_end(tape);
    dp_tape_close(tape);
    /* rows [0,3) [2,5) [4,7), columns [0,3) [2,5); x[h][w] = 5h + w, so a
     * window's mean is 5 mean(h) + mean(w) */
    double want[6] = {5 * 1.0 + 1.0, 5 * 1.0 + 3.0, 5 * 3.0 + 1.0,
                      5 * 3.0 + 3.0, 5 * 5.0 + 1.0, 5 * 5.0 + 3.0};
    assert_values("adaptive windows 7x5 -> 3x2", yv, want, 6, 1e-6, 0);
    free(yv);
    dp_tensor_free(x);
}

/* ---- gradient checks ------------------------------------------------------------ */

typedef struct adaptive_ctx {
    int P, Q;
    bool nhwc; /* x through the identity conv in in[1] */
} adaptive_ctx;

static int build_adaptive(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const adaptive_ctx *c = ctx;
    dp_tensor_t *x = in[0];
    if (c->nhwc) {
        int rc = dp_conv2d(&x, in[0], in[1], NULL, NULL);
        if (rc)
            return rc;
    }
    return dp_adaptive_avg_pool2d(out, x, c->P, c->Q);
}

static void adaptive_grad_case(const int64_t *xs, int P, int Q, bool nhwc, uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 1);
    int64_t C = xs[1], ws[4] = {C, C, 1, 1};
    adaptive_ctx c = {P, Q, nhwc};
    char name[64];
    snprintf(name, sizeof name, "adaptive %lldx%lld -> %dx%d%s", (long long)xs[2], (long long)xs[3],
             P, Q, nhwc ? " NHWC" : "");
    gc_problem g = {.name = name, .build = build_adaptive, .ctx = &c, .seed = seed};
    g.in[g.nin++] = input("x", 4, xs, normal_array(&rng, count(4, xs), 1.0f), true);
    if (nhwc)
        g.in[g.nin++] = input("w", 4, ws, identity_1x1(C), false);
    gc_run(&g);
}

static void test_adaptive_grad(void **state)
{
    (void)state;
    for (int nhwc = 0; nhwc < 2; nhwc++) {
        adaptive_grad_case((int64_t[]){2, 3, 4, 4}, 1, 1, nhwc, 31);
        adaptive_grad_case((int64_t[]){2, 3, 4, 4}, 2, 2, nhwc, 32);
        adaptive_grad_case((int64_t[]){2, 3, 7, 5}, 3, 2, nhwc, 33);
        adaptive_grad_case((int64_t[]){2, 2, 3, 2}, 5, 3, nhwc, 34);
    }
}

int main(int argc, char **argv)
{
    printf("gradient checks on cpu:0 with %d kernel thread(s)\n", gc_threads());
#define T(f) cmocka_unit_test_setup_teardown(f, gc_open_device, gc_close_device)
    const struct CMUnitTest tests[] = {
        T(test_adaptive_forward),
        T(test_adaptive_windows),
        T(test_adaptive_grad),
    };
#undef T
    return tu_run(argc, argv, tests, NULL, NULL);
}
