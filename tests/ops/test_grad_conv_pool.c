/* Gradient checks on cpu:0 of conv2d (strides, padding, fused ReLU, LeNet's
 * shapes), of a fused ReLU followed by average pooling, of average and max
 * pooling (also on a convolution's NHWC output) and of relu, with respect
 * to every differentiable input, against central finite differences.
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

/* ---- host data ------------------------------------------------------------ */

/* Values of random sign at least `margin` away from 0. */
static float *away_array(dp_rng *rng, int64_t n, float margin)
{
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        float m = margin + fabsf(dp_rng_normal(rng));
        v[i] = dp_rng_uniform(rng) < 0.5f ? -m : m;
    }
    return v;
}

/* ---- builders ---------------------------------------------------------------------- */

typedef struct conv_ctx {
    dp_conv2d_params p;
    bool bias;
} conv_ctx;

static int build_conv(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const conv_ctx *c = ctx;
    return dp_conv2d(out, in[0], in[1], c->bias ? in[2] : NULL, &c->p);
}

typedef struct pool_ctx {
    dp_pool2d_params p;
    bool max;
    bool nhwc; /* run the pool on the output of a conv (stored NHWC): in[1], in[2] */
} pool_ctx;

static int build_pool(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const pool_ctx *c = ctx;
    dp_tensor_t *x = in[0];
    if (c->nhwc) {
        dp_conv2d_params cp = {.pad_h = 1, .pad_w = 1};
        int rc = dp_conv2d(&x, in[0], in[1], in[2], &cp);
        if (rc)
            return rc;
    }
    return c->max ? dp_max_pool2d(out, x, &c->p) : dp_avg_pool2d(out, x, &c->p);
}

/* max pooling of an NHWC tensor with exactly the values of in[0]: a 1x1
 * convolution with the identity matrix in in[1]. */
static int build_identity_max_pool(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    dp_tensor_t *x;
    int rc = dp_conv2d(&x, in[0], in[1], NULL, NULL);
    return rc ? rc : dp_max_pool2d(out, x, ctx);
}

static int build_relu(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    (void)ctx;
    return dp_relu(out, in[0]);
}

/* relu of a conv output (NHWC). */
static int build_conv_relu_op(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    dp_tensor_t *y;
    int rc = dp_conv2d(&y, in[0], in[1], in[2], ctx);
    return rc ? rc : dp_relu(out, y);
}

/* ---- gradient tests -------------------------------------------------------------- */

/* Adds conv inputs x (1.0 scale), w (0.5), b (0.5, when `bias`) to g. With
 * a ReLU after the conv, draws again until every pre-activation is at least
 * 1e-2 away from the kink, so that small enough steps never cross it. */
static void add_conv_inputs(gc_problem *g, dp_rng *rng, const int64_t *xs, const int64_t *ws,
                            bool bias, const dp_conv2d_params *p, bool relu, bool diff_wb)
{
    conv_geom geom =
        make_geom(xs[0], xs[1], xs[2], xs[3], ws[0], ws[2], ws[3], p->stride_h ? p->stride_h : 1,
                  p->stride_w ? p->stride_w : 1, p->pad_h, p->pad_w);
    int64_t bs = ws[0], ny = geom.N * geom.K * geom.P * geom.Q;
    for (int attempt = 0;; attempt++) {
        assert_true(attempt < 100);
        float *x = normal_array(rng, count(4, xs), 1.0f),
              *w = normal_array(rng, count(4, ws), 0.5f);
        float *b = normal_array(rng, bs, 0.5f);
        bool near_kink = false;
        if (relu) {
            double *z = conv_ref(&geom, x, w, bias ? b : NULL, false);
            for (int64_t i = 0; i < ny; i++)
                near_kink = near_kink || fabs(z[i]) < 1e-2;
            free(z);
        }
        if (near_kink) {
            free(x), free(w), free(b);
            continue;
        }
        g->in[g->nin++] = input("x", 4, xs, x, true);
        g->in[g->nin++] = input("w", 4, ws, w, diff_wb);
        if (bias)
            g->in[g->nin++] = input("b", 1, &bs, b, diff_wb);
        else
            free(b);
        return;
    }
}

static void conv_grad_case(const char *name, const int64_t *xs, const int64_t *ws,
                           dp_conv2d_params p, bool bias, uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 1);
    conv_ctx c = {p, bias};
    gc_problem g = {.name = name, .build = build_conv, .ctx = &c, .seed = seed, .kink = p.relu};
    if (count(4, xs) > 1000)
        g.checks = 40; /* the LeNet shapes: keep the run short */
    add_conv_inputs(&g, &rng, xs, ws, bias, &p, p.relu, true);
    gc_run(&g);
}

static void test_conv2d_grad(void **state)
{
    (void)state;
    conv_grad_case("conv2d bias", (int64_t[]){2, 3, 6, 5}, (int64_t[]){4, 3, 3, 2},
                   (dp_conv2d_params){0}, true, 1);
    conv_grad_case("conv2d no bias pad 1", (int64_t[]){2, 3, 5, 5}, (int64_t[]){4, 3, 3, 3},
                   (dp_conv2d_params){.pad_h = 1, .pad_w = 1}, false, 2);
    conv_grad_case("conv2d stride 2 pad 1", (int64_t[]){2, 3, 7, 8}, (int64_t[]){5, 3, 3, 3},
                   (dp_conv2d_params){.stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1}, true,
                   3);
    conv_grad_case("conv2d stride 1x2 pad 0x1", (int64_t[]){2, 2, 6, 7}, (int64_t[]){3, 2, 2, 3},
                   (dp_conv2d_params){.stride_h = 1, .stride_w = 2, .pad_h = 0, .pad_w = 1}, true,
                   4);
    /* Windows that leave the last rows/columns unused (H = 10, R = 3, stride 2). */
    conv_grad_case("conv2d stride 2 uneven", (int64_t[]){1, 2, 10, 9}, (int64_t[]){3, 2, 3, 3},
                   (dp_conv2d_params){.stride_h = 2, .stride_w = 2}, true, 5);
    /* LeNet's first layer, where oneDNN keeps the weights in a blocked
     * layout of its own (reordered from and to the user's OIHW), and its
     * second layer's channels on a smaller image */
    conv_grad_case("conv2d LeNet conv1", (int64_t[]){2, 1, 28, 28}, (int64_t[]){6, 1, 5, 5},
                   (dp_conv2d_params){.pad_h = 2, .pad_w = 2}, true, 6);
    conv_grad_case("conv2d LeNet conv2 channels", (int64_t[]){2, 6, 8, 8}, (int64_t[]){16, 6, 5, 5},
                   (dp_conv2d_params){0}, true, 7);
}

static void test_conv2d_relu_grad(void **state)
{
    (void)state;
    conv_grad_case("conv2d relu", (int64_t[]){2, 3, 6, 6}, (int64_t[]){4, 3, 3, 3},
                   (dp_conv2d_params){.pad_h = 1, .pad_w = 1, .relu = true}, true, 11);
    conv_grad_case(
        "conv2d relu stride 2 no bias", (int64_t[]){2, 2, 7, 7}, (int64_t[]){3, 2, 3, 3},
        (dp_conv2d_params){.stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1, .relu = true},
        false, 12);
}

/* A convolution with fused ReLU followed by average pooling: the pool's
 * backward applies the ReLU mask itself (in one pass for tiling windows, as
 * a second pass otherwise), and the convolution then skips its own. With
 * `twice`, the conv output also feeds an add, so its gradient sums a masked
 * and an unmasked contribution. */
typedef struct conv_pool_ctx {
    dp_conv2d_params conv;
    dp_pool2d_params pool;
    bool twice;
} conv_pool_ctx;

static int build_conv_relu_pool(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const conv_pool_ctx *c = ctx;
    dp_tensor_t *y, *p, *q = NULL, *py;
    int rc = dp_conv2d(&y, in[0], in[1], in[2], &c->conv);
    /* The other consumer is recorded first, so its backward runs after the
     * pool's: the pool writes the masked gradient, the add then sums into it. */
    if (rc == 0 && c->twice)
        rc = dp_flatten(&q, y);
    if (rc == 0)
        rc = dp_avg_pool2d(&p, y, &c->pool);
    if (rc || !c->twice) {
        *out = p;
        return rc;
    }
    /* One output from both paths: flatten(p) v2 + (q + q) v1. */
    rc = dp_flatten(&p, p);
    if (rc == 0)
        rc = dp_add(&q, q, q);
    if (rc == 0)
        rc = dp_linear(&py, q, in[3], NULL, DP_WEIGHT_IN_OUT);
    if (rc == 0)
        rc = dp_linear(out, p, in[4], NULL, DP_WEIGHT_IN_OUT);
    if (rc == 0)
        rc = dp_add(out, *out, py);
    return rc;
}

static void conv_relu_pool_case(const char *name, const int64_t *xs, const int64_t *ws,
                                conv_pool_ctx c, uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 1);
    /* The output is pooled, so the kink test on output signs cannot see a
     * ReLU flip: keep the step (2e-3) inside the 1e-2 margin that
     * add_conv_inputs leaves around every pre-activation, and allow for the
     * float noise of so small a step. */
    gc_problem g = {.name = name,
                    .build = build_conv_relu_pool,
                    .ctx = &c,
                    .seed = seed,
                    .eps = 2e-3,
                    .atol = 2e-3};
    add_conv_inputs(&g, &rng, xs, ws, true, &c.conv, true, true);
    if (c.twice) {
        int64_t P = xs[2] - ws[2] + 1 + 2 * c.conv.pad_h, Q = xs[3] - ws[3] + 1 + 2 * c.conv.pad_w;
        int sh = c.pool.stride_h ? c.pool.stride_h : c.pool.kernel_h;
        int sw = c.pool.stride_w ? c.pool.stride_w : c.pool.kernel_w;
        int64_t py = (P + 2 * c.pool.pad_h - c.pool.kernel_h) / sh + 1;
        int64_t qy = (Q + 2 * c.pool.pad_w - c.pool.kernel_w) / sw + 1;
        int64_t a[2] = {ws[0] * P * Q, 3}, b[2] = {ws[0] * py * qy, 3};
        g.in[g.nin++] = input("v1", 2, a, normal_array(&rng, a[0] * a[1], 0.5f), false);
        g.in[g.nin++] = input("v2", 2, b, normal_array(&rng, b[0] * b[1], 0.5f), false);
    }
    gc_run(&g);
}

static void test_conv_relu_pool_grad(void **state)
{
    (void)state;
    /* 7x7 conv output, 2x2 windows: the last row and column get no gradient. */
    conv_relu_pool_case(
        "conv relu avgpool 2x2", (int64_t[]){2, 3, 9, 9}, (int64_t[]){4, 3, 3, 3},
        (conv_pool_ctx){.conv = {.relu = true}, .pool = {.kernel_h = 2, .kernel_w = 2}}, 21);
    conv_relu_pool_case("conv relu avgpool 3 s2 p1", (int64_t[]){2, 3, 8, 8},
                        (int64_t[]){4, 3, 3, 3},
                        (conv_pool_ctx){.conv = {.relu = true},
                                        .pool = {.kernel_h = 3,
                                                 .kernel_w = 3,
                                                 .stride_h = 2,
                                                 .stride_w = 2,
                                                 .pad_h = 1,
                                                 .pad_w = 1}},
                        22);
    conv_relu_pool_case("conv relu avgpool + add", (int64_t[]){1, 2, 8, 8}, (int64_t[]){3, 2, 3, 3},
                        (conv_pool_ctx){.conv = {.relu = true},
                                        .pool = {.kernel_h = 2, .kernel_w = 2},
                                        .twice = true},
                        23);
}

static void pool_grad_case(const char *name, const int64_t *xs, dp_pool2d_params pp, bool max,
                           uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 1);
    pool_ctx c = {pp, max, false};
    int64_t n = count(4, xs);
    gc_problem g = {.name = name, .build = build_pool, .ctx = &c, .seed = seed};
    /* max: distinct values 0.1 apart and eps 0.02, so no argmax moves */
    g.in[g.nin++] =
        input("x", 4, xs, max ? distinct_array(&rng, n, 0.1f) : normal_array(&rng, n, 1.0f), true);
    gc_run(&g);
}

static void test_avg_pool2d_grad(void **state)
{
    (void)state;
    pool_grad_case(
        "avg_pool2d k3 s2 pad 1", (int64_t[]){2, 3, 7, 7},
        (dp_pool2d_params){
            .kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1},
        false, 21);
    pool_grad_case("avg_pool2d k2x3 s1x2", (int64_t[]){2, 2, 5, 8},
                   (dp_pool2d_params){.kernel_h = 2, .kernel_w = 3, .stride_h = 1, .stride_w = 2},
                   false, 22);
    pool_grad_case("avg_pool2d k2 default stride", (int64_t[]){2, 3, 6, 6},
                   (dp_pool2d_params){.kernel_h = 2, .kernel_w = 2}, false, 23);

    /* on a conv output (NHWC), with the conv's x, w and b checked */
    dp_rng rng;
    dp_rng_init(&rng, 24, 1);
    int64_t xs[4] = {2, 3, 6, 6}, ws[4] = {4, 3, 3, 3}, bs = 4;
    pool_ctx c = {
        {.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1},
        false,
        true};
    gc_problem g = {.name = "conv2d -> avg_pool2d (NHWC)", .build = build_pool, .ctx = &c};
    g.in[g.nin++] = input("x", 4, xs, normal_array(&rng, count(4, xs), 1.0f), true);
    g.in[g.nin++] = input("w", 4, ws, normal_array(&rng, count(4, ws), 0.5f), true);
    g.in[g.nin++] = input("b", 1, &bs, normal_array(&rng, bs, 0.5f), true);
    gc_run(&g);
}

static void test_max_pool2d_grad(void **state)
{
    (void)state;
    pool_grad_case(
        "max_pool2d k3 s2 pad 1", (int64_t[]){2, 3, 7, 7},
        (dp_pool2d_params){
            .kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1},
        true, 31);
    pool_grad_case("max_pool2d k2 default stride", (int64_t[]){2, 3, 6, 6},
                   (dp_pool2d_params){.kernel_h = 2, .kernel_w = 2}, true, 32);
    pool_grad_case(
        "max_pool2d k3x2 s1x2 pad 1x1", (int64_t[]){1, 2, 6, 7},
        (dp_pool2d_params){
            .kernel_h = 3, .kernel_w = 2, .stride_h = 1, .stride_w = 2, .pad_h = 1, .pad_w = 1},
        true, 33);

    /* on NHWC data holding exactly x: identity 1x1 conv, then max pool */
    dp_rng rng;
    dp_rng_init(&rng, 34, 1);
    int64_t xs[4] = {2, 4, 6, 6}, ws[4] = {4, 4, 1, 1};
    dp_pool2d_params pp = {
        .kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1};
    gc_problem g = {.name = "max_pool2d on NHWC", .build = build_identity_max_pool, .ctx = &pp};
    g.in[g.nin++] = input("x", 4, xs, distinct_array(&rng, count(4, xs), 0.1f), true);
    g.in[g.nin++] = input("w", 4, ws, identity_1x1(4), false);
    gc_run(&g);
}

static void test_relu_grad(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 41, 1);
    int64_t xs[3] = {3, 5, 4};
    gc_problem g = {.name = "relu", .build = build_relu, .kink = true};
    g.in[g.nin++] = input("x", 3, xs, away_array(&rng, count(3, xs), 0.1f), true);
    gc_run(&g);

    /* relu of a conv output (NHWC) */
    int64_t cx[4] = {2, 3, 5, 5}, cw[4] = {4, 3, 3, 3};
    dp_conv2d_params cp = {.pad_h = 1, .pad_w = 1};
    gc_problem h = {
        .name = "conv2d -> relu (NHWC)", .build = build_conv_relu_op, .ctx = &cp, .kink = true};
    add_conv_inputs(&h, &rng, cx, cw, true, &cp, true, true);
    gc_run(&h);
}

int main(int argc, char **argv)
{
    printf("gradient checks on cpu:0 with %d kernel thread(s)\n", gc_threads());
#define T(f) cmocka_unit_test_setup_teardown(f, gc_open_device, gc_close_device)
    const struct CMUnitTest tests[] = {
        T(test_conv2d_grad),
        T(test_conv2d_relu_grad),
        T(test_conv_relu_pool_grad),
        T(test_avg_pool2d_grad),
        T(test_max_pool2d_grad),
        T(test_relu_grad),
    };
#undef T
    return tu_run(argc, argv, tests, NULL, NULL);
}
