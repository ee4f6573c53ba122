/* dp_model_export_onnx of the built-in resnet18 and of an nn.Sequential
 * file holding every module dptrain reads (grouped, dilated and 'same'
 * convolutions, ConvTranspose2d, PReLU per channel and shared, pools with
 * ceil_mode and count_include_pad=False, the activations, Softmax,
 * LogSoftmax, batch norm 1-D and 2-D): with random weights and running
 * statistics, the file loads back through the ONNX loader and gives the
 * same eval outputs (within 1e-6 of the largest), with the parameters'
 * names and shapes the model had. tests/onnx/cli_onnx_export.sh runs
 * onnx.checker on such files. */
#include "onnxutil.h"

#include "gradcheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char every_module[] =
    "Conv2d(3, 8, 3, padding=1)\n"
    "BatchNorm2d(8)\n"
    "PReLU(8)\n"
    "Conv2d(8, 8, 3, groups=4, dilation=2, padding='same')\n"
    "ReLU6()\n"
    "MaxPool2d(3, 2, padding=1, dilation=2, ceil_mode=True)\n"
    "Conv2d(8, 8, (3, 1), padding=(1, 0), bias=False)\n"
    "Hardswish()\n"
    "AvgPool2d(2, ceil_mode=True, count_include_pad=False)\n"
    "ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)\n"
    "ELU()\n"
    "AvgPool2d(3, stride=1, padding=1)\n"
    "Conv2d(4, 8, 3, stride=2)\n"
    "SELU()\n"
    "Hardsigmoid()\n"
    "LeakyReLU(0.1)\n"
    "GELU()\n"
    "SiLU()\n"
    "Sigmoid()\n"
    "Tanh()\n"
    "Softmax(dim=1)\n"
    "AdaptiveAvgPool2d(1)\n"
    "Flatten()\n"
    "Linear(8, 16)\n"
    "BatchNorm1d(16)\n"
    "PReLU()\n"
    "Dropout(0.2)\n"
    "ReLU()\n"
    "Linear(16, 10)\n"
    "LogSoftmax(dim=1)\n";

static const int64_t chw[3] = {3, 16, 16};

/* Random values for m's parameters (in +- scale) and buffers (running means
 * around 0, variances in [0.5, 1.5]), so that no batch norm is the
 * identity. */
static void randomize(dp_model_t *m, uint64_t seed, float scale)
{
    dp_params_t *sets[2] = {dp_model_params(m), dp_model_buffers(m)};
    const dp_model_def *def = dp_model_definition(m);
    for (int s = 0; s < 2; s++) {
        int64_t n = dp_params_numel(sets[s]);
        if (n == 0)
            continue;
        float *v = malloc((size_t)n * sizeof *v);
        ou_fill(seed + (uint64_t)s, v, n, s == 0 ? scale : 0.5f, 0.0f);
        int64_t off = 0;
        for (int i = 0; s == 1 && i < def->nbuffers; i++) {
            int64_t k = count(def->buffers[i].ndim, def->buffers[i].shape);
            const char *name = def->buffers[i].name;
            if (strstr(name, "running_var"))
                for (int64_t j = 0; j < k; j++)
                    v[off + j] += 1.0f;
            off += k;
        }
        OK(dp_params_set(sets[s], v));
        free(v);
    }
}

static float *eval(dp_model_t *m, dp_tensor_t *x, int64_t *n)
{
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    dp_tensor_t *y;
    OK(dp_model_forward(m, x, false, &y));
    *n = dp_tensor_numel(y);
    float *v = malloc((size_t)*n * sizeof *v);
    OK(dp_tensor_to_host(y, v, (size_t)*n * sizeof *v));
    dp_tape_end(tape);
    dp_tape_reset(tape);
    dp_tape_close(tape);
    return v;
}

/* m exported to `file`, loaded back: the same outputs on x, the same
 * parameter names and shapes. */
static void round_trip(dp_model_t *m, const char *what, const char *file)
{
    int64_t xs[4] = {3, chw[0], chw[1], chw[2]}, nx = count(4, xs);
    float *xv = malloc((size_t)nx * sizeof *xv);
    ou_fill(77, xv, nx, 2.0f, 0.0f);
    dp_tensor_t *x = upload(4, xs, xv);
    int64_t n, nb;
    float *want = eval(m, x, &n);
    const char *path = tu_tmp_path(file);
    OK(dp_model_export_onnx(m, chw, path));
    dp_model_def *back;
    OK(dp_model_def_load_onnx(&back, path, chw));
    const dp_model_def *def = dp_model_definition(m);
    assert_int_equal(back->nparams, def->nparams);
    for (int i = 0; i < def->nparams; i++) {
        assert_string_equal(back->params[i].name, def->params[i].name);
        assert_int_equal(back->params[i].ndim, def->params[i].ndim);
        for (int d = 0; d < def->params[i].ndim; d++)
            assert_int_equal(back->params[i].shape[d], def->params[i].shape[d]);
    }
    dp_model_t *mb;
    OK(dp_model_init(&mb, back, gc_dev, 1));
    float *got = eval(mb, x, &nb);
    assert_int_equal(nb, n);
    double big = tu_max_abs(what, want, n), diff = tu_max_diff(what, want, got, n);
    printf("%-40s %d parameters by their names, %lld outputs: largest difference %.3g, %.3g of "
           "the largest %.3g\n",
           what, def->nparams, (long long)n, diff, diff / big, big);
    assert_true(big > 0);
    assert_true(diff <= 1e-6 * big);
    free(want), free(got), free(xv);
    dp_tensor_free(x);
    dp_model_close(mb);
    dp_model_def_free(back);
}

static void test_export_resnet18(void **state)
{
    (void)state;
    const dp_model_def *def;
    OK(dp_model_builtin(&def, "resnet18", chw));
    dp_model_t *m;
    OK(dp_model_init(&m, def, gc_dev, 5));
    randomize(m, 5, 0.1f);
    round_trip(m, "resnet18", "resnet18.onnx");
    dp_model_close(m);
}

static void test_export_every_module(void **state)
{
    (void)state;
    dp_model_def *def;
    OK(dp_model_def_parse(&def, every_module, "every.txt", chw));
    dp_model_t *m;
    OK(dp_model_init(&m, def, gc_dev, 6));
    randomize(m, 6, 0.5f);
    round_trip(m, "nn.Sequential of every module", "every.onnx");
    dp_model_close(m);
    dp_model_def_free(def);
}

/* AdaptiveAvgPool2d to more than one value has no ONNX operator dptrain
 * writes: refused in one line. */
static void test_export_refused(void **state)
{
    (void)state;
    dp_model_def *def;
    OK(dp_model_def_parse(&def, "Conv2d(3, 4, 3)\nAdaptiveAvgPool2d(2)\nFlatten()\nLinear(16, 2)\n",
                          "pool2.txt", chw));
    dp_model_t *m;
    OK(dp_model_init(&m, def, gc_dev, 1));
    ou_capture();
    assert_int_equal(dp_model_export_onnx(m, chw, tu_tmp_path("pool2.onnx")), DP_ENOTSUP);
    dp_log_set(NULL, NULL);
    printf("%s\n", ou_last_error);
    assert_non_null(strstr(ou_last_error, "AdaptiveAvgPool2d(2, 2)"));
    dp_model_close(m);
    dp_model_def_free(def);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_export_resnet18),
        cmocka_unit_test(test_export_every_module),
        cmocka_unit_test(test_export_refused),
    };
    return tu_run(argc, argv, tests, gc_open_device_and_tmp, gc_close_device_and_tmp);
}
