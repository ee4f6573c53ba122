/* dp_add_relu (a residual sum and its ReLU in one sweep) against finite
 * differences, and against dp_add then dp_relu bit for bit, in a residual
 * block's graph: one input of the sum also feeds the convolution whose
 * output is the other, so the gradient that add's backward hands it adds
 * up with the convolution's, and the other input takes the output's
 * gradient buffer itself (dp__grad_adopt). */
#include "gradcheck.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* in: x (NCHW), w (a 3x3 conv), identity: out = relu(conv(x') + x'), x'
 * being x in NHWC (the identity conv), which feeds both the conv and the
 * sum: a residual block's shape. */
typedef struct fused_ctx {
    bool fused;
} fused_ctx;

static int build(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const fused_ctx *c = ctx;
    dp_conv2d_params p = {.pad_h = 1, .pad_w = 1};
    dp_tensor_t *x, *h, *s;
    int rc = dp_conv2d(&x, in[0], in[2], NULL, NULL);
    if (rc == 0)
        rc = dp_conv2d(&h, x, in[1], NULL, &p);
    if (rc == 0 && c->fused)
        rc = dp_add_relu(&s, h, x);
    else if (rc == 0 && (rc = dp_add(&s, h, x)) == 0)
        rc = dp_relu(&s, s);
    *out = s;
    return rc;
}

static void add_relu_gradients(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 31, 1);
    int64_t xs[4] = {2, 4, 5, 5}, ws[4] = {4, 4, 3, 3}, is[4] = {4, 4, 1, 1};
    fused_ctx c = {true};
    gc_problem g = {.name = "add_relu", .build = build, .ctx = &c, .seed = 31, .kink = true};
    g.in[g.nin++] = input("x", 4, xs, normal_array(&rng, count(4, xs), 1.0f), true);
    g.in[g.nin++] = input("w", 4, ws, normal_array(&rng, count(4, ws), 0.3f), true);
    g.in[g.nin++] = input("id", 4, is, identity_1x1(4), false);
    gc_run(&g);
}

/* The fused op gives the values and gradients of add then relu, to the bit. */
static void add_relu_equals_add_then_relu(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 32, 1);
    int64_t xs[4] = {2, 4, 6, 6}, ws[4] = {4, 4, 3, 3}, is[4] = {4, 4, 1, 1};
    float *xv = normal_array(&rng, count(4, xs), 1.0f),
          *wv = normal_array(&rng, count(4, ws), 0.3f);
    float *iv = identity_1x1(4);
    float *y[2], *gx[2], *gw[2];
    for (int f = 0; f < 2; f++) {
        dp_tensor_t *in[3] = {upload(4, xs, xv), upload(4, ws, wv), upload(4, is, iv)};
        OK(dp_tensor_set_requires_grad(in[0], NULL));
        OK(dp_tensor_set_requires_grad(in[1], NULL));
        dp_tape_t *tape;
        OK(dp_tape_init(&tape, true));
        dp_tape_begin(tape);
        fused_ctx c = {f == 1};
        dp_tensor_t *out, *row, *loss, *ones;
        OK(build(&out, in, &c));
        int64_t n = dp_tensor_numel(out), flat[2] = {1, n}, rs[2] = {n, 1};
        dp_rng_init(&rng, 33, 1); /* the same projection both times */
        float *r = normal_array(&rng, n, 1.0f);
        ones = upload(2, rs, r);
        OK(dp_reshape(&row, out, 2, flat));
        OK(dp_linear(&loss, row, ones, NULL, DP_WEIGHT_IN_OUT));
        OK(dp_backward(loss));
        y[f] = download(out);
        gx[f] = download(dp_tensor_grad(in[0]));
        gw[f] = download(dp_tensor_grad(in[1]));
        dp_tape_end(tape);
        dp_tape_close(tape);
        dp_tensor_free(ones);
        for (int i = 0; i < 3; i++)
            dp_tensor_free(in[i]);
        free(r);
    }
    assert_memory_equal(y[0], y[1], (size_t)count(4, xs) * sizeof(float));
    assert_memory_equal(gx[0], gx[1], (size_t)count(4, xs) * sizeof(float));
    assert_memory_equal(gw[0], gw[1], (size_t)count(4, ws) * sizeof(float));
    for (int f = 0; f < 2; f++)
        free(y[f]), free(gx[f]), free(gw[f]);
    free(xv);
    free(wv);
    free(iv);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(add_relu_gradients, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(add_relu_equals_add_then_relu, gc_open_device,
                                        gc_close_device),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
