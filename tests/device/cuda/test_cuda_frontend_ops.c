/* The Python front end's ops on the CUDA device against the CPU device:
 * sum and mean forward and backward (compare_case's head), argmax, eq,
 * int32 casts and int32 sums (exactly the CPU's integers), cross-entropy
 * per row with a gradient per row, narrow, and copies between the GPU and
 * host memory in either layout (dp_to_device's gradient back to the CPU,
 * dp_tensor_copy into a GPU tensor stored N, H, W, C).
 *
 * Without a GPU (a CPU-only build, or no GPU visible to the CUDA runtime)
 * every test says so on stdout and is skipped. */
#include "cudautil.h"

#include "device/device.h"
#include "dp/dp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[2] = {"cpu:0", "cuda:0"};

/* y (N, 1, H, 1) = the mean over W of the sum over C of x (N, C, H, W). */
static int op_sum_mean(dp_tensor_t **y, dp_tensor_t **l)
{
    dp_tensor_t *s;
    int rc = dp_sum(&s, l[0], 1, true);
    return rc < 0 ? rc : dp_mean(y, s, 3, true);
}

static const op_case sum_mean_case = {"sum dim 1, mean dim 3", 1, {{4, {4, 3, 5, 6}, false}},
                                      op_sum_mean};

static void sum_and_mean_match_cpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    dp_set_tf32(false);
    compare_case(&sum_mean_case, TOL_FORWARD, TOL_GRAD);
}

/* d2l's accuracy on both devices: argmax (by row and flattened), eq with
 * int32 labels, int32 sums, and the casts both ways: every integer the
 * CPU's. */
static void integer_ops_match_cpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    enum { ROWS = 37 };
    const int64_t shape[2] = {ROWS, CLASSES}, rows = ROWS;
    float logits[ROWS * CLASSES];
    int32_t labels[ROWS];
    fill_random(logits, ROWS * CLASSES, 11);
    logits[5] = logits[7] = 3.0f; /* a tie in row 0: the first wins */
    logits[12] = NAN;             /* a NaN in row 1: it wins */
    for (int i = 0; i < ROWS; i++)
        labels[i] = (int32_t)(i % CLASSES);
    int32_t am[2][ROWS], flat[2], hits[2][ROWS], total[2], trunc[2][ROWS * CLASSES];
    float back[2][ROWS * CLASSES];
    for (int d = 0; d < 2; d++) {
        dp_device_t *dev;
        dp_tensor_t *x, *y, *a, *f, *h, *t, *big, *i32, *f32;
        assert_int_equal(dp_device_open(&dev, names[d], 1), 0);
        assert_int_equal(dp_tensor_from_host(&x, dev, DP_F32, 2, shape, logits), 0);
        assert_int_equal(dp_tensor_from_host(&y, dev, DP_I32, 1, &rows, labels), 0);
        assert_int_equal(dp_argmax(&a, x, 1, false), 0);
        assert_int_equal(dp_argmax(&f, x, -1, false), 0);
        assert_int_equal(dp_eq(&h, a, y), 0);
        assert_int_equal(dp_sum(&t, h, -1, false), 0);
        float scale = 3e9f; /* values past int32's range, both signs */
        dp_tensor_t *s;
        assert_int_equal(dp_tensor_from_host(&s, dev, DP_F32, 0, NULL, &scale), 0);
        assert_int_equal(dp_binary(&big, DP_BINARY_MUL, x, s), 0);
        assert_int_equal(dp_cast(&i32, big, DP_I32), 0);
        assert_int_equal(dp_cast(&f32, i32, DP_F32), 0);
        assert_int_equal(dp_tensor_to_host(a, am[d], sizeof am[d]), 0);
        assert_int_equal(dp_tensor_to_host(f, &flat[d], sizeof flat[d]), 0);
        assert_int_equal(dp_tensor_to_host(h, hits[d], sizeof hits[d]), 0);
        assert_int_equal(dp_tensor_to_host(t, &total[d], sizeof total[d]), 0);
        assert_int_equal(dp_tensor_to_host(i32, trunc[d], sizeof trunc[d]), 0);
        assert_int_equal(dp_tensor_to_host(f32, back[d], sizeof back[d]), 0);
        dp_tensor_t *all[] = {x, y, a, f, h, t, s, big, i32, f32};
        for (size_t i = 0; i < COUNTOF(all); i++)
            dp_tensor_free(all[i]);
        dp_device_close(dev);
    }
    assert_int_equal(am[0][0], 5);
    assert_int_equal(am[0][1], 2);
    assert_memory_equal(am[0], am[1], sizeof am[0]);
    assert_int_equal(flat[0], 12);
    assert_int_equal(flat[0], flat[1]);
    assert_memory_equal(hits[0], hits[1], sizeof hits[0]);
    assert_int_equal(total[0], total[1]);
    assert_memory_equal(trunc[0], trunc[1], sizeof trunc[0]);
    assert_memory_equal(back[0], back[1], sizeof back[0]);
    print_message("argmax, eq, int32 sum (%d hits), casts: CUDA's integers are the CPU's\n",
                  total[0]);
}

/* Per-row cross-entropy, and its backward with a different gradient for
 * each row (the loss projected on r before backward). */
static void cross_entropy_per_row_matches_cpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    enum { ROWS = 19 };
    const int64_t shape[2] = {ROWS, CLASSES}, rows = ROWS, rshape[2] = {ROWS, 1},
                  flat[2] = {1, ROWS};
    float logits[ROWS * CLASSES], r[ROWS];
    int32_t labels[ROWS];
    fill_random(logits, ROWS * CLASSES, 12);
    fill_random(r, ROWS, 13);
    for (int i = 0; i < ROWS; i++)
        labels[i] = (int32_t)((i * 7) % CLASSES);
    float loss[2][ROWS], grad[2][ROWS * CLASSES];
    for (int d = 0; d < 2; d++) {
        dp_device_t *dev;
        dp_tensor_t *x, *y, *rt, *l, *row, *s;
        assert_int_equal(dp_device_open(&dev, names[d], 1), 0);
        assert_int_equal(dp_tensor_from_host(&x, dev, DP_F32, 2, shape, logits), 0);
        assert_int_equal(dp_tensor_from_host(&y, dev, DP_I32, 1, &rows, labels), 0);
        assert_int_equal(dp_tensor_from_host(&rt, dev, DP_F32, 2, rshape, r), 0);
        assert_int_equal(dp_tensor_set_requires_grad(x, NULL), 0);
        dp_tape_t *tape;
        assert_int_equal(dp_tape_init(&tape, true), 0);
        dp_tape_begin(tape);
        assert_int_equal(dp_cross_entropy_smoothed(&l, x, y, DP_REDUCE_NONE, 0.1f), 0);
        assert_int_equal(dp_reshape(&row, l, 2, flat), 0);
        assert_int_equal(dp_linear(&s, row, rt, NULL, DP_WEIGHT_IN_OUT), 0);
        assert_int_equal(dp_backward(s), 0);
        assert_int_equal(dp_tensor_to_host(l, loss[d], sizeof loss[d]), 0);
        assert_int_equal(dp_tensor_to_host(dp_tensor_grad(x), grad[d], sizeof grad[d]), 0);
        dp_tape_end(tape);
        dp_tape_close(tape);
        dp_tensor_free(x), dp_tensor_free(y), dp_tensor_free(rt);
        dp_device_close(dev);
    }
    tu_assert_at_most(rel_error(loss[1], loss[0], ROWS), TOL_FORWARD);
    tu_assert_at_most(rel_error(grad[1], grad[0], ROWS * CLASSES), TOL_GRAD);
}

/* x on cpu:0 -> cuda:0 -> narrow rows 1..2 -> cpu:0, projected on r:
 * x's gradient is r in those rows and zero elsewhere, exactly. A tensor
 * copied into a GPU tensor stored N, H, W, C and back is the same too. */
static void copies_between_gpu_and_host(void **state)
{
    (void)state;
    REQUIRE_GPU();
    dp_device_t *cpu, *gpu;
    assert_int_equal(dp_device_open(&cpu, "cpu:0", 1), 0);
    assert_int_equal(dp_device_open(&gpu, "cuda:0", 1), 0);
    const int64_t shape[4] = {4, 3, 2, 2}, rshape[2] = {24, 1}, flat[2] = {1, 24};
    float xv[48], r[24], got[48];
    fill_random(xv, 48, 14);
    fill_random(r, 24, 15);
    dp_tensor_t *x, *rt, *there, *rows, *back, *row, *s;
    assert_int_equal(dp_tensor_from_host(&x, cpu, DP_F32, 4, shape, xv), 0);
    assert_int_equal(dp_tensor_from_host(&rt, cpu, DP_F32, 2, rshape, r), 0);
    assert_int_equal(dp_tensor_set_requires_grad(x, NULL), 0);
    dp_tape_t *tape;
    assert_int_equal(dp_tape_init(&tape, true), 0);
    dp_tape_begin(tape);
    assert_int_equal(dp_to_device(&there, x, gpu), 0);
    assert_int_equal(dp_narrow(&rows, there, 1, 2), 0);
    assert_int_equal(dp_to_device(&back, rows, cpu), 0);
    assert_int_equal(dp_tensor_to_host(back, got, 24 * sizeof(float)), 0);
    assert_memory_equal(got, xv + 12, 24 * sizeof(float));
    assert_int_equal(dp_reshape(&row, back, 2, flat), 0);
    assert_int_equal(dp_linear(&s, row, rt, NULL, DP_WEIGHT_IN_OUT), 0);
    assert_int_equal(dp_backward(s), 0);
    assert_int_equal(dp_tensor_to_host(dp_tensor_grad(x), got, sizeof got), 0);
    for (int i = 0; i < 48; i++)
        assert_true(got[i] == (i >= 12 && i < 36 ? r[i - 12] : 0.0f));
    dp_tape_end(tape);
    dp_tape_close(tape);
    dp_tensor_t *nhwc, *home;
    assert_int_equal(dp__tensor_alloc(&nhwc, gpu, DP_F32, 4, shape, 1), 0);
    assert_int_equal(dp_tensor_new(&home, cpu, DP_F32, 4, shape), 0);
    assert_int_equal(dp_tensor_copy(nhwc, x), 0);
    assert_int_equal(dp_tensor_copy(home, nhwc), 0);
    assert_int_equal(dp_tensor_to_host(home, got, sizeof got), 0);
    assert_memory_equal(got, xv, sizeof got);
    assert_int_equal(dp_tensor_to_host(nhwc, got, sizeof got), 0); /* logical order */
    assert_memory_equal(got, xv, sizeof got);
    assert_null(dp_tensor_host_data(nhwc));
    dp_tensor_free(nhwc), dp_tensor_free(home), dp_tensor_free(x), dp_tensor_free(rt);
    dp_device_close(gpu);
    dp_device_close(cpu);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sum_and_mean_match_cpu),
        cmocka_unit_test(integer_ops_match_cpu),
        cmocka_unit_test(cross_entropy_per_row_matches_cpu),
        cmocka_unit_test(copies_between_gpu_and_host),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
