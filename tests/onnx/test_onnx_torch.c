/* Networks as PyTorch itself exports them: tests/onnx/onnx_torch_models.py has
 * torch.onnx.export (Debian's python3-torch, torchvision's models with
 * random weights and batch norm statistics) write each model, a batch of
 * inputs and PyTorch's eval-mode outputs for it; dptrain loads the file as
 * `--model FILE.onnx` loads it and must give those outputs within 1e-4 of
 * their largest magnitude. A model exported in training mode keeps the
 * state_dict's names: dptrain's parameters must be exactly those, with
 * their shapes (a checkpoint then loads strictly into PyTorch). Skipped,
 * visibly, without torch, torchvision and onnx in /usr/bin/python3, except
 * under DP_REQUIRE_TORCH=1 (make test-interop). */
#include "onnxutil.h"

#include "gradcheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The models of this program, by the script's names. */
static const char *const models[] = {
    "mobilenet_v2", "resnet18",  "regnet_x_400mf",     "squeezenet1_0",   "squeezenet1_1",
    "densenet121",  "googlenet", "mobilenet_v3_small", "efficientnet_b0", "mobilenet_v3_small17",
    "prelu_train",  "gelu",      "avgpool_pad",        "bn_cnn_train",    "scalars",
};

static bool have_torch(void)
{
    return system("/usr/bin/python3 -c 'import torch, torchvision, onnx' >/dev/null 2>&1") == 0;
}

static float *read_floats(const char *path, int64_t n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    float *v = malloc((size_t)n * sizeof *v);
    assert_non_null(v);
    assert_int_equal(fread(v, sizeof *v, (size_t)n, f), (size_t)n);
    fclose(f);
    return v;
}

/* shape.txt's two lines: the input's dims and the output's. */
static void read_shapes(const char *path, int64_t *in, int *in_rank, int64_t *out, int *out_rank)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[256];
    for (int which = 0; which < 2; which++) {
        assert_non_null(fgets(line, sizeof line, f));
        int64_t *s = which ? out : in;
        int *r = which ? out_rank : in_rank;
        *r = 0;
        for (char *p = strtok(line, " \n"); p && *r < 4; p = strtok(NULL, " \n"))
            s[(*r)++] = strtoll(p, NULL, 10);
    }
    fclose(f);
}

/* params.txt: dptrain's parameters are these names and shapes, each once. */
static void check_names(const dp_model_def *def, const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        char *name = strtok(line, " \n");
        int64_t shape[4];
        int rank = 0;
        for (char *p = strtok(NULL, " \n"); p && rank < 4; p = strtok(NULL, " \n"))
            shape[rank++] = strtoll(p, NULL, 10);
        int i = 0;
        while (i < def->nparams && strcmp(def->params[i].name, name) != 0)
            i++;
        if (i == def->nparams)
            fail_msg("PyTorch's parameter '%s' is not among dptrain's", name);
        assert_int_equal(def->params[i].ndim, rank);
        for (int d = 0; d < rank; d++)
            assert_int_equal(def->params[i].shape[d], shape[d]);
        n++;
    }
    fclose(f);
    printf("  the %d parameters are PyTorch's state_dict names and shapes\n", n);
    assert_int_equal(def->nparams, n);
}

static void check_model(dp_device_t *dev, const char *dir, const char *name)
{
    char path[1024];
    int64_t in[4], out[4];
    int in_rank, out_rank;
    snprintf(path, sizeof path, "%s/%s/shape.txt", dir, name);
    read_shapes(path, in, &in_rank, out, &out_rank);
    assert_int_equal(in_rank, 4);
    snprintf(path, sizeof path, "%s/%s/model.onnx", dir, name);
    dp_model_def *def = NULL;
    int rc = dp_model_def_load_onnx(&def, path, in + 1);
    if (rc < 0)
        fail_msg("%s: refused: %s", name, dp_last_error());
    snprintf(path, sizeof path, "%s/%s/params.txt", dir, name);
    FILE *probe = fopen(path, "r");
    if (probe) {
        fclose(probe);
        check_names(def, path);
    }
    dp_model_t *m;
    OK(dp_model_init(&m, def, dev, 1));
    int64_t nin = count(4, in), nout = count(out_rank, out);
    snprintf(path, sizeof path, "%s/%s/input.bin", dir, name);
    float *xv = read_floats(path, nin);
    snprintf(path, sizeof path, "%s/%s/output.bin", dir, name);
    float *want = read_floats(path, nout);
    dp_tensor_t *x;
    OK(dp_tensor_from_host(&x, dev, DP_F32, 4, in, xv));
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    dp_tensor_t *y;
    OK(dp_model_forward(m, x, false, &y));
    assert_int_equal(dp_tensor_ndim(y), out_rank);
    for (int d = 0; d < out_rank; d++)
        assert_int_equal(dp_tensor_dim(y, d), out[d]);
    float *got = malloc((size_t)nout * sizeof *got);
    OK(dp_tensor_to_host(y, got, (size_t)nout * sizeof *got));
    double worst = tu_max_diff(name, got, want, nout), scale = tu_max_abs(name, want, nout);
    printf("%-22s %d parameter tensors, output [%lld, %lld]: largest difference %.3g, %.3g of "
           "the largest output %.3g\n",
           name, def->nparams, (long long)out[0], (long long)out[1], worst, worst / scale, scale);
    assert_true(scale > 0 && worst <= 1e-4 * scale);
    dp_tape_end(tape);
    dp_tape_reset(tape);
    dp_tape_close(tape);
    dp_tensor_free(x);
    free(xv);
    free(want);
    free(got);
    dp_model_close(m);
    dp_model_def_free(def);
}

static void test_torch_exports(void **state)
{
    (void)state;
    if (!have_torch()) {
        const char *require = getenv("DP_REQUIRE_TORCH");
        if (require && require[0] == '1')
            fail_msg("/usr/bin/python3 cannot import torch, torchvision and onnx");
        tu_skip("torch, torchvision or onnx is missing in /usr/bin/python3 (make test-interop "
                "installs them)");
    }
    const char *src = getenv("DP_SOURCE_DIR");
    char cmd[4096];
    int off = snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/onnx/onnx_torch_models.py %s",
                       src ? src : "..", tu_tmp);
    for (size_t i = 0; i < COUNTOF(models); i++)
        off += snprintf(cmd + off, sizeof cmd - (size_t)off, " %s", models[i]);
    assert_int_equal(system(cmd), 0);
    dp_device_t *dev;
    OK(dp_device_open(&dev, "cpu:0", 0));
    for (size_t i = 0; i < COUNTOF(models); i++)
        check_model(dev, tu_tmp, models[i]);
    dp_device_close(dev);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_torch_exports, tu_setup_tmp, tu_teardown_tmp),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
