/* sigmoid and tanh on cpu:0, which PyTorch nn.Sequential files need beyond
 * the built-in models: forward values against a naive reference computed
 * here in double (also on NHWC input), and the gradient against central
 * finite differences (tests/util/gradcheck.h: L = sum_i r_i y_i for a fixed
 * random r, each check also required to fail for the analytic gradient
 * scaled by 1.1). */
#include "gradcheck.h"

#include "dp/autograd.h"
#include "dp/core.h"
#include "dp/ops.h"
#include "dp/tensor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- sigmoid and tanh ---------------------------------------------------- */

static int build_sigmoid(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    (void)ctx;
    return dp_sigmoid(out, in[0]);
}

static int build_tanh(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    (void)ctx;
    return dp_tanh(out, in[0]);
}

static void activation_forward_case(int ndim, const int64_t *xs, bool nhwc, uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 2);
    int64_t n = count(ndim, xs), ny;
    float *xv = normal_array(&rng, n, 3.0f);
    double *ws = malloc((size_t)n * sizeof *ws), *wt = malloc((size_t)n * sizeof *wt);
    for (int64_t i = 0; i < n; i++) {
        ws[i] = 1.0 / (1.0 + exp(-(double)xv[i]));
        wt[i] = tanh((double)xv[i]);
    }
    float *ys = run_forward(build_sigmoid, NULL, ndim, xs, xv, nhwc, &ny);
    assert_int_equal(ny, n);
    assert_values(nhwc ? "sigmoid NHWC" : "sigmoid", ys, ws, n, 1e-6, 1e-7);
    float *yt = run_forward(build_tanh, NULL, ndim, xs, xv, nhwc, &ny);
    assert_values(nhwc ? "tanh NHWC" : "tanh", yt, wt, n, 1e-6, 1e-7);
    free(xv), free(ws), free(wt), free(ys), free(yt);
}

static void test_sigmoid_tanh_forward(void **state)
{
    (void)state;
    activation_forward_case(3, (int64_t[]){3, 5, 7}, false, 1);
    activation_forward_case(1, (int64_t[]){1000}, false, 2);
    activation_forward_case(4, (int64_t[]){2, 3, 4, 5}, true, 3);
}

static void test_sigmoid_tanh_grad(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 11, 1);
    int64_t xs[3] = {3, 4, 5};
    gc_problem g = {.name = "sigmoid", .build = build_sigmoid, .seed = 11};
    g.in[g.nin++] = input("x", 3, xs, normal_array(&rng, count(3, xs), 2.0f), true);
    gc_run(&g);
    gc_problem h = {.name = "tanh", .build = build_tanh, .seed = 12};
    h.in[h.nin++] = input("x", 3, xs, normal_array(&rng, count(3, xs), 1.5f), true);
    gc_run(&h);
}

int main(int argc, char **argv)
{
    printf("op checks on cpu:0 with %d kernel thread(s)\n", gc_threads());
#define T(f) cmocka_unit_test_setup_teardown(f, gc_open_device, gc_close_device)
    const struct CMUnitTest tests[] = {
        T(test_sigmoid_tanh_forward),
        T(test_sigmoid_tanh_grad),
    };
#undef T
    return tu_run(argc, argv, tests, NULL, NULL);
}
