/* Global pooling: dp_global_max_pool2d's values (the max over H x W of
 * each channel, NCHW and NHWC, odd sizes) and its gradient to each argmax
 * against finite differences; global average pooling, which
 * dp_adaptive_avg_pool2d(1, 1) serves, against the mean. */
#include "gradcheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct pool_case {
    const char *name;
    int64_t shape[4];
    bool nhwc, avg;
} pool_case;

static const pool_case cases[] = {
    {"global max (2,3,4,5)", {2, 3, 4, 5}, false, false},
    {"global max (2,3,4,5) NHWC", {2, 3, 4, 5}, true, false},
    {"global max (1,2,13,17) NHWC", {1, 2, 13, 17}, true, false},
    {"global max (3,2,1,1)", {3, 2, 1, 1}, false, false},
    {"global avg (2,3,7,7) NHWC", {2, 3, 7, 7}, true, true},
};

/* in[0] = x, in[1] = the identity 1x1 weight of an NHWC case. */
static int build(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const pool_case *c = ctx;
    dp_tensor_t *x = in[0];
    if (c->nhwc) {
        int rc = dp_conv2d(&x, in[0], in[1], NULL, NULL);
        if (rc != 0)
            return rc;
    }
    return c->avg ? dp_adaptive_avg_pool2d(out, x, 1, 1) : dp_global_max_pool2d(out, x);
}

static void test_values(void **state)
{
    (void)state;
    for (size_t k = 0; k < COUNTOF(cases); k++) {
        const pool_case *c = &cases[k];
        int64_t n = count(4, c->shape), NC = c->shape[0] * c->shape[1], HW = n / NC;
        dp_rng rng;
        dp_rng_init(&rng, 4, k);
        float *xv = normal_array(&rng, n, 1.0f), *iv = identity_1x1(c->shape[1]);
        int64_t ws[4] = {c->shape[1], c->shape[1], 1, 1};
        dp_tensor_t *in[2] = {upload(4, c->shape, xv), upload(4, ws, iv)}, *y;
        dp_tape_t *tape;
        OK(dp_tape_init(&tape, false));
        dp_tape_begin(tape);
        OK(build(&y, in, c));
        assert_int_equal(dp_tensor_numel(y), NC);
        float *got = download(y);
        dp_tape_end(tape);
        dp_tape_close(tape);
        double *want = malloc((size_t)NC * sizeof *want);
        for (int64_t p = 0; p < NC; p++) {
            double m = -INFINITY, s = 0;
            for (int64_t i = 0; i < HW; i++) {
                m = fmax(m, xv[p * HW + i]);
                s += xv[p * HW + i];
            }
            want[p] = c->avg ? s / (double)HW : m;
        }
        assert_values(c->name, got, want, NC, c->avg ? 1e-6 : 0, c->avg ? 1e-7 : 0);
        printf("%-30s values as the %s\n", c->name, c->avg ? "mean" : "max, exactly");
        dp_tensor_free(in[0]), dp_tensor_free(in[1]);
        free(xv), free(iv), free(got), free(want);
    }
}

static void test_gradients(void **state)
{
    (void)state;
    for (size_t k = 0; k < COUNTOF(cases); k++) {
        const pool_case *c = &cases[k];
        dp_rng rng;
        dp_rng_init(&rng, 40, k);
        int64_t ws[4] = {c->shape[1], c->shape[1], 1, 1};
        /* every element: each argmax among them */
        gc_problem g = {
            .name = c->name, .build = build, .ctx = c, .checks = (int)count(4, c->shape)};
        /* values 0.1 apart: the argmax stays under a perturbation of 0.02 */
        g.in[g.nin++] =
            input("x", 4, c->shape, distinct_array(&rng, count(4, c->shape), 0.1f), true);
        g.in[g.nin++] = input("id", 4, ws, identity_1x1(c->shape[1]), false);
        gc_run(&g);
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_gradients),
    };
    return tu_run(argc, argv, tests, gc_open_device, gc_close_device);
}
