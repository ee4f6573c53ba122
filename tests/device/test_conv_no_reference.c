/* The convolution chooser (DP_CONV_ALGO_AUTO) never times or runs one of
 * oneDNN's reference kernels where a real one exists: torchvision's
 * ResNet-18 stem, x (2, 3, 224, 224) in NCHW as the loader gives it,
 * w (64, 3, 7, 7), stride 2, padding 3, y (2, 64, 112, 112), forward and
 * both backward passes, in f32 and (where the CPU has it) native bf16.
 * oneDNN 2.x has only "ref:any" for an NCHW x of more than one channel
 * with an NHWC y, the direct layout's pair before x was reordered into
 * NHWC; that kernel took seconds a pass where the others take
 * milliseconds. Under --conv-algo direct (the default) the passes run
 * oneDNN's direct kernel untimed, so it must be a real one; under auto the
 * chooser times only real ones. */
#include "gradcheck.h"

#include "dp/dp.h"

#include <stdlib.h>
#include <string.h>

static const dp_conv2d_params stem = {.stride_h = 2, .stride_w = 2, .pad_h = 3, .pad_w = 3};

/* in: x (NCHW), w */
static int build_stem(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    (void)ctx;
    return dp_conv2d(out, in[0], in[1], NULL, &stem);
}

static void stem_runs_no_reference_kernel(dp_precision p, dp_conv_algo algo)
{
    const int64_t xs[4] = {2, 3, 224, 224}, ws[4] = {64, 3, 7, 7};
    dp__conv_shape s = gc_conv_shape(xs, ws, &stem, p);
    char key[160];
    dp__conv_shape_str(key, sizeof key, &s);
    dp_conv_choices_clear();
    dp_set_conv_algo(algo);
    dp_set_precision(p);
    dp__conv_trace(true);
    long before = dp__conv_reference_runs();
    dp_rng rng;
    dp_rng_init(&rng, 5, 0);
    gc_problem g = {.name = "stem", .build = build_stem};
    g.in[g.nin++] = input("x", 4, xs, normal_array(&rng, count(4, xs), 1.0f), true);
    g.in[g.nin++] = input("w", 4, ws, normal_array(&rng, count(4, ws), 0.1f), true);
    int64_t n = xs[0] * ws[0] * 112 * 112;
    double *r = malloc((size_t)n * sizeof *r);
    assert_non_null(r);
    for (int64_t i = 0; i < n; i++)
        r[i] = (double)(i % 7) - 3.0; /* any fixed projection */
    float *grads[GC_MAX_IN];
    gc_analytic(&g, r, n, grads);
    long runs = dp__conv_reference_runs() - before;
    dp_set_precision(DP_PRECISION_FP32);
    dp_set_conv_algo(DP_CONV_ALGO_DIRECT);
    print_message("%s:", key);
    for (int pass = 0; pass < DP__CONV_PASSES; pass++) {
        int ran = dp__conv_trace_find(gc_dev, &s, (dp__conv_pass)pass);
        print_message(" %s ran %s", dp__conv_pass_name((dp__conv_pass)pass),
                      ran >= 0 ? dp__conv_impl_name((dp__conv_impl)ran) : "nothing");
        if (ran < 0)
            fail_msg("%s: the %s pass did not run", key, dp__conv_pass_name((dp__conv_pass)pass));
        if (algo == DP_CONV_ALGO_DIRECT && ran != DP__CONV_DIRECT)
            fail_msg("%s: --conv-algo direct ran %s", key, dp__conv_impl_name((dp__conv_impl)ran));
    }
    print_message("; reference kernel runs %ld\n", runs);
    dp__conv_trace(false);
    for (int i = 0; i < g.nin; i++) {
        free(grads[i]);
        free(g.in[i].v);
    }
    free(r);
    dp_conv_choices_clear();
    if (runs != 0)
        fail_msg("%s: %ld pass(es) timed or ran a oneDNN reference kernel", key, runs);
}

static void stem_f32_direct(void **state)
{
    (void)state;
    stem_runs_no_reference_kernel(DP_PRECISION_FP32, DP_CONV_ALGO_DIRECT);
}

static void stem_f32_auto(void **state)
{
    (void)state;
    stem_runs_no_reference_kernel(DP_PRECISION_FP32, DP_CONV_ALGO_AUTO);
}

static void stem_bf16_direct(void **state)
{
    (void)state;
    if (!dp_device_has(gc_dev, DP_DEVICE_BF16_NATIVE))
        tu_skip("this CPU has no native bf16");
    stem_runs_no_reference_kernel(DP_PRECISION_BF16, DP_CONV_ALGO_DIRECT);
}

static void stem_bf16_auto(void **state)
{
    (void)state;
    if (!dp_device_has(gc_dev, DP_DEVICE_BF16_NATIVE))
        tu_skip("this CPU has no native bf16");
    stem_runs_no_reference_kernel(DP_PRECISION_BF16, DP_CONV_ALGO_AUTO);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(stem_f32_direct, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(stem_f32_auto, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(stem_bf16_direct, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(stem_bf16_auto, gc_open_device, gc_close_device),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
