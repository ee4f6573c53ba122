/* add of a convolution's output (stored NHWC) and a tensor in logical order,
 * a residual conv(x) + x: dp_add and dp_binary (add, and sub, which meets in
 * logical order too), with the NHWC operand first and second. Values against
 * the double-precision convolution plus x; gradients of x, w and b against
 * central finite differences (gradcheck.h). */
#include "gradcheck.h"

#include "device/storage.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct residual {
    dp_conv2d_params conv;
    int kind;  /* 0: dp_add, 1: dp_binary add, 2: dp_binary sub */
    bool conv_first;
} residual;

/* y = conv(x, w, b) op x, or x op conv(x, w, b). */
static int build_residual(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const residual *r = ctx;
    dp_tensor_t *c;
    int rc = dp_conv2d(&c, in[0], in[1], in[2], &r->conv);
    if (rc < 0)
        return rc;
    /* The case under test: the layouts differ. */
    if (!dp__tensor_nhwc(c) || dp__tensor_nhwc(in[0]))
        fail_msg("the convolution's output is not NHWC, or its input is");
    dp_tensor_t *a = r->conv_first ? c : in[0], *b = r->conv_first ? in[0] : c;
    if (r->kind == 0)
        return dp_add(out, a, b);
    return dp_binary(out, r->kind == 1 ? DP_BINARY_ADD : DP_BINARY_SUB, a, b);
}

static const char *const kind_names[] = {"dp_add", "dp_binary add", "dp_binary sub"};

static void residual_values_and_gradients(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 37, 1);
    int64_t xs[4] = {2, 3, 5, 5}, ws[4] = {3, 3, 3, 3}, bs[1] = {3};
    conv_geom g = make_geom(2, 3, 5, 5, 3, 3, 3, 1, 1, 1, 1);
    for (int kind = 0; kind < 3; kind++) {
        for (int first = 0; first < 2; first++) {
            residual r = {.conv = {.pad_h = 1, .pad_w = 1}, .kind = kind, .conv_first = first};
            char name[96];
            snprintf(name, sizeof name, "%s(%s)", kind_names[kind],
                     first ? "conv(x), x" : "x, conv(x)");
            float *xv = normal_array(&rng, count(4, xs), 1.0f);
            float *wv = normal_array(&rng, count(4, ws), 0.5f);
            float *bv = normal_array(&rng, 3, 0.5f);

            /* Values, in double: conv + x, or the difference in its order. */
            dp_tensor_t *in[3] = {upload(4, xs, xv), upload(4, ws, wv), upload(1, bs, bv)}, *y;
            dp_tape_t *tape; /* owns the convolution's output and the sum */
            OK(dp_tape_init(&tape, false));
            dp_tape_begin(tape);
            OK(build_residual(&y, in, &r));
            float *got = download(y);
            dp_tape_end(tape);
            dp_tape_close(tape);
            double *want = conv_ref(&g, xv, wv, bv, false);
            double sign_x = kind == 2 && first ? -1.0 : 1.0, sign_c = kind == 2 && !first ? -1.0 : 1.0;
            for (int64_t i = 0; i < count(4, xs); i++)
                want[i] = sign_c * want[i] + sign_x * xv[i];
            assert_values(name, got, want, count(4, xs), 1e-5, 1e-5);
            free(got);
            free(want);
            for (int i = 0; i < 3; i++)
                dp_tensor_free(in[i]);

            gc_problem p = {.name = name, .build = build_residual, .ctx = &r};
            p.in[p.nin++] = input("x", 4, xs, xv, true);
            p.in[p.nin++] = input("w", 4, ws, wv, true);
            p.in[p.nin++] = input("b", 1, bs, bv, true);
            gc_run(&p);
        }
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(residual_values_and_gradients, gc_open_device,
                                        gc_close_device),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
