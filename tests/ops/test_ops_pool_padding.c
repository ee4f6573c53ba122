/* Max and average pooling with padding on cpu:0, as PyTorch nn.Sequential
 * files use them: output sizes and values against a naive reference
 * computed here in double (also on NHWC input), error cases, and the
 * gradient against central finite differences (tests/util/gradcheck.h:
 * L = sum_i r_i y_i for a fixed random r, each check also required to fail
 * for the analytic gradient scaled by 1.1). */
#include "gradcheck.h"

#include "dp/autograd.h"
#include "dp/core.h"
#include "dp/ops.h"
#include "dp/tensor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- pooling with padding ------------------------------------------------- */

typedef struct pool_case {
    dp_pool2d_params p;
    bool max;
} pool_case;

static int build_pool(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const pool_case *c = ctx;
    return c->max ? dp_max_pool2d(out, in[0], &c->p) : dp_avg_pool2d(out, in[0], &c->p);
}

/* PyTorch's MaxPool2d / AvgPool2d (count_include_pad=True) at output
 * (nc, p, q) of x (N C, H, W): padded cells are -inf for max and 0 for the
 * mean, whose divisor is the whole kernel. */
static double pool_at(const float *x, int64_t H, int64_t W, const pool_case *c, int64_t nc,
                      int64_t p, int64_t q)
{
    int sh = c->p.stride_h ? c->p.stride_h : c->p.kernel_h;
    int sw = c->p.stride_w ? c->p.stride_w : c->p.kernel_w;
    double best = -INFINITY, sum = 0.0;
    for (int64_t h = p * sh - c->p.pad_h; h < p * sh - c->p.pad_h + c->p.kernel_h; h++)
        for (int64_t w = q * sw - c->p.pad_w; w < q * sw - c->p.pad_w + c->p.kernel_w; w++) {
            bool inside = h >= 0 && h < H && w >= 0 && w < W;
            double v = inside ? x[(nc * H + h) * W + w] : (c->max ? -INFINITY : 0.0);
            best = fmax(best, v);
            sum += v;
        }
    return c->max ? best : sum / (c->p.kernel_h * c->p.kernel_w);
}

/* Output sizes floor((H + 2 pad - k) / s) + 1, and values of max and
 * average pooling in both layouts; x all negative, so that a padded 0
 * would win a max. */
static void pool_forward_case(const int64_t *xs, dp_pool2d_params pp, int64_t P, int64_t Q,
                              uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 1);
    int64_t n = count(4, xs), NC = xs[0] * xs[1], H = xs[2], W = xs[3];
    float *xv = normal_array(&rng, n, 1.0f);
    for (int64_t i = 0; i < n; i++)
        xv[i] = -1.0f - fabsf(xv[i]);
    double *want = malloc((size_t)(NC * P * Q) * sizeof *want);
    for (int kind = 0; kind < 4; kind++) {
        pool_case c = {pp, kind & 1};
        bool nhwc = kind & 2;
        for (int64_t k = 0; k < NC * P * Q; k++)
            want[k] = pool_at(xv, H, W, &c, k / (P * Q), k / Q % P, k % Q);
        int64_t ny;
        float *y = run_forward(build_pool, &c, 4, xs, xv, nhwc, &ny);
        assert_int_equal(ny, NC * P * Q);
        char what[96];
        snprintf(what, sizeof what, "%s k%dx%d s%dx%d p%dx%d%s", c.max ? "max" : "avg", pp.kernel_h,
                 pp.kernel_w, pp.stride_h, pp.stride_w, pp.pad_h, pp.pad_w, nhwc ? " NHWC" : "");
        assert_values(what, y, want, ny, 1e-6, 1e-7);
        free(y);
    }
    free(xv), free(want);
}

static void test_pool_padding_forward(void **state)
{
    (void)state;
    /* 7 + 2 - 3 = 6, / 2 + 1 = 4; 8 + 2 - 3 = 7, / 2 + 1 = 4 (floor) */
    pool_forward_case((int64_t[]){2, 3, 7, 8},
                      (dp_pool2d_params){3, 3, 2, 2, 1, 1, false, false, 1, 1}, 4, 4, 61);
    /* kernel 2, pad 1 (exactly half), default stride 2: (5 + 2 - 2) / 2 + 1 = 3 */
    pool_forward_case((int64_t[]){1, 2, 5, 5},
                      (dp_pool2d_params){2, 2, 0, 0, 1, 1, false, false, 1, 1}, 3, 3, 62);
    /* uneven: kernel 5x3, stride 1x2, pad 2x1 over 6x7: 6 x 4 */
    pool_forward_case((int64_t[]){2, 2, 6, 7},
                      (dp_pool2d_params){5, 3, 1, 2, 2, 1, false, false, 1, 1}, 6, 4, 63);
}

static void test_pool_padding_errors(void **state)
{
    (void)state;
    tu_quiet_log();
    int64_t xs[4] = {1, 1, 6, 6};
    float v[36] = {0};
    dp_tensor_t *x = upload(4, xs, v), *y = NULL;
    dp_pool2d_params too_much = {.kernel_h = 3, .kernel_w = 3, .pad_h = 2, .pad_w = 1};
    assert_int_equal(dp_max_pool2d(&y, x, &too_much), DP_EINVAL);
    assert_non_null(strstr(dp_last_error(), "pad=2x1"));
    assert_null(strchr(dp_last_error(), '\n'));
    assert_int_equal(dp_avg_pool2d(&y, x, &too_much), DP_EINVAL);
    dp_pool2d_params negative = {.kernel_h = 2, .kernel_w = 2, .pad_h = -1};
    assert_int_equal(dp_avg_pool2d(&y, x, &negative), DP_EINVAL);
    dp_tensor_free(x);
}

static void test_pool_padding_grad(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 71, 1);
    int64_t xs[4] = {2, 2, 5, 6};
    pool_case cases[] = {
        {{.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1},
         true},
        {{.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1},
         false},
        {{.kernel_h = 2, .kernel_w = 4, .stride_h = 1, .stride_w = 1, .pad_h = 1, .pad_w = 2},
         true},
        {{.kernel_h = 2, .kernel_w = 4, .stride_h = 1, .stride_w = 1, .pad_h = 1, .pad_w = 2},
         false},
    };
    const char *names[] = {"max_pool2d k3 s2 p1", "avg_pool2d k3 s2 p1", "max_pool2d k2x4 p1x2",
                           "avg_pool2d k2x4 p1x2"};
    for (size_t k = 0; k < COUNTOF(cases); k++) {
        gc_problem g = {.name = names[k], .build = build_pool, .ctx = &cases[k], .seed = 71 + k};
        int64_t n = count(4, xs);
        g.in[g.nin++] =
            input("x", 4, xs,
                  cases[k].max ? distinct_array(&rng, n, 0.1f) : normal_array(&rng, n, 1.0f), true);
        gc_run(&g);
    }
}

int main(int argc, char **argv)
{
    printf("op checks on cpu:0 with %d kernel thread(s)\n", gc_threads());
#define T(f) cmocka_unit_test_setup_teardown(f, gc_open_device, gc_close_device)
    const struct CMUnitTest tests[] = {
        T(test_pool_padding_forward),
        T(test_pool_padding_errors),
        T(test_pool_padding_grad),
    };
#undef T
    return tu_run(argc, argv, tests, NULL, NULL);
}
