/* Dropout on cpu:0, which PyTorch nn.Sequential files need beyond the
 * built-in models. Dropout is smooth for a fixed mask (training, fixed
 * seed, step and layer), so it gets a gradient check against central
 * finite differences (tests/util/gradcheck.h: L = sum_i r_i y_i for a fixed
 * random r, each check also required to fail for the analytic gradient
 * scaled by 1.1). Its own tests show that the mask is the counter-based
 * RNG's at each element's global index (the reference draws it with
 * dp_rng_*), keeps 1 - prob of the elements, shards like the batch (what
 * makes 1 and 2 devices train alike), changes with the step and the layer,
 * and vanishes in eval mode. */
#include "gradcheck.h"

#include "dp/autograd.h"
#include "dp/core.h"
#include "dp/ops.h"
#include "dp/tensor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        if (!tu_close(frac, 1.0 - p.prob, 0, 0.01))
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

int main(int argc, char **argv)
{
    printf("op checks on cpu:0 with %d kernel thread(s)\n", gc_threads());
#define T(f) cmocka_unit_test_setup_teardown(f, gc_open_device, gc_close_device)
    const struct CMUnitTest tests[] = {
        T(test_dropout_fraction_and_scale), T(test_dropout_shards), T(test_dropout_step_layer),
        T(test_dropout_eval_and_limits),    T(test_dropout_grad),
    };
#undef T
    return tu_run(argc, argv, tests, NULL, NULL);
}
