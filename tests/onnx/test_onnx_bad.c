/* Bad ONNX files, each refused with one line that names the file (and the
 * node where there is one) and says what is wrong, never a crash: cut
 * short, not protobuf, an empty file, an opset dptrain does not read, an
 * operator it does not run, a node setting it does not run (a 3-D
 * window), a value no node gives (a missing initializer), a cycle, a
 * tensor claiming 2^31 elements in a small file, and an initializer whose
 * data live in an external file. The
 * same through `dptrain model`: one line on stderr and exit 1. */
#include "onnxutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static int setup(void **state)
{
    return tu_setup_tmp(state);
}

static int teardown(void **state)
{
    return tu_teardown_tmp(state);
}

/* Loading `bytes` must fail with one line starting with the path and
 * holding each of the words. */
static void refused(const char *file, const uint8_t *bytes, size_t n, const char *const *words)
{
    const char *path = tu_tmp_path(file);
    assert_int_equal(tu_write_file(path, bytes, n), 0);
    ou_capture();
    dp_model_def *def = NULL;
    int rc = dp_model_def_load_onnx(&def, path, NULL);
    dp_log_set(NULL, NULL);
    printf("%s: %s\n", file, ou_last_error);
    assert_true(rc < 0);
    assert_null(def);
    assert_int_equal(ou_errors, 1);
    assert_null(strchr(ou_last_error, '\n'));
    assert_int_equal(strncmp(ou_last_error, path, strlen(path)), 0);
    for (int i = 0; words[i]; i++)
        if (!strstr(ou_last_error, words[i]))
            fail_msg("'%s' is not in: %s", words[i], ou_last_error);
}

static void refused_model(const char *file, ou_model *m, const char *const *words)
{
    size_t n;
    uint8_t *bytes = ou_pack(m, &n);
    refused(file, bytes, n, words);
    free(bytes);
    ou_free(m);
}

static void test_truncated(void **state)
{
    (void)state;
    ou_model m;
    ou_test_net(&m, 1, false);
    size_t n;
    uint8_t *bytes = ou_pack(&m, &n);
    ou_free(&m);
    /* Everywhere in the graph: cuts inside it leave a length-delimited field
     * longer than what is left. */
    for (size_t cut = 8; cut < n; cut += n / 7)
        refused("cut.onnx", bytes, cut, WORDS("truncated or damaged"));
    free(bytes);
}

static void test_not_protobuf(void **state)
{
    (void)state;
    static const char text[] = "Conv2d(1, 6, kernel_size=5)\nReLU()\n";
    refused("text.onnx", (const uint8_t *)text, sizeof text - 1, WORDS("not an ONNX model"));
    refused("empty.onnx", (const uint8_t *)"", 0, WORDS("empty"));
    static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13};
    refused("png.onnx", png, sizeof png, WORDS("not an ONNX model"));
}

static void test_opset(void **state)
{
    (void)state;
    ou_model m;
    ou_test_net(&m, 1, false);
    m.opset.version = 18;
    refused_model("opset18.onnx", &m, WORDS("opset 18", "opsets 6 to 17"));
}

static void test_unknown_op(void **state)
{
    (void)state;
    ou_model m;
    ou_test_net(&m, 1, false);
    Onnx__NodeProto *relu = m.graph.node[2];
    relu->op_type = (char *)"NonMaxSuppression";
    refused_model("unknown.onnx", &m,
                  WORDS("node '/2/Relu' (NonMaxSuppression)", "not supported (opset 17)",
                        "supports Add, AveragePool, BatchNormalization"));
}

static void test_setting_to_come(void **state)
{
    (void)state;
    ou_model m;
    ou_test_net(&m, 1, false);
    ou_attr_ints(&m, m.graph.node[0], "strides", 3, (const int64_t[]){1, 1, 1});
    refused_model("conv3d.onnx", &m,
                  WORDS("node '/0/Conv' (Conv)", "strides has 3 values, not 2", "2-D ops only"));
}

static void test_missing_initializer(void **state)
{
    (void)state;
    ou_model m;
    ou_test_net(&m, 1, false);
    m.graph.n_initializer--; /* 5.bias */
    refused_model("missing.onnx", &m,
                  WORDS("node '/5/Gemm' (Gemm) reads '5.bias'", "no node, graph input or "
                                                                "initializer"));
}

static void test_cycle(void **state)
{
    (void)state;
    ou_model m;
    ou_begin(&m, 17);
    ou_input(&m, "x", 2, (const int64_t[]){-1, 4});
    ou_init(&m, "w", 2, (const int64_t[]){4, 4}, (const float[16]){0});
    ou_node(&m, "Add", "a", "x,c", "b");
    ou_node(&m, "Relu", "r", "b", "c");
    ou_output(&m, "c");
    refused_model("cycle.onnx", &m, WORDS("cycle", "(Add)"));
}

static void test_huge_claim(void **state)
{
    (void)state;
    ou_model m;
    ou_test_net(&m, 1, false);
    Onnx__TensorProto *w = m.graph.initializer[6]; /* 5.weight: 768 bytes */
    w->dims[0] = (int64_t)1 << 29;
    w->dims[1] = 4; /* 2^31 floats: 8 GiB */
    refused_model("huge.onnx", &m, WORDS("'5.weight' claims [536870912, 4]", "holds 192"));
}

static void test_external_data(void **state)
{
    (void)state;
    ou_model m;
    ou_test_net(&m, 1, false);
    Onnx__TensorProto *w = m.graph.initializer[0];
    static Onnx__StringStringEntryProto loc = ONNX__STRING_STRING_ENTRY_PROTO__INIT, *locs[1];
    loc.key = (char *)"location";
    loc.value = (char *)"weights.bin";
    locs[0] = &loc;
    w->has_raw_data = 0;
    w->has_data_location = 1;
    w->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    w->n_external_data = 1;
    w->external_data = locs;
    refused_model("external.onnx", &m, WORDS("'0.weight'", "external file"));
}

/* Through the command line: exit 1 and one line on stderr. */
static void test_cli_one_line(void **state)
{
    (void)state;
    if (tu_find_dptrain() != 0)
        tu_skip("no dptrain binary here");
    ou_model m;
    ou_test_net(&m, 1, false);
    m.graph.n_initializer--;
    const char *path = tu_tmp_path("cli.onnx");
    ou_write(&m, path);
    ou_free(&m);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s model %s 2>&1", tu_dptrain, path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char out[4096] = "";
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    printf("%s", out);
    assert_int_equal(WEXITSTATUS(status), 1);
    assert_non_null(strstr(out, "dptrain: error: "));
    assert_ptr_equal(strchr(out, '\n'), out + n - 1);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_truncated),       cmocka_unit_test(test_not_protobuf),
        cmocka_unit_test(test_opset),           cmocka_unit_test(test_unknown_op),
        cmocka_unit_test(test_setting_to_come), cmocka_unit_test(test_missing_initializer),
        cmocka_unit_test(test_cycle),           cmocka_unit_test(test_huge_claim),
        cmocka_unit_test(test_external_data),   cmocka_unit_test(test_cli_one_line),
    };
    return tu_run(argc, argv, tests, setup, teardown);
}
