/* narrow (dp_narrow, torch.narrow along dim 0, the front end's rows) and
 * to_device (dp_to_device, tensor.to): values exact, in either layout,
 * gradients against finite differences (to_device's through a second
 * device and back), and the errors of rows outside the tensor. */
#include "gradcheck.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct narrow_ctx {
    int64_t start, length;
} narrow_ctx;

static int build_narrow(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const narrow_ctx *c = ctx;
    return dp_narrow(out, in[0], c->start, c->length);
}

static void test_narrow_values(void **state)
{
    (void)state;
    const int64_t xs[4] = {5, 3, 2, 2};
    dp_rng rng;
    dp_rng_init(&rng, 31, 0);
    float *xv = normal_array(&rng, 60, 1.0f);
    static const narrow_ctx cases[] = {{1, 3}, {-2, 2}, {0, 5}, {4, 0}, {5, 0}};
    for (size_t k = 0; k < COUNTOF(cases); k++)
        for (int nhwc = 0; nhwc < 2; nhwc++) {
            int64_t n;
            float *got = run_forward(build_narrow, &cases[k], 4, xs, xv, nhwc, &n);
            int64_t first = cases[k].start < 0 ? cases[k].start + 5 : cases[k].start;
            assert_int_equal(n, cases[k].length * 12);
            double *want = to_double(xv + first * 12, n);
            assert_values("narrow", got, want, n, 0, 0);
            free(got), free(want);
        }
    free(xv);
    /* int32 rows too: labels of a batch */
    const int64_t n = 6;
    const int32_t lv[6] = {0, 1, 2, 3, 4, 5};
    dp_tensor_t *l, *y;
    OK(dp_tensor_from_host(&l, gc_dev, DP_I32, 1, &n, lv));
    OK(dp_narrow(&y, l, 2, 3));
    int32_t got[3];
    OK(dp_tensor_to_host(y, got, sizeof got));
    assert_int_equal(got[0], 2), assert_int_equal(got[2], 4);
    dp_tensor_free(y), dp_tensor_free(l);
    printf("narrow of (5, 3, 2, 2), either layout, and of int32 labels: exact\n");
}

static void test_narrow_errors(void **state)
{
    (void)state;
    tu_quiet_log();
    const int64_t xs[2] = {4, 2};
    const float xv[8] = {0};
    dp_tensor_t *x = upload(2, xs, xv), *y, *s;
    assert_int_equal(dp_narrow(&y, x, 3, 2), DP_EINVAL);
    tu_assert_error_mentions("[4, 2]");
    assert_int_equal(dp_narrow(&y, x, -5, 1), DP_EINVAL);
    assert_int_equal(dp_narrow(&y, x, 0, -1), DP_EINVAL);
    float v = 1;
    OK(dp_tensor_from_host(&s, gc_dev, DP_F32, 0, NULL, &v));
    assert_int_equal(dp_narrow(&y, s, 0, 1), DP_EINVAL);
    tu_assert_error_mentions("scalar");
    dp_tensor_free(s), dp_tensor_free(x);
}

static dp_device_t *second;

/* y = to_device(narrow(to_device(x, cpu:1), 1, 2) , gc_dev): a copy
 * there, an op there, a copy back (the checker's projection runs on
 * gc_dev). */
static int build_round_trip(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    (void)ctx;
    dp_tensor_t *there, *rows;
    int rc = dp_to_device(&there, in[0], second);
    if (rc == 0)
        rc = dp_narrow(&rows, there, 1, 2);
    return rc ? rc : dp_to_device(out, rows, gc_dev);
}

static int open_second(void **state)
{
    int rc = gc_open_device(state);
    return rc ? rc : dp_device_open(&second, "cpu:1", 1);
}

static int close_second(void **state)
{
    dp_device_close(second);
    second = NULL;
    return gc_close_device(state);
}

static void test_to_device(void **state)
{
    (void)state;
    const int64_t xs[4] = {3, 4, 2, 2};
    dp_rng rng;
    dp_rng_init(&rng, 32, 0);
    float *xv = normal_array(&rng, 48, 1.0f);
    for (int nhwc = 0; nhwc < 2; nhwc++) {
        int64_t n;
        float *got = run_forward(build_round_trip, NULL, 4, xs, xv, nhwc, &n);
        double *want = to_double(xv + 16, 32);
        assert_int_equal(n, 32);
        assert_values("to_device and back", got, want, n, 0, 0);
        free(got), free(want);
    }
    free(xv);
    dp_tensor_t *x = upload(4, xs, xv = normal_array(&rng, 48, 1.0f)), *y;
    OK(dp_to_device(&y, x, second));
    assert_ptr_equal(dp_tensor_device(y), second);
    assert_int_equal(dp_tensor_ndim(y), 4);
    assert_non_null(dp_tensor_host_data(y)); /* logical order */
    float *got = download(y);
    assert_memory_equal(got, xv, sizeof(float) * 48);
    dp_tensor_free(y), dp_tensor_free(x), free(got), free(xv);
    tu_quiet_log();
    assert_int_equal(dp_to_device(&y, NULL, second), DP_EINVAL);
    tu_assert_error_mentions("tensor is NULL");
    printf("to_device cpu:0 -> cpu:1 -> cpu:0, either layout: exact\n");
}

static void test_gradients(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 33, 0);
    const int64_t xs[3] = {5, 3, 4};
    static const narrow_ctx nc = {1, 3};
    gc_problem p = {.name = "narrow rows 1..3 of 5", .build = build_narrow, .ctx = &nc};
    p.in[p.nin++] = input("x", 3, xs, normal_array(&rng, 60, 1.0f), true);
    gc_run(&p);
    const int64_t ts[4] = {3, 4, 2, 2};
    gc_problem t = {.name = "to cpu:1, narrow, back", .build = build_round_trip};
    t.in[t.nin++] = input("x", 4, ts, normal_array(&rng, 48, 1.0f), true);
    gc_run(&t);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_narrow_values),
        cmocka_unit_test(test_narrow_errors),
        cmocka_unit_test(test_to_device),
        cmocka_unit_test(test_gradients),
    };
    return tu_run(argc, argv, tests, open_second, close_second);
}
