/* Every op of dp/ops.h on cpu:0: its forward values against a naive
 * reference computed here in double, and its gradient with respect to every
 * differentiable input against central finite differences.
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

/* A random permutation of (i - n/2) * step: values at least `step` apart, so
 * that an argmax does not move under a perturbation below step / 2. */
static float *distinct_array(dp_rng *rng, int64_t n, float step)
{
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(i - n / 2) * step;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)dp_rng_below(rng, (uint64_t)i + 1);
        float t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
    return v;
}

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

static dp_tensor_t *upload_labels(int64_t n, const int32_t *labels)
{
    dp_tensor_t *t = NULL;
    OK(dp_tensor_from_host(&t, gc_dev, DP_I32, 1, &n, labels));
    return t;
}

/* ---- naive references (double, logical NCHW) --------------------------------- */

typedef struct conv_geom {
    int64_t N, C, H, W, K, R, S;
    int sh, sw, ph, pw;
    int64_t P, Q;
} conv_geom;

static conv_geom make_geom(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t R,
                           int64_t S, int sh, int sw, int ph, int pw)
{
    conv_geom g = {N, C, H, W, K, R, S, sh, sw, ph, pw, 0, 0};
    g.P = (H + 2 * ph - R) / sh + 1;
    g.Q = (W + 2 * pw - S) / sw + 1;
    return g;
}

static double *conv_ref(const conv_geom *g, const float *x, const float *w, const float *b,
                        bool relu)
{
    double *y = malloc((size_t)(g->N * g->K * g->P * g->Q) * sizeof *y);
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t k = 0; k < g->K; k++)
            for (int64_t p = 0; p < g->P; p++)
                for (int64_t q = 0; q < g->Q; q++) {
                    double s = b ? b[k] : 0.0;
                    for (int64_t c = 0; c < g->C; c++)
                        for (int64_t r = 0; r < g->R; r++)
                            for (int64_t t = 0; t < g->S; t++) {
                                int64_t h = p * g->sh - g->ph + r, ww = q * g->sw - g->pw + t;
                                if (h < 0 || h >= g->H || ww < 0 || ww >= g->W)
                                    continue;
                                s += (double)x[((n * g->C + c) * g->H + h) * g->W + ww] *
                                     w[((k * g->C + c) * g->R + r) * g->S + t];
                            }
                    if (relu && s < 0)
                        s = 0;
                    y[((n * g->K + k) * g->P + p) * g->Q + q] = s;
                }
    return y;
}

/* Pooling of x (N, C, H, W) given in double; avg counts the padding. */
static double *pool_ref(const double *x, int64_t N, int64_t C, int64_t H, int64_t W,
                        const dp_pool2d_params *pp, bool max, int64_t *P_out, int64_t *Q_out)
{
    int sh = pp->stride_h ? pp->stride_h : pp->kernel_h;
    int sw = pp->stride_w ? pp->stride_w : pp->kernel_w;
    int64_t P = (H + 2 * pp->pad_h - pp->kernel_h) / sh + 1;
    int64_t Q = (W + 2 * pp->pad_w - pp->kernel_w) / sw + 1;
    double *y = malloc((size_t)(N * C * P * Q) * sizeof *y);
    for (int64_t nc = 0; nc < N * C; nc++)
        for (int64_t p = 0; p < P; p++)
            for (int64_t q = 0; q < Q; q++) {
                double s = 0.0, m = -INFINITY;
                for (int r = 0; r < pp->kernel_h; r++)
                    for (int t = 0; t < pp->kernel_w; t++) {
                        int64_t h = p * sh - pp->pad_h + r, w = q * sw - pp->pad_w + t;
                        if (h < 0 || h >= H || w < 0 || w >= W)
                            continue;
                        double v = x[(nc * H + h) * W + w];
                        s += v;
                        m = v > m ? v : m;
                    }
                y[(nc * P + p) * Q + q] = max ? m : s / (pp->kernel_h * pp->kernel_w);
            }
    *P_out = P;
    *Q_out = Q;
    return y;
}

/* y (N, Dout) = x (N, Din) w + b, w as `layout` says. */
static double *linear_ref(const float *x, const float *w, const float *b, int64_t N, int64_t Din,
                          int64_t Dout, dp_weight_layout layout)
{
    double *y = malloc((size_t)(N * Dout) * sizeof *y);
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < Dout; o++) {
            double s = b ? b[o] : 0.0;
            for (int64_t i = 0; i < Din; i++)
                s += (double)x[n * Din + i] *
                     (layout == DP_WEIGHT_OUT_IN ? w[o * Din + i] : w[i * Dout + o]);
            y[n * Dout + o] = s;
        }
    return y;
}

static double xent_ref(const float *z, const int32_t *labels, int64_t N, int64_t K, bool mean)
{
    double total = 0.0;
    for (int64_t n = 0; n < N; n++) {
        double m = z[n * K];
        for (int64_t k = 1; k < K; k++)
            m = fmax(m, z[n * K + k]);
        double s = 0.0;
        for (int64_t k = 0; k < K; k++)
            s += exp(z[n * K + k] - m);
        total += m + log(s) - z[n * K + labels[n]];
    }
    return mean ? total / (double)N : total;
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

/* ---- forward values --------------------------------------------------------------- */

static void conv_forward_case(const conv_geom *g, bool bias, bool relu, uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 2);
    int64_t xs[4] = {g->N, g->C, g->H, g->W}, ws[4] = {g->K, g->C, g->R, g->S};
    float *xv = normal_array(&rng, count(4, xs), 1.0f),
          *wv = normal_array(&rng, count(4, ws), 0.5f);
    float *bv = normal_array(&rng, g->K, 0.5f);
    dp_tensor_t *x = upload(4, xs, xv), *w = upload(4, ws, wv), *b = upload(1, &g->K, bv);
    dp_conv2d_params p = {g->sh, g->sw, g->ph, g->pw, relu};
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    dp_tensor_t *y, *f;
    OK(dp_conv2d(&y, x, w, bias ? b : NULL, &p));
    assert_int_equal(dp_tensor_ndim(y), 4);
    assert_int_equal(dp_tensor_dim(y, 0), g->N);
    assert_int_equal(dp_tensor_dim(y, 1), g->K);
    assert_int_equal(dp_tensor_dim(y, 2), g->P);
    assert_int_equal(dp_tensor_dim(y, 3), g->Q);
    OK(dp_flatten(&f, y));
    assert_int_equal(dp_tensor_dim(f, 1), g->K * g->P * g->Q);
    float *yv = download(y), *fv = download(f);
    dp_tape_end(tape);
    dp_tape_close(tape);
    double *want = conv_ref(g, xv, wv, bias ? bv : NULL, relu);
    int64_t n = g->N * g->K * g->P * g->Q;
    char what[96];
    snprintf(what, sizeof what, "conv2d %lldx%lld s%dx%d p%dx%d%s%s y", (long long)g->H,
             (long long)g->W, g->sh, g->sw, g->ph, g->pw, bias ? " bias" : "", relu ? " relu" : "");
    assert_values(what, yv, want, n, 1e-5, 1e-5);
    snprintf(what, sizeof what, "flatten(conv2d %lldx%lld)", (long long)g->H, (long long)g->W);
    assert_values(what, fv, want, n, 1e-5, 1e-5);
    free(want), free(yv), free(fv), free(xv), free(wv), free(bv);
    dp_tensor_free(x), dp_tensor_free(w), dp_tensor_free(b);
}

static void test_conv2d_forward(void **state)
{
    (void)state;
    conv_geom g1 = make_geom(2, 3, 6, 5, 4, 3, 2, 1, 1, 0, 0);
    conv_geom g2 = make_geom(2, 3, 5, 5, 4, 3, 3, 1, 1, 1, 1);
    conv_geom g3 = make_geom(2, 3, 7, 8, 5, 3, 3, 2, 2, 1, 1);
    conv_geom g4 = make_geom(2, 2, 6, 7, 3, 2, 3, 1, 2, 0, 1);
    conv_geom g5 = make_geom(1, 2, 10, 9, 3, 3, 3, 2, 2, 0, 0);
    conv_geom g6 = make_geom(3, 1, 28, 28, 6, 5, 5, 1, 1, 2, 2); /* LeNet's first layer */
    conv_forward_case(&g1, true, false, 1);
    conv_forward_case(&g2, false, false, 2);
    conv_forward_case(&g3, true, false, 3);
    conv_forward_case(&g4, true, false, 4);
    conv_forward_case(&g5, true, false, 5);
    conv_forward_case(&g2, true, true, 6);
    conv_forward_case(&g3, false, true, 7);
    conv_forward_case(&g6, true, true, 8);
}

static void pool_forward_case(const char *name, const int64_t *xs, dp_pool2d_params pp, bool nhwc,
                              uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 2);
    int64_t n = count(4, xs);
    float *xv = normal_array(&rng, n, 1.0f);
    dp_tensor_t *x = upload(4, xs, xv);
    int64_t C = xs[1];
    float *wv = identity_1x1(C);
    int64_t ws[4] = {C, C, 1, 1};
    dp_tensor_t *w = upload(4, ws, wv);
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    dp_tensor_t *in = x, *ya, *ym;
    if (nhwc)
        OK(dp_conv2d(&in, x, w, NULL, NULL)); /* the same values, stored NHWC */
    OK(dp_avg_pool2d(&ya, in, &pp));
    OK(dp_max_pool2d(&ym, in, &pp));
    float *av = download(ya), *mv = download(ym);
    int64_t P, Q, P2, Q2;
    double *xd = to_double(xv, n);
    double *wa = pool_ref(xd, xs[0], C, xs[2], xs[3], &pp, false, &P, &Q);
    double *wm = pool_ref(xd, xs[0], C, xs[2], xs[3], &pp, true, &P2, &Q2);
    assert_int_equal(dp_tensor_dim(ya, 2), P);
    assert_int_equal(dp_tensor_dim(ya, 3), Q);
    assert_int_equal(dp_tensor_dim(ym, 2), P);
    assert_int_equal(dp_tensor_dim(ym, 3), Q);
    dp_tape_end(tape);
    dp_tape_close(tape);
    char what[96];
    snprintf(what, sizeof what, "avg_pool2d %s", name);
    assert_values(what, av, wa, xs[0] * C * P * Q, 1e-5, 1e-6);
    snprintf(what, sizeof what, "max_pool2d %s", name);
    assert_values(what, mv, wm, xs[0] * C * P * Q, 0, 0);
    free(av), free(mv), free(xd), free(wa), free(wm), free(xv), free(wv);
    dp_tensor_free(x), dp_tensor_free(w);
}

static void test_pool2d_forward(void **state)
{
    (void)state;
    for (int nhwc = 0; nhwc < 2; nhwc++) {
        pool_forward_case(nhwc ? "k3 s2 p1 NHWC" : "k3 s2 p1", (int64_t[]){2, 3, 7, 7},
                          (dp_pool2d_params){3, 3, 2, 2, 1, 1}, nhwc, 1);
        pool_forward_case(nhwc ? "k2 NHWC" : "k2", (int64_t[]){2, 3, 6, 6},
                          (dp_pool2d_params){2, 2, 0, 0, 0, 0}, nhwc, 2);
        pool_forward_case(nhwc ? "k2x3 s1x2 NHWC" : "k2x3 s1x2", (int64_t[]){2, 2, 5, 8},
                          (dp_pool2d_params){2, 3, 1, 2, 0, 0}, nhwc, 3);
        pool_forward_case(nhwc ? "k3x2 s1x2 p1x1 NHWC" : "k3x2 s1x2 p1x1", (int64_t[]){1, 2, 6, 7},
                          (dp_pool2d_params){3, 2, 1, 2, 1, 1}, nhwc, 4);
        pool_forward_case(nhwc ? "k3 s2 uneven NHWC" : "k3 s2 uneven", (int64_t[]){1, 2, 10, 9},
                          (dp_pool2d_params){3, 3, 2, 2, 0, 0}, nhwc, 5);
    }
}

static void test_linear_forward(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 3, 2);
    int64_t N = 4, Din = 6, Dout = 3;
    for (int l = 0; l < 2; l++) {
        dp_weight_layout layout = l ? DP_WEIGHT_IN_OUT : DP_WEIGHT_OUT_IN;
        int64_t xs[2] = {N, Din}, ws[2] = {Dout, Din};
        if (l)
            ws[0] = Din, ws[1] = Dout;
        float *xv = normal_array(&rng, N * Din, 1.0f), *wv = normal_array(&rng, Din * Dout, 1.0f);
        float *bv = normal_array(&rng, Dout, 1.0f);
        dp_tensor_t *x = upload(2, xs, xv), *w = upload(2, ws, wv), *b = upload(1, &Dout, bv);
        for (int bias = 0; bias < 2; bias++) {
            dp_tape_t *tape;
            OK(dp_tape_init(&tape, false));
            dp_tape_begin(tape);
            dp_tensor_t *y;
            OK(dp_linear(&y, x, w, bias ? b : NULL, layout));
            assert_int_equal(dp_tensor_dim(y, 0), N);
            assert_int_equal(dp_tensor_dim(y, 1), Dout);
            float *yv = download(y);
            dp_tape_end(tape);
            dp_tape_close(tape);
            double *want = linear_ref(xv, wv, bias ? bv : NULL, N, Din, Dout, layout);
            assert_values(l ? "linear IN_OUT" : "linear OUT_IN", yv, want, N * Dout, 1e-5, 1e-5);
            free(yv), free(want);
        }
        /* the wrong layout for a non-square weight is a shape error */
        dp_tape_t *tape;
        OK(dp_tape_init(&tape, false));
        dp_tape_begin(tape);
        dp_tensor_t *y;
        tu_quiet_log();
        assert_int_equal(dp_linear(&y, x, w, NULL, l ? DP_WEIGHT_OUT_IN : DP_WEIGHT_IN_OUT),
                         DP_ESHAPE);
        dp_log_set(NULL, NULL);
        dp_tape_end(tape);
        dp_tape_close(tape);
        free(xv), free(wv), free(bv);
        dp_tensor_free(x), dp_tensor_free(w), dp_tensor_free(b);
    }
}

static void test_eltwise_reshape_forward(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 4, 2);
    int64_t s[4] = {2, 3, 2, 2}, n = 24, s2[2] = {4, 6};
    float *av = normal_array(&rng, n, 1.0f), *bv = normal_array(&rng, n, 1.0f);
    dp_tensor_t *a = upload(4, s, av), *b = upload(4, s, bv);
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    dp_tensor_t *r, *z, *f, *re;
    OK(dp_relu(&r, a));
    OK(dp_add(&z, a, b));
    OK(dp_flatten(&f, a));
    OK(dp_reshape(&re, a, 2, s2));
    assert_int_equal(dp_tensor_ndim(f), 2);
    assert_int_equal(dp_tensor_dim(f, 1), 12);
    assert_int_equal(dp_tensor_dim(f, 0), 2);
    assert_int_equal(dp_tensor_dim(re, 0), 4);
    assert_int_equal(dp_tensor_dim(re, 1), 6);
    float *rv = download(r), *zv = download(z), *fv = download(f), *rev = download(re);
    dp_tape_end(tape);
    dp_tape_close(tape);
    double want_r[24], want_z[24], want_f[24];
    for (int i = 0; i < n; i++) {
        want_r[i] = av[i] > 0 ? av[i] : 0.0;
        want_z[i] = (double)av[i] + bv[i];
        want_f[i] = av[i];
    }
    assert_values("relu", rv, want_r, n, 0, 0);
    assert_values("add", zv, want_z, n, 1e-7, 0);
    assert_values("flatten", fv, want_f, n, 0, 0);
    assert_values("reshape", rev, want_f, n, 0, 0);
    free(rv), free(zv), free(fv), free(rev), free(av), free(bv);
    dp_tensor_free(a), dp_tensor_free(b);
}

static void test_cross_entropy_forward(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 5, 2);
    int64_t N = 6, K = 5, zs[2] = {N, K};
    float *zv = normal_array(&rng, N * K, 2.0f);
    /* a row of large logits: the loss must not overflow */
    for (int k = 0; k < K; k++)
        zv[2 * K + k] += 80.0f;
    zv[4 * K + 1] = 95.0f;
    int32_t labels[6] = {0, 3, 4, 1, 1, 2};
    dp_tensor_t *z = upload(2, zs, zv), *lab = upload_labels(N, labels);
    for (int mean = 0; mean < 2; mean++) {
        dp_tape_t *tape;
        OK(dp_tape_init(&tape, false));
        dp_tape_begin(tape);
        dp_tensor_t *loss;
        OK(dp_cross_entropy(&loss, z, lab, mean ? DP_REDUCE_MEAN : DP_REDUCE_SUM));
        assert_int_equal(dp_tensor_numel(loss), 1);
        float got;
        OK(dp_tensor_to_host(loss, &got, sizeof got));
        dp_tape_end(tape);
        dp_tape_close(tape);
        double want = xent_ref(zv, labels, N, K, mean);
        tu_assert_close(got, want, 1e-6, 1e-6);
    }
    free(zv);
    dp_tensor_free(z), dp_tensor_free(lab);
}

static void test_accuracy_forward(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 6, 2);
    int64_t N = 7, K = 4, zs[2] = {N, K}, one = 1;
    float *zv = distinct_array(&rng, N * K, 0.25f);
    int32_t labels[7];
    int correct = 0;
    for (int n = 0; n < N; n++) {
        int best = 0;
        for (int k = 1; k < K; k++)
            if (zv[n * K + k] > zv[n * K + best])
                best = k;
        labels[n] = n % 3 == 0 ? (best + 1) % (int)K : best; /* rows 0, 3, 6 wrong */
        correct += labels[n] == best;
    }
    assert_int_equal(correct, 4);
    float start = 1.5f, got;
    dp_tensor_t *z = upload(2, zs, zv), *lab = upload_labels(N, labels),
                *acc = upload(1, &one, &start);
    OK(dp_accuracy_accumulate(acc, z, lab));
    OK(dp_tensor_to_host(acc, &got, sizeof got));
    assert_true(got == start + (float)correct);
    OK(dp_accuracy_accumulate(acc, z, lab));
    OK(dp_tensor_to_host(acc, &got, sizeof got));
    assert_true(got == start + 2.0f * (float)correct);
    free(zv);
    dp_tensor_free(z), dp_tensor_free(lab), dp_tensor_free(acc);
}

int main(int argc, char **argv)
{
    printf("gradient checks on cpu:0 with %d kernel thread(s)\n", gc_threads());
#define T(f) cmocka_unit_test_setup_teardown(f, gc_open_device, gc_close_device)
    const struct CMUnitTest tests[] = {
        T(test_conv2d_forward),
        T(test_pool2d_forward),
        T(test_linear_forward),
        T(test_eltwise_reshape_forward),
        T(test_cross_entropy_forward),
        T(test_accuracy_forward),
        T(test_conv2d_grad),
        T(test_conv2d_relu_grad),
        T(test_conv_relu_pool_grad),
        T(test_avg_pool2d_grad),
        T(test_max_pool2d_grad),
        T(test_relu_grad),
        T(test_add_grad),
        T(test_linear_grad),
        T(test_flatten_reshape_grad),
        T(test_cross_entropy_grad),
        T(test_add_same_tensor),
        T(test_shared_use_grad),
    };
#undef T
    return tu_run(argc, argv, tests, NULL, NULL);
}
