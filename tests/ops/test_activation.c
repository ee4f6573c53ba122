/* The activations of dp_activation (ReLU6 and hardtanh, Hardswish,
 * Hardsigmoid, ELU, SELU, GELU exact and tanh, SiLU): their values against
 * torch.nn.functional's formulas written out here in double, their
 * gradients against finite differences (away from the kinks), and a model
 * file that uses every module parses with PyTorch's names and trains. */
#include "gradcheck.h"

#include "device/activation_math.h"

#include "dp/nn.h"
#include "dp/optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct kind_case {
    const char *name;
    dp_activation_kind kind;
    float alpha, beta;
} kind_case;

static const kind_case cases[] = {
    {"relu6", DP_ACT_HARDTANH, 0.0f, 6.0f},
    {"hardtanh(-2, 1.5)", DP_ACT_HARDTANH, -2.0f, 1.5f},
    {"hardswish", DP_ACT_HARDSWISH, 0, 0},
    {"hardsigmoid", DP_ACT_HARDSIGMOID, 1.0f / 6.0f, 0.5f},
    {"hardsigmoid (ONNX's 0.2, 0.5)", DP_ACT_HARDSIGMOID, 0.2f, 0.5f},
    {"elu", DP_ACT_ELU, 1.0f, 0},
    {"elu(0.3)", DP_ACT_ELU, 0.3f, 0},
    {"selu", DP_ACT_SELU, 1.6732632423543772f, 1.0507009873554805f},
    {"gelu", DP_ACT_GELU, 0, 0},
    {"gelu (tanh)", DP_ACT_GELU_TANH, 0, 0},
    {"silu", DP_ACT_SILU, 0, 0},
    {"linear (0.5 x - 2)", DP_ACT_LINEAR, 0.5f, -2.0f},
    {"linear (-x + 3)", DP_ACT_LINEAR, -1.0f, 3.0f},
};

/* torch.nn.functional's definitions, in double. */
static double reference(const kind_case *c, double x)
{
    double a = c->alpha, b = c->beta;
    switch (c->kind) {
    case DP_ACT_HARDTANH:
        return fmin(fmax(x, a), b);
    case DP_ACT_HARDSWISH:
        return x * fmin(fmax(x + 3.0, 0.0), 6.0) / 6.0;
    case DP_ACT_HARDSIGMOID:
        return fmin(fmax(a * x + b, 0.0), 1.0);
    case DP_ACT_ELU:
        return x > 0 ? x : a * (exp(x) - 1.0);
    case DP_ACT_SELU:
        return b * (x > 0 ? x : a * (exp(x) - 1.0));
    case DP_ACT_GELU:
        return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case DP_ACT_GELU_TANH:
        return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case DP_ACT_LINEAR:
        return a * x + b;
    default:
        return x / (1.0 + exp(-x));
    }
}

static void test_values(void **state)
{
    (void)state;
    enum { N = 15 };
    float x[N] = {-8.0f, -4.0f, -3.5f, -2.5f, -1.0f, -0.3f, -0.01f, 0.0f,
                  0.02f, 0.4f,  1.0f,  2.9f,  3.1f,  5.5f,  7.0f};
    float y[N];
    int64_t n = N;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        dp_tensor_t *t = upload(1, &n, x), *out;
        OK(dp_activation(&out, t, cases[c].kind, cases[c].alpha, cases[c].beta));
        OK(dp_tensor_to_host(out, y, sizeof y));
        double worst = 0;
        for (int i = 0; i < N; i++) {
            double want = reference(&cases[c], x[i]);
            /* Relative where |f(x)| >= 1, absolute below: oneDNN's erf
             * is accurate to float's rounding of values near 1. */
            double err = tu_worst_rel(0, y[i], want, fmax(fabs(want), 1.0), cases[c].name, i);
            worst = fmax(worst, err);
            if (!(err <= 2e-6))
                fail_msg("%s(%g) = %.9g, want %.9g", cases[c].name, (double)x[i], (double)y[i],
                         want);
        }
        printf("%-30s values from -8 to 7: largest difference %.1e (relative above 1)\n",
               cases[c].name, worst);
        dp_tensor_free(out);
        dp_tensor_free(t);
    }
    dp_tensor_t *t = upload(1, &n, x), *out;
    assert_int_equal(dp_activation(&out, t, DP_ACT_HARDTANH, 1.0f, -1.0f), DP_EINVAL);
    assert_int_equal(dp_activation(&out, t, (dp_activation_kind)42, 0, 0), DP_EINVAL);
    dp_tensor_free(t);
}

/* device/activation_math.h, the CUDA kernels' formulas (the CPU runs
 * oneDNN for most kinds), checked here on the host: values against the
 * reference, derivatives against its central differences in double. */
static void test_kernel_formulas(void **state)
{
    (void)state;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double worst_f = 0, worst_d = 0;
        for (int i = 0; i <= 140; i++) {
            double x = -7.0 + 0.1 * i + 0.0137; /* never on a kink */
            float a = cases[c].alpha, b = cases[c].beta;
            double f = dp__act_forward(cases[c].kind, (float)x, a, b);
            double want = reference(&cases[c], (float)x), h = 1e-4;
            double d = dp__act_backward(cases[c].kind, (float)x, 1.0f, a, b);
            double dwant =
                (reference(&cases[c], (float)x + h) - reference(&cases[c], (float)x - h)) / (2 * h);
            worst_f = tu_worst_rel(worst_f, f, want, fmax(fabs(want), 1.0), cases[c].name, i);
            worst_d = tu_worst_rel(worst_d, d, dwant, fmax(fabs(dwant), 1.0), cases[c].name, i);
        }
        printf("%-30s kernel formulas: value %.1e, derivative %.1e off\n", cases[c].name, worst_f,
               worst_d);
        assert_true(worst_f < 2e-6 && worst_d < 1e-5);
    }
}

static int build(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const kind_case *c = ctx;
    return dp_activation(out, in[0], c->kind, c->alpha, c->beta);
}

/* Inputs away from every kink (0, +-3, hardtanh's -2 and 1.5, ReLU6's 6,
 * ONNX's hardsigmoid ends +-2.5), where a finite difference would straddle
 * two slopes. */
static float *kink_free(dp_rng *rng, int64_t n)
{
    static const float centres[] = {-5.5f, -1.2f, -0.5f, 0.5f, 1.0f, 2.0f, 4.5f};
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = centres[i % 7] + 0.2f * (2.0f * dp_rng_uniform(rng) - 1.0f);
    return v;
}

static void test_gradients(void **state)
{
    (void)state;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        dp_rng rng;
        dp_rng_init(&rng, 23, c);
        int64_t xs[3] = {2, 3, 6};
        gc_problem g = {.name = cases[c].name, .build = build, .ctx = &cases[c], .kink = true};
        g.in[g.nin++] = input("x", 3, xs, kink_free(&rng, count(3, xs)), true);
        gc_run(&g);
    }
}

/* Every module, with PyTorch's names and defaults, in a small classifier. */
static const char model_text[] = "nn.Conv2d(1, 6, kernel_size=3, padding=1)\n"
                                 "nn.ReLU6()\n"
                                 "nn.Conv2d(6, 6, 3, padding=1)\n"
                                 "nn.Hardswish(inplace=True)\n"
                                 "nn.MaxPool2d(2)\n"
                                 "nn.Flatten()\n"
                                 "nn.Linear(6 * 4 * 4, 32)\n"
                                 "nn.GELU()\n"
                                 "nn.Linear(32, 32)\n"
                                 "nn.SiLU()\n"
                                 "nn.Linear(32, 32)\n"
                                 "nn.ELU(alpha=0.5)\n"
                                 "nn.Linear(32, 32)\n"
                                 "nn.SELU()\n"
                                 "nn.Linear(32, 16)\n"
                                 "nn.Hardsigmoid()\n"
                                 "nn.Linear(16, 3)\n";

static void test_model_file_trains(void **state)
{
    (void)state;
    const char *path = tu_tmp_path("activations.txt");
    assert_int_equal(tu_write_file(path, model_text, strlen(model_text)), 0);
    const int64_t chw[3] = {1, 8, 8};
    const dp_model_def *def;
    OK(dp_model_def_load(&def, path, chw));
    dp_layer_summary *rows;
    int nrows, acts = 0;
    OK(dp_model_summary(def, chw, &rows, &nrows));
    for (int i = 0; i < nrows; i++)
        acts += strcmp(rows[i].op, "activation") == 0;
    free(rows);
    assert_int_equal(acts, 7);
    enum { N = 24, STEPS = 150 };
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
    dp_optimizer_options o;
    dp_optimizer_options_default(&o, DP_OPTIMIZER_ADAM, 0.01f);
    gc_train_falls(m, x, y, &o, STEPS, 0.5f, "model file with every activation");
    dp_tensor_free(x);
    dp_tensor_free(y);
    dp_model_close(m);
}

/* GELU(approximate='tanh') is refused rather than run exactly. */
static void test_gelu_arguments(void **state)
{
    (void)state;
    dp_model_def *def = NULL;
    int rc =
        dp_model_def_parse(&def, "nn.Flatten()\nnn.GELU(approximate='tanh')\n", "gelu.txt", NULL);
    assert_int_equal(rc, DP_EFORMAT);
    tu_assert_error_mentions("gelu.txt: line 2: ");
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
        cmocka_unit_test(test_values),         cmocka_unit_test(test_kernel_formulas),
        cmocka_unit_test(test_gradients),      cmocka_unit_test(test_model_file_trains),
        cmocka_unit_test(test_gelu_arguments),
    };
    return tu_run(argc, argv, tests, open_device_and_tmp, close_device_and_tmp);
}
