/* ONNX models as model definitions: a Conv-BN-ReLU-MaxPool-Flatten-Gemm
 * graph written with protobuf-c's messages (onnxutil.c, as
 * torch.onnx.export writes nn.Sequential's in training mode) loads with
 * the initializers' names and values, runs forward (eval and training)
 * and trains step for step as the same nn.Sequential file with the same
 * weights, a Flatten written as a shape chain gives the same at any batch
 * size, and dp_model_export_onnx writes graphs that load back to the same
 * outputs. */
#include "onnxutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OK(x) assert_int_equal((x), 0)

static dp_device_t *cpu;
static const int64_t chw[3] = {1, 8, 8};

static int setup(void **state)
{
    tu_setup_tmp(state);
    return dp_device_open(&cpu, "cpu:0", 1);
}

static int teardown(void **state)
{
    dp_device_close(cpu);
    return tu_teardown_tmp(state);
}

static dp_model_def *load_net(const char *file, uint64_t seed, bool chain)
{
    ou_model om;
    ou_test_net(&om, seed, chain);
    const char *path = tu_tmp_path(file);
    ou_write(&om, path);
    ou_free(&om);
    dp_model_def *def = NULL;
    OK(dp_model_def_load_onnx(&def, path, chw));
    return def;
}

static float *values(dp_params_t *p)
{
    float *v = malloc((size_t)dp_params_numel(p) * sizeof *v);
    assert_non_null(v);
    OK(dp_params_get_all(p, v));
    return v;
}

/* Parameters named and ordered as the state_dict, buffers and the batch
 * norm layer's name; a model starts from the initializers whatever its
 * seed. */
static void test_names_and_values(void **state)
{
    (void)state;
    dp_model_def *def = load_net("net.onnx", 1, false);
    static const char *const params[] = {"0.weight", "0.bias",   "1.weight",
                                         "1.bias",   "5.weight", "5.bias"};
    assert_int_equal(def->nparams, 6);
    for (int i = 0; i < 6; i++)
        assert_string_equal(def->params[i].name, params[i]);
    assert_int_equal(def->nbuffers, 2);
    assert_string_equal(def->buffers[0].name, "1.running_mean");
    assert_string_equal(def->buffers[1].name, "1.running_var");
    assert_int_equal(def->nbn, 1);
    assert_string_equal(def->bn_names[0], "1");
    dp_model_t *a, *b;
    OK(dp_model_init(&a, def, cpu, 1));
    OK(dp_model_init(&b, def, cpu, 99));
    float *va = values(dp_model_params(a)), *vb = values(dp_model_params(b));
    int64_t n = dp_params_numel(dp_model_params(a));
    assert_int_equal(n, 36 + 4 + 4 + 4 + 192 + 3);
    assert_memory_equal(va, vb, (size_t)n * sizeof *va);
    assert_memory_equal(va, def->param_values, (size_t)n * sizeof *va);
    float *rb = values(dp_model_buffers(a));
    assert_memory_equal(rb, def->buffer_values, 8 * sizeof *rb);
    free(va);
    free(vb);
    free(rb);
    dp_model_close(a);
    dp_model_close(b);
    dp_model_def_free(def);
}

/* x (n, 1, 8, 8) and labels (n) of the fixed test batch. */
static void batch(int n, dp_tensor_t **x, dp_tensor_t **y)
{
    float *v = malloc((size_t)n * 64 * sizeof *v);
    int32_t *l = malloc((size_t)n * sizeof *l);
    assert_non_null(v);
    assert_non_null(l);
    for (int i = 0; i < n * 64; i++)
        v[i] = sinf(0.37f * (float)i) + 0.1f * (float)(i % 7);
    for (int i = 0; i < n; i++)
        l[i] = i % 3;
    int64_t xs[4] = {n, 1, 8, 8}, ns = n;
    OK(dp_tensor_from_host(x, cpu, DP_F32, 4, xs, v));
    OK(dp_tensor_from_host(y, cpu, DP_I32, 1, &ns, l));
    free(v);
    free(l);
}

/* Logits (n x 3) of a forward, eval or training. */
static void forward(dp_model_t *m, dp_tensor_t *x, bool train, float *out, int n)
{
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    dp_tensor_t *y;
    OK(dp_model_forward(m, x, train, &y));
    assert_int_equal(dp_tensor_dim(y, 0), n);
    assert_int_equal(dp_tensor_dim(y, 1), 3);
    OK(dp_tensor_to_host(y, out, (size_t)n * 3 * sizeof *out));
    dp_tape_end(tape);
    dp_tape_reset(tape);
    dp_tape_close(tape);
}

/* A model of the nn.Sequential text holding m's values. */
static dp_model_t *sequential_twin(dp_model_t *m, dp_model_def **def)
{
    OK(dp_model_def_parse(def, ou_test_net_text, "net.txt", chw));
    dp_model_t *s;
    OK(dp_model_init(&s, *def, cpu, 5));
    assert_int_equal(dp_params_numel(dp_model_params(s)), dp_params_numel(dp_model_params(m)));
    for (int i = 0; i < dp_params_count(dp_model_params(m)); i++)
        assert_string_equal(dp_params_name(dp_model_params(s), i),
                            dp_params_name(dp_model_params(m), i));
    float *v = values(dp_model_params(m)), *b = values(dp_model_buffers(m));
    OK(dp_params_set(dp_model_params(s), v));
    OK(dp_params_set(dp_model_buffers(s), b));
    free(v);
    free(b);
    return s;
}

static void train_steps(dp_model_t *m, dp_tensor_t *x, dp_tensor_t *y, int steps)
{
    dp_optimizer_t *sgd;
    dp_optimizer_options o = {.lr = 0.1f, .momentum = 0.9f};
    OK(dp_optimizer_init(&sgd, dp_model_params(m), &o));
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, true));
    for (int s = 0; s < steps; s++) {
        dp_tape_begin(tape);
        dp_tensor_t *logits, *loss;
        OK(dp_model_forward(m, x, true, &logits));
        OK(dp_cross_entropy(&loss, logits, y, DP_REDUCE_MEAN));
        dp_params_zero_grad(dp_model_params(m));
        OK(dp_backward(loss));
        OK(dp_params_finish_grad(dp_model_params(m)));
        OK(dp_optimizer_step(sgd, 1.0f));
        OK(dp_device_sync(cpu));
        dp_tape_end(tape);
        dp_tape_reset(tape);
    }
    dp_tape_close(tape);
    dp_optimizer_close(sgd);
}

/* The graph computes what the nn.Sequential file computes with the same
 * weights: forward in eval and in training mode, then 5 SGD steps with
 * momentum, batch norm's running statistics included. */
static void test_forward_and_training_match_sequential(void **state)
{
    (void)state;
    enum { N = 6 };
    dp_model_def *def = load_net("net.onnx", 2, false), *sdef;
    dp_model_t *m, *s;
    OK(dp_model_init(&m, def, cpu, 1));
    s = sequential_twin(m, &sdef);
    dp_tensor_t *x, *y;
    batch(N, &x, &y);
    float a[N * 3], b[N * 3];
    for (int train = 0; train < 2; train++) {
        forward(m, x, train, a, N);
        forward(s, x, train, b, N);
        printf("forward (%s): largest difference %g\n", train ? "training" : "eval",
               tu_max_diff("values", a, b, N * 3));
        assert_true(tu_max_diff("values", a, b, N * 3) <= 1e-6f);
    }
    train_steps(m, x, y, 5);
    train_steps(s, x, y, 5);
    float *pm = values(dp_model_params(m)), *ps = values(dp_model_params(s));
    float *bm = values(dp_model_buffers(m)), *bs = values(dp_model_buffers(s));
    float *p0 = (float *)def->param_values;
    int64_t n = dp_params_numel(dp_model_params(m));
    printf("after 5 steps: parameters differ by %g, running statistics by %g; moved by %g\n",
           tu_max_diff("values", pm, ps, n), tu_max_diff("values", bm, bs, 8),
           tu_max_diff("values", pm, p0, n));
    assert_true(tu_max_diff("values", pm, ps, n) <= 1e-6f);
    assert_true(tu_max_diff("values", bm, bs, 8) <= 1e-6f);
    assert_true(tu_max_diff("values", pm, p0, n) > 1e-3f);                 /* it trained */
    assert_true(tu_max_diff("values", bm, def->buffer_values, 8) > 1e-3f); /* and tracked */
    free(pm);
    free(ps);
    free(bm);
    free(bs);
    dp_tensor_free(x);
    dp_tensor_free(y);
    dp_model_close(m);
    dp_model_close(s);
    dp_model_def_free(def);
    dp_model_def_free(sdef);
}

/* x.view(x.size(0), -1) as Shape, Gather, Squeeze, Unsqueeze, Concat and
 * Reshape: computed on the host from this batch's shape, so batches of 1
 * and 7 give what Flatten gives. */
static void test_shape_chain_any_batch(void **state)
{
    (void)state;
    dp_model_def *flat = load_net("flat.onnx", 3, false), *chain = load_net("chain.onnx", 3, true);
    dp_model_t *mf, *mc;
    OK(dp_model_init(&mf, flat, cpu, 1));
    OK(dp_model_init(&mc, chain, cpu, 1));
    for (int n = 1; n <= 7; n += 6) {
        dp_tensor_t *x, *y;
        batch(n, &x, &y);
        float a[7 * 3], b[7 * 3];
        forward(mf, x, false, a, n);
        forward(mc, x, false, b, n);
        assert_memory_equal(a, b, (size_t)n * 3 * sizeof *a);
        dp_tensor_free(x);
        dp_tensor_free(y);
    }
    dp_model_close(mf);
    dp_model_close(mc);
    dp_model_def_free(flat);
    dp_model_def_free(chain);
}

/* Exported after training and loaded back: the same eval outputs, for the
 * imported graph and for the nn.Sequential file's own. */
static void test_export_loads_back(void **state)
{
    (void)state;
    enum { N = 5 };
    dp_model_def *def = load_net("net.onnx", 4, false), *sdef;
    dp_model_t *m, *s;
    OK(dp_model_init(&m, def, cpu, 1));
    dp_tensor_t *x, *y;
    batch(N, &x, &y);
    train_steps(m, x, y, 3);
    s = sequential_twin(m, &sdef);
    float want[N * 3], got[N * 3];
    forward(m, x, false, want, N);
    for (int which = 0; which < 2; which++) {
        const char *path = tu_tmp_path(which ? "seq_out.onnx" : "net_out.onnx");
        OK(dp_model_export_onnx(which ? s : m, chw, path));
        dp_model_def *back;
        OK(dp_model_def_load_onnx(&back, path, chw));
        dp_model_t *mb;
        OK(dp_model_init(&mb, back, cpu, 1));
        forward(mb, x, false, got, N);
        printf("%s export: largest difference %g\n", which ? "nn.Sequential" : "ONNX",
               tu_max_diff("values", want, got, N * 3));
        assert_true(tu_max_diff("values", want, got, N * 3) <= 1e-6f);
        dp_model_close(mb);
        dp_model_def_free(back);
    }
    dp_tensor_free(x);
    dp_tensor_free(y);
    dp_model_close(m);
    dp_model_close(s);
    dp_model_def_free(def);
    dp_model_def_free(sdef);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_values),
        cmocka_unit_test(test_forward_and_training_match_sequential),
        cmocka_unit_test(test_shape_chain_any_batch),
        cmocka_unit_test(test_export_loads_back),
    };
    return tu_run(argc, argv, tests, setup, teardown);
}
