/* Finite-difference gradient checks of every float32 convolution
 * implementation the chooser can pick (src/device/cpu/conv2d.c): direct in
 * NHWC, direct in oneDNN's blocked layout, Winograd and im2col + matrix
 * product, each forced for all three passes through the choice table
 * (dp_conv_choices_load under DP_CONV_ALGO_AUTO), on the shapes each
 * serves. The trace of what ran must show the forced implementation, so a
 * silent fall-back to direct fails; Winograd, which oneDNN 2.6 has only on
 * AVX-512 CPUs, is skipped visibly, naming the CPU, where it is missing. */
#include "gradcheck.h"

#include "device/conv_choice.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct algo_ctx {
    dp_conv2d_params p;
} algo_ctx;

/* in: x (NCHW), w, b, the identity 1x1 weight. The identity convolution
 * puts x in NHWC, as every convolution after a network's first sees it. */
static int build(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const algo_ctx *c = ctx;
    dp_tensor_t *x;
    int rc = dp_conv2d(&x, in[0], in[3], NULL, NULL);
    return rc ? rc : dp_conv2d(out, x, in[1], in[2], &c->p);
}

/* The gradient check of one shape with one implementation; returns false
 * (after checking nothing) when the implementation does not exist here. */
static bool check(const char *name, dp__conv_impl impl, const int64_t *xs, const int64_t *ws,
                  dp_conv2d_params p, uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 3);
    int64_t bs = ws[0], is[4] = {xs[1], xs[1], 1, 1};
    algo_ctx c = {p};
    gc_problem g = {.name = name, .build = build, .ctx = &c, .seed = seed, .checks = 60};
    g.in[g.nin++] = input("x", 4, xs, normal_array(&rng, count(4, xs), 1.0f), true);
    g.in[g.nin++] = input("w", 4, ws, normal_array(&rng, count(4, ws), 0.5f), true);
    g.in[g.nin++] = input("b", 1, &bs, normal_array(&rng, bs, 0.5f), true);
    g.in[g.nin++] = input("id", 4, is, identity_1x1(xs[1]), false);
    dp__conv_shape s = gc_conv_shape(xs, ws, &p, DP_PRECISION_FP32);
    gc_force_conv_impl(&s, impl);
    /* One forward and backward decides whether the implementation runs
     * here before the check spends its time. */
    dp__conv_trace(true);
    dp_set_conv_algo(DP_CONV_ALGO_AUTO);
    gc_run(&g);
    bool ok = gc_conv_ran(&s, impl);
    dp__conv_trace(false);
    dp_set_conv_algo(DP_CONV_ALGO_DIRECT);
    dp_conv_choices_clear();
    return ok;
}

static const struct {
    const char *name;
    int64_t xs[4], ws[4];
    dp_conv2d_params p;
} shapes[] = {
    {"3x3 pad 1", {2, 16, 6, 6}, {16, 16, 3, 3}, {.pad_h = 1, .pad_w = 1}},
    {"3x3 stride 2 pad 1",
     {2, 8, 7, 7},
     {12, 8, 3, 3},
     {.stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1}},
    {"5x5 (LeNet's conv2)", {2, 6, 9, 9}, {10, 6, 5, 5}, {0}},
    {"1x1 stride 2", {2, 8, 7, 7}, {16, 8, 1, 1}, {.stride_h = 2, .stride_w = 2}},
};

static void every_shape(dp__conv_impl impl)
{
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        char name[96];
        snprintf(name, sizeof name, "conv2d %s %s", dp__conv_impl_name(impl), shapes[i].name);
        if (!check(name, impl, shapes[i].xs, shapes[i].ws, shapes[i].p, 100 + i))
            fail_msg("%s: the %s implementation did not run (fell back to another)", name,
                     dp__conv_impl_name(impl));
    }
}

static void test_direct(void **state)
{
    (void)state;
    every_shape(DP__CONV_DIRECT);
}

static void test_blocked(void **state)
{
    (void)state;
    every_shape(DP__CONV_BLOCKED);
}

static void test_gemm(void **state)
{
    (void)state;
    every_shape(DP__CONV_GEMM);
}

/* Winograd F(4x4, 3x3): 3x3, stride 1, in oneDNN only with AVX-512. */
static void test_winograd(void **state)
{
    (void)state;
    if (!check("conv2d winograd 3x3 pad 1", DP__CONV_WINOGRAD, shapes[0].xs, shapes[0].ws,
               shapes[0].p, 200)) {
        tu_skip("oneDNN has no f32 Winograd convolution on %s (it needs AVX-512); the direct "
                "kernel ran instead, and its gradients were checked",
                tu_cpu_name());
    }
    /* Where Winograd ran above it must run here too: a fall-back to direct
     * for a shape it serves fails. */
    if (!check("conv2d winograd 3x3 no pad", DP__CONV_WINOGRAD, (int64_t[]){2, 16, 8, 8},
               (int64_t[]){16, 16, 3, 3}, (dp_conv2d_params){0}, 201))
        fail_msg("conv2d winograd 3x3 no pad: the winograd implementation did not run (fell "
                 "back to another)");
}

/* The reference bf16 path always runs the direct kernel, whatever the
 * table says; the native implementations are compared with it in
 * test_bf16. */
static void test_reference_runs_direct(void **state)
{
    (void)state;
    dp__conv_shape s = gc_conv_shape(shapes[0].xs, shapes[0].ws, &shapes[0].p, DP_PRECISION_BF16);
    gc_force_conv_impl(&s, DP__CONV_GEMM);
    dp_set_conv_algo(DP_CONV_ALGO_AUTO);
    dp_set_precision(DP_PRECISION_BF16_REFERENCE);
    dp__conv_trace(true);
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    dp_rng rng;
    dp_rng_init(&rng, 5, 5);
    float *xv = normal_array(&rng, count(4, shapes[0].xs), 1.0f);
    float *wv = normal_array(&rng, count(4, shapes[0].ws), 1.0f);
    dp_tensor_t *x = upload(4, shapes[0].xs, xv), *w = upload(4, shapes[0].ws, wv), *y;
    OK(dp_conv2d(&y, x, w, NULL, &shapes[0].p));
    OK(dp_tensor_wait(y));
    dp_set_precision(DP_PRECISION_FP32);
    dp_tape_end(tape);
    dp_tape_close(tape);
    dp_tensor_free(x);
    dp_tensor_free(w);
    free(xv);
    free(wv);
    dp__conv_shape ref = s;
    ref.precision = DP_PRECISION_BF16_REFERENCE;
    assert_int_equal(dp__conv_trace_find(gc_dev, &s, DP__CONV_FORWARD), -1);
    assert_int_equal(dp__conv_trace_find(gc_dev, &ref, DP__CONV_FORWARD), DP__CONV_DIRECT);
    dp__conv_trace(false);
    dp_set_conv_algo(DP_CONV_ALGO_DIRECT);
    dp_conv_choices_clear();
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_direct, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_blocked, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_gemm, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_winograd, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_reference_runs_direct, gc_open_device,
                                        gc_close_device),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
