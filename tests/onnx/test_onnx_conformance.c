/* Conformance against tests no one here wrote: every pytorch-converted and
 * pytorch-operator case of Debian's libonnx-testdata (ONNX's own backend
 * test data, models exported by PyTorch with their inputs and expected
 * outputs as TensorProto files) goes through dptrain's ONNX loader. A case
 * whose graph dptrain runs must match every expected output within 1e-4
 * relative (|got - want| <= 1e-4 |want| + 1e-5); a case it does not run
 * must be refused with one line naming the file, never a crash; the 47
 * cases whose ops and settings are all in the loader's list must run and
 * pass (inputs of doubles are read as floats; cases whose data are no
 * finite floats are refused). Prints a
 * line per case and the counts of cases ran, passed and refused by op
 * type. Skipped without libonnx-testdata, except under make test-interop
 * (DP_REQUIRE_ONNX_TESTDATA=1), which installs it. */
#include "testutil.h"

#include "dp/dp.h"
#include "onnx/onnx_model.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DATA "/usr/share/libonnx-testdata/data"

static char last_error[1024];
static int errors;

static void capture(dp_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level == DP_LOG_ERROR) {
        errors++;
        snprintf(last_error, sizeof last_error, "%s", msg);
    }
}

/* By op type: cases that hold it, ran, passed, refused. */
enum { MAX_OPS = 96 };
static struct {
    char op[32];
    int cases, ran, passed, refused;
} by_op[MAX_OPS];
static int nops;

static void count(const char *op, int ran, int passed, int refused)
{
    int i = 0;
    while (i < nops && strcmp(by_op[i].op, op) != 0)
        i++;
    if (i == nops && nops < MAX_OPS)
        snprintf(by_op[nops++].op, sizeof by_op[0].op, "%.31s", op);
    if (i < MAX_OPS) {
        by_op[i].cases++;
        by_op[i].ran += ran;
        by_op[i].passed += passed;
        by_op[i].refused += refused;
    }
}

static Onnx__TensorProto *read_tensor(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static uint8_t buf[1 << 24];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return onnx__tensor_proto__unpack(NULL, n, buf);
}

/* A float (or double, as pytorch-operator's cases hold them: dptrain
 * computes in float32, within the tolerance) tensor of the case's data as
 * a dptrain tensor, or NULL (why). */
static dp_tensor_t *to_device(dp_device_t *dev, const Onnx__TensorProto *t, const char **why)
{
    if (!dp__onnx_is_float(t) || t->n_dims < 1 || t->n_dims > DP_MAX_DIMS) {
        *why = "an input that is not a float tensor of 1 to 4 dimensions";
        return NULL;
    }
    int64_t n = dp__onnx_numel(t);
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    assert_non_null(v);
    dp__onnx_to_floats(t, v);
    for (int64_t i = 0; i < n; i++)
        if (isinf(v[i]) || isnan(v[i])) {
            /* some pytorch-operator cases hold uninitialised doubles */
            *why = "an input holding values that are no finite float (1e198, denormals)";
            free(v);
            return NULL;
        }
    dp_tensor_t *x = NULL;
    assert_int_equal(dp_tensor_from_host(&x, dev, DP_F32, (int)t->n_dims, t->dims, v), 0);
    free(v);
    return x;
}

/* Runs one case: 1 passed, 0 refused, -1 wrong. */
static int run_case(dp_device_t *dev, const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/model.onnx", dir, name);
    errors = 0;
    dp__onnx_graph *g = NULL;
    dp_log_set(capture, NULL);
    int rc = dp__onnx_load(&g, path, NULL);
    dp_log_set(NULL, NULL);
    if (rc < 0) {
        if (errors != 1 || strncmp(last_error, path, strlen(path)) != 0 || strchr(last_error, '\n'))
            fail_msg("%s: refused without one line naming the file: %s", name, last_error);
        printf("refused %s: %s\n", name, last_error + strlen(path) + 2);
        return 0;
    }
    dp_tensor_t *params[64] = {0}, *buffers[64] = {0}, *inputs[DP__ONNX_MAX_IO] = {0};
    dp_tensor_t *outputs[DP__ONNX_MAX_IO] = {0};
    assert_true(g->nparams <= 64 && g->nbuffers <= 64);
    const float *v = g->init_values;
    for (int i = 0; i < g->nparams + g->nbuffers; i++) {
        const dp_param_spec *s = i < g->nparams ? &g->params[i] : &g->buffers[i - g->nparams];
        dp_tensor_t **t = i < g->nparams ? &params[i] : &buffers[i - g->nparams];
        assert_int_equal(dp_tensor_from_host(t, dev, DP_F32, s->ndim, s->shape, v), 0);
        v += dp_tensor_numel(*t);
    }
    const char *why = NULL;
    int result = 1;
    for (int k = 0; k < g->ninputs && !why; k++) {
        snprintf(path, sizeof path, "%s/%s/test_data_set_0/input_%d.pb", dir, name, k);
        Onnx__TensorProto *t = read_tensor(path);
        assert_non_null(t);
        inputs[k] = to_device(dev, t, &why);
        onnx__tensor_proto__free_unpacked(t, NULL);
    }
    dp_tape_t *tape;
    assert_int_equal(dp_tape_init(&tape, false), 0);
    dp_tape_begin(tape);
    errors = 0;
    dp_log_set(capture, NULL);
    rc = why ? 0 : dp__onnx_run_graph(g, NULL, params, buffers, inputs, false, outputs);
    if (rc == 0 && !why)
        rc = dp_device_sync(dev);
    dp_log_set(NULL, NULL);
    if (why || rc < 0) {
        if (!why && errors < 1)
            fail_msg("%s: a failed run logged no error", name);
        printf("refused %s at run: %s\n", name, why ? why : last_error);
        result = 0;
    }
    for (int k = 0; result == 1 && k < g->noutputs; k++) {
        snprintf(path, sizeof path, "%s/%s/test_data_set_0/output_%d.pb", dir, name, k);
        Onnx__TensorProto *t = read_tensor(path);
        assert_non_null(t);
        int64_t n = dp__onnx_numel(t);
        bool same =
            dp_tensor_numel(outputs[k]) == n && dp_tensor_ndim(outputs[k]) == (int)t->n_dims;
        for (int d = 0; same && d < (int)t->n_dims; d++)
            same = dp_tensor_dim(outputs[k], d) == t->dims[d];
        float *want = malloc((size_t)(n ? n : 1) * sizeof *want);
        float *got = malloc((size_t)(n ? n : 1) * sizeof *got);
        assert_non_null(want);
        assert_non_null(got);
        dp__onnx_to_floats(t, want);
        double worst = 0;
        if (same) {
            assert_int_equal(dp_tensor_to_host(outputs[k], got, (size_t)n * sizeof *got), 0);
            for (int64_t i = 0; i < n; i++) {
                double tol = 1e-4 * fabs(want[i]) + 1e-5;
                if (!tu_close(got[i], want[i], 0, tol)) {
                    same = false; /* NaN and Inf included */
                    break;
                }
                worst = tu_worst_rel(worst, got[i], want[i], tol, "output", i);
            }
        }
        char gs[64];
        printf("%s %s output %d: %lld values, worst error %.3g of the tolerance%s%s\n",
               same ? "passed" : "FAILED", name, k, (long long)n, worst, same ? "" : "; dptrain's ",
               same ? "" : dp_tensor_shape_str(outputs[k], gs, sizeof gs));
        result = same ? 1 : -1;
        free(want);
        free(got);
        onnx__tensor_proto__free_unpacked(t, NULL);
    }
    dp_tape_end(tape);
    dp_tape_reset(tape);
    dp_tape_close(tape);
    for (int i = 0; i < 64; i++) {
        dp_tensor_free(params[i]);
        dp_tensor_free(buffers[i]);
    }
    for (int k = 0; k < DP__ONNX_MAX_IO; k++)
        dp_tensor_free(inputs[k]);
    dp__onnx_graph_free(g);
    return result;
}

/* The op types a case's graph holds, once each, into ops (", "-joined). */
static void case_ops(const char *model, char ops[][32], int *n)
{
    *n = 0;
    Onnx__ModelProto *m;
    dp_log_set(capture, NULL);
    int rc = dp__onnx_read(&m, model);
    dp_log_set(NULL, NULL);
    if (rc < 0)
        return;
    for (size_t i = 0; i < m->graph->n_node && *n < 16; i++) {
        int j = 0;
        while (j < *n && strcmp(ops[j], m->graph->node[i]->op_type) != 0)
            j++;
        if (j == *n)
            snprintf(ops[(*n)++], 32, "%.31s", m->graph->node[i]->op_type);
    }
    dp__onnx_free(m);
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_libonnx_testdata(void **state)
{
    (void)state;
    const char *require = getenv("DP_REQUIRE_ONNX_TESTDATA");
    DIR *probe = opendir(DATA "/pytorch-converted");
    if (!probe) {
        if (require && require[0] == '1')
            fail_msg("%s is missing (apt-get install libonnx-testdata)", DATA);
        tu_skip("libonnx-testdata is not installed (make test-interop installs it)");
    }
    closedir(probe);
    dp_device_t *dev;
    assert_int_equal(dp_device_open(&dev, "cpu:0", 0), 0);
    static const char *const sets[] = {"pytorch-converted", "pytorch-operator"};
    /* The cases whose every op and setting is in the loader's list: each
     * must run and pass (a refusal of one is a defect, not a count). */
    static const char *const must_pass[] = {"test_AvgPool2d",
                                            "test_AvgPool2d_stride",
                                            "test_BatchNorm1d_3d_input_eval",
                                            "test_BatchNorm2d_eval",
                                            "test_BatchNorm2d_momentum_eval",
                                            "test_Conv2d",
                                            "test_Conv2d_depthwise",
                                            "test_Conv2d_depthwise_padded",
                                            "test_Conv2d_depthwise_strided",
                                            "test_Conv2d_depthwise_with_multiplier",
                                            "test_Conv2d_dilated",
                                            "test_Conv2d_groups",
                                            "test_Conv2d_groups_thnn",
                                            "test_Conv2d_no_bias",
                                            "test_Conv2d_padding",
                                            "test_Conv2d_strided",
                                            "test_ConvTranspose2d",
                                            "test_ConvTranspose2d_no_bias",
                                            "test_ELU",
                                            "test_GLU",
                                            "test_GLU_dim",
                                            "test_LeakyReLU",
                                            "test_LeakyReLU_with_negval",
                                            "test_Linear",
                                            "test_Linear_no_bias",
                                            "test_LogSoftmax",
                                            "test_MaxPool2d",
                                            "test_MaxPool2d_stride_padding_dilation",
                                            "test_PReLU_1d",
                                            "test_PReLU_1d_multiparam",
                                            "test_PReLU_2d",
                                            "test_PReLU_2d_multiparam",
                                            "test_ReLU",
                                            "test_SELU",
                                            "test_Sigmoid",
                                            "test_Softmax",
                                            "test_Tanh",
                                            "test_log_softmax_dim3",
                                            "test_log_softmax_lastdim",
                                            "test_softmax_functional_dim3",
                                            "test_softmax_lastdim",
                                            "test_operator_addmm",
                                            "test_operator_chunk",
                                            "test_operator_clip",
                                            "test_operator_concat2",
                                            "test_operator_conv",
                                            "test_operator_convtranspose",
                                            "test_operator_flatten",
                                            "test_operator_mm",
                                            "test_operator_selu",
                                            "test_operator_view"};
    enum { NMUST = (int)COUNTOF(must_pass) };
    bool must_passed[NMUST] = {0};
    int ran = 0, passed = 0, refused = 0, wrong = 0;
    for (int s = 0; s < 2; s++) {
        char dir[512];
        snprintf(dir, sizeof dir, "%s/%s", DATA, sets[s]);
        DIR *d = opendir(dir);
        assert_non_null(d);
        char *names[512];
        int n = 0;
        for (struct dirent *e; (e = readdir(d)) && n < 512;)
            if (e->d_name[0] != '.')
                names[n++] = strdup(e->d_name);
        closedir(d);
        qsort(names, (size_t)n, sizeof *names, compare_names);
        for (int i = 0; i < n; i++) {
            int r = run_case(dev, dir, names[i]);
            char model[4096], ops[16][32];
            int nops_case;
            snprintf(model, sizeof model, "%s/%s/model.onnx", dir, names[i]);
            case_ops(model, ops, &nops_case);
            for (int k = 0; k < nops_case; k++)
                count(ops[k], r != 0, r == 1, r == 0);
            ran += r != 0;
            passed += r == 1;
            refused += r == 0;
            wrong += r < 0;
            for (int k = 0; k < NMUST; k++)
                if (strcmp(names[i], must_pass[k]) == 0)
                    must_passed[k] = r == 1;
            free(names[i]);
        }
    }
    printf("\nby op type: cases, ran, passed, refused\n");
    for (int i = 0; i < nops; i++)
        printf("  %-22s %3d %3d %3d %3d\n", by_op[i].op, by_op[i].cases, by_op[i].ran,
               by_op[i].passed, by_op[i].refused);
    printf("libonnx-testdata pytorch-converted and pytorch-operator: %d cases, %d ran, %d "
           "passed, %d refused by name\n",
           ran + refused, ran, passed, refused);
    dp_device_close(dev);
    assert_int_equal(wrong, 0);
    int missing = 0;
    for (int k = 0; k < NMUST; k++)
        if (!must_passed[k]) {
            printf("not passed: %s, whose ops the loader runs\n", must_pass[k]);
            missing++;
        }
    printf("%d cases of the loader's ops: %d passed\n", NMUST, NMUST - missing);
    assert_int_equal(missing, 0);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_libonnx_testdata),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
