/* Gradient checks on cpu:0 of linear (both weight layouts, with and without
 * bias), flatten and reshape (also of and into a convolution), and
 * cross-entropy (sum and mean, and at the end of a small network, every
 * parameter), with respect to every differentiable input, against central
 * finite differences.
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

typedef struct linear_ctx {
    dp_weight_layout layout;
    bool bias;
} linear_ctx;

static int build_linear(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const linear_ctx *c = ctx;
    return dp_linear(out, in[0], in[1], c->bias ? in[2] : NULL, c->layout);
}

static int build_flatten(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    (void)ctx;
    return dp_flatten(out, in[0]);
}

/* flatten(conv(x, w, b)) then a linear layer with in[3] (OUT_IN): the
 * flattened features must come in logical (C, H, W) order. */
static int build_conv_flatten_linear(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    dp_tensor_t *y, *f;
    int rc = dp_conv2d(&y, in[0], in[1], in[2], ctx);
    if (rc == 0)
        rc = dp_flatten(&f, y);
    return rc ? rc : dp_linear(out, f, in[3], NULL, DP_WEIGHT_OUT_IN);
}

typedef struct reshape_ctx {
    int ndim;
    int64_t shape[4];
    dp_conv2d_params p; /* for the conv variants */
} reshape_ctx;

static int build_reshape(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const reshape_ctx *c = ctx;
    return dp_reshape(out, in[0], c->ndim, c->shape);
}

/* reshape (N, D) -> (N, C, H, W), then conv. */
static int build_reshape_conv(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const reshape_ctx *c = ctx;
    dp_tensor_t *x;
    int rc = dp_reshape(&x, in[0], c->ndim, c->shape);
    return rc ? rc : dp_conv2d(out, x, in[1], in[2], &c->p);
}

/* conv (NHWC output), then a reshape to another 4-d shape. */
static int build_conv_reshape(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const reshape_ctx *c = ctx;
    dp_tensor_t *y;
    int rc = dp_conv2d(&y, in[0], in[1], in[2], &c->p);
    return rc ? rc : dp_reshape(out, y, c->ndim, c->shape);
}

typedef struct xent_ctx {
    dp_tensor_t *labels;
    dp_reduction reduction;
} xent_ctx;

static int build_xent(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const xent_ctx *c = ctx;
    return dp_cross_entropy(out, in[0], c->labels, c->reduction);
}

/* A small network: conv -> avg pool -> flatten -> linear -> cross-entropy. */
static int build_net(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const xent_ctx *c = ctx;
    dp_conv2d_params cp = {.pad_h = 1, .pad_w = 1};
    dp_pool2d_params pp = {.kernel_h = 2, .kernel_w = 2};
    dp_tensor_t *y, *z, *f, *logits;
    int rc = dp_conv2d(&y, in[0], in[1], in[2], &cp);
    if (rc == 0)
        rc = dp_avg_pool2d(&z, y, &pp);
    if (rc == 0)
        rc = dp_flatten(&f, z);
    if (rc == 0)
        rc = dp_linear(&logits, f, in[3], in[4], DP_WEIGHT_OUT_IN);
    return rc ? rc : dp_cross_entropy(out, logits, c->labels, c->reduction);
}

/* ---- gradient tests -------------------------------------------------------------- */

static void linear_grad_case(const char *name, dp_weight_layout layout, bool bias, uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 1);
    int64_t N = 3, Din = 5, Dout = 4;
    int64_t xs[2] = {N, Din}, ws[2] = {Dout, Din};
    if (layout == DP_WEIGHT_IN_OUT)
        ws[0] = Din, ws[1] = Dout;
    linear_ctx c = {layout, bias};
    gc_problem g = {.name = name, .build = build_linear, .ctx = &c, .seed = seed};
    g.in[g.nin++] = input("x", 2, xs, normal_array(&rng, count(2, xs), 1.0f), true);
    g.in[g.nin++] = input("w", 2, ws, normal_array(&rng, count(2, ws), 1.0f), true);
    if (bias)
        g.in[g.nin++] = input("b", 1, &Dout, normal_array(&rng, Dout, 1.0f), true);
    gc_run(&g);
}

static void test_linear_grad(void **state)
{
    (void)state;
    linear_grad_case("linear OUT_IN bias", DP_WEIGHT_OUT_IN, true, 61);
    linear_grad_case("linear OUT_IN no bias", DP_WEIGHT_OUT_IN, false, 62);
    linear_grad_case("linear IN_OUT bias", DP_WEIGHT_IN_OUT, true, 63);
    linear_grad_case("linear IN_OUT no bias", DP_WEIGHT_IN_OUT, false, 64);
}

static void test_flatten_reshape_grad(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 71, 1);

    int64_t xs[4] = {2, 3, 4, 5};
    gc_problem a = {.name = "flatten (NCHW input)", .build = build_flatten};
    a.in[a.nin++] = input("x", 4, xs, normal_array(&rng, count(4, xs), 1.0f), true);
    gc_run(&a);

    /* flatten of a conv output (NHWC) into a linear layer */
    int64_t cx[4] = {2, 3, 5, 4}, cw[4] = {4, 3, 3, 3}, cb = 4, lw[2] = {3, 4 * 5 * 4};
    dp_conv2d_params cp = {.pad_h = 1, .pad_w = 1};
    gc_problem b = {
        .name = "conv2d -> flatten -> linear", .build = build_conv_flatten_linear, .ctx = &cp};
    b.in[b.nin++] = input("x", 4, cx, normal_array(&rng, count(4, cx), 1.0f), true);
    b.in[b.nin++] = input("w", 4, cw, normal_array(&rng, count(4, cw), 0.5f), true);
    b.in[b.nin++] = input("b", 1, &cb, normal_array(&rng, cb, 0.5f), true);
    b.in[b.nin++] = input("lw", 2, lw, normal_array(&rng, count(2, lw), 0.3f), true);
    gc_run(&b);

    /* flatten of a conv output alone: the projection sees the logical order */
    gc_problem c = {.name = "conv2d -> flatten -> linear (x only)",
                    .build = build_conv_flatten_linear,
                    .ctx = &cp};
    c.in[c.nin++] = input("x", 4, cx, normal_array(&rng, count(4, cx), 1.0f), true);
    c.in[c.nin++] = input("w", 4, cw, normal_array(&rng, count(4, cw), 0.5f), false);
    c.in[c.nin++] = input("b", 1, &cb, normal_array(&rng, cb, 0.5f), false);
    c.in[c.nin++] = input("lw", 2, lw, normal_array(&rng, count(2, lw), 0.3f), false);
    gc_run(&c);

    /* reshape 3-d -> 2-d */
    int64_t s3[3] = {2, 3, 4};
    reshape_ctx r1 = {.ndim = 2, .shape = {4, 6}};
    gc_problem d = {.name = "reshape (2,3,4) -> (4,6)", .build = build_reshape, .ctx = &r1};
    d.in[d.nin++] = input("x", 3, s3, normal_array(&rng, count(3, s3), 1.0f), true);
    gc_run(&d);

    /* reshape (N, D) -> (N, C, H, W) into a conv */
    int64_t fx[2] = {2, 2 * 4 * 5}, fw[4] = {3, 2, 3, 3}, fb = 3;
    reshape_ctx r2 = {.ndim = 4, .shape = {2, 2, 4, 5}, .p = {.pad_h = 1, .pad_w = 1}};
    gc_problem e = {
        .name = "reshape (2,40) -> (2,2,4,5) -> conv2d", .build = build_reshape_conv, .ctx = &r2};
    e.in[e.nin++] = input("x", 2, fx, normal_array(&rng, count(2, fx), 1.0f), true);
    e.in[e.nin++] = input("w", 4, fw, normal_array(&rng, count(4, fw), 0.5f), true);
    e.in[e.nin++] = input("b", 1, &fb, normal_array(&rng, fb, 0.5f), true);
    gc_run(&e);

    /* conv output (2, 4, 3, 5) (NHWC) reshaped to (2, 12, 5, 1) */
    int64_t gx[4] = {2, 3, 5, 7}, gw[4] = {4, 3, 3, 3}, gb = 4;
    reshape_ctx r3 = {.ndim = 4, .shape = {2, 12, 5, 1}};
    gc_problem f = {
        .name = "conv2d -> reshape (2,12,5,1)", .build = build_conv_reshape, .ctx = &r3};
    f.in[f.nin++] = input("x", 4, gx, normal_array(&rng, count(4, gx), 1.0f), true);
    f.in[f.nin++] = input("w", 4, gw, normal_array(&rng, count(4, gw), 0.5f), true);
    f.in[f.nin++] = input("b", 1, &gb, normal_array(&rng, gb, 0.5f), true);
    gc_run(&f);
}

static void xent_grad_case(const char *name, dp_reduction red, float scale, uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 1);
    int64_t N = 5, K = 7, zs[2] = {N, K};
    int32_t labels[5];
    for (int i = 0; i < N; i++)
        labels[i] = (int32_t)dp_rng_below(&rng, (uint64_t)K);
    xent_ctx c = {upload_labels(N, labels), red};
    gc_problem g = {.name = name, .build = build_xent, .ctx = &c, .eps = 1e-2, .seed = seed};
    g.in[g.nin++] = input("z", 2, zs, normal_array(&rng, N * K, scale), true);
    gc_run(&g);
    dp_tensor_free(c.labels);
}

static void test_cross_entropy_grad(void **state)
{
    (void)state;
    xent_grad_case("cross_entropy sum", DP_REDUCE_SUM, 1.0f, 81);
    xent_grad_case("cross_entropy mean", DP_REDUCE_MEAN, 1.0f, 82);
    xent_grad_case("cross_entropy sum, peaked logits", DP_REDUCE_SUM, 3.0f, 83);

    /* the small network, every parameter */
    dp_rng rng;
    dp_rng_init(&rng, 84, 1);
    int64_t N = 3, xs[4] = {3, 2, 6, 6}, ws[4] = {3, 2, 3, 3}, bs = 3, K = 5;
    int64_t lw[2] = {K, 3 * 3 * 3};
    int32_t labels[3] = {4, 0, 2};
    xent_ctx c = {upload_labels(N, labels), DP_REDUCE_MEAN};
    gc_problem g = {
        .name = "conv->avgpool->flatten->linear->xent", .build = build_net, .ctx = &c, .eps = 1e-2};
    g.in[g.nin++] = input("x", 4, xs, normal_array(&rng, count(4, xs), 1.0f), true);
    g.in[g.nin++] = input("w", 4, ws, normal_array(&rng, count(4, ws), 0.5f), true);
    g.in[g.nin++] = input("b", 1, &bs, normal_array(&rng, bs, 0.5f), true);
    g.in[g.nin++] = input("lw", 2, lw, normal_array(&rng, count(2, lw), 0.5f), true);
    g.in[g.nin++] = input("lb", 1, &K, normal_array(&rng, K, 0.5f), true);
    gc_run(&g);
    dp_tensor_free(c.labels);
}

int main(int argc, char **argv)
{
    printf("gradient checks on cpu:0 with %d kernel thread(s)\n", gc_threads());
#define T(f) cmocka_unit_test_setup_teardown(f, gc_open_device, gc_close_device)
    const struct CMUnitTest tests[] = {
        T(test_linear_grad),
        T(test_flatten_reshape_grad),
        T(test_cross_entropy_grad),
    };
#undef T
    return tu_run(argc, argv, tests, NULL, NULL);
}
