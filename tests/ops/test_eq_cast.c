/* eq (dp_eq) and the int32 casts of dp_cast, as torch's == and
 * .type(torch.int) / .float(): d2l's accuracy, (y_hat.argmax(1).type(y.dtype)
 * == y).type(torch.float).sum(), step by step against values worked out
 * here, and the errors of mismatched shapes, dtypes and devices. */
#include "gradcheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static dp_tensor_t *ints(int ndim, const int64_t *shape, const int32_t *v)
{
    dp_tensor_t *t = NULL;
    OK(dp_tensor_from_host(&t, gc_dev, DP_I32, ndim, shape, v));
    return t;
}

static void expect_ints(const dp_tensor_t *t, const int32_t *want, int64_t n)
{
    assert_int_equal(dp_tensor_dtype(t), DP_I32);
    assert_int_equal(dp_tensor_numel(t), n);
    int32_t *got = malloc((size_t)n * sizeof *got);
    OK(dp_tensor_to_host(t, got, (size_t)n * sizeof *got));
    for (int64_t i = 0; i < n; i++)
        if (got[i] != want[i])
            fail_msg("element %lld: %d, want %d", (long long)i, got[i], want[i]);
    free(got);
}

static void test_eq_values(void **state)
{
    (void)state;
    const int64_t s[2] = {2, 3};
    const float av[6] = {1.0f, 2.5f, NAN, -0.0f, 3.0f, 7.0f};
    const float bv[6] = {1.0f, 2.0f, NAN, 0.0f, 3.0f, -7.0f};
    dp_tensor_t *a = upload(2, s, av), *b = upload(2, s, bv), *y;
    OK(dp_eq(&y, a, b));
    assert_int_equal(dp_tensor_ndim(y), 2);
    const int32_t want_ff[6] = {1, 0, 0, 1, 1, 0}; /* NaN != NaN, -0 == 0 */
    expect_ints(y, want_ff, 6);
    dp_tensor_free(y);
    /* int32 against float32: compared as float32 */
    const int32_t iv[6] = {1, 2, 0, 0, 3, 16777217};
    const float fv[6] = {1.0f, 2.5f, 0.0f, -0.0f, 3.0f, 16777216.0f};
    dp_tensor_t *i = ints(2, s, iv), *f = upload(2, s, fv);
    OK(dp_eq(&y, i, f));
    /* 16777217 becomes 16777216.0f as float32: equal, as torch finds */
    const int32_t want_if[6] = {1, 0, 1, 1, 1, 1};
    expect_ints(y, want_if, 6);
    dp_tensor_free(y);
    OK(dp_eq(&y, f, i));
    expect_ints(y, want_if, 6);
    dp_tensor_free(y);
    /* int32 against int32, exactly: 16777217 != 16777216 */
    const int32_t jv[6] = {1, 3, 0, 1, 3, 16777216};
    dp_tensor_t *j = ints(2, s, jv);
    OK(dp_eq(&y, i, j));
    const int32_t want_ii[6] = {1, 0, 1, 0, 1, 0};
    expect_ints(y, want_ii, 6);
    dp_tensor_free(y);
    /* b of one element, broadcast */
    const float three = 3.0f;
    dp_tensor_t *one;
    OK(dp_tensor_from_host(&one, gc_dev, DP_F32, 0, NULL, &three));
    OK(dp_eq(&y, a, one));
    const int32_t want_s[6] = {0, 0, 0, 0, 1, 0};
    expect_ints(y, want_s, 6);
    dp_tensor_free(y);
    dp_tensor_free(a), dp_tensor_free(b), dp_tensor_free(i), dp_tensor_free(f);
    dp_tensor_free(j), dp_tensor_free(one);
    printf("eq: float32, int32, int32 against float32 (as float32), a scalar on the right\n");
}

/* d2l's accuracy on a batch: argmax, cast to the labels' dtype, ==, cast
 * to float, sum. */
static void test_accuracy_chain(void **state)
{
    (void)state;
    const int64_t s[2] = {4, 3}, n = 4;
    const float logits[12] = {0.1f, 2.0f, 0.3f, 5.0f, 1.0f, 1.0f,
                              0.0f, 0.0f, 9.0f, 1.0f, 3.0f, 2.0f};
    const int32_t labels[4] = {1, 0, 1, 1};
    dp_tensor_t *x = upload(2, s, logits), *y = ints(1, &n, labels), *am, *hit, *hf, *total;
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    OK(dp_argmax(&am, x, 1, false));
    OK(dp_eq(&hit, am, y));
    OK(dp_cast(&hf, hit, DP_F32));
    OK(dp_sum(&total, hf, -1, false));
    float got;
    OK(dp_tensor_to_host(total, &got, sizeof got));
    tu_assert_close(got, 3.0, 0, 0); /* rows 0, 1 and 3 are right, row 2 not */
    dp_tape_end(tape);
    dp_tape_close(tape);
    dp_tensor_free(x), dp_tensor_free(y);
    printf("accuracy of 4 rows through argmax, eq, cast and sum: %g\n", (double)got);
}

static void test_cast_int32(void **state)
{
    (void)state;
    const int64_t n = 9;
    const float fv[9] = {2.9f,   -2.9f, 0.5f,          -0.5f,         1e10f,
                         -1e10f, NAN,   2147483520.0f, -2147483648.0f};
    dp_tensor_t *f = upload(1, &n, fv), *i, *back;
    OK(dp_cast(&i, f, DP_I32));
    /* toward zero; NaN and out of range: INT32_MIN (x86's, on every device) */
    const int32_t want[9] = {2, -2, 0, 0, INT32_MIN, INT32_MIN, INT32_MIN, 2147483520, INT32_MIN};
    expect_ints(i, want, 9);
    OK(dp_cast(&back, i, DP_F32));
    float got[9];
    OK(dp_tensor_to_host(back, got, sizeof got));
    const double want_f[9] = {
        2, -2, 0, 0, -2147483648.0, -2147483648.0, -2147483648.0, 2147483520.0, -2147483648.0};
    assert_values("int32 to float32", got, want_f, 9, 0, 0);
    dp_tensor_free(back), dp_tensor_free(i);
    /* not recorded through int32: a tape that records makes no node, so
     * the float input gets no gradient from it */
    OK(dp_tensor_set_requires_grad(f, NULL));
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, true));
    dp_tape_begin(tape);
    OK(dp_cast(&i, f, DP_I32));
    OK(dp_cast(&back, i, DP_F32));
    dp_tensor_t *s;
    OK(dp_sum(&s, back, -1, false));
    tu_quiet_log();
    assert_int_equal(dp_backward(s), DP_EINVAL); /* no recorded path to a parameter */
    dp_tape_end(tape);
    dp_tape_close(tape);
    dp_tensor_free(f);
    printf("float32 -> int32 truncates toward zero, not recorded\n");
}

static void test_errors(void **state)
{
    (void)state;
    tu_quiet_log();
    const int64_t s[2] = {2, 3}, t[2] = {3, 2};
    const float v[6] = {0};
    dp_tensor_t *a = upload(2, s, v), *b = upload(2, t, v), *y;
    assert_int_equal(dp_eq(&y, a, b), DP_ESHAPE);
    tu_assert_error_mentions("[2, 3] against [3, 2]");
    assert_int_equal(dp_eq(&y, a, NULL), DP_EINVAL);
    dp_device_t *other;
    OK(dp_device_open(&other, "cpu:1", 1));
    dp_tensor_t *c;
    OK(dp_tensor_from_host(&c, other, DP_F32, 2, s, v));
    assert_int_equal(dp_eq(&y, a, c), DP_EINVAL);
    tu_assert_error_mentions("different devices");
    dp_tensor_t *bf;
    OK(dp_cast(&bf, a, DP_BF16));
    assert_int_equal(dp_cast(&y, bf, DP_I32), DP_EINVAL);
    tu_assert_error_mentions("bfloat16 to int32");
    assert_int_equal(dp_cast(&y, a, (dp_dtype)7), DP_EINVAL);
    dp_tensor_free(bf), dp_tensor_free(c), dp_tensor_free(a), dp_tensor_free(b);
    dp_device_close(other);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eq_values),
        cmocka_unit_test(test_accuracy_chain),
        cmocka_unit_test(test_cast_int32),
        cmocka_unit_test(test_errors),
    };
    return tu_run(argc, argv, tests, gc_open_device, gc_close_device);
}
