/* sum, mean and argmax (dp_sum, dp_mean, dp_argmax), torch's reductions:
 * values against loops in double for every dim of a 3-D tensor, with and
 * without keepdim (the output's shape too: a scalar of 0 dimensions for
 * dim -1), the chunked path of a long axis, int32 and bf16 inputs, the
 * same bits for 1 and 2 kernel threads, an input stored N, H, W, C,
 * argmax's first maximum and NaN, gradients against finite differences,
 * and the errors of bad dims and dtypes. */
#include "gradcheck.h"

#include "device/kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct reduce_ctx {
    int dim;
    bool keepdim, mean;
} reduce_ctx;

static int build_reduce(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const reduce_ctx *c = ctx;
    return c->mean ? dp_mean(out, in[0], c->dim, c->keepdim)
                   : dp_sum(out, in[0], c->dim, c->keepdim);
}

/* want (outer, inner) = the sums (or means) over dim of x in double. */
static double *reduce_ref(const float *x, int ndim, const int64_t *shape, int dim, bool mean)
{
    int64_t outer = 1, len = 1, inner = 1;
    for (int d = 0; d < ndim; d++) {
        if (dim == -1 || d == dim)
            len *= shape[d];
        else if (d < dim)
            outer *= shape[d];
        else
            inner *= shape[d];
    }
    double *want = calloc((size_t)(outer * inner), sizeof *want);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double s = 0;
            for (int64_t l = 0; l < len; l++)
                s += x[(o * len + l) * inner + i];
            want[o * inner + i] = mean ? s / (double)len : s;
        }
    return want;
}

static void test_values_and_shapes(void **state)
{
    (void)state;
    const int64_t xs[3] = {3, 4, 5};
    dp_rng rng;
    dp_rng_init(&rng, 21, 0);
    float *xv = normal_array(&rng, 60, 1.0f);
    dp_tensor_t *x = upload(3, xs, xv);
    for (int mean = 0; mean < 2; mean++)
        for (int dim = -1; dim < 3; dim++)
            for (int keep = 0; keep < 2; keep++) {
                dp_tensor_t *y;
                OK(mean ? dp_mean(&y, x, dim, keep) : dp_sum(&y, x, dim, keep));
                int want_ndim = dim == -1 ? (keep ? 3 : 0) : (keep ? 3 : 2);
                assert_int_equal(dp_tensor_ndim(y), want_ndim);
                for (int d = 0, k = 0; d < 3; d++) {
                    if (dim == -1 || d == dim) {
                        if (keep)
                            assert_int_equal(dp_tensor_dim(y, k++), 1);
                    } else {
                        assert_int_equal(dp_tensor_dim(y, k++), xs[d]);
                    }
                }
                assert_int_equal(dp_tensor_dtype(y), DP_F32);
                double *want = reduce_ref(xv, 3, xs, dim, mean);
                float *got = download(y);
                char what[64];
                snprintf(what, sizeof what, "%s dim %d keepdim %d", mean ? "mean" : "sum", dim,
                         keep);
                assert_values(what, got, want, dp_tensor_numel(y), 1e-6, 1e-6);
                free(got), free(want);
                dp_tensor_free(y);
            }
    printf("sum and mean of (3, 4, 5) over dims -1 .. 2, keepdim or not: as in double\n");
    /* a scalar in, a scalar out: torch.sum of a 0-d tensor */
    float v = 2.5f;
    dp_tensor_t *s, *y;
    OK(dp_tensor_from_host(&s, gc_dev, DP_F32, 0, NULL, &v));
    OK(dp_mean(&y, s, 0, false));
    assert_int_equal(dp_tensor_ndim(y), 0);
    float got;
    OK(dp_tensor_to_host(y, &got, sizeof got));
    tu_assert_close(got, 2.5, 0, 0);
    dp_tensor_free(y), dp_tensor_free(s), dp_tensor_free(x), free(xv);
}

/* A long axis is summed chunk by chunk: against double, and its mean. */
static void test_long_axis(void **state)
{
    (void)state;
    const int64_t xs[2] = {3, 3 * DP__REDUCE_CHUNK + 17};
    int64_t n = xs[0] * xs[1];
    dp_rng rng;
    dp_rng_init(&rng, 22, 0);
    float *xv = normal_array(&rng, n, 1.0f);
    for (int64_t i = 0; i < n; i++)
        xv[i] += 0.25f; /* a sum far from zero: a relative bound means something */
    dp_tensor_t *x = upload(2, xs, xv), *y, *m;
    OK(dp_sum(&y, x, 1, false));
    OK(dp_mean(&m, x, -1, false));
    double *want = reduce_ref(xv, 2, xs, 1, false), *want_m = reduce_ref(xv, 2, xs, -1, true);
    float *got = download(y), *got_m = download(m);
    assert_values("sum of 3 rows of 12305", got, want, 3, 1e-7, 0);
    assert_values("mean of all 36915", got_m, want_m, 1, 1e-7, 0);
    printf("sum over 12305 elements (chunks of %d): %.6f, in double %.6f\n", DP__REDUCE_CHUNK,
           (double)got[0], want[0]);
    free(got), free(got_m), free(want), free(want_m), free(xv);
    dp_tensor_free(y), dp_tensor_free(m), dp_tensor_free(x);
}

/* The same bits with 1 and 2 kernel threads, over a long axis and many
 * short ones. */
static void test_thread_count_invariant(void **state)
{
    (void)state;
    const int64_t xs[2] = {64, 40000};
    int64_t n = xs[0] * xs[1];
    dp_rng rng;
    dp_rng_init(&rng, 23, 0);
    float *xv = normal_array(&rng, n, 1.0f);
    float got[2][1 + 64 + 40000];
    for (int t = 0; t < 2; t++) {
        dp_device_t *dev;
        OK(dp_device_open(&dev, "cpu:1", t + 1));
        dp_tensor_t *x, *all, *rows, *cols;
        OK(dp_tensor_from_host(&x, dev, DP_F32, 2, xs, xv));
        OK(dp_sum(&all, x, -1, false));
        OK(dp_sum(&rows, x, 1, false));
        OK(dp_sum(&cols, x, 0, false));
        OK(dp_tensor_to_host(all, got[t], sizeof(float)));
        OK(dp_tensor_to_host(rows, got[t] + 1, 64 * sizeof(float)));
        OK(dp_tensor_to_host(cols, got[t] + 65, 40000 * sizeof(float)));
        dp_tensor_free(x), dp_tensor_free(all), dp_tensor_free(rows), dp_tensor_free(cols);
        dp_device_close(dev);
    }
    assert_memory_equal(got[0], got[1], sizeof got[0]);
    printf("sums of (64, 40000): the same bits with 1 and 2 threads (total %.6f)\n",
           (double)got[0][0]);
    free(xv);
}

static void test_int32_and_bf16(void **state)
{
    (void)state;
    const int64_t xs[2] = {2, 3};
    const int32_t iv[6] = {1, -7, 2147483647, 4, 5, 6};
    dp_tensor_t *x, *y, *z;
    OK(dp_tensor_from_host(&x, gc_dev, DP_I32, 2, xs, iv));
    OK(dp_sum(&y, x, 1, true));
    assert_int_equal(dp_tensor_dtype(y), DP_I32);
    int32_t got[2];
    OK(dp_tensor_to_host(y, got, sizeof got));
    /* row 0 stays inside int32 (2^31 - 7); the total below wraps past it */
    assert_int_equal(got[0], 2147483641);
    assert_int_equal(got[1], 15);
    OK(dp_sum(&z, x, -1, false));
    int32_t total;
    OK(dp_tensor_to_host(z, &total, sizeof total));
    assert_int_equal(total, (int32_t)(2147483641LL + 15 - 4294967296LL));
    dp_tensor_free(y), dp_tensor_free(z);
    tu_quiet_log();
    assert_int_equal(dp_mean(&y, x, 0, false), DP_EINVAL);
    tu_assert_error_mentions("int32");
    dp_tensor_free(x);
    /* bf16 in, float32 out (autocast's rule), of the bf16 values */
    const float fv[6] = {1.0f, 2.0f, 3.0f, 0.5f, 0.25f, 8.0f};
    dp_tensor_t *f, *b;
    OK(dp_tensor_from_host(&f, gc_dev, DP_F32, 2, xs, fv));
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    OK(dp_cast(&b, f, DP_BF16));
    OK(dp_sum(&y, b, 0, false));
    assert_int_equal(dp_tensor_dtype(y), DP_F32);
    float gotf[3];
    OK(dp_tensor_to_host(y, gotf, sizeof gotf));
    const double want[3] = {1.5, 2.25, 11.0};
    assert_values("sum of bf16", gotf, want, 3, 0, 0);
    dp_tape_end(tape);
    dp_tape_close(tape);
    dp_tensor_free(f);
    printf("int32 sums wrap as int32; bf16 sums are float32\n");
}

static void test_nhwc_input(void **state)
{
    (void)state;
    const int64_t xs[4] = {2, 3, 2, 2};
    dp_rng rng;
    dp_rng_init(&rng, 24, 0);
    float *xv = normal_array(&rng, 24, 1.0f);
    for (int dim = -1; dim < 4; dim++) {
        reduce_ctx c = {dim, false, false};
        int64_t n;
        float *got = run_forward(build_reduce, &c, 4, xs, xv, true, &n);
        double *want = reduce_ref(xv, 4, xs, dim, false);
        assert_values("sum of an NHWC tensor", got, want, n, 1e-6, 1e-6);
        free(got), free(want);
    }
    free(xv);
}

static int build_argmax(dp_tensor_t **out, dp_tensor_t *x, int dim, bool keepdim, int32_t *got,
                        int64_t n)
{
    int rc = dp_argmax(out, x, dim, keepdim);
    if (rc == 0)
        rc = dp_tensor_to_host(*out, got, (size_t)n * sizeof *got);
    return rc;
}

static void test_argmax(void **state)
{
    (void)state;
    /* ties: the first maximum; a NaN is the maximum (torch's rule) */
    const int64_t xs[2] = {3, 4};
    const float xv[12] = {1, 5, 5, 2, /**/ -1, -3, -1, -2, /**/ 0, NAN, 7, NAN};
    dp_tensor_t *x = upload(2, xs, xv), *y;
    int32_t got[4];
    OK(build_argmax(&y, x, 1, false, got, 3));
    assert_int_equal(dp_tensor_ndim(y), 1);
    assert_int_equal(got[0], 1), assert_int_equal(got[1], 0), assert_int_equal(got[2], 1);
    dp_tensor_free(y);
    OK(build_argmax(&y, x, 0, true, got, 4));
    assert_int_equal(dp_tensor_ndim(y), 2), assert_int_equal(dp_tensor_dim(y, 0), 1);
    assert_int_equal(got[0], 0), assert_int_equal(got[1], 2), assert_int_equal(got[2], 2);
    assert_int_equal(got[3], 2);
    dp_tensor_free(y);
    OK(build_argmax(&y, x, -1, false, got, 1));
    assert_int_equal(dp_tensor_ndim(y), 0);
    assert_int_equal(got[0], 9); /* the flattened index of the first NaN */
    assert_int_equal(dp_tensor_dtype(y), DP_I32);
    dp_tensor_free(y), dp_tensor_free(x);
    /* int32 input, and a larger random one against a loop */
    const int32_t iv[6] = {3, 9, 9, -4, 2, 1};
    const int64_t is[2] = {2, 3};
    OK(dp_tensor_from_host(&x, gc_dev, DP_I32, 2, is, iv));
    OK(build_argmax(&y, x, 1, false, got, 2));
    assert_int_equal(got[0], 1), assert_int_equal(got[1], 1);
    dp_tensor_free(y), dp_tensor_free(x);
    dp_rng rng;
    dp_rng_init(&rng, 25, 0);
    const int64_t rs[3] = {4, 50, 6};
    float *rv = normal_array(&rng, 1200, 1.0f);
    int32_t *rg = malloc(24 * sizeof *rg);
    x = upload(3, rs, rv);
    OK(build_argmax(&y, x, 1, false, rg, 24));
    for (int64_t o = 0; o < 4; o++)
        for (int64_t i = 0; i < 6; i++) {
            int64_t best = 0;
            for (int64_t l = 1; l < 50; l++)
                if (rv[(o * 50 + l) * 6 + i] > rv[(o * 50 + best) * 6 + i])
                    best = l;
            assert_int_equal(rg[o * 6 + i], best);
        }
    dp_tensor_free(y), dp_tensor_free(x), free(rv), free(rg);
    printf("argmax: first maxima, NaN first, int32 input, (4, 50, 6) over dim 1 as a loop\n");
}

static void test_gradients(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 26, 0);
    const int64_t xs[3] = {3, 4, 5};
    static const reduce_ctx cases[] = {
        {1, false, false}, {-1, false, true}, {2, true, true}, {0, true, false}};
    const char *names[] = {"sum dim 1", "mean of all", "mean dim 2 keepdim", "sum dim 0 keepdim"};
    for (size_t k = 0; k < COUNTOF(cases); k++) {
        gc_problem p = {.name = names[k], .build = build_reduce, .ctx = &cases[k]};
        p.in[p.nin++] = input("x", 3, xs, normal_array(&rng, 60, 1.0f), true);
        gc_run(&p);
    }
}

static void test_errors(void **state)
{
    (void)state;
    tu_quiet_log();
    const int64_t xs[2] = {2, 3};
    const float xv[6] = {0};
    dp_tensor_t *x = upload(2, xs, xv), *y;
    assert_int_equal(dp_sum(&y, x, 2, false), DP_EINVAL);
    tu_assert_error_mentions("dim 2 is outside -1 .. 1");
    assert_int_equal(dp_mean(&y, x, -2, false), DP_EINVAL);
    tu_assert_error_mentions("dim -2");
    assert_int_equal(dp_argmax(&y, x, 5, false), DP_EINVAL);
    tu_assert_error_mentions("argmax: dim 5");
    assert_int_equal(dp_sum(&y, NULL, 0, false), DP_EINVAL);
    tu_assert_error_mentions("NULL");
    const int64_t empty[2] = {0, 3};
    dp_tensor_t *e;
    OK(dp_tensor_new(&e, gc_dev, DP_F32, 2, empty));
    assert_int_equal(dp_argmax(&y, e, 0, false), DP_EINVAL);
    tu_assert_error_mentions("empty");
    /* torch: the sum of nothing is 0, the mean NaN */
    float got[3];
    OK(dp_sum(&y, e, 0, false));
    OK(dp_tensor_to_host(y, got, sizeof got));
    const double zeros[3] = {0, 0, 0};
    assert_values("sum over an empty dim", got, zeros, 3, 0, 0);
    dp_tensor_free(y);
    OK(dp_mean(&y, e, 0, false));
    OK(dp_tensor_to_host(y, got, sizeof got));
    assert_true(isnan(got[0]) && isnan(got[2]));
    dp_tensor_free(y), dp_tensor_free(e), dp_tensor_free(x);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values_and_shapes),
        cmocka_unit_test(test_long_axis),
        cmocka_unit_test(test_thread_count_invariant),
        cmocka_unit_test(test_int32_and_bf16),
        cmocka_unit_test(test_nhwc_input),
        cmocka_unit_test(test_argmax),
        cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_errors),
    };
    return tu_run(argc, argv, tests, gc_open_device, gc_close_device);
}
