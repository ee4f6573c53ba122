/* Models written as the body of PyTorch's nn.Sequential (dp_model_def_parse):
 * d2l's LeNet gets PyTorch's state_dict names, shapes and parameter count in
 * every spelling; batch norm layers get their buffers; the default init is
 * PyTorch's; each kind of bad file is refused with its file and line; the
 * parsed forward is the hand-written one. */
#include "sequentialutil.h"

#include "dp/autograd.h"
#include "dp/core.h"
#include "dp/nn.h"
#include "dp/ops.h"
#include "dp/tensor.h"
#include "dp/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* d2l's LeNet (7.6) as its chapter writes it: with `nn.`, keyword
 * arguments and 16 * 5 * 5. */
static const char d2l_lenet[] = "nn.Conv2d(1, 6, kernel_size=5, padding=2), nn.Sigmoid(),\n"
                                "nn.AvgPool2d(kernel_size=2, stride=2),\n"
                                "nn.Conv2d(6, 16, kernel_size=5), nn.Sigmoid(),\n";

/* The same model in other spellings: one module a line, no `nn.`,
 * positional arguments, comments and blank lines between. */
static const char *const lenet_spellings[] = {
    "nn.Conv2d(1, 6, kernel_size=5, padding=2)\n"
    "nn.Sigmoid()\n"
    "nn.AvgPool2d(kernel_size=2, stride=2)\n"
    "nn.Conv2d(6, 16, kernel_size=5)\n"
    "nn.Sigmoid()\n"
    "nn.AvgPool2d(kernel_size=2, stride=2)\n"
    "nn.Flatten()\n"
    "nn.Linear(16 * 5 * 5, 120)\n"
    "nn.Sigmoid()\n"
    "nn.Linear(120, 84)\n"
    "nn.Sigmoid()\n"
    "nn.Linear(84, 10)\n",

    "# d2l's LeNet\n"
    "\n"
    "Conv2d(1, 6, 5, 1, 2)   # 6 x 28 x 28\n"
    "Sigmoid()\n"
    "AvgPool2d(2, 2)\n"
    "   \n"
    "Conv2d(6, 16, 5)\n"
    "Sigmoid()\n"
    "AvgPool2d(2)\n"
    "Flatten()\n"
    "# 16 channels of 5 x 5\n"
    "Linear(400, 120)\n"
    "Sigmoid()\n"
    "Linear(in_features=120, out_features=84)\n"
    "Sigmoid()\n"
    "Linear(84, out_features=10, bias=True)\n",

    "nn.Conv2d(in_channels=1, out_channels=6, kernel_size=(5, 5), padding=(2, 2)),\n"
    "nn.Sigmoid(), \n"
    "nn.AvgPool2d(kernel_size=2, stride=2),\n"
    "nn.Conv2d(6, 16, kernel_size=5),\r\n"
    "nn.Sigmoid(),\n"
    "nn.AvgPool2d(kernel_size=2, stride=2),\n"
    "nn.Flatten(),\n"
    "nn.Linear(16 * (10 - 5) * 5, 120),\n"
    "nn.Sigmoid(),\n"
    "nn.Linear(120, 84),\n"
    "nn.Sigmoid(),\n"
    "nn.Linear(84, 10)",
};

static const struct {
    const char *name;
    int ndim;
    int64_t shape[4];
} lenet_params[] = {
    {"0.weight", 4, {6, 1, 5, 5}}, {"0.bias", 1, {6}},          {"3.weight", 4, {16, 6, 5, 5}},
    {"3.bias", 1, {16}},           {"7.weight", 2, {120, 400}}, {"7.bias", 1, {120}},
    {"9.weight", 2, {84, 120}},    {"9.bias", 1, {84}},         {"11.weight", 2, {10, 84}},
    {"11.bias", 1, {10}},
};

static void check_lenet(const dp_model_def *def)
{
    assert_int_equal(def->nparams, 10);
    assert_int_equal(def->nbuffers, 0);
    assert_int_equal(def->nbn, 0);
    for (int i = 0; i < 10; i++) {
        assert_string_equal(def->params[i].name, lenet_params[i].name);
        assert_int_equal(def->params[i].ndim, lenet_params[i].ndim);
        for (int d = 0; d < lenet_params[i].ndim; d++)
            assert_int_equal(def->params[i].shape[d], lenet_params[i].shape[d]);
    }
    dp_model_t *m;
    assert_int_equal(dp_model_init(&m, def, cpu, 0), 0);
    assert_int_equal(dp_params_numel(dp_model_params(m)), 61706);
    assert_int_equal(dp_params_count(dp_model_params(m)), 10);
    assert_null(dp_model_buffers(m));
    dp_model_close(m);
}

static void test_lenet_names_shapes_count(void **state)
{
    (void)state;
    /* d2l's text: three lines of modules, then the rest. */
    char text[1024];
    snprintf(text, sizeof text, "%s%s", d2l_lenet,
             "nn.AvgPool2d(kernel_size=2, stride=2), nn.Flatten(),\n");
    dp_model_def *def;
    /* Several modules a line are not nn.Sequential's one-a-line body. */
    assert_int_equal(dp_model_def_parse(&def, text, "d2l.txt", NULL), DP_EFORMAT);
    assert_non_null(strstr(last_log, "d2l.txt: line 1: "));
    for (size_t i = 0; i < sizeof lenet_spellings / sizeof lenet_spellings[0]; i++) {
        int rc = dp_model_def_parse(&def, lenet_spellings[i], "lenet.txt", NULL);
        if (rc != 0)
            fail_msg("spelling %zu: %d: %s", i, rc, last_log);
        check_lenet(def);
        dp_model_def_free(def);
    }
    /* The example shipped with the sources is the same model. */
    const char *src = getenv("DP_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/examples/models/d2l_lenet.txt", src ? src : "..");
    const dp_model_def *loaded;
    int64_t chw[3] = {1, 28, 28};
    int rc = dp_model_def_load(&loaded, path, chw);
    if (rc != 0)
        fail_msg("%s: %d: %s", path, rc, last_log);
    check_lenet(loaded);
    dp_model_def_free((dp_model_def *)loaded);
}

static void test_batch_norm_buffers(void **state)
{
    (void)state;
    const char *text = "Conv2d(1, 4, 3, padding=1, bias=False)\n"
                       "BatchNorm2d(4)\n"
                       "ReLU()\n"
                       "MaxPool2d(2)\n"
                       "Flatten()\n"
                       "Linear(4 * 14 * 14, 32)\n"
                       "BatchNorm1d(32, eps=1e-5, momentum=0.1)\n"
                       "ReLU(inplace=True)\n"
                       "Linear(32, 10)\n";
    dp_model_def *def;
    int rc = dp_model_def_parse(&def, text, "bn.txt", NULL);
    if (rc != 0)
        fail_msg("%d: %s", rc, last_log);
    static const char *const params[] = {"0.weight", "1.weight", "1.bias",   "5.weight", "5.bias",
                                         "6.weight", "6.bias",   "8.weight", "8.bias"};
    static const char *const buffers[] = {"1.running_mean", "1.running_var", "6.running_mean",
                                          "6.running_var"};
    assert_int_equal(def->nparams, 9);
    for (int i = 0; i < 9; i++)
        assert_string_equal(def->params[i].name, params[i]);
    assert_int_equal(def->nbuffers, 4);
    for (int i = 0; i < 4; i++) {
        assert_string_equal(def->buffers[i].name, buffers[i]);
        assert_int_equal(def->buffers[i].ndim, 1);
        assert_int_equal(def->buffers[i].shape[0], i < 2 ? 4 : 32);
    }
    assert_int_equal(def->nbn, 2);
    assert_string_equal(def->bn_names[0], "1");
    assert_string_equal(def->bn_names[1], "6");

    dp_model_t *m;
    assert_int_equal(dp_model_init(&m, def, cpu, 3), 0);
    /* 36 + 8 + 25088 + 32 + 64 + 330: PyTorch's count for the same modules. */
    assert_int_equal(dp_params_numel(dp_model_params(m)), 36 + 8 + 25088 + 32 + 64 + 320 + 10);
    dp_params_t *B = dp_model_buffers(m);
    assert_non_null(B);
    float buf[72];
    assert_int_equal(dp_params_numel(B), 72);
    assert_int_equal(dp_params_get_all(B, buf), 0);
    for (int i = 0; i < 72; i++) { /* running_mean 0, running_var 1 */
        bool var = (i >= 4 && i < 8) || i >= 40;
        assert_true(buf[i] == (var ? 1.0f : 0.0f));
    }
    int n;
    const char *const *names = dp_model_bn_names(m, &n);
    assert_int_equal(n, 2);
    assert_string_equal(names[1], "6");
    dp_model_close(m);
    dp_model_def_free(def);
}

/* Every value of parameter `name` within +-bound, not all equal. */
static void check_uniform(dp_model_t *m, const char *name, float bound)
{
    dp_params_t *P = dp_model_params(m);
    int i = dp_params_find(P, name);
    assert_true(i >= 0);
    dp_tensor_t *t = dp_params_get(P, i);
    int64_t n = dp_tensor_numel(t);
    float *v = malloc((size_t)n * sizeof *v);
    assert_non_null(v);
    assert_int_equal(dp_tensor_to_host(t, v, (size_t)n * sizeof *v), 0);
    float lo = v[0], hi = v[0];
    for (int64_t k = 0; k < n; k++) {
        lo = v[k] < lo ? v[k] : lo;
        hi = v[k] > hi ? v[k] : hi;
    }
    free(v);
    if (!(lo >= -bound && hi <= bound && lo < hi))
        fail_msg("%s: values in [%g, %g], expected within +-%g and not all equal", name, (double)lo,
                 (double)hi, (double)bound);
    /* Drawn over the whole range, not a narrow part of it. */
    if (n >= 16 && !(hi - lo > bound))
        fail_msg("%s: values in [%g, %g] cover little of +-%g", name, (double)lo, (double)hi,
                 (double)bound);
}

static void check_constant(dp_model_t *m, const char *name, float want)
{
    dp_params_t *P = dp_model_params(m);
    dp_tensor_t *t = dp_params_get(P, dp_params_find(P, name));
    float v[64];
    int64_t n = dp_tensor_numel(t);
    assert_true(n <= 64);
    assert_int_equal(dp_tensor_to_host(t, v, (size_t)n * sizeof *v), 0);
    for (int64_t k = 0; k < n; k++)
        if (v[k] != want)
            fail_msg("%s[%lld] = %g, expected %g", name, (long long)k, (double)v[k], (double)want);
}

static void test_default_init(void **state)
{
    (void)state;
    const char *text = "Conv2d(1, 6, kernel_size=5, padding=2)\n"
                       "BatchNorm2d(6)\n"
                       "ReLU()\n"
                       "AdaptiveAvgPool2d((2, 2))\n"
                       "Flatten()\n"
                       "Linear(24, 16)\n"
                       "BatchNorm1d(16)\n"
                       "Linear(16, 10)\n";
    dp_model_def *def;
    assert_int_equal(dp_model_def_parse(&def, text, "init.txt", NULL), 0);
    dp_model_t *m;
    assert_int_equal(dp_model_init(&m, def, cpu, 7), 0);
    check_uniform(m, "0.weight", 1.0f / sqrtf(25.0f));
    check_uniform(m, "0.bias", 1.0f / sqrtf(25.0f));
    check_uniform(m, "5.weight", 1.0f / sqrtf(24.0f));
    check_uniform(m, "5.bias", 1.0f / sqrtf(24.0f));
    check_uniform(m, "7.weight", 1.0f / sqrtf(16.0f));
    check_uniform(m, "7.bias", 1.0f / sqrtf(16.0f));
    check_constant(m, "1.weight", 1.0f);
    check_constant(m, "1.bias", 0.0f);
    check_constant(m, "6.weight", 1.0f);
    check_constant(m, "6.bias", 0.0f);
    dp_model_close(m);
    dp_model_def_free(def);
}

/* d2l's LeNet without the first Conv2d's padding: 28 -> 24 -> 12 -> 8 -> 4,
 * so Flatten gives 16 * 4 * 4 = 256 where Linear(400, 120) wants 400. */
static const char lenet_unpadded[] =
    LENET_FEATURES("Conv2d(1, 6, kernel_size=5)\n") "Linear(400, 120)\n"
                                                    "Sigmoid()\n"
                                                    "Linear(120, 84)\n"
                                                    "Sigmoid()\n"
                                                    "Linear(84, 10)\n";

static const struct bad_file {
    const char *text;
    const char *message; /* after "bad.txt: " */
} bad_files[] = {
    {"Flatten()\n# a comment\nConv3d(1, 6, 5)\nLinear(784, 10)\n",
     "line 3: unknown module 'Conv3d'"},
    {"Conv2d(1, 6, kernel_size=5, padding=2, bogus=1)\n", "line 1: "},
    {"\n\nConv2d(1, 6, 5, kernel_size=5)\n", "line 3: "},
    {"Flatten()\nLinear(784)\n", "line 2: "},
    {"Conv2d(1, 6, kernel_size='five')\n", "line 1: "},
    {"Flatten()\nLinear(784.0, 10)\n", "line 2: "},
    {"Conv2d(1, 6, kernel_size=5.5)\n", "line 1: "},
    {"Flatten()\n\nLinear(784, 10\n", "line 3: "},
    {"Flatten()\nLinear(784, 10) Linear(10, 10)\n", "line 2: "},
    {lenet_unpadded, "line 8: Linear(400, 120) expects 400 inputs, the layer before gives 256"},
    {"Conv2d(3, 6, 5)\nFlatten()\nLinear(3456, 10)\n",
     "line 1: Conv2d(3, 6, 5) expects 3 input channels, the layer before gives 1"},
    {"Conv2d(1, 6, 5)\nLinear(3456, 10)\n",
     "line 2: Linear(3456, 10) expects 3456 inputs, the layer before gives images (6, 24, 24)"},
    {"Conv2d(1, 6, 5)\nReLU()\n# the end\n", "line 2: the last module gives (6, 24, 24)"},
    {"", "no modules"},
    {"# nothing but a comment\n\n   \n", "no modules"},
    {"Conv2d(1, 6, kernel_size=29)\nFlatten()\n", "line 1: "},
    {"Conv2d(1, 6, 5)\nMaxPool2d(25)\nFlatten()\n", "line 2: "},
    {"Flatten()\nLinear(784, 10)\nDropout(p=1.5)\n", "line 3: "},
    {"Conv2d(1, 6, 3, groups=3)\nFlatten()\nLinear(3456, 10)\n", "line 1: "},
    {"Conv2d(1, 6, 3, stride=2, padding='same')\nFlatten()\n", "line 1: "},
    {"ConvTranspose2d(1, 6, 3, stride=2, output_padding=2)\nFlatten()\n", "line 1: "},
    {"Flatten()\nReLU()\n", "no module with parameters"},
};

/* What each bad file's message must also say, beyond its line. */
static const char *const bad_detail[] = {
    "(known: Conv2d",
    "Conv2d has no argument 'bogus'",
    "Conv2d's 'kernel_size' is given twice",
    "Linear needs 'out_features'",
    "Conv2d's 'kernel_size' must be an integer >= 1",
    "Linear's 'in_features' must be an integer >= 1",
    "Conv2d's 'kernel_size' must be an integer >= 1",
    "missing ')'",
    "unexpected text after ')'",
    "",
    "",
    "put Flatten() before it",
    "add Flatten() and a Linear",
    "",
    "",
    "a window of 29 does not fit an input of 28",
    "a window of 25 does not fit an input of 24",
    "Dropout's 'p' must be a number in [0, 1]",
    "in_channels (1) and out_channels (6) must be divisible by groups (3)",
    "padding='same' is not supported for strided convolutions",
    "output_padding must be smaller than the stride",
    "",
};

static void test_bad_files(void **state)
{
    (void)state;
    _Static_assert(sizeof bad_files / sizeof bad_files[0] ==
                       sizeof bad_detail / sizeof bad_detail[0],
                   "one detail per bad file");
    for (size_t i = 0; i < sizeof bad_files / sizeof bad_files[0]; i++) {
        dp_model_def *def = NULL;
        last_log[0] = '\0';
        int rc = dp_model_def_parse(&def, bad_files[i].text, "bad.txt", NULL);
        char want[256];
        snprintf(want, sizeof want, "bad.txt: %s", bad_files[i].message);
        if (rc != DP_EFORMAT)
            fail_msg("bad file %zu: %d, expected DP_EFORMAT; log \"%s\"", i, rc, last_log);
        if (strncmp(last_log, want, strlen(want)) != 0 || !strstr(last_log, bad_detail[i]))
            fail_msg("bad file %zu: \"%s\" does not start with \"%s\" or lacks \"%s\"", i, last_log,
                     want, bad_detail[i]);
        if (strchr(last_log, '\n'))
            fail_msg("bad file %zu: message of more than one line: \"%s\"", i, last_log);
        printf("refused: %s\n", last_log);
    }
}

/* The parsed LeNet's forward and the same layers called one by one. */
static void test_forward_equals_hand_written(void **state)
{
    (void)state;
    dp_model_def *def;
    assert_int_equal(dp_model_def_parse(&def, lenet_spellings[0], "lenet.txt", NULL), 0);
    dp_model_t *m;
    assert_int_equal(dp_model_init(&m, def, cpu, 11), 0);
    enum { N = 3 };
    float images[N * 28 * 28];
    dp_rng rng;
    dp_rng_init(&rng, 5, 0);
    for (int i = 0; i < N * 28 * 28; i++)
        images[i] = dp_rng_uniform(&rng);
    int64_t xs[4] = {N, 1, 28, 28};
    dp_tensor_t *x;
    assert_int_equal(dp_tensor_from_host(&x, cpu, DP_F32, 4, xs, images), 0);
    dp_tape_t *tape;
    assert_int_equal(dp_tape_init(&tape, false), 0);
    dp_tape_begin(tape);
    dp_tensor_t *parsed, *h;
    assert_int_equal(dp_model_forward(m, x, false, &parsed), 0);

    dp_params_t *P = dp_model_params(m);
    dp_tensor_t *w[10];
    for (int i = 0; i < 10; i++)
        w[i] = dp_params_get(P, i);
    dp_conv2d_params pad2 = {.stride_h = 1, .stride_w = 1, .pad_h = 2, .pad_w = 2};
    dp_conv2d_params nopad = {.stride_h = 1, .stride_w = 1};
    dp_pool2d_params pool = {.kernel_h = 2, .kernel_w = 2, .stride_h = 2, .stride_w = 2};
    assert_int_equal(dp_conv2d(&h, x, w[0], w[1], &pad2), 0);
    assert_int_equal(dp_sigmoid(&h, h), 0);
    assert_int_equal(dp_avg_pool2d(&h, h, &pool), 0);
    assert_int_equal(dp_conv2d(&h, h, w[2], w[3], &nopad), 0);
    assert_int_equal(dp_sigmoid(&h, h), 0);
    assert_int_equal(dp_avg_pool2d(&h, h, &pool), 0);
    assert_int_equal(dp_flatten(&h, h), 0);
    assert_int_equal(dp_linear(&h, h, w[4], w[5], DP_WEIGHT_OUT_IN), 0);
    assert_int_equal(dp_sigmoid(&h, h), 0);
    assert_int_equal(dp_linear(&h, h, w[6], w[7], DP_WEIGHT_OUT_IN), 0);
    assert_int_equal(dp_sigmoid(&h, h), 0);
    assert_int_equal(dp_linear(&h, h, w[8], w[9], DP_WEIGHT_OUT_IN), 0);

    float a[N * 10], b[N * 10];
    assert_int_equal(dp_tensor_ndim(parsed), 2);
    assert_int_equal(dp_tensor_dim(parsed, 0), N);
    assert_int_equal(dp_tensor_dim(parsed, 1), 10);
    assert_int_equal(dp_tensor_to_host(parsed, a, sizeof a), 0);
    assert_int_equal(dp_tensor_to_host(h, b, sizeof b), 0);
    dp_tape_end(tape);
    dp_tape_reset(tape);
    dp_tape_close(tape);
    double spread = 0;
    for (int i = 0; i < N * 10; i++) {
        if (memcmp(&a[i], &b[i], sizeof a[i]) != 0)
            fail_msg("logit %d: parsed %.9g, by hand %.9g", i, (double)a[i], (double)b[i]);
        spread = tu_worst_diff(spread, a[i], a[0], "logits", i);
    }
    assert_true(spread > 0); /* not a constant output */
    printf("parsed forward = hand-written forward on %d logits, first %.6f\n", N * 10,
           (double)a[0]);
    dp_tensor_free(x);
    dp_model_close(m);
    dp_model_def_free(def);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lenet_names_shapes_count),
        cmocka_unit_test(test_batch_norm_buffers),
        cmocka_unit_test(test_default_init),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_forward_equals_hand_written),
    };
    return tu_run(argc, argv, tests, group_setup, group_teardown);
}
