/* Max and average pooling with ceil_mode and with padding left out of the
 * mean (count_include_pad=False), as SqueezeNet's MaxPool2d(3, 2,
 * ceil_mode=True) and ONNX's AveragePool use them, on cpu:0: output sizes
 * and values against PyTorch's rule computed here in double (both
 * layouts), the refused case, and gradients against central finite
 * differences (tests/util/gradcheck.h). */
#include "gradcheck.h"

#include "dp/autograd.h"
#include "dp/core.h"
#include "dp/ops.h"
#include "dp/tensor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN64(a, b) ((a) < (b) ? (a) : (b))
#define MAX64(a, b) ((a) > (b) ? (a) : (b))

typedef struct pool_case {
    dp_pool2d_params p;
    bool max;
} pool_case;

static int build_pool(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const pool_case *c = ctx;
    return c->max ? dp_max_pool2d(out, in[0], &c->p) : dp_avg_pool2d(out, in[0], &c->p);
}

/* PyTorch's output size (aten's pooling_output_shape): ceil or floor of
 * (size + 2 pad - k) / s, plus one, less the last window if it starts at
 * or past size + pad. */
static int64_t ref_size(int64_t size, int k, int s, int pad, bool ceil_mode)
{
    int64_t span = size + 2 * pad - k;
    int64_t n = (int64_t)(ceil_mode ? ceil((double)span / s) : floor((double)span / s)) + 1;
    if (ceil_mode && (n - 1) * s >= size + pad)
        n--;
    return n;
}

/* PyTorch's value at (nc, p, q): the max over the window's cells inside x;
 * the mean divides by the window clipped to the padded input (padding
 * counted) or to x (count_include_pad=False), as aten's avg_pool2d. */
static double ref_at(const float *x, int64_t H, int64_t W, const pool_case *c, int64_t nc,
                     int64_t p, int64_t q)
{
    const dp_pool2d_params *pp = &c->p;
    int64_t h0 = p * pp->stride_h - pp->pad_h, w0 = q * pp->stride_w - pp->pad_w;
    int64_t h1 = MIN64(h0 + pp->kernel_h, H + pp->pad_h);
    int64_t w1 = MIN64(w0 + pp->kernel_w, W + pp->pad_w);
    double pool_size = (double)((h1 - h0) * (w1 - w0)), best = -INFINITY, sum = 0.0;
    int64_t inside = 0;
    for (int64_t h = MAX64(h0, 0); h < MIN64(h1, H); h++)
        for (int64_t w = MAX64(w0, 0); w < MIN64(w1, W); w++) {
            double v = x[(nc * H + h) * W + w];
            best = fmax(best, v);
            sum += v;
            inside++;
        }
    if (c->max)
        return best;
    return sum / (pp->exclude_pad ? (double)inside : pool_size);
}

static void forward_case(const int64_t *xs, pool_case c, int64_t P, int64_t Q, uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 1);
    int64_t n = count(4, xs), NC = xs[0] * xs[1], H = xs[2], W = xs[3];
    const dp_pool2d_params *pp = &c.p;
    assert_int_equal(ref_size(H, pp->kernel_h, pp->stride_h, pp->pad_h, pp->ceil_mode), P);
    assert_int_equal(ref_size(W, pp->kernel_w, pp->stride_w, pp->pad_w, pp->ceil_mode), Q);
    float *xv = normal_array(&rng, n, 1.0f);
    double *want = malloc((size_t)(NC * P * Q) * sizeof *want);
    for (int64_t k = 0; k < NC * P * Q; k++)
        want[k] = ref_at(xv, H, W, &c, k / (P * Q), k / Q % P, k % Q);
    for (int nhwc = 0; nhwc < 2; nhwc++) {
        int64_t ny;
        float *y = run_forward(build_pool, &c, 4, xs, xv, nhwc, &ny);
        assert_int_equal(ny, NC * P * Q);
        char what[128];
        snprintf(what, sizeof what, "%s k%dx%d s%dx%d p%dx%d%s%s over %lldx%lld -> %lldx%lld%s",
                 c.max ? "max" : "avg", pp->kernel_h, pp->kernel_w, pp->stride_h, pp->stride_w,
                 pp->pad_h, pp->pad_w, pp->ceil_mode ? " ceil" : "",
                 pp->exclude_pad ? " exclude_pad" : "", (long long)H, (long long)W, (long long)P,
                 (long long)Q, nhwc ? " NHWC" : "");
        assert_values(what, y, want, ny, 1e-6, 1e-7);
        printf("%s: %lld values as PyTorch's rule gives them\n", what, (long long)ny);
        free(y);
    }
    free(xv), free(want);
}

#define P2(kh, kw, sh, sw, ph, pw, ceil, excl)                                                     \
    (dp_pool2d_params)                                                                             \
    {                                                                                              \
        .kernel_h = kh, .kernel_w = kw, .stride_h = sh, .stride_w = sw, .pad_h = ph, .pad_w = pw,  \
        .ceil_mode = ceil, .exclude_pad = excl                                                     \
    }

static void test_pool_ceil_forward(void **state)
{
    (void)state;
    int64_t sq[4] = {2, 3, 8, 9}; /* SqueezeNet's k3 s2: 8 -> 4 (floor 3), 9 -> 4 */
    forward_case(sq, (pool_case){P2(3, 3, 2, 2, 0, 0, true, false), true}, 4, 4, 81);
    /* The same windows averaged: the last row's divisor is the 2 rows of x
     * it covers, not 3. */
    forward_case(sq, (pool_case){P2(3, 3, 2, 2, 0, 0, true, false), false}, 4, 4, 82);
    /* Padding 1 on 7 x 6 with k3 s2: (7 + 2 - 3) / 2 = 3 exactly, 4 rows
     * either way; (6 + 2 - 3) / 2 = 2.5: 4 columns, the last starting at
     * column 5 < 6 + 1. Max, then a mean without the padding. */
    int64_t pd[4] = {1, 2, 7, 6};
    forward_case(pd, (pool_case){P2(3, 3, 2, 2, 1, 1, true, false), true}, 4, 4, 83);
    forward_case(pd, (pool_case){P2(3, 3, 2, 2, 1, 1, true, true), false}, 4, 4, 84);
    /* count_include_pad=False without ceil_mode: the border means divide
     * by 4 or 6 cells, not 9. */
    forward_case(pd, (pool_case){P2(3, 3, 2, 2, 1, 1, false, true), false}, 4, 3, 85);
    /* A last window dropped: H 5, k 2, s 3, pad 1: (5 + 2 - 2) / 3 rounds up
     * to 2, + 1 = 3, but it would start at 6 >= 5 + 1: 2 rows. */
    int64_t dr[4] = {1, 2, 5, 5};
    forward_case(dr, (pool_case){P2(2, 2, 3, 3, 1, 1, true, false), true}, 2, 2, 86);
    /* Padding counted where the ceil window stays inside the padding. */
    forward_case(dr, (pool_case){P2(2, 2, 3, 3, 1, 1, true, false), false}, 2, 2, 87);
}

/* A mean counting padding whose last ceil window hangs past it: refused,
 * in one line. */
static void test_pool_ceil_refused(void **state)
{
    (void)state;
    tu_quiet_log();
    int64_t xs[4] = {1, 1, 6, 6};
    float v[36] = {0};
    dp_tensor_t *x = upload(4, xs, v), *y = NULL;
    dp_pool2d_params p = P2(3, 3, 2, 2, 1, 1, true, false); /* 6 + 2 - 3 = 5: 3.5 -> 4 */
    assert_int_equal(dp_avg_pool2d(&y, x, &p), DP_EINVAL);
    printf("refused: %s\n", dp_last_error());
    assert_non_null(strstr(dp_last_error(), "hangs past the padding"));
    assert_null(strchr(dp_last_error(), '\n'));
    p.exclude_pad = true;
    assert_int_equal(dp_avg_pool2d(&y, x, &p), 0);
    assert_int_equal(dp_tensor_dim(y, 2), 4);
    dp_tensor_free(y);
    dp_tensor_free(x);
}

static void test_pool_ceil_grad(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 91, 1);
    int64_t xs[4] = {2, 2, 6, 7};
    pool_case cases[] = {
        {P2(3, 3, 2, 2, 0, 0, true, false), true},
        {P2(3, 3, 2, 2, 0, 0, true, false), false},
        {P2(3, 2, 2, 2, 1, 1, true, true), false},
        {P2(3, 3, 2, 2, 1, 1, false, true), false},
    };
    const char *names[] = {"max_pool2d k3 s2 ceil", "avg_pool2d k3 s2 ceil",
                           "avg_pool2d k3x2 s2 p1 ceil exclude_pad",
                           "avg_pool2d k3 s2 p1 exclude_pad"};
    for (size_t k = 0; k < COUNTOF(cases); k++) {
        gc_problem g = {.name = names[k], .build = build_pool, .ctx = &cases[k], .seed = 91 + k};
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
        T(test_pool_ceil_forward),
        T(test_pool_ceil_refused),
        T(test_pool_ceil_grad),
    };
#undef T
    return tu_run(argc, argv, tests, NULL, NULL);
}
