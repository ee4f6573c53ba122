/* Matmul and 2-D transpose (dp_matmul, dp_transpose), as ONNX's MatMul and
 * Transpose of a matrix: values against loops in double (transposes exact,
 * across the CUDA kernel's 32 x 32 tiles' edges), gradients against finite
 * differences, and matmul by a constant that takes no gradient. */
#include "gradcheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int build_t(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    (void)ctx;
    return dp_transpose(out, in[0]);
}

/* y = a transpose(w): ONNX's MatMul(a, Transpose(w)). */
static int build_mm(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    (void)ctx;
    dp_tensor_t *wt;
    int rc = dp_transpose(&wt, in[1]);
    return rc ? rc : dp_matmul(out, in[0], wt);
}

static void test_transpose_values(void **state)
{
    (void)state;
    static const int64_t shapes[][2] = {{5, 7}, {1, 1}, {1, 9}, {33, 65}, {64, 32}};
    for (size_t k = 0; k < COUNTOF(shapes); k++) {
        int64_t r = shapes[k][0], c = shapes[k][1];
        dp_rng rng;
        dp_rng_init(&rng, 3, k);
        float *xv = normal_array(&rng, r * c, 1.0f);
        int64_t n;
        float *y = run_forward(build_t, NULL, 2, shapes[k], xv, false, &n);
        double *want = malloc((size_t)(r * c) * sizeof *want);
        for (int64_t i = 0; i < r; i++)
            for (int64_t j = 0; j < c; j++)
                want[j * r + i] = xv[i * c + j];
        assert_int_equal(n, r * c);
        assert_values("transpose", y, want, n, 0, 0);
        printf("transpose (%lld, %lld): exact\n", (long long)r, (long long)c);
        free(xv), free(y), free(want);
    }
}

static void test_matmul_values(void **state)
{
    (void)state;
    const int64_t as[2] = {4, 6}, bs[2] = {6, 3};
    dp_rng rng;
    dp_rng_init(&rng, 8, 0);
    float *av = normal_array(&rng, 24, 1.0f), *bv = normal_array(&rng, 18, 1.0f);
    dp_tensor_t *a = upload(2, as, av), *b = upload(2, bs, bv), *y;
    /* b is a constant: no gradient is asked of it, and none is made */
    OK(dp_tensor_set_requires_grad(a, NULL));
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, true));
    dp_tape_begin(tape);
    OK(dp_matmul(&y, a, b));
    float *got = download(y);
    double want[12];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) {
            want[i * 3 + j] = 0;
            for (int k = 0; k < 6; k++)
                want[i * 3 + j] += (double)av[i * 6 + k] * bv[k * 3 + j];
        }
    assert_values("matmul", got, want, 12, 1e-6, 1e-6);
    assert_null(dp_tensor_grad(b));
    dp_tape_end(tape);
    dp_tape_close(tape);
    printf("matmul (4, 6) x (6, 3): as the sums in double\n");
    int64_t bad[2] = {5, 3};
    dp_tensor_t *c = upload(2, bad, bv);
    assert_int_equal(dp_matmul(&y, a, c), DP_ESHAPE);
    dp_tensor_free(a), dp_tensor_free(b), dp_tensor_free(c);
    free(av), free(bv), free(got);
}

static void test_gradients(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 12, 0);
    const int64_t xs[2] = {33, 40}, as[2] = {5, 8}, ws[2] = {6, 8};
    gc_problem t = {.name = "transpose (33, 40)", .build = build_t};
    t.in[t.nin++] = input("x", 2, xs, normal_array(&rng, 33 * 40, 1.0f), true);
    gc_run(&t);
    gc_problem m = {.name = "matmul(a, transpose(w))", .build = build_mm};
    m.in[m.nin++] = input("a", 2, as, normal_array(&rng, 40, 1.0f), true);
    m.in[m.nin++] = input("w", 2, ws, normal_array(&rng, 48, 1.0f), true);
    gc_run(&m);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transpose_values),
        cmocka_unit_test(test_matmul_values),
        cmocka_unit_test(test_gradients),
    };
    return tu_run(argc, argv, tests, gc_open_device, gc_close_device);
}
