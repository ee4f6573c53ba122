/* The convolution choice table (DP_CONV_ALGO_AUTO) and bf16 training on
 * several devices:
 *   - the table's text survives a save and load; a bad line installs
 *     nothing and names itself;
 *   - the chooser keeps each pass's fastest candidate: timings handed to
 *     it (dp__conv_set_timing_hook), the fastest on each implementation in
 *     turn, and the table then holds that one;
 *   - every replica of a DataParallel runs the implementation measured
 *     once (the trace of what each device ran);
 *   - N devices train in bf16 as 1 does, within the bound below;
 *   - a resumed run runs the kernels its checkpoint recorded, measuring
 *     nothing, and (--deterministic) ends bit for bit where an uninterrupted
 *     run with those kernels ends. */
#include "gradcheck.h"

#include "dp/dp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void choices_round_trip(void **state)
{
    (void)state;
    dp_conv_choices_clear();
    const char *text = "bf16 64x28x28 k64 3x3 s1x1 p1x1: forward=direct backward_data=blocked "
                       "backward_weights=gemm\n"
                       "f32 20x13x13 k50 5x5 s1x1 p0x0: forward=blocked\n"
                       /* padding per side, dilation and groups */
                       "f32 32x14x14 k64 3x3 s2x2 p0x0x1x1 d2x2 g32: forward=direct "
                       "backward_weights=blocked\n"
                       "f32 8x9x9 k8 2x2 s1x1 p0x0x1x1: forward=gemm\n"
                       "bf16 16x7x7 k16 3x3 s1x1 p1x1 g16: backward_data=direct\n";
    assert_int_equal(dp_conv_choices_load(text), 0);
    char *saved = dp_conv_choices_save();
    assert_non_null(saved);
    assert_string_equal(saved, text);
    /* A later line for a known shape replaces only the passes it names. */
    assert_int_equal(dp_conv_choices_load("f32 20x13x13 k50 5x5 s1x1 p0x0: forward=winograd "
                                          "backward_weights=direct\n"),
                     0);
    char *again = dp_conv_choices_save();
    assert_non_null(strstr(again, "f32 20x13x13 k50 5x5 s1x1 p0x0: forward=winograd "
                                  "backward_weights=direct\n"));
    free(again);
    /* Bad lines: nothing of the text is installed, and the error names it. */
    tu_quiet_log();
    const char *bad[] = {
        "bf16 64x28x28 k64 3x3 s1x1 p1x1: forward=fastest\n",
        "f16 64x28x28 k64 3x3 s1x1 p1x1: forward=direct\n",
        "bf16 64x28 k64 3x3 s1x1 p1x1: forward=direct\n",
        "bf16 0x28x28 k64 3x3 s1x1 p1x1: forward=direct\n",
        "bf16 64x28x28 k64 3x3 s1x1 p1x1: sideways=direct\n",
        "f32 32x14x14 k64 3x3 s2x2 p0x0x1x1 d2x2 g3: forward=direct\n",
        "f32 32x14x14 k64 3x3 s2x2 p0x0x1 d2x2: forward=direct\n",
        "f32 32x14x14 k64 3x3 s2x2 p1x1 d0x2: forward=direct\n",
        "f32 32x14x14 k64 3x3 s2x2 p1x1 g32 d2x2: forward=direct\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char two[256];
        snprintf(two, sizeof two, "f32 8x8x8 k8 3x3 s1x1 p1x1: forward=gemm\n%s", bad[i]);
        assert_int_equal(dp_conv_choices_load(two), DP_EINVAL);
        tu_assert_error_mentions("cannot read the line");
        char *now = dp_conv_choices_save();
        assert_null(strstr(now, "8x8x8"));
        free(now);
    }
    dp_log_set(NULL, NULL);
    free(saved);
    dp_conv_choices_clear();
    char *empty = dp_conv_choices_save();
    assert_string_equal(empty, "");
    free(empty);
}

/* ---- the fastest candidate is kept --------------------------------------------- */

/* The timings handed to the chooser: implementation i of pass p takes
 * 1 + (i + p + rotation) mod 4 ms, so each rotation makes another one the
 * fastest; offered[p][i] records which candidates the chooser timed (a
 * candidate that does not serve the shape, or that oneDNN lacks here, is
 * never timed). Written by the device's worker while it measures; read
 * after the tensors are waited for. */
static int rotation;
static bool offered[DP__CONV_PASSES][DP__CONV_IMPLS];

static double injected_ms(int pass, int impl)
{
    return 1 + (impl + pass + rotation) % DP__CONV_IMPLS;
}

static double injected_timing(dp__conv_pass pass, dp__conv_impl impl, double measured)
{
    (void)measured;
    offered[pass][impl] = true;
    return 1e-3 * injected_ms(pass, impl);
}

/* in: x (NCHW), w, the identity 1x1 weight (x into NHWC first) */
static int build_conv(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    (void)ctx;
    dp_tensor_t *x;
    int rc = dp_conv2d(&x, in[0], in[2], NULL, NULL);
    const dp_conv2d_params p = {.pad_h = 1, .pad_w = 1};
    return rc ? rc : dp_conv2d(out, x, in[1], NULL, &p);
}

static void the_fastest_candidate_is_kept(void **state)
{
    (void)state;
    const int64_t xs[4] = {2, 8, 6, 6}, ws[4] = {8, 8, 3, 3}, is[4] = {8, 8, 1, 1};
    const dp_conv2d_params cp = {.pad_h = 1, .pad_w = 1};
    dp__conv_shape s = gc_conv_shape(xs, ws, &cp, DP_PRECISION_FP32);
    char key[160];
    dp__conv_shape_str(key, sizeof key, &s);
    dp__conv_set_timing_hook(injected_timing);
    dp_set_conv_algo(DP_CONV_ALGO_AUTO);
    for (rotation = 0; rotation < DP__CONV_IMPLS; rotation++) {
        dp_conv_choices_clear();
        /* The identity 1x1 convolution's passes chosen beforehand: offered[]
         * then records the 3x3 one's candidates alone (oneDNN has only a
         * reference kernel for some of its blocked passes, never timed). */
        assert_int_equal(dp_conv_choices_load("f32 8x6x6 k8 1x1 s1x1 p0x0: forward=direct "
                                              "backward_data=direct backward_weights=direct\n"),
                         0);
        memset(offered, 0, sizeof offered);
        dp_rng rng;
        dp_rng_init(&rng, 3, (uint64_t)rotation);
        gc_problem g = {.name = "conv", .build = build_conv};
        g.in[g.nin++] = input("x", 4, xs, normal_array(&rng, count(4, xs), 1.0f), true);
        g.in[g.nin++] = input("w", 4, ws, normal_array(&rng, count(4, ws), 0.5f), true);
        g.in[g.nin++] = input("id", 4, is, identity_1x1(xs[1]), false);
        int64_t n = xs[0] * ws[0] * xs[2] * xs[3];
        double *r = to_double(g.in[0].v, n); /* any fixed projection */
        float *grads[GC_MAX_IN];
        gc_analytic(&g, r, n, grads);
        for (int i = 0; i < g.nin; i++) {
            free(grads[i]);
            free(g.in[i].v);
        }
        free(r);
        int kept[DP__CONV_PASSES], fastest[DP__CONV_PASSES], timed[DP__CONV_PASSES];
        print_message("%s, rotation %d:", key, rotation);
        for (int pass = 0; pass < DP__CONV_PASSES; pass++) {
            fastest[pass] = -1, timed[pass] = 0;
            for (int impl = 0; impl < DP__CONV_IMPLS; impl++)
                if (offered[pass][impl]) {
                    timed[pass]++;
                    if (fastest[pass] < 0 ||
                        injected_ms(pass, impl) < injected_ms(pass, fastest[pass]))
                        fastest[pass] = impl;
                }
            kept[pass] = dp__conv_choice_find(&s, (dp__conv_pass)pass);
            print_message(" %s %s of %d", dp__conv_pass_name((dp__conv_pass)pass),
                          dp__conv_impl_name((dp__conv_impl)kept[pass]), timed[pass]);
        }
        print_message("\n");
        for (int pass = 0; pass < DP__CONV_PASSES; pass++) {
            const char *name = dp__conv_pass_name((dp__conv_pass)pass);
            if (timed[pass] < 2)
                fail_msg("%s: only %d candidate(s) timed", name, timed[pass]);
            if (kept[pass] != fastest[pass])
                fail_msg("%s, rotation %d: kept %s, the fastest was %s (%.0f ms against %.0f)",
                         name, rotation, dp__conv_impl_name((dp__conv_impl)kept[pass]),
                         dp__conv_impl_name((dp__conv_impl)fastest[pass]),
                         injected_ms(pass, kept[pass]), injected_ms(pass, fastest[pass]));
        }
    }
}

/* After the_fastest_candidate_is_kept, passed or failed: the clock's
 * timings again, and the suite's defaults. */
static int real_timings(void **state)
{
    dp__conv_set_timing_hook(NULL);
    dp_set_conv_algo(DP_CONV_ALGO_DIRECT);
    dp_conv_choices_clear();
    return gc_close_device(state);
}

/* ---- LeNet through DataParallel -------------------------------------------- */

enum { STEPS = 20, BATCH = 64 };

typedef struct run {
    float *params;
    int64_t numel;
} run;

/* STEPS steps of LeNet on n devices in precision p, the devices' kernels
 * traced; returns replica 0's parameters (every replica's are checked
 * equal). */
static run train_lenet(const dp_dataset *ds, int n, dp_precision p)
{
    dp_device_t *devs[2];
    tu_open_cpu_devices(devs, n);
    dp_model_t *model;
    assert_int_equal(dp_model_init_builtin(&model, "lenet", devs[0], 7), 0);
    dp_data_parallel_t *dp;
    dp_data_parallel_options opt = {.allreduce = DP_ALLREDUCE_RING,
                                    .optimizer = {.lr = 0.2f, .momentum = 0.5f}};
    assert_int_equal(dp_data_parallel_init(&dp, model, devs, n, &opt), 0);
    dp_tape_t *tape;
    assert_int_equal(dp_tape_init(&tape, true), 0);
    dp_set_precision(p);
    for (int s = 0; s < STEPS; s++)
        tu_data_parallel_step(dp, tape, devs[0], ds->images + s * BATCH * 784,
                              ds->labels + s * BATCH, BATCH);
    dp_set_precision(DP_PRECISION_FP32);
    run r;
    r.params = tu_replica_params(dp, model, n, &r.numel);
    dp_tape_close(tape);
    dp_data_parallel_close(dp);
    dp_model_close(model);
    dp_devices_close(devs, n);
    return r;
}

static bool have_data(dp_dataset *ds)
{
    if (!tu_have_fashion_mnist())
        return false;
    assert_int_equal(dp_fashion_mnist_load(NULL, true, ds), 0);
    return true;
}

static bool native_bf16(void)
{
    dp_device_t *dev;
    assert_int_equal(dp_device_open(&dev, "cpu:0", 1), 0);
    bool native = dp_device_has(dev, DP_DEVICE_BF16_NATIVE);
    dp_device_close(dev);
    return native;
}

/* Every (device, shape, pass) the trace holds ran the table's choice, and
 * each shape and pass ran on both devices: LeNet's second convolution makes
 * 2 x 3 entries (the first runs with its pool in one kernel of its own,
 * dp_conv2d_avg_pool2d, which the chooser has no candidates for). */
static void replicas_run_the_measured_kernels(void **state)
{
    (void)state;
    dp_dataset ds;
    if (!have_data(&ds))
        tu_skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
    dp_conv_choices_clear();
    dp_set_conv_algo(DP_CONV_ALGO_AUTO);
    dp__conv_trace(true);
    dp_precision p = native_bf16() ? DP_PRECISION_BF16 : DP_PRECISION_FP32;
    run r = train_lenet(&ds, 2, p);
    free(r.params);
    const void *dev, *devs[2] = {NULL, NULL};
    dp__conv_shape s;
    dp__conv_pass pass;
    dp__conv_impl impl;
    int n = 0;
    for (; dp__conv_trace_get(n, &dev, &s, &pass, &impl); n++) {
        assert_true((int)impl >= 0); /* -2: this device ran two implementations */
        assert_int_equal(impl, dp__conv_choice_find(&s, pass));
        if (!devs[0] || devs[0] == dev)
            devs[0] = dev;
        else
            devs[1] = dev;
        print_message("%dx%dx%d k%d %dx%d %-16s %s\n", s.c, s.h, s.w, s.k, s.r, s.s,
                      dp__conv_pass_name(pass), dp__conv_impl_name(impl));
    }
    assert_int_equal(n, 2 * 3);
    assert_non_null(devs[1]);
    for (int i = 0; dp__conv_trace_get(i, &dev, &s, &pass, &impl); i++)
        assert_int_equal(dp__conv_trace_find(dev == devs[0] ? devs[1] : devs[0], &s, pass), impl);
    char *text = dp_conv_choices_save();
    print_message("%s, measured once for 2 devices:\n%s", dp_precision_name(p), text);
    free(text);
    dp__conv_trace(false);
    dp_set_conv_algo(DP_CONV_ALGO_DIRECT);
    dp_conv_choices_clear();
    dp_dataset_close(&ds);
}

/* 2 devices against 1 after STEPS steps of LeNet in bf16. Every device
 * split rounds the same products to bf16 (a sample's activations do not
 * depend on the split); what differs is the order of the f32 sums of the
 * weight gradients, as in float32, and a bf16 rounding that this flips
 * moves one activation by one ulp (2u of it), diluted over the batch. The
 * bound is float32 data parallelism's, 1e-5 of the largest weight; so that
 * it cannot pass with bf16 ignored, the run must also differ from float32
 * by more than u = 2^-8 of it (bf16 rounds every activation). The
 * reference path runs on every CPU; the native kernels are a test of their
 * own, skipped visibly, naming the CPU, where it has none. */
static void bf16_n_devices_equals_one(dp_precision p)
{
    dp_dataset ds;
    if (!have_data(&ds))
        tu_skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
    run one = train_lenet(&ds, 1, p), two = train_lenet(&ds, 2, p);
    run f32 = train_lenet(&ds, 1, DP_PRECISION_FP32);
    double scale = tu_max_abs("1 device's weights", one.params, one.numel);
    double worst = tu_max_diff("2 devices vs 1", two.params, one.params, one.numel);
    double vs_f32 = tu_max_diff("float32 vs bf16", f32.params, one.params, one.numel);
    print_message("%s, %d steps: 2 devices vs 1: max |difference| / max |param| = %.2e; "
                  "1 device vs float32: %.2e\n",
                  dp_precision_name(p), STEPS, worst / scale, vs_f32 / scale);
    assert_true(worst <= 1e-5 * scale);
    assert_true(vs_f32 > scale / 256);
    free(one.params);
    free(two.params);
    free(f32.params);
    dp_dataset_close(&ds);
}

static void bf16_reference_n_devices_equals_one(void **state)
{
    (void)state;
    bf16_n_devices_equals_one(DP_PRECISION_BF16_REFERENCE);
}

static void bf16_native_n_devices_equals_one(void **state)
{
    (void)state;
    if (!native_bf16())
        tu_skip("no native bf16 on %s (AVX512-BF16 or AMX): the reference path was compared "
                "instead (bf16_reference_n_devices_equals_one)",
                tu_cpu_name());
    bf16_n_devices_equals_one(DP_PRECISION_BF16);
}

/* ---- a resumed run's kernels ------------------------------------------------- */

static void lenet_options(dp_train_options *o, int epochs, dp_precision p)
{
    dp_train_options_default(o);
    o->run.epochs = epochs;
    o->data.batch_size = 64;
    o->data.limit_train = 640;
    o->data.limit_test = 128;
    o->numerics.deterministic = true;
    o->numerics.precision = p;
    o->numerics.conv_algo = DP_CONV_ALGO_AUTO;
}

/* The table holds LeNet's kernels chosen by hand (im2col + matrix product
 * for every pass, which measuring would not pick for all of them). */
static void choose_gemm_everywhere(dp_precision p)
{
    char text[256];
    const char *prec = p == DP_PRECISION_FP32 ? "f32" : "bf16";
    snprintf(text, sizeof text,
             "%s 1x28x28 k20 3x3 s1x1 p0x0: forward=gemm backward_weights=gemm\n"
             "%s 20x13x13 k50 5x5 s1x1 p0x0: forward=gemm backward_data=gemm "
             "backward_weights=gemm\n",
             prec, prec);
    dp_conv_choices_clear();
    assert_int_equal(dp_conv_choices_load(text), 0);
}

/* Two epochs straight, and one then a resume for the second, both with the
 * hand-chosen kernels; before the resume the table is emptied: the resumed
 * run must load the kernels from the checkpoint (the trace shows them, the
 * table then holds exactly them) and end on the same weights, bit for bit. */
static void resume_runs_the_recorded_kernels(void **state)
{
    (void)state;
    if (!tu_have_fashion_mnist())
        tu_skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
    dp_precision p = native_bf16() ? DP_PRECISION_BF16 : DP_PRECISION_BF16_REFERENCE;
    char straight[512], half[512], resumed[512];
    snprintf(straight, sizeof straight, "%s/straight.safetensors", tu_tmp);
    snprintf(half, sizeof half, "%s/half.safetensors", tu_tmp);
    snprintf(resumed, sizeof resumed, "%s/resumed.safetensors", tu_tmp);
    dp_train_options o;
    dp_train_result r;
    choose_gemm_everywhere(p);
    char *chosen = dp_conv_choices_save();
    lenet_options(&o, 2, p);
    o.checkpoint.checkpoint_path = straight;
    OK(dp_train(&o, &r));
    lenet_options(&o, 1, p);
    o.checkpoint.checkpoint_path = half;
    OK(dp_train(&o, &r));
    dp_conv_choices_clear();
    dp__conv_trace(true);
    lenet_options(&o, 2, p);
    o.checkpoint.resume_path = half;
    o.checkpoint.checkpoint_path = resumed;
    OK(dp_train(&o, &r));
    const void *dev;
    dp__conv_shape s;
    dp__conv_pass pass;
    dp__conv_impl impl;
    int n = 0;
    for (; dp__conv_trace_get(n, &dev, &s, &pass, &impl); n++)
        assert_int_equal(impl, DP__CONV_GEMM);
    assert_int_equal(n, 3); /* the second convolution's passes */
    dp__conv_trace(false);
    char *after = dp_conv_choices_save();
    assert_string_equal(after, chosen);
    print_message("%s: the resumed run ran the recorded kernels:\n%s", dp_precision_name(p), after);
    tu_assert_same_tensors(straight, resumed);
    free(after);
    free(chosen);
    dp_conv_choices_clear();
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(choices_round_trip),
        cmocka_unit_test_setup_teardown(the_fastest_candidate_is_kept, gc_open_device,
                                        real_timings),
        cmocka_unit_test(replicas_run_the_measured_kernels),
        cmocka_unit_test(bf16_reference_n_devices_equals_one),
        cmocka_unit_test(bf16_native_n_devices_equals_one),
        cmocka_unit_test_setup_teardown(resume_runs_the_recorded_kernels, tu_setup_tmp,
                                        tu_teardown_tmp),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
