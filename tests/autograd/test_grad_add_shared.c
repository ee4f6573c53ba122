/* Gradient checks on cpu:0 of add, and of tensors used more than once (an
 * input added to itself, a convolution's input, output, weight and bias
 * used twice, a leaf used by two ops), whose gradients accumulate: against
 * central finite differences, and add(x, x) exactly, with and without
 * dp_zero_grad between steps.
 *
 * A gradient check turns the op's output y (any shape, any physical layout)
 * into a scalar with a fixed random projection, L = sum_i r_i y_i:
 *   analytic:  reshape y to (1, n), linear with r (n, 1) -> (1, 1), backward;
 *   numerical: y read back with dp_tensor_to_host (logical order) and the
 *              sum taken here in double, for x[i] +- eps.
 * Summing in double keeps the finite differences accurate to ~1e-5, so the
 * tolerance (1e-2 relative + 1e-3 absolute by default) catches a gradient off
 * by a few percent; every check also verifies that the same analytic values
 * scaled by 1.1 would have failed, so a check cannot pass vacuously. */
#include "gradcheck.h"

#include "dp/autograd.h"
#include "dp/core.h"
#include "dp/ops.h"
#include "dp/tensor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each test gets its own device, so that a sticky device error stays in the
 * test that caused it. */

/* ---- builders ---------------------------------------------------------------------- */

static int build_add(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    (void)ctx;
    return dp_add(out, in[0], in[1]);
}

/* add of two conv outputs (NHWC): conv(in0, in1) + conv(in0, in2), so x is
 * used twice. */
static int build_add_convs(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    dp_tensor_t *y1, *y2;
    int rc = dp_conv2d(&y1, in[0], in[1], NULL, ctx);
    if (rc == 0)
        rc = dp_conv2d(&y2, in[0], in[2], NULL, ctx);
    return rc ? rc : dp_add(out, y1, y2);
}

/* y + y for y = conv(x, w, b): an intermediate used twice. */
static int build_add_same_intermediate(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    dp_tensor_t *y;
    int rc = dp_conv2d(&y, in[0], in[1], in[2], ctx);
    return rc ? rc : dp_add(out, y, y);
}

/* conv(x1, w, b) + conv(x2, w, b): a weight and a bias used twice. */
static int build_shared_weight(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    dp_tensor_t *y1, *y2;
    int rc = dp_conv2d(&y1, in[0], in[2], in[3], ctx);
    if (rc == 0)
        rc = dp_conv2d(&y2, in[1], in[2], in[3], ctx);
    return rc ? rc : dp_add(out, y1, y2);
}

/* linear(x, w) + x: a leaf used by two different ops. */
static int build_linear_plus_input(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    dp_tensor_t *y;
    int rc = dp_linear(&y, in[0], in[1], NULL, *(const dp_weight_layout *)ctx);
    return rc ? rc : dp_add(out, y, in[0]);
}

/* ---- gradient tests -------------------------------------------------------------- */

static void test_add_grad(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 51, 1);
    int64_t s[3] = {2, 3, 4};
    gc_problem g = {.name = "add", .build = build_add};
    g.in[g.nin++] = input("a", 3, s, normal_array(&rng, count(3, s), 1.0f), true);
    g.in[g.nin++] = input("b", 3, s, normal_array(&rng, count(3, s), 1.0f), true);
    gc_run(&g);

    /* one side only needs a gradient */
    gc_problem h = {.name = "add (b constant)", .build = build_add};
    h.in[h.nin++] = input("a", 3, s, normal_array(&rng, count(3, s), 1.0f), true);
    h.in[h.nin++] = input("b", 3, s, normal_array(&rng, count(3, s), 1.0f), false);
    gc_run(&h);

    /* two conv outputs (NHWC) of the same x */
    int64_t xs[4] = {2, 3, 5, 5}, ws[4] = {4, 3, 3, 3};
    dp_conv2d_params cp = {.pad_h = 1, .pad_w = 1};
    gc_problem k = {.name = "conv2d + conv2d (x used twice)", .build = build_add_convs, .ctx = &cp};
    k.in[k.nin++] = input("x", 4, xs, normal_array(&rng, count(4, xs), 1.0f), true);
    k.in[k.nin++] = input("w1", 4, ws, normal_array(&rng, count(4, ws), 0.5f), true);
    k.in[k.nin++] = input("w2", 4, ws, normal_array(&rng, count(4, ws), 0.5f), true);
    gc_run(&k);
}

/* ---- gradient accumulation ----------------------------------------------------- */

/* dp_add(x, x): dx = 2 * upstream, exactly; without dp_zero_grad a second
 * step adds to it, after dp_zero_grad the next one writes. */
static void test_add_same_tensor(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 91, 1);
    int64_t xs[2] = {3, 4}, rs[2] = {12, 1}, flat[2] = {1, 12};
    float *xv = normal_array(&rng, 12, 1.0f), *rv = normal_array(&rng, 12, 1.0f), got[12];
    dp_tensor_t *x = upload(2, xs, xv), *r = upload(2, rs, rv);
    OK(dp_tensor_set_requires_grad(x, NULL));
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, true));
    for (int step = 0; step < 3; step++) {
        dp_tape_begin(tape);
        dp_tensor_t *z, *row, *loss;
        OK(dp_add(&z, x, x));
        OK(dp_reshape(&row, z, 2, flat));
        OK(dp_linear(&loss, row, r, NULL, DP_WEIGHT_IN_OUT));
        if (step != 1)
            dp_zero_grad(&x, 1);
        OK(dp_backward(loss));
        OK(dp_tensor_to_host(dp_tensor_grad(x), got, sizeof got));
        float loss_v;
        OK(dp_tensor_to_host(loss, &loss_v, sizeof loss_v));
        dp_tape_end(tape);
        dp_tape_reset(tape);
        double want_loss = 0.0;
        for (int i = 0; i < 12; i++)
            want_loss += 2.0 * xv[i] * rv[i];
        tu_assert_close(loss_v, want_loss, 1e-5, 1e-5);
        /* Steps 0 and 2 write r, then add r: exactly 2r. Step 1 adds r twice
         * to step 0's 2r: 4r up to the rounding of 3r. */
        float factor = step == 1 ? 4.0f : 2.0f;
        for (int i = 0; i < 12; i++) {
            if (step != 1 && got[i] != factor * rv[i])
                fail_msg("step %d: dx[%d] = %.9g, want %g * %.9g", step, i, (double)got[i],
                         (double)factor, (double)rv[i]);
            tu_assert_close(got[i], factor * rv[i], 1e-6, 0);
        }
    }
    dp_tape_close(tape);
    dp_tensor_free(x);
    dp_tensor_free(r);
    free(xv);
    free(rv);
}

static void test_shared_use_grad(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 92, 1);
    int64_t xs[4] = {2, 3, 5, 5}, ws[4] = {4, 3, 3, 3}, bs = 4;
    dp_conv2d_params cp = {.pad_h = 1, .pad_w = 1};

    gc_problem a = {
        .name = "y + y, y = conv2d(x)", .build = build_add_same_intermediate, .ctx = &cp};
    a.in[a.nin++] = input("x", 4, xs, normal_array(&rng, count(4, xs), 1.0f), true);
    a.in[a.nin++] = input("w", 4, ws, normal_array(&rng, count(4, ws), 0.5f), true);
    a.in[a.nin++] = input("b", 1, &bs, normal_array(&rng, bs, 0.5f), true);
    gc_run(&a);

    gc_problem b = {
        .name = "conv2d(x1,w) + conv2d(x2,w)", .build = build_shared_weight, .ctx = &cp};
    b.in[b.nin++] = input("x1", 4, xs, normal_array(&rng, count(4, xs), 1.0f), true);
    b.in[b.nin++] = input("x2", 4, xs, normal_array(&rng, count(4, xs), 1.0f), true);
    b.in[b.nin++] = input("w", 4, ws, normal_array(&rng, count(4, ws), 0.5f), true);
    b.in[b.nin++] = input("b", 1, &bs, normal_array(&rng, bs, 0.5f), true);
    gc_run(&b);

    for (int l = 0; l < 2; l++) {
        dp_weight_layout layout = l ? DP_WEIGHT_IN_OUT : DP_WEIGHT_OUT_IN;
        int64_t lx[2] = {3, 4}, lw[2] = {4, 4};
        gc_problem c = {.name = l ? "linear(x, w) + x, IN_OUT" : "linear(x, w) + x, OUT_IN",
                        .build = build_linear_plus_input,
                        .ctx = &layout};
        c.in[c.nin++] = input("x", 2, lx, normal_array(&rng, count(2, lx), 1.0f), true);
        c.in[c.nin++] = input("w", 2, lw, normal_array(&rng, count(2, lw), 1.0f), true);
        gc_run(&c);
    }
}

int main(int argc, char **argv)
{
    printf("gradient checks on cpu:0 with %d kernel thread(s)\n", gc_threads());
#define T(f) cmocka_unit_test_setup_teardown(f, gc_open_device, gc_close_device)
    const struct CMUnitTest tests[] = {
        T(test_add_grad),
        T(test_add_same_tensor),
        T(test_shared_use_grad),
    };
#undef T
    return tu_run(argc, argv, tests, NULL, NULL);
}
