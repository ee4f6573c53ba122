/* conv2d [ReLU] -> avg_pool2d in one kernel (dp_conv2d_avg_pool2d, the
 * CPU's conv2d_pool, src/device/cpu/conv_pool.c), against the two ops run
 * one after the other: the pooled values and d/dW, d/db, in f32 and in
 * bf16 (native where the CPU has it, else the reference path), and a
 * finite-difference check of its gradients. Every case asserts that the
 * fused node was recorded, so none passes by running the unfused ops.
 *
 * What may differ: the order of the convolution's f32 sums (oneDNN's
 * against the kernel's), so f32 values agree to a few ulps; bf16 rounds
 * the convolution's output to bf16 on both sides, so a value lands on the
 * other side of a rounding boundary now and then: at most 2% of the bf16
 * outputs may differ, each by one bf16 step of its window. The shapes give
 * LeNet's first layer (1 -> 20, 3x3 on 28x28: a 16-wide block and 4 over),
 * rows and columns past the last window (odd sizes), three input channels
 * and one partial block (K = 5), 33 channels (two blocks and one over),
 * padding and stride 2, 3x3 windows (dy / 9, rounded to bf16 as the pool's
 * backward rounds it), and no ReLU. */
#include "gradcheck.h"

#include "autograd/tape.h"
#include "dp/ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct case_ctx {
    dp_conv2d_params conv;
    int pool;
    bool fused; /* dp_conv2d_avg_pool2d, else dp_conv2d then dp_avg_pool2d */
} case_ctx;

/* Whether the active tape holds a conv2d_pool node (a check of which path
 * ran: the unfused one records conv2d and avg_pool2d). */
static bool recorded_fused(void)
{
    const dp__tape *t = dp__tape_current();
    for (size_t i = 0; t && i < t->nnodes; i++)
        if (t->nodes[i].op == DP__OP_conv2d_pool)
            return true;
    return false;
}

static int build(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const case_ctx *c = ctx;
    dp_pool2d_params pool = {.kernel_h = c->pool, .kernel_w = c->pool};
    if (c->fused)
        return dp_conv2d_avg_pool2d(out, in[0], in[1], in[2], &c->conv, &pool);
    dp_tensor_t *h;
    int rc = dp_conv2d(&h, in[0], in[1], in[2], &c->conv);
    return rc ? rc : dp_avg_pool2d(out, h, &pool);
}

typedef struct run_result {
    int64_t ny;
    float *y, *dw, *db;
    bool fused_node;
} run_result;

/* y and the gradients of sum(r * y) for w and b (x needs none); r is the
 * projection's values from the skip-th on (a part of a batch projects
 * with its rows' own). */
static run_result run(const case_ctx *c, const int64_t *xs, const int64_t *ws, float *const v[3],
                      int64_t skip)
{
    int64_t bs = ws[0];
    dp_tensor_t *x = upload(4, xs, v[0]), *w = upload(4, ws, v[1]), *b = upload(1, &bs, v[2]);
    OK(dp_tensor_set_requires_grad(w, NULL));
    OK(dp_tensor_set_requires_grad(b, NULL));
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, true));
    dp_tape_begin(tape);
    dp_tensor_t *in[3] = {x, w, b}, *y, *y32, *row, *loss, *proj;
    OK(build(&y, in, c));
    run_result res = {.fused_node = recorded_fused()};
    OK(dp_cast(&y32, y, DP_F32));
    int64_t n = dp_tensor_numel(y), flat[2] = {1, n}, rs[2] = {n, 1};
    dp_rng rng;
    dp_rng_init(&rng, 45, 1); /* the same projection for both paths */
    float *all = normal_array(&rng, skip + n, 1.0f), *r = all + skip;
    proj = upload(2, rs, r);
    OK(dp_reshape(&row, y, 2, flat));
    OK(dp_linear(&loss, row, proj, NULL, DP_WEIGHT_IN_OUT));
    OK(dp_backward(loss));
    res.ny = n;
    res.y = download(y32);
    res.dw = download(dp_tensor_grad(w));
    res.db = download(dp_tensor_grad(b));
    dp_tape_end(tape);
    dp_tape_close(tape);
    dp_tensor_free(proj);
    dp_tensor_free(x);
    dp_tensor_free(w);
    dp_tensor_free(b);
    free(all);
    return res;
}

/* |a - b| <= tol max(|a|, |b|, floor) element by element; returns the count
 * of elements beyond it, failing at once on a NaN on either side. */
static int64_t beyond(const float *a, const float *b, int64_t n, double tol, double floor)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        assert_false(isnan(a[i]) || isnan(b[i]));
        double m = fmax(fmax(fabs(a[i]), fabs(b[i])), floor);
        bad += fabs((double)a[i] - (double)b[i]) > tol * m;
    }
    return bad;
}

/* sqrt(sum (a - b)^2 / sum b^2). */
static double rel_norm(const float *a, const float *b, int64_t n)
{
    double d = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        assert_false(isnan(a[i]) || isnan(b[i]));
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    assert_true(s > 0);
    return sqrt(d / s);
}

static void fused_equals_unfused(dp_precision prec, case_ctx c, const int64_t *xs,
                                 const int64_t *ws, uint64_t seed)
{
    dp_set_precision(prec);
    dp_rng rng;
    dp_rng_init(&rng, seed, 1);
    float *v[3] = {normal_array(&rng, count(4, xs), 1.0f), normal_array(&rng, count(4, ws), 0.3f),
                   normal_array(&rng, ws[0], 0.3f)};
    c.fused = true;
    run_result f = run(&c, xs, ws, v, 0);
    c.fused = false;
    run_result u = run(&c, xs, ws, v, 0);
    dp_set_precision(DP_PRECISION_FP32);
    assert_true(f.fused_node);
    assert_false(u.fused_node);
    assert_int_equal(f.ny, u.ny);
    bool bf16 = prec != DP_PRECISION_FP32;
    if (c.conv.relu) {
        /* Some windows wholly cut by the ReLU and most not: the mask ran. */
        int64_t zeros = 0;
        for (int64_t i = 0; i < u.ny; i++)
            zeros += u.y[i] == 0.0f;
        assert_true(zeros > 0 && zeros < u.ny / 2);
    }
    int64_t off = beyond(f.y, u.y, f.ny, bf16 ? 1.01 / 128 : 1e-5, 1e-2);
    printf("%s %lldx%lldx%lldx%lld * %lldx%lldx%lldx%lld pool %d: %lld of %lld outputs differ "
           "beyond %s\n",
           bf16 ? "bf16" : "f32", (long long)xs[0], (long long)xs[1], (long long)xs[2],
           (long long)xs[3], (long long)ws[0], (long long)ws[1], (long long)ws[2], (long long)ws[3],
           c.pool, (long long)off, (long long)f.ny, bf16 ? "a bf16 step" : "1e-5");
    if (bf16) {
        /* one bf16 step where the convolution's rounding went the other way */
        assert_true(off == 0);
        int64_t differ = beyond(f.y, u.y, f.ny, 0, 0);
        printf("  %lld differ at all (at most 2%%)\n", (long long)differ);
        assert_true(differ * 50 <= f.ny);
    } else {
        assert_int_equal(off, 0);
    }
    int64_t nw = count(4, ws);
    double ew = rel_norm(f.dw, u.dw, nw), eb = rel_norm(f.db, u.db, ws[0]);
    printf("  dW relative difference %.2e, db %.2e\n", ew, eb);
    /* bf16: the outputs a rounding flips carry their window's gradient */
    assert_true(ew <= (bf16 ? 2e-2 : 1e-5) && eb <= (bf16 ? 2e-2 : 1e-5));
    for (int i = 0; i < 3; i++)
        free(v[i]);
    free(f.y), free(f.dw), free(f.db), free(u.y), free(u.dw), free(u.db);
}

static void cases(dp_precision prec)
{
    const dp_conv2d_params relu = {.relu = true};
    /* LeNet's first layer, at a small batch */
    fused_equals_unfused(prec, (case_ctx){relu, 2, false}, (int64_t[]){4, 1, 28, 28},
                         (int64_t[]){20, 1, 3, 3}, 61);
    /* 13x13 output: the last row and column under no window */
    fused_equals_unfused(prec, (case_ctx){relu, 2, false}, (int64_t[]){3, 1, 15, 15},
                         (int64_t[]){20, 1, 3, 3}, 62);
    /* 3 channels, 27 taps, one partial block */
    fused_equals_unfused(prec, (case_ctx){relu, 2, false}, (int64_t[]){3, 3, 12, 12},
                         (int64_t[]){5, 3, 3, 3}, 63);
    /* two blocks and one over; 5x5 taps */
    fused_equals_unfused(prec, (case_ctx){relu, 2, false}, (int64_t[]){2, 1, 14, 14},
                         (int64_t[]){33, 1, 5, 5}, 64);
    /* padding 1, stride 2, 3x3 windows */
    fused_equals_unfused(
        prec,
        (case_ctx){{.relu = true, .pad_h = 1, .pad_w = 1, .stride_h = 2, .stride_w = 2}, 3, false},
        (int64_t[]){3, 2, 25, 25}, (int64_t[]){7, 2, 3, 3}, 65);
}

static void f32_fused_equals_unfused(void **state)
{
    (void)state;
    cases(DP_PRECISION_FP32);
}

static void bf16_fused_equals_unfused(void **state)
{
    (void)state;
    dp_precision p = dp_device_has(gc_dev, DP_DEVICE_BF16_NATIVE) ? DP_PRECISION_BF16
                                                                  : DP_PRECISION_BF16_REFERENCE;
    cases(p);
}

/* No ReLU: the pool of the plain convolution, no mask. */
static void no_relu_fused_equals_unfused(void **state)
{
    (void)state;
    fused_equals_unfused(DP_PRECISION_FP32, (case_ctx){{0}, 2, false}, (int64_t[]){2, 1, 12, 12},
                         (int64_t[]){6, 1, 3, 3}, 66);
}

/* With split-invariant blocks of 8 rows (dp_set_split_invariant), the
 * fused op's dW and db over 32 rows equal, bit for bit, the float sum of
 * its gradients over the two halves (two devices and their allreduce), and
 * its outputs the halves' outputs: the backward reads each block's own rows
 * of x, dy and the mask. */
static void split_invariant_blocks(void **state)
{
    (void)state;
    const int64_t ws[4] = {20, 1, 3, 3};
    dp_rng rng;
    dp_rng_init(&rng, 68, 1);
    float *x = normal_array(&rng, 32 * 28 * 28, 1.0f), *w = normal_array(&rng, 180, 0.3f),
          *b = normal_array(&rng, 20, 0.3f);
    case_ctx c = {{.relu = true}, 2, true};
    dp_set_split_invariant(8);
    run_result whole = run(&c, (int64_t[]){32, 1, 28, 28}, ws, (float *[]){x, w, b}, 0), half[2];
    for (int k = 0; k < 2; k++)
        half[k] = run(&c, (int64_t[]){16, 1, 28, 28}, ws, (float *[]){x + k * 16 * 784, w, b},
                      k * 16 * 20 * 13 * 13);
    dp_set_split_invariant(0);
    assert_true(whole.fused_node && half[0].fused_node);
    int differ = 0;
    for (int i = 0; i < 180; i++) {
        float sum = half[0].dw[i] + half[1].dw[i];
        differ += memcmp(&sum, &whole.dw[i], sizeof sum) != 0;
    }
    for (int i = 0; i < 20; i++) {
        float sum = half[0].db[i] + half[1].db[i];
        differ += memcmp(&sum, &whole.db[i], sizeof sum) != 0;
    }
    for (int k = 0; k < 2; k++)
        differ += memcmp(half[k].y, whole.y + k * half[k].ny, (size_t)half[k].ny * 4) != 0;
    printf("split-invariant blocks of 8: %d of 200 gradients and 2 output halves differ\n", differ);
    assert_int_equal(differ, 0);
    free(x), free(w), free(b);
    free(whole.y), free(whole.dw), free(whole.db);
    for (int k = 0; k < 2; k++)
        free(half[k].y), free(half[k].dw), free(half[k].db);
}

/* The threads split the images and sum their gradients in a fixed order:
 * on a device of 2 threads the fused op still equals the unfused ops. */
static void two_threads(void **state)
{
    (void)state;
    dp_device_t *one = gc_dev;
    OK(dp_device_open(&gc_dev, "cpu:0", 2));
    fused_equals_unfused(DP_PRECISION_FP32, (case_ctx){{.relu = true}, 2, false},
                         (int64_t[]){6, 1, 28, 28}, (int64_t[]){20, 1, 3, 3}, 69);
    dp_device_close(gc_dev);
    gc_dev = one;
}

/* Finite differences of dW and db through the fused path, every
 * pre-activation at least 1e-2 from the ReLU's kink so that the 2e-3 step
 * never crosses it (the pooled output hides a crossing from gc's own kink
 * test). */
static void fused_gradients(void **state)
{
    (void)state;
    const int64_t xs[4] = {1, 1, 6, 6}, ws[4] = {20, 1, 3, 3}, bs = 20;
    case_ctx c = {{.relu = true}, 2, true};
    conv_geom geom = make_geom(1, 1, 6, 6, 20, 3, 3, 1, 1, 0, 0);
    dp_rng rng;
    dp_rng_init(&rng, 67, 1);
    for (int attempt = 0;; attempt++) {
        assert_true(attempt < 200);
        float *x = normal_array(&rng, count(4, xs), 1.0f), *w = normal_array(&rng, 180, 0.5f),
              *b = normal_array(&rng, bs, 0.5f);
        double *z = conv_ref(&geom, x, w, b, false);
        bool near_kink = false;
        for (int64_t i = 0; i < 20 * 4 * 4; i++)
            near_kink = near_kink || fabs(z[i]) < 1e-2;
        free(z);
        if (near_kink) {
            free(x), free(w), free(b);
            continue;
        }
        gc_problem g = {.name = "conv relu avgpool fused",
                        .build = build,
                        .ctx = &c,
                        .seed = 67,
                        .eps = 2e-3,
                        .atol = 2e-3};
        g.in[g.nin++] = input("x", 4, xs, x, false);
        g.in[g.nin++] = input("w", 4, ws, w, true);
        g.in[g.nin++] = input("b", 1, &bs, b, true);
        gc_run(&g);
        return;
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(f32_fused_equals_unfused, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(bf16_fused_equals_unfused, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(no_relu_fused_equals_unfused, gc_open_device,
                                        gc_close_device),
        cmocka_unit_test_setup_teardown(split_invariant_blocks, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(two_threads, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(fused_gradients, gc_open_device, gc_close_device),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
