/* LeakyReLU (dp_leaky_relu, nn.LeakyReLU): its values are F.leaky_relu's
 * for several slopes, zero and negative ones included; its gradient matches
 * finite differences; a model file that uses the module parses with
 * PyTorch's arguments and defaults, names it in its summary, and trains
 * (the loss goes down). */
#include "gradcheck.h"

#include "dp/nn.h"
#include "dp/optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Values at least `margin` away from zero (the kink), of either sign. */
static float *away_array(dp_rng *rng, int64_t n, float margin)
{
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        float m = margin + fabsf(dp_rng_normal(rng));
        v[i] = dp_rng_uniform(rng) < 0.5f ? -m : m;
    }
    return v;
}

static void test_forward_values(void **state)
{
    (void)state;
    static const float slopes[] = {0.01f, 0.2f, 0.0f, -0.5f, 1.5f};
    float x[7] = {-3.0f, -0.5f, -0.0f, 0.0f, 1e-8f, 0.25f, 4.0f}, y[7];
    int64_t n = 7;
    for (size_t s = 0; s < sizeof slopes / sizeof slopes[0]; s++) {
        dp_tensor_t *t = upload(1, &n, x), *out;
        OK(dp_leaky_relu(&out, t, slopes[s]));
        OK(dp_tensor_to_host(out, y, sizeof y));
        for (int i = 0; i < 7; i++) {
            float want = x[i] > 0.0f ? x[i] : slopes[s] * x[i];
            if (y[i] != want)
                fail_msg("slope %g: leaky_relu(%g) = %g, want %g", (double)slopes[s], (double)x[i],
                         (double)y[i], (double)want);
        }
        dp_tensor_free(out);
        dp_tensor_free(t);
    }
    dp_tensor_t *t = upload(1, &n, x), *out;
    assert_int_equal(dp_leaky_relu(&out, t, NAN), DP_EINVAL);
    dp_tensor_free(t);
}

static int build_leaky_relu(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    return dp_leaky_relu(out, in[0], *(const float *)ctx);
}

/* leaky_relu of a conv output, whose activations are stored NHWC. */
static int build_conv_leaky_relu(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    dp_tensor_t *h;
    dp_conv2d_params p = {.pad_h = 1, .pad_w = 1};
    int rc = dp_conv2d(&h, in[0], in[1], NULL, &p);
    return rc ? rc : dp_leaky_relu(out, h, *(const float *)ctx);
}

static void test_gradient(void **state)
{
    (void)state;
    static const float slopes[] = {0.01f, 0.3f, -0.7f};
    for (size_t s = 0; s < sizeof slopes / sizeof slopes[0]; s++) {
        dp_rng rng;
        dp_rng_init(&rng, 17, s);
        int64_t xs[3] = {3, 5, 4};
        char name[64];
        snprintf(name, sizeof name, "leaky_relu slope %g", (double)slopes[s]);
        gc_problem g = {.name = name, .build = build_leaky_relu, .ctx = &slopes[s], .kink = true};
        g.in[g.nin++] = input("x", 3, xs, away_array(&rng, count(3, xs), 0.1f), true);
        gc_run(&g);
    }
    dp_rng rng;
    dp_rng_init(&rng, 18, 0);
    int64_t cx[4] = {2, 3, 5, 5}, cw[4] = {4, 3, 3, 3};
    gc_problem h = {.name = "conv2d -> leaky_relu (NHWC)",
                    .build = build_conv_leaky_relu,
                    .ctx = &slopes[1],
                    .kink = true};
    h.in[h.nin++] = input("x", 4, cx, normal_array(&rng, count(4, cx), 1.0f), true);
    h.in[h.nin++] = input("w", 4, cw, normal_array(&rng, count(4, cw), 0.3f), true);
    gc_run(&h);
}

/* A small classifier on 1x8x8 images with the module in both spellings. */
static const char model_text[] = "nn.Conv2d(1, 4, kernel_size=3, padding=1)\n"
                                 "nn.LeakyReLU()\n"
                                 "nn.MaxPool2d(2)\n"
                                 "nn.Flatten()\n"
                                 "nn.Linear(4 * 4 * 4, 16)\n"
                                 "nn.LeakyReLU(negative_slope=0.2, inplace=True)\n"
                                 "nn.Linear(16, 3)\n";

static void test_model_file_parses_and_trains(void **state)
{
    (void)state;
    const char *path = tu_tmp_path("leaky.txt");
    assert_int_equal(tu_write_file(path, model_text, strlen(model_text)), 0);
    const int64_t chw[3] = {1, 8, 8};
    const dp_model_def *def;
    OK(dp_model_def_load(&def, path, chw));

    dp_layer_summary *rows;
    int nrows, leaky = 0;
    OK(dp_model_summary(def, chw, &rows, &nrows));
    for (int i = 0; i < nrows; i++)
        if (strcmp(rows[i].op, "leaky_relu") == 0) {
            leaky++; /* one FLOP per output element */
            assert_int_equal(rows[i].flops, count(rows[i].ndim, rows[i].shape));
        }
    free(rows);
    assert_int_equal(leaky, 2);

    enum { N = 24, STEPS = 100 };
    dp_model_t *m;
    OK(dp_model_init(&m, def, gc_dev, 7));
    float images[N * 64];
    int32_t labels[N];
    dp_rng rng;
    dp_rng_init(&rng, 3, 0);
    for (int i = 0; i < N; i++) {
        labels[i] = i % 3;
        for (int j = 0; j < 64; j++) /* each class lights its own rows */
            images[i * 64 + j] =
                0.3f * dp_rng_normal(&rng) + (j / 8 % 3 == labels[i] ? 1.0f : 0.0f);
    }
    int64_t xs[4] = {N, 1, 8, 8}, n = N;
    dp_tensor_t *x, *y;
    OK(dp_tensor_from_host(&x, gc_dev, DP_F32, 4, xs, images));
    OK(dp_tensor_from_host(&y, gc_dev, DP_I32, 1, &n, labels));
    dp_optimizer_options o = {.lr = 0.2f};
    gc_train_falls(m, x, y, &o, STEPS, 0.5f, "model file with LeakyReLU");
    dp_tensor_free(x);
    dp_tensor_free(y);
    dp_model_close(m);
}

/* nn.LeakyReLU() takes PyTorch's default slope, 0.01; a given one wins
 * (after a Linear layer that copies its input). */
static void test_module_slope(void **state)
{
    (void)state;
    static const char *const texts[] = {
        "nn.Flatten()\nnn.Linear(6, 6)\nnn.LeakyReLU()\n",
        "nn.Flatten()\nnn.Linear(6, 6)\nnn.LeakyReLU(negative_slope=0.25)\n"};
    static const float slopes[] = {0.01f, 0.25f};
    const int64_t chw[3] = {1, 2, 3};
    float x[2 * 6], y[2 * 6];
    for (int i = 0; i < 12; i++)
        x[i] = (float)(i - 6) * 0.5f;
    for (int t = 0; t < 2; t++) {
        dp_model_def *def;
        OK(dp_model_def_parse(&def, texts[t], "slope.txt", chw));
        dp_model_t *m;
        OK(dp_model_init(&m, def, gc_dev, 1));
        float identity[6 * 6 + 6] = {0}; /* Linear's weight, then its bias */
        for (int i = 0; i < 6; i++)
            identity[i * 6 + i] = 1.0f;
        OK(dp_params_set(dp_model_params(m), identity));
        int64_t xs[4] = {2, 1, 2, 3};
        dp_tensor_t *in = upload(4, xs, x), *out;
        /* The tape owns the forward's tensors (Flatten's, Linear's, ...). */
        dp_tape_t *tape;
        OK(dp_tape_init(&tape, false));
        dp_tape_begin(tape);
        OK(dp_model_forward(m, in, false, &out));
        OK(dp_tensor_to_host(out, y, sizeof y));
        dp_tape_end(tape);
        for (int i = 0; i < 12; i++)
            if (y[i] != (x[i] > 0.0f ? x[i] : slopes[t] * x[i]))
                fail_msg("%s: y[%d] = %g for x = %g", texts[t], i, (double)y[i], (double)x[i]);
        dp_tape_reset(tape);
        dp_tape_close(tape);
        dp_tensor_free(in);
        dp_model_close(m);
        dp_model_def_free(def);
    }
}

/* PyTorch's argument checks: a slope that is not a number is refused. */
static void test_bad_arguments(void **state)
{
    (void)state;
    static const char *const bad[] = {"nn.Flatten()\nnn.LeakyReLU('a')\n",
                                      "nn.Flatten()\nnn.LeakyReLU(0.1, slope=2)\n",
                                      "nn.Flatten()\nnn.LeakyReLU(0.1, True, 3)\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dp_model_def *def = NULL;
        int rc = dp_model_def_parse(&def, bad[i], "bad.txt", NULL);
        if (rc != DP_EFORMAT)
            fail_msg("bad file %zu: %d, want DP_EFORMAT", i, rc);
        tu_assert_error_mentions("bad.txt: line 2: ");
    }
}

static int open_device_and_tmp(void **state)
{
    return tu_setup_tmp(state) || gc_open_device(state);
}

static int close_device_and_tmp(void **state)
{
    return gc_close_device(state) | tu_teardown_tmp(state);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_forward_values, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_gradient, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_module_slope, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_bad_arguments, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_model_file_parses_and_trains, open_device_and_tmp,
                                        close_device_and_tmp),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
