/* Dilated max pooling on cpu:0, as PyTorch's MaxPool2d(dilation=): output
 * sizes floor (ceil in ceil_mode) of (H + 2 pad - d (k - 1) - 1) / s, plus
 * one; values against a naive loop here (both layouts, padding, strides,
 * ceil_mode); the gradient against central finite differences
 * (tests/util/gradcheck.h); average pooling with a dilation and a negative
 * dilation refused in one line; and nn.Sequential's
 * MaxPool2d(..., dilation=2, ceil_mode=True) computing what the op does. */
#include "gradcheck.h"

#include "dp/nn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int build_max(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    return dp_max_pool2d(out, in[0], ctx);
}

/* Max pooling's parameters: kernel, stride, padding and dilation, rows
 * then columns. */
static dp_pool2d_params maxp(int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw,
                             bool ceil_mode)
{
    return (dp_pool2d_params){.kernel_h = kh,
                              .kernel_w = kw,
                              .stride_h = sh,
                              .stride_w = sw,
                              .pad_h = ph,
                              .pad_w = pw,
                              .ceil_mode = ceil_mode,
                              .dilation_h = dh,
                              .dilation_w = dw};
}

/* PyTorch's output size along a side of `size`. */
static int64_t torch_out(int64_t size, int k, int s, int pad, int d, bool ceil_mode)
{
    int64_t span = size + 2 * pad - (int64_t)d * (k - 1) - 1;
    int64_t n = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (n - 1) * s >= size + pad)
        n--;
    return n;
}

/* max over window (p, q) of plane x (H, W); padded cells never win */
static double window_max(const float *x, int64_t H, int64_t W, const dp_pool2d_params *pp,
                         int64_t p, int64_t q)
{
    double best = -INFINITY;
    for (int i = 0; i < pp->kernel_h; i++)
        for (int j = 0; j < pp->kernel_w; j++) {
            int64_t h = p * pp->stride_h - pp->pad_h + (int64_t)i * pp->dilation_h;
            int64_t w = q * pp->stride_w - pp->pad_w + (int64_t)j * pp->dilation_w;
            if (h >= 0 && h < H && w >= 0 && w < W)
                best = fmax(best, x[h * W + w]);
        }
    return best;
}

static void forward_case(const int64_t *xs, dp_pool2d_params pp, uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 1);
    int64_t n = count(4, xs), NC = xs[0] * xs[1], H = xs[2], W = xs[3];
    int64_t P = torch_out(H, pp.kernel_h, pp.stride_h, pp.pad_h, pp.dilation_h, pp.ceil_mode);
    int64_t Q = torch_out(W, pp.kernel_w, pp.stride_w, pp.pad_w, pp.dilation_w, pp.ceil_mode);
    float *xv = normal_array(&rng, n, 1.0f);
    for (int64_t i = 0; i < n; i++) /* all negative: a padded 0 would win */
        xv[i] = -1.0f - fabsf(xv[i]);
    double *want = malloc((size_t)(NC * P * Q) * sizeof *want);
    for (int64_t k = 0; k < NC * P * Q; k++)
        want[k] = window_max(xv + k / (P * Q) * H * W, H, W, &pp, k / Q % P, k % Q);
    for (int nhwc = 0; nhwc < 2; nhwc++) {
        int64_t ny;
        float *y = run_forward(build_max, &pp, 4, xs, xv, nhwc, &ny);
        char what[128];
        snprintf(what, sizeof what, "k%dx%d s%dx%d p%dx%d d%dx%d%s%s: %lld x %lld", pp.kernel_h,
                 pp.kernel_w, pp.stride_h, pp.stride_w, pp.pad_h, pp.pad_w, pp.dilation_h,
                 pp.dilation_w, pp.ceil_mode ? " ceil" : "", nhwc ? " NHWC" : "", (long long)P,
                 (long long)Q);
        assert_int_equal(ny, NC * P * Q);
        assert_values(what, y, want, ny, 0, 0);
        printf("max_pool2d %s: %lld values equal the loop's\n", what, (long long)ny);
        free(y);
    }
    free(xv), free(want);
}

static void test_dilated_forward(void **state)
{
    (void)state;
    /* (9 + 2 - 2 2 - 1) / 1 + 1 = 7 */
    forward_case((int64_t[]){2, 3, 9, 9}, maxp(3, 3, 1, 1, 1, 1, 2, 2, false), 81);
    /* uneven: kernel, stride and dilation differ between rows and columns */
    forward_case((int64_t[]){1, 2, 12, 11}, maxp(3, 2, 2, 3, 1, 1, 2, 3, false), 82);
    /* ceil_mode: (10 + 2 - 4 - 1) / 2 = 3.5 -> 4 + 1 = 5 windows */
    forward_case((int64_t[]){2, 2, 10, 10}, maxp(2, 2, 2, 2, 1, 1, 4, 4, true), 83);
}

static void test_dilated_grad(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 91, 1);
    int64_t xs[4] = {2, 2, 9, 8};
    dp_pool2d_params cases[] = {maxp(3, 3, 1, 1, 1, 1, 2, 2, false),
                                maxp(2, 3, 2, 1, 1, 0, 3, 2, true)};
    const char *names[] = {"max_pool2d k3 p1 d2 (overlapping)", "max_pool2d k2x3 s2x1 d3x2 ceil"};
    for (size_t k = 0; k < COUNTOF(cases); k++) {
        gc_problem g = {.name = names[k], .build = build_max, .ctx = &cases[k], .seed = 91 + k};
        g.in[g.nin++] = input("x", 4, xs, distinct_array(&rng, count(4, xs), 0.1f), true);
        gc_run(&g);
    }
}

static void test_dilated_errors(void **state)
{
    (void)state;
    tu_quiet_log();
    int64_t xs[4] = {1, 1, 6, 6};
    float v[36] = {0};
    dp_tensor_t *x = upload(4, xs, v), *y = NULL;
    dp_pool2d_params avg = {.kernel_h = 2, .kernel_w = 2, .dilation_h = 2, .dilation_w = 2};
    assert_int_equal(dp_avg_pool2d(&y, x, &avg), DP_EINVAL);
    printf("avg_pool2d with a dilation: %s\n", dp_last_error());
    assert_non_null(strstr(dp_last_error(), "only max pooling is dilated"));
    dp_pool2d_params negative = {.kernel_h = 2, .kernel_w = 2, .dilation_h = -1};
    assert_int_equal(dp_max_pool2d(&y, x, &negative), DP_EINVAL);
    assert_non_null(strstr(dp_last_error(), "dilation -1x1"));
    /* a 3x3 window 3 apart spans 7 > 6 */
    dp_pool2d_params wide = {.kernel_h = 3, .kernel_w = 3, .dilation_h = 3, .dilation_w = 3};
    assert_int_equal(dp_max_pool2d(&y, x, &wide), DP_ESHAPE);
    printf("a window too wide: %s\n", dp_last_error());
    assert_non_null(strstr(dp_last_error(), "7x7 window"));
    assert_null(strchr(dp_last_error(), '\n'));
    dp_tensor_free(x);
}

/* MaxPool2d(3, stride=2, padding=1, dilation=2, ceil_mode=True) on 28 x 28:
 * ceil(25 / 2) + 1 = 14 windows a side, which Linear's in_features must
 * match; its forward equals dp_max_pool2d's bit for bit. */
static void test_sequential_dilation(void **state)
{
    (void)state;
    const char *text = "Conv2d(1, 2, 1)\n"
                       "MaxPool2d(3, stride=2, padding=1, dilation=2, ceil_mode=True)\n"
                       "Flatten()\n"
                       "Linear(2 * 14 * 14, 10)\n";
    dp_model_def *def;
    OK(dp_model_def_parse(&def, text, "dilated.txt", NULL));
    dp_model_t *m;
    OK(dp_model_init(&m, def, gc_dev, 3));
    int64_t xs[4] = {2, 1, 28, 28};
    dp_rng rng;
    dp_rng_init(&rng, 7, 0);
    float *xv = normal_array(&rng, count(4, xs), 1.0f);
    dp_tensor_t *x = upload(4, xs, xv), *parsed, *h;
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    OK(dp_model_forward(m, x, false, &parsed));
    dp_params_t *P = dp_model_params(m);
    dp_pool2d_params pool = maxp(3, 3, 2, 2, 1, 1, 2, 2, true);
    OK(dp_conv2d(&h, x, dp_params_get(P, 0), dp_params_get(P, 1), NULL));
    OK(dp_max_pool2d(&h, h, &pool));
    assert_int_equal(dp_tensor_dim(h, 2), 14);
    OK(dp_flatten(&h, h));
    OK(dp_linear(&h, h, dp_params_get(P, 2), dp_params_get(P, 3), DP_WEIGHT_OUT_IN));
    float *a = download(parsed), *b = download(h);
    assert_int_equal(memcmp(a, b, 20 * sizeof *a), 0);
    printf("MaxPool2d(3, stride=2, padding=1, dilation=2, ceil_mode=True): 14 x 14, the "
           "parsed forward equals the ops' (logit 0 %.6f)\n",
           (double)a[0]);
    dp_tape_end(tape);
    dp_tape_close(tape);
    free(a), free(b), free(xv);
    dp_tensor_free(x);
    dp_model_close(m);
    dp_model_def_free(def);
}

int main(int argc, char **argv)
{
    printf("op checks on cpu:0 with %d kernel thread(s)\n", gc_threads());
#define T(f) cmocka_unit_test_setup_teardown(f, gc_open_device, gc_close_device)
    const struct CMUnitTest tests[] = {
        T(test_dilated_forward),
        T(test_dilated_grad),
        T(test_dilated_errors),
        T(test_sequential_dilation),
    };
#undef T
    return tu_run(argc, argv, tests, NULL, NULL);
}
