/* The ops that PyTorch nn.Sequential files need beyond the built-in models,
 * on cpu:0: sigmoid, tanh, dropout, batch_norm1d, and max and average
 * pooling with padding. Each has its forward values checked against a
 * naive reference computed here in double, and its gradient with respect
 * to every differentiable input checked against central finite differences
 * (tests/gradcheck.h: L = sum_i r_i y_i for a fixed random r, each check
 * also required to fail for the analytic gradient scaled by 1.1).
 *
 * Dropout is smooth for a fixed mask (training, fixed seed, step and layer),
 * so it gets a gradient check too; its own tests show that the mask is the
 * counter-based RNG's at each element's global index (the reference draws
 * it with dp_rng_*), keeps 1 - prob of the elements, shards like the batch
 * (what makes 1 and 2 devices train alike), changes with the step and the
 * layer, and vanishes in eval mode. */
#include "gradcheck.h"

#include "dp/autograd.h"
#include "dp/core.h"
#include "dp/ops.h"
#include "dp/tensor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNTOF(a) (sizeof(a) / sizeof((a)[0]))

/* Runs `build` on x uploaded with shape xs, without a tape recording, and
 * returns y in logical order (y's element count in *n_out). With nhwc, x
 * first goes through an identity 1x1 convolution, whose output is stored
 * NHWC and holds exactly x. */
static float *run_forward(build_fn build, const void *ctx, int ndim, const int64_t *xs,
                          const float *xv, bool nhwc, int64_t *n_out)
{
    dp_tensor_t *x = upload(ndim, xs, xv), *w = NULL, *in = x, *y;
    float *wv = NULL;
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    if (nhwc) {
        int64_t ws[4] = {xs[1], xs[1], 1, 1};
        wv = identity_1x1(xs[1]);
        w = upload(4, ws, wv);
        OK(dp_conv2d(&in, x, w, NULL, NULL));
    }
    OK(build(&y, &in, ctx));
    float *yv = download(y);
    *n_out = 1;
    for (int d = 0; d < dp_tensor_ndim(y); d++)
        *n_out *= dp_tensor_dim(y, d);
    dp_tape_end(tape);
    dp_tape_close(tape);
    dp_tensor_free(x), dp_tensor_free(w);
    free(wv);
    return yv;
}

/* ---- sigmoid and tanh ---------------------------------------------------- */

static int build_sigmoid(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    (void)ctx;
    return dp_sigmoid(out, in[0]);
}

static int build_tanh(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    (void)ctx;
    return dp_tanh(out, in[0]);
}

static void activation_forward_case(int ndim, const int64_t *xs, bool nhwc, uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 2);
    int64_t n = count(ndim, xs), ny;
    float *xv = normal_array(&rng, n, 3.0f);
    double *ws = malloc((size_t)n * sizeof *ws), *wt = malloc((size_t)n * sizeof *wt);
    for (int64_t i = 0; i < n; i++) {
        ws[i] = 1.0 / (1.0 + exp(-(double)xv[i]));
        wt[i] = tanh((double)xv[i]);
    }
    float *ys = run_forward(build_sigmoid, NULL, ndim, xs, xv, nhwc, &ny);
    assert_int_equal(ny, n);
    assert_values(nhwc ? "sigmoid NHWC" : "sigmoid", ys, ws, n, 1e-6, 1e-7);
    float *yt = run_forward(build_tanh, NULL, ndim, xs, xv, nhwc, &ny);
    assert_values(nhwc ? "tanh NHWC" : "tanh", yt, wt, n, 1e-6, 1e-7);
    free(xv), free(ws), free(wt), free(ys), free(yt);
}

static void test_sigmoid_tanh_forward(void **state)
{
    (void)state;
    activation_forward_case(3, (int64_t[]){3, 5, 7}, false, 1);
    activation_forward_case(1, (int64_t[]){1000}, false, 2);
    activation_forward_case(4, (int64_t[]){2, 3, 4, 5}, true, 3);
}

static void test_sigmoid_tanh_grad(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 11, 1);
    int64_t xs[3] = {3, 4, 5};
    gc_problem g = {.name = "sigmoid", .build = build_sigmoid, .seed = 11};
    g.in[g.nin++] = input("x", 3, xs, normal_array(&rng, count(3, xs), 2.0f), true);
    gc_run(&g);
    gc_problem h = {.name = "tanh", .build = build_tanh, .seed = 12};
    h.in[h.nin++] = input("x", 3, xs, normal_array(&rng, count(3, xs), 1.5f), true);
    gc_run(&h);
}

/* ---- dropout ------------------------------------------------------------- */

static int build_dropout(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    return dp_dropout(out, in[0], ctx);
}

/* The reference mask, drawn with the public RNG: element i (logical) of
 * global sample g is kept when the uniform at counter g S + i of stream
 * 2^63 | step 2^32 | layer reaches prob. */
static bool ref_keep(const dp_dropout_params *p, int64_t g, int64_t S, int64_t i)
{
    dp_rng r;
    dp_rng_init(&r, p->seed, (1ULL << 63) | (p->step << 32) | p->layer);
    r.counter = (uint64_t)(g * S + i);
    return dp_rng_uniform(&r) >= p->prob;
}

static float *dropout_forward(const dp_dropout_params *p, int ndim, const int64_t *xs,
                              const float *xv, bool nhwc)
{
    int64_t n;
    return run_forward(build_dropout, p, ndim, xs, xv, nhwc, &n);
}

/* Over 100k elements: the kept fraction is 1 - prob within 1%, kept values
 * are x scaled by exactly 1 / (1 - prob), and the mask is the reference's. */
static void test_dropout_fraction_and_scale(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 21, 1);
    const float probs[] = {0.1f, 0.3f, 0.5f, 0.8f};
    int64_t xs[2] = {100, 1000}, n = count(2, xs);
    float *xv = normal_array(&rng, n, 1.0f);
    for (int64_t i = 0; i < n; i++)
        xv[i] += xv[i] < 0 ? -0.5f : 0.5f; /* no zeros, so y == 0 means dropped */
    for (size_t k = 0; k < COUNTOF(probs); k++) {
        dp_dropout_params p = {
            .prob = probs[k], .training = true, .seed = 7, .step = 3, .layer = 2};
        float *yv = dropout_forward(&p, 2, xs, xv, false);
        float scale = 1.0f / (1.0f - p.prob);
        int64_t kept = 0;
        for (int64_t i = 0; i < n; i++) {
            bool keep = ref_keep(&p, i / xs[1], xs[1], i % xs[1]);
            if (keep && yv[i] != xv[i] * scale)
                fail_msg("dropout %g: y[%lld] = %.9g, want exactly %.9g", (double)p.prob,
                         (long long)i, (double)yv[i], (double)(xv[i] * scale));
            if (!keep && yv[i] != 0.0f)
                fail_msg("dropout %g: y[%lld] = %.9g, the reference drops it", (double)p.prob,
                         (long long)i, (double)yv[i]);
            kept += keep;
        }
        double frac = (double)kept / (double)n;
        printf("dropout p=%.1f: kept %.4f of %lld (want %.4f)\n", (double)p.prob, frac,
               (long long)n, 1.0 - p.prob);
        if (fabs(frac - (1.0 - p.prob)) > 0.01)
            fail_msg("dropout %g kept %.4f of the elements", (double)p.prob, frac);
        free(yv);
    }
    free(xv);
}

/* Two half-batches with sample_offset 0 and N/2 draw the whole batch's mask,
 * in either layout. */
static void test_dropout_shards(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 22, 1);
    int64_t xs[4] = {8, 3, 5, 4}, half[4] = {4, 3, 5, 4};
    int64_t n = count(4, xs), nh = n / 2;
    float *xv = normal_array(&rng, n, 1.0f);
    dp_dropout_params p = {.prob = 0.5f, .training = true, .seed = 99, .step = 12, .layer = 1};
    for (int nhwc = 0; nhwc < 2; nhwc++) {
        float *whole = dropout_forward(&p, 4, xs, xv, nhwc);
        dp_dropout_params p0 = p, p1 = p;
        p1.sample_offset = 4;
        float *a = dropout_forward(&p0, 4, half, xv, nhwc);
        float *b = dropout_forward(&p1, 4, half, xv + nh, nhwc);
        assert_memory_equal(a, whole, (size_t)nh * sizeof *a);
        assert_memory_equal(b, whole + nh, (size_t)nh * sizeof *b);
        /* and the shard with offset 0 differs from it: the offset is used */
        float *c = dropout_forward(&p0, 4, half, xv + nh, nhwc);
        assert_memory_not_equal(c, whole + nh, (size_t)nh * sizeof *c);
        free(whole), free(a), free(b), free(c);
    }
    /* the mask follows the logical index, not the storage order */
    float *nchw = dropout_forward(&p, 4, xs, xv, false);
    float *nhwc = dropout_forward(&p, 4, xs, xv, true);
    assert_memory_equal(nchw, nhwc, (size_t)n * sizeof *nchw);
    free(nchw), free(nhwc), free(xv);
}

static int64_t count_differences(const float *a, const float *b, int64_t n)
{
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++)
        d += a[i] != b[i];
    return d;
}

/* Another step or layer draws another mask; the same ones draw the same. */
static void test_dropout_step_layer(void **state)
{
    (void)state;
    int64_t xs[2] = {16, 256}, n = count(2, xs);
    float *xv = malloc((size_t)n * sizeof *xv);
    for (int64_t i = 0; i < n; i++)
        xv[i] = 1.0f;
    dp_dropout_params p = {.prob = 0.5f, .training = true, .seed = 5, .step = 100, .layer = 3};
    dp_dropout_params step = p, layer = p, seed = p;
    step.step = 101;
    layer.layer = 4;
    seed.seed = 6;
    float *y = dropout_forward(&p, 2, xs, xv, false), *y2 = dropout_forward(&p, 2, xs, xv, false);
    float *ys = dropout_forward(&step, 2, xs, xv, false);
    float *yl = dropout_forward(&layer, 2, xs, xv, false);
    float *yd = dropout_forward(&seed, 2, xs, xv, false);
    assert_int_equal(count_differences(y, y2, n), 0);
    /* independent masks of p = 0.5 differ in about half the elements */
    int64_t ds = count_differences(y, ys, n), dl = count_differences(y, yl, n),
            dd = count_differences(y, yd, n);
    printf("elements differing from step 100 layer 3: step 101 %lld, layer 4 %lld, seed 6 %lld "
           "of %lld\n",
           (long long)ds, (long long)dl, (long long)dd, (long long)n);
    assert_true(ds > n / 3 && dl > n / 3 && dd > n / 3);
    free(xv), free(y), free(y2), free(ys), free(yl), free(yd);
}

/* Eval mode and prob 0 are the identity, prob 1 gives zeros, and a
 * probability outside [0, 1] is an error. */
static void test_dropout_eval_and_limits(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 23, 1);
    int64_t xs[3] = {4, 6, 5}, n = count(3, xs);
    float *xv = normal_array(&rng, n, 1.0f);
    dp_dropout_params eval = {.prob = 0.5f, .training = false, .seed = 1, .step = 2};
    float *y = dropout_forward(&eval, 3, xs, xv, false);
    assert_memory_equal(y, xv, (size_t)n * sizeof *y);
    free(y);
    dp_dropout_params zero = {.prob = 0.0f, .training = true, .seed = 1};
    y = dropout_forward(&zero, 3, xs, xv, false);
    assert_memory_equal(y, xv, (size_t)n * sizeof *y);
    free(y);
    dp_dropout_params one = {.prob = 1.0f, .training = true, .seed = 1};
    y = dropout_forward(&one, 3, xs, xv, false);
    for (int64_t i = 0; i < n; i++)
        assert_true(y[i] == 0.0f);
    free(y);

    tu_quiet_log();
    dp_tensor_t *x = upload(3, xs, xv), *out = NULL;
    const float bad[] = {-0.1f, 1.5f, NAN};
    for (size_t k = 0; k < COUNTOF(bad); k++) {
        dp_dropout_params p = {.prob = bad[k], .training = true};
        assert_int_equal(dp_dropout(&out, x, &p), DP_EINVAL);
        assert_non_null(strstr(dp_last_error(), "probability"));
        assert_null(strchr(dp_last_error(), '\n'));
    }
    dp_tensor_free(x);
    free(xv);
}

static void dropout_grad_case(const char *name, dp_dropout_params p, int ndim, const int64_t *xs,
                              uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 1);
    gc_problem g = {.name = name, .build = build_dropout, .ctx = &p, .seed = seed};
    g.in[g.nin++] = input("x", ndim, xs, normal_array(&rng, count(ndim, xs), 1.0f), true);
    gc_run(&g);
}

static void test_dropout_grad(void **state)
{
    (void)state;
    dropout_grad_case(
        "dropout 0.4 training",
        (dp_dropout_params){.prob = 0.4f, .training = true, .seed = 3, .step = 9, .layer = 1}, 2,
        (int64_t[]){6, 20}, 31);
    dropout_grad_case(
        "dropout 0.25 training (N, C, H, W), offset 6",
        (dp_dropout_params){
            .prob = 0.25f, .training = true, .seed = 4, .step = 1, .layer = 7, .sample_offset = 6},
        4, (int64_t[]){2, 3, 4, 4}, 32);
    dropout_grad_case("dropout eval", (dp_dropout_params){.prob = 0.5f, .seed = 3}, 2,
                      (int64_t[]){4, 10}, 33);
}

/* ---- batch_norm1d -------------------------------------------------------- */

#define BN_EPS 1e-5

/* BatchNorm1d of x (N, C, L) (L = 1 for (N, C)): per channel over (N, L).
 * Training: the batch's mean and biased var, rm and rv updated with the
 * unbiased var; eval: rm and rv. */
static double *bn1d_ref(const float *x, int64_t N, int64_t C, int64_t L, const float *gamma,
                        const float *beta, double *rm, double *rv, bool training)
{
    double *y = malloc((size_t)(N * C * L) * sizeof *y);
    int64_t m = N * L;
    for (int64_t c = 0; c < C; c++) {
        double mean = rm[c], var = rv[c];
        if (training) {
            double s = 0.0, ss = 0.0;
            for (int64_t k = 0; k < m; k++)
                s += x[((k / L) * C + c) * L + k % L];
            mean = s / (double)m;
            for (int64_t k = 0; k < m; k++) {
                double d = x[((k / L) * C + c) * L + k % L] - mean;
                ss += d * d;
            }
            var = ss / (double)m;
            rm[c] = 0.9 * rm[c] + 0.1 * mean;
            rv[c] = 0.9 * rv[c] + 0.1 * ss / (double)(m - 1);
        }
        for (int64_t k = 0; k < m; k++) {
            int64_t at = ((k / L) * C + c) * L + k % L;
            y[at] = gamma[c] * (x[at] - mean) / sqrt(var + BN_EPS) + beta[c];
        }
    }
    return y;
}

static float *positive(dp_rng *rng, int64_t n)
{
    float *v = normal_array(rng, n, 0.3f);
    for (int64_t i = 0; i < n; i++)
        v[i] = 0.5f + fabsf(v[i]);
    return v;
}

/* Two calls (training: the running statistics move twice), each checked. */
static void bn1d_forward_case(int ndim, const int64_t *xs, bool training, uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 1);
    int64_t N = xs[0], C = xs[1], L = ndim == 3 ? xs[2] : 1, n = N * C * L;
    float *xv = normal_array(&rng, n, 2.0f), *gv = normal_array(&rng, C, 1.0f),
          *bv = normal_array(&rng, C, 1.0f), *rm0 = normal_array(&rng, C, 0.5f),
          *rv0 = positive(&rng, C);
    for (int64_t i = 0; i < n; i++)
        xv[i] += (float)(i % C); /* channels of different means */
    double *rm = to_double(rm0, C), *rv = to_double(rv0, C);
    dp_tensor_t *x = upload(ndim, xs, xv), *g = upload(1, &C, gv), *b = upload(1, &C, bv);
    dp_tensor_t *rmt = upload(1, &C, rm0), *rvt = upload(1, &C, rv0);
    dp_batch_norm_params p = {.training = training};
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    for (int call = 0; call < 2; call++) {
        dp_tape_begin(tape);
        dp_tensor_t *y;
        OK(dp_batch_norm1d(&y, x, g, b, rmt, rvt, &p));
        assert_int_equal(dp_tensor_ndim(y), ndim);
        float *yv = download(y), *rmv = download(rmt), *rvv = download(rvt);
        double *want = bn1d_ref(xv, N, C, L, gv, bv, rm, rv, training);
        char what[64];
        snprintf(what, sizeof what, "bn1d %s y (call %d)", training ? "train" : "eval", call);
        assert_values(what, yv, want, n, 1e-4, 1e-5);
        assert_values("running_mean", rmv, rm, C, 1e-5, 1e-6);
        assert_values("running_var", rvv, rv, C, 1e-5, 1e-6);
        free(yv), free(rmv), free(rvv), free(want);
        dp_tape_end(tape);
        dp_tape_reset(tape);
    }
    dp_tape_close(tape);
    dp_tensor_free(x), dp_tensor_free(g), dp_tensor_free(b), dp_tensor_free(rmt),
        dp_tensor_free(rvt);
    free(xv), free(gv), free(bv), free(rm0), free(rv0), free(rm), free(rv);
}

static void test_bn1d_forward(void **state)
{
    (void)state;
    bn1d_forward_case(2, (int64_t[]){16, 5}, true, 41);
    bn1d_forward_case(2, (int64_t[]){16, 5}, false, 42);
    bn1d_forward_case(2, (int64_t[]){2, 3}, true, 43);
    bn1d_forward_case(3, (int64_t[]){4, 3, 6}, true, 44);
    bn1d_forward_case(3, (int64_t[]){4, 3, 6}, false, 45);
}

static void test_bn1d_errors(void **state)
{
    (void)state;
    tu_quiet_log();
    int64_t C = 3, x4[4] = {2, 3, 1, 1}, x1[2] = {1, 3};
    float v[6] = {1, 2, 3, 4, 5, 6};
    dp_tensor_t *g = upload(1, &C, v), *b = upload(1, &C, v), *rm = upload(1, &C, v),
                *rv = upload(1, &C, v), *y = NULL;
    dp_tensor_t *four = upload(4, x4, v), *one = upload(2, x1, v);
    dp_batch_norm_params train = {.training = true}, eval = {0};
    assert_int_equal(dp_batch_norm1d(&y, four, g, b, rm, rv, &train), DP_ESHAPE);
    assert_non_null(strstr(dp_last_error(), "[2, 3, 1, 1]"));
    /* one value per channel: PyTorch's error in training, fine in eval */
    assert_int_equal(dp_batch_norm1d(&y, one, g, b, rm, rv, &train), DP_EINVAL);
    assert_non_null(strstr(dp_last_error(), "more than 1 value per channel"));
    OK(dp_batch_norm1d(&y, one, g, b, rm, rv, &eval));
    dp_tensor_free(y);
    dp_tensor_free(g), dp_tensor_free(b), dp_tensor_free(rm), dp_tensor_free(rv),
        dp_tensor_free(four), dp_tensor_free(one);
}

typedef struct bn1d_ctx {
    dp_batch_norm_params p;
    dp_tensor_t *rm, *rv;
} bn1d_ctx;

static int build_bn1d(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const bn1d_ctx *c = ctx;
    return dp_batch_norm1d(out, in[0], in[1], in[2], c->rm, c->rv, &c->p);
}

static void bn1d_grad_case(const char *name, int ndim, const int64_t *xs, bool training,
                           uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 1);
    int64_t C = xs[1];
    float *rm0 = normal_array(&rng, C, 0.5f), *rv0 = positive(&rng, C);
    bn1d_ctx c = {.p = {.training = training}, .rm = upload(1, &C, rm0), .rv = upload(1, &C, rv0)};
    gc_problem g = {.name = name, .build = build_bn1d, .ctx = &c, .seed = seed};
    float *gv = normal_array(&rng, C, 0.3f);
    for (int64_t i = 0; i < C; i++)
        gv[i] += gv[i] < 0 ? -0.7f : 0.7f;
    g.in[g.nin++] = input("x", ndim, xs, normal_array(&rng, count(ndim, xs), 1.0f), true);
    g.in[g.nin++] = input("g", 1, &C, gv, true);
    g.in[g.nin++] = input("b", 1, &C, normal_array(&rng, C, 0.5f), true);
    gc_run(&g);
    free(rm0), free(rv0);
    dp_tensor_free(c.rm), dp_tensor_free(c.rv);
}

static void test_bn1d_grad(void **state)
{
    (void)state;
    bn1d_grad_case("bn1d training (N, C)", 2, (int64_t[]){6, 4}, true, 51);
    bn1d_grad_case("bn1d eval (N, C)", 2, (int64_t[]){6, 4}, false, 52);
    bn1d_grad_case("bn1d training (N, C, L)", 3, (int64_t[]){3, 4, 5}, true, 53);
    bn1d_grad_case("bn1d eval (N, C, L)", 3, (int64_t[]){3, 4, 5}, false, 54);
}

/* ---- pooling with padding ------------------------------------------------- */

typedef struct pool_case {
    dp_pool2d_params p;
    bool max;
} pool_case;

static int build_pool(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const pool_case *c = ctx;
    return c->max ? dp_max_pool2d(out, in[0], &c->p) : dp_avg_pool2d(out, in[0], &c->p);
}

/* PyTorch's MaxPool2d / AvgPool2d (count_include_pad=True) at output
 * (nc, p, q) of x (N C, H, W): padded cells are -inf for max and 0 for the
 * mean, whose divisor is the whole kernel. */
static double pool_at(const float *x, int64_t H, int64_t W, const pool_case *c, int64_t nc,
                      int64_t p, int64_t q)
{
    int sh = c->p.stride_h ? c->p.stride_h : c->p.kernel_h;
    int sw = c->p.stride_w ? c->p.stride_w : c->p.kernel_w;
    double best = -INFINITY, sum = 0.0;
    for (int64_t h = p * sh - c->p.pad_h; h < p * sh - c->p.pad_h + c->p.kernel_h; h++)
        for (int64_t w = q * sw - c->p.pad_w; w < q * sw - c->p.pad_w + c->p.kernel_w; w++) {
            bool inside = h >= 0 && h < H && w >= 0 && w < W;
            double v = inside ? x[(nc * H + h) * W + w] : (c->max ? -INFINITY : 0.0);
            best = fmax(best, v);
            sum += v;
        }
    return c->max ? best : sum / (c->p.kernel_h * c->p.kernel_w);
}

/* Output sizes floor((H + 2 pad - k) / s) + 1, and values of max and
 * average pooling in both layouts; x all negative, so that a padded 0
 * would win a max. */
static void pool_forward_case(const int64_t *xs, dp_pool2d_params pp, int64_t P, int64_t Q,
                              uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 1);
    int64_t n = count(4, xs), NC = xs[0] * xs[1], H = xs[2], W = xs[3];
    float *xv = normal_array(&rng, n, 1.0f);
    for (int64_t i = 0; i < n; i++)
        xv[i] = -1.0f - fabsf(xv[i]);
    double *want = malloc((size_t)(NC * P * Q) * sizeof *want);
    for (int kind = 0; kind < 4; kind++) {
        pool_case c = {pp, kind & 1};
        bool nhwc = kind & 2;
        for (int64_t k = 0; k < NC * P * Q; k++)
            want[k] = pool_at(xv, H, W, &c, k / (P * Q), k / Q % P, k % Q);
        int64_t ny;
        float *y = run_forward(build_pool, &c, 4, xs, xv, nhwc, &ny);
        assert_int_equal(ny, NC * P * Q);
        char what[96];
        snprintf(what, sizeof what, "%s k%dx%d s%dx%d p%dx%d%s", c.max ? "max" : "avg", pp.kernel_h,
                 pp.kernel_w, pp.stride_h, pp.stride_w, pp.pad_h, pp.pad_w, nhwc ? " NHWC" : "");
        assert_values(what, y, want, ny, 1e-6, 1e-7);
        free(y);
    }
    free(xv), free(want);
}

static void test_pool_padding_forward(void **state)
{
    (void)state;
    /* 7 + 2 - 3 = 6, / 2 + 1 = 4; 8 + 2 - 3 = 7, / 2 + 1 = 4 (floor) */
    pool_forward_case((int64_t[]){2, 3, 7, 8}, (dp_pool2d_params){3, 3, 2, 2, 1, 1}, 4, 4, 61);
    /* kernel 2, pad 1 (exactly half), default stride 2: (5 + 2 - 2) / 2 + 1 = 3 */
    pool_forward_case((int64_t[]){1, 2, 5, 5}, (dp_pool2d_params){2, 2, 0, 0, 1, 1}, 3, 3, 62);
    /* uneven: kernel 5x3, stride 1x2, pad 2x1 over 6x7: 6 x 4 */
    pool_forward_case((int64_t[]){2, 2, 6, 7}, (dp_pool2d_params){5, 3, 1, 2, 2, 1}, 6, 4, 63);
}

static void test_pool_padding_errors(void **state)
{
    (void)state;
    tu_quiet_log();
    int64_t xs[4] = {1, 1, 6, 6};
    float v[36] = {0};
    dp_tensor_t *x = upload(4, xs, v), *y = NULL;
    dp_pool2d_params too_much = {.kernel_h = 3, .kernel_w = 3, .pad_h = 2, .pad_w = 1};
    assert_int_equal(dp_max_pool2d(&y, x, &too_much), DP_EINVAL);
    assert_non_null(strstr(dp_last_error(), "pad=2x1"));
    assert_null(strchr(dp_last_error(), '\n'));
    assert_int_equal(dp_avg_pool2d(&y, x, &too_much), DP_EINVAL);
    dp_pool2d_params negative = {.kernel_h = 2, .kernel_w = 2, .pad_h = -1};
    assert_int_equal(dp_avg_pool2d(&y, x, &negative), DP_EINVAL);
    dp_tensor_free(x);
}

/* Values 0.1 apart (a random permutation), so that no max moves under the
 * checker's steps. */
static float *spread(dp_rng *rng, int64_t n)
{
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = 0.1f * (float)(i - n / 2);
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)dp_rng_below(rng, (uint64_t)i + 1);
        float t = v[i];
        v[i] = v[j], v[j] = t;
    }
    return v;
}

static void test_pool_padding_grad(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 71, 1);
    int64_t xs[4] = {2, 2, 5, 6};
    pool_case cases[] = {
        {{.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1},
         true},
        {{.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1},
         false},
        {{.kernel_h = 2, .kernel_w = 4, .stride_h = 1, .stride_w = 1, .pad_h = 1, .pad_w = 2},
         true},
        {{.kernel_h = 2, .kernel_w = 4, .stride_h = 1, .stride_w = 1, .pad_h = 1, .pad_w = 2},
         false},
    };
    const char *names[] = {"max_pool2d k3 s2 p1", "avg_pool2d k3 s2 p1", "max_pool2d k2x4 p1x2",
                           "avg_pool2d k2x4 p1x2"};
    for (size_t k = 0; k < COUNTOF(cases); k++) {
        gc_problem g = {.name = names[k], .build = build_pool, .ctx = &cases[k], .seed = 71 + k};
        int64_t n = count(4, xs);
        g.in[g.nin++] =
            input("x", 4, xs, cases[k].max ? spread(&rng, n) : normal_array(&rng, n, 1.0f), true);
        gc_run(&g);
    }
}

int main(int argc, char **argv)
{
    printf("op checks on cpu:0 with %d kernel thread(s)\n", gc_threads());
#define T(f) cmocka_unit_test_setup_teardown(f, gc_open_device, gc_close_device)
    const struct CMUnitTest tests[] = {
        T(test_sigmoid_tanh_forward),
        T(test_sigmoid_tanh_grad),
        T(test_dropout_fraction_and_scale),
        T(test_dropout_shards),
        T(test_dropout_step_layer),
        T(test_dropout_eval_and_limits),
        T(test_dropout_grad),
        T(test_bn1d_forward),
        T(test_bn1d_errors),
        T(test_bn1d_grad),
        T(test_pool_padding_forward),
        T(test_pool_padding_errors),
        T(test_pool_padding_grad),
    };
#undef T
    return tu_run(argc, argv, tests, NULL, NULL);
}
