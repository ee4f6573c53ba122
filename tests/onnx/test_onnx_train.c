/* dptrain training ONNX graphs across devices.
 *
 * torchvision's ResNet-18 (onnxutil.c, 11.2M parameters, batch norm in
 * training mode) on 1x28x28 Fashion-MNIST, 20 SGD steps of 32 images with
 * momentum. Batch norm normalises each replica's shard (each micro-batch
 * in a pipeline) on its own, so a run is compared with the run that
 * normalises the same groups of images: a pipeline of one micro-batch with
 * one device, `mpirun -np 2` with one process of 2 devices, small gradient
 * buckets with one allreduce after the backward, a pipeline of 4
 * micro-batches with 4 devices (its weights; its running statistics take 4
 * updates a step), bf16 in a pipeline with bf16 on 1 device. Each within
 * MU_VS_ONE_PROCESS (max |difference| / max |param| over the checkpoints);
 * 2 devices against 1, which normalise different groups, differ by far
 * more, as they should.
 *
 * A residual CNN without batch norm trains on 2 devices, in a pipeline of
 * 4 micro-batches and under mpirun -np 2 as on 1 device. A graph where no
 * single tensor crosses between its nodes is refused by --pipeline, and
 * --stages inside a residual block by --stages, in one line. */
#include "mpiutil.h"
#include "onnxutil.h"

#include "dp/safetensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const int64_t chw[3] = {1, 28, 28};

/* 20 steps: 640 images, batch 32; later flags of mu_run's common ones win. */
#define ONNX_RUN(model)                                                                            \
    "--model", model, "--limit-train", "640", "--batch-size", "32", "--lr", "0.01",                \
        "--limit-test", "64"

typedef struct paths {
    char model[256], log[256], dir[128];
} paths;

static void skip_without_data(void)
{
    if (!tu_have_fashion_mnist())
        tu_skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
}

/* One directory and one model file for the whole group; a checkpoint two
 * tests compare with is trained once (run_once). */
static paths shared;

static int group_setup(void **state)
{
    if (mu_setup(state) != 0)
        return -1;
    char *dir = tu_tempdir("onnx_train");
    snprintf(shared.dir, sizeof shared.dir, "%s", dir);
    free(dir);
    snprintf(shared.model, sizeof shared.model, "%s/resnet18.onnx", shared.dir);
    snprintf(shared.log, sizeof shared.log, "%s/log", shared.dir);
    ou_model om;
    ou_resnet18(&om, 11, chw, 10);
    ou_write(&om, shared.model);
    ou_free(&om);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    return mu_sh("rm -rf '%s'", shared.dir) == 0 ? 0 : -1;
}

static void write_resnet(paths *p)
{
    *p = shared;
}

static const char *ck(const paths *p, const char *name)
{
    static char buf[4][300];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s.safetensors", p->dir, name);
    return buf[k];
}

/* max |a - b| / max |b| over the parameters and the optimizer's state
 * (momentum), not batch norm's running statistics. */
static double weight_diff(const char *a, const char *b)
{
    dp_safetensors_t *fa, *fb;
    assert_int_equal(dp_safetensors_open(&fa, a), 0);
    assert_int_equal(dp_safetensors_open(&fb, b), 0);
    double d = 0, scale = 0;
    int compared = 0;
    for (int i = 0; i < dp_safetensors_count(fa); i++) {
        dp_st_tensor ta, tb;
        assert_int_equal(dp_safetensors_get(fa, i, &ta), 0);
        if (ta.dtype != DP_ST_F32 || strstr(ta.name, ".running_"))
            continue;
        assert_int_equal(dp_safetensors_find(fb, ta.name, &tb), 0);
        assert_int_equal(ta.bytes, tb.bytes);
        int64_t n = (int64_t)(ta.bytes / sizeof(float));
        d = fmax(d, tu_max_diff(ta.name, ta.data, tb.data, n));
        scale = fmax(scale, tu_max_abs(ta.name, tb.data, n));
        compared++;
    }
    assert_true(compared > 62); /* 62 weights and biases, and the momentum */
    dp_safetensors_close(fa);
    dp_safetensors_close(fb);
    return d / scale;
}

/* How far the checkpoint's parameters are from the ONNX file's
 * initializers: max |ck - init| / max |ck|. */
static double moved_from_init(const char *path, const char *model)
{
    dp_model_def *def;
    dp_device_t *cpu;
    dp_model_t *m;
    assert_int_equal(dp_model_def_load_onnx(&def, model, chw), 0);
    assert_int_equal(dp_device_open(&cpu, "cpu:0", 1), 0);
    assert_int_equal(dp_model_init(&m, def, cpu, 0), 0);
    dp_safetensors_t *f;
    assert_int_equal(dp_safetensors_open(&f, path), 0);
    dp_params_t *P = dp_model_params(m);
    double d = 0, scale = 0;
    for (int i = 0; i < dp_params_count(P); i++) {
        dp_tensor_t *t = dp_params_get(P, i);
        int64_t n = dp_tensor_numel(t);
        float *v = malloc((size_t)n * sizeof *v);
        assert_non_null(v);
        assert_int_equal(dp_tensor_to_host(t, v, (size_t)n * sizeof *v), 0);
        dp_st_tensor st;
        assert_int_equal(dp_safetensors_find(f, dp_params_name(P, i), &st), 0);
        assert_int_equal(st.bytes, (size_t)n * sizeof *v);
        d = fmax(d, tu_max_diff(dp_params_name(P, i), st.data, v, n));
        scale = fmax(scale, tu_max_abs(dp_params_name(P, i), st.data, n));
        free(v);
    }
    dp_safetensors_close(f);
    dp_model_close(m);
    dp_device_close(cpu);
    dp_model_def_free(def);
    return d / scale;
}

static void run_ok(int ranks, const char *devices, const char *path, const char *const *extra,
                   const paths *p)
{
    double t = mu_now();
    assert_int_equal(mu_run(ranks, devices, path, NULL, extra, p->log), 0);
    printf("  %s: %.1f s\n", strrchr(path, '/') + 1, mu_now() - t);
}

/* run_ok, unless an earlier test of the group has written `path`. */
static void run_once(int ranks, const char *devices, const char *path, const char *const *extra,
                     const paths *p)
{
    if (access(path, R_OK) != 0)
        run_ok(ranks, devices, path, extra, p);
}

static void report(const char *what, double d, const char *vs)
{
    printf("%-44s vs %-26s max |difference| / max |param| = %.3g\n", what, vs, d);
}

static void test_devices_pipeline_buckets(void **state)
{
    (void)state;
    skip_without_data();
    paths p;
    write_resnet(&p);
    const char *base[] = {ONNX_RUN(p.model), NULL};
    const char *pipe1[] = {ONNX_RUN(p.model), "--pipeline", "2", "--micro-batches", "1", NULL};
    const char *nobucket[] = {ONNX_RUN(p.model), "--bucket-mb", "0", NULL};
    const char *small[] = {ONNX_RUN(p.model), "--bucket-mb", "1", NULL};
    run_once(0, "1", ck(&p, "one"), base, &p);
    run_ok(0, "2", ck(&p, "pipe1"), pipe1, &p);
    run_once(0, "2", ck(&p, "two"), nobucket, &p);
    run_ok(0, "2", ck(&p, "two_buckets"), small, &p);

    double d = mu_max_param_diff(ck(&p, "pipe1"), ck(&p, "one"));
    report("--pipeline 2 --micro-batches 1 (2 devices)", d, "1 device");
    tu_assert_at_most(d, MU_VS_ONE_PROCESS);
    d = mu_max_param_diff(ck(&p, "two_buckets"), ck(&p, "two"));
    report("2 devices, --bucket-mb 1", d, "2 devices, --bucket-mb 0");
    tu_assert_at_most(d, MU_VS_ONE_PROCESS);
    /* Each device's batch norm sees 16 images, not 32: not the same run. */
    d = mu_max_param_diff(ck(&p, "two"), ck(&p, "one"));
    report("2 devices (batch norm per shard)", d, "1 device");
    assert_true(d > 100 * MU_VS_ONE_PROCESS);
    d = moved_from_init(ck(&p, "one"), p.model);
    printf("1 device: the weights moved by %.3g (max |difference| / max |param|) from the "
           "graph's initializers\n",
           d);
    assert_true(d > 0.01);
}

static void test_mpi_ranks(void **state)
{
    (void)state;
    mu_skip_without_mpi();
    paths p;
    write_resnet(&p);
    const char *small[] = {ONNX_RUN(p.model), "--bucket-mb", "1", NULL};
    const char *nobucket[] = {ONNX_RUN(p.model), "--bucket-mb", "0", NULL};
    run_once(0, "2", ck(&p, "two"), nobucket, &p);
    run_ok(2, "1", ck(&p, "ranks"), small, &p);
    double d = mu_max_param_diff(ck(&p, "ranks"), ck(&p, "two"));
    report("mpirun -np 2, 1 device each, --bucket-mb 1", d, "1 process, 2 devices");
    tu_assert_at_most(d, MU_VS_ONE_PROCESS);
    assert_int_equal(mu_assert_same_non_float(ck(&p, "ranks"), ck(&p, "two")), 20);
}

/* A pipeline of 4 micro-batches normalises each quarter of a batch, as 4
 * devices do; it updates the running statistics 4 times a step (as
 * PyTorch would, a forward per micro-batch) where a replica of 4 devices
 * updates them once, so the weights and momentum are compared. Two steps:
 * the accumulation's order differs from the allreduce's, and in 20 steps
 * this ResNet's small batch norm groups (8 images, 1x1 in layer4) grow a
 * difference of float rounding to ~1e-2 whatever the layout. */
static void test_pipeline_micro_batches(void **state)
{
    (void)state;
    skip_without_data();
    paths p;
    write_resnet(&p);
    const char *four[] = {ONNX_RUN(p.model), "--limit-train", "64", NULL};
    const char *pipe4[] = {
        ONNX_RUN(p.model), "--limit-train", "64", "--pipeline", "2", "--micro-batches", "4", NULL};
    run_ok(0, "4", ck(&p, "four"), four, &p);
    run_ok(0, "2", ck(&p, "pipe4"), pipe4, &p);
    double d = weight_diff(ck(&p, "pipe4"), ck(&p, "four"));
    report("--pipeline 2 --micro-batches 4, 2 steps", d, "4 devices (weights)");
    tu_assert_at_most(d, MU_VS_ONE_PROCESS);
    d = mu_max_param_diff(ck(&p, "pipe4"), ck(&p, "four"));
    printf("  with the running statistics: %.3g\n", d);
    assert_true(d > 0.1);
}

/* x -> Flatten f -> Gemm a, Gemm b (both read f) -> Add(a, b): f and a
 * cross the cut between the Gemms, a and b the one before the Add. */
static void test_no_cut_refused(void **state)
{
    (void)state;
    skip_without_data();
    char path[256], log[256];
    snprintf(path, sizeof path, "%s/nocut.onnx", shared.dir);
    snprintf(log, sizeof log, "%s", shared.log);
    ou_model om;
    ou_begin(&om, 17);
    ou_input(&om, "x", 4, (const int64_t[]){-1, 1, 28, 28});
    static float w[10 * 784];
    for (int i = 0; i < 10 * 784; i++)
        w[i] = (float)(i % 7) * 0.01f;
    ou_init(&om, "a.weight", 2, (const int64_t[]){10, 784}, w);
    ou_init(&om, "b.weight", 2, (const int64_t[]){10, 784}, w);
    Onnx__NodeProto *n = ou_node(&om, "Flatten", "flat", "x", "f");
    ou_attr_int(&om, n, "axis", 1);
    n = ou_node(&om, "Gemm", "a", "f,a.weight", "ya");
    ou_attr_int(&om, n, "transB", 1);
    n = ou_node(&om, "Gemm", "b", "f,b.weight", "yb");
    ou_attr_int(&om, n, "transB", 1);
    ou_node(&om, "Add", "add", "ya,yb", "logits");
    ou_output(&om, "logits");
    ou_write(&om, path);
    ou_free(&om);
    const char *argv[] = {tu_dptrain,   "train", "--model",   path, "--devices",     "2",
                          "--pipeline", "2",     "--threads", "1",  "--limit-train", "64",
                          NULL};
    int rc = mu_wait_for(mu_start(argv, log), 60);
    char *out = mu_slurp(log);
    printf("exit %d: %s", rc, out);
    assert_int_equal(rc, 1);
    assert_int_equal(mu_count(out, "\n"), 1);
    assert_non_null(strstr(out, path));
    assert_non_null(strstr(out, "--pipeline 2 needs 1"));
    free(out);
}

/* bf16 as the bf16 tests bound it for built-ins (test_conv_choice.c): the
 * same run split otherwise within float32 data parallelism's 1e-5 of the
 * largest weight (here a pipeline of one micro-batch against 1 device),
 * and further than u = 2^-8 from float32, so that bf16 was not ignored.
 * Native bf16 where the CPU has it, else the reference path. */
static void test_bf16(void **state)
{
    (void)state;
    skip_without_data();
    paths p;
    write_resnet(&p);
    dp_device_t *cpu;
    assert_int_equal(dp_device_open(&cpu, "cpu:0", 1), 0);
    const char *precision = dp_device_has(cpu, DP_DEVICE_BF16_NATIVE) ? "bf16" : "bf16-reference";
    dp_device_close(cpu);
    const char *bf[] = {ONNX_RUN(p.model), "--precision", precision, NULL};
    const char *bf_pipe[] = {ONNX_RUN(p.model), "--precision", precision, "--pipeline", "2", NULL};
    const char *f32[] = {ONNX_RUN(p.model), NULL}; /* the float32 run of 1 device */
    run_ok(0, "1", ck(&p, "bf16"), bf, &p);
    run_ok(0, "2", ck(&p, "bf16_pipe"), bf_pipe, &p);
    run_once(0, "1", ck(&p, "one"), f32, &p);
    double d = mu_max_param_diff(ck(&p, "bf16_pipe"), ck(&p, "bf16"));
    char what[64];
    snprintf(what, sizeof what, "%s, --pipeline 2 (2 devices)", precision);
    report(what, d, "1 device");
    tu_assert_at_most(d, MU_VS_ONE_PROCESS);
    d = weight_diff(ck(&p, "bf16"), ck(&p, "one"));
    report(precision, d, "float32 (weights)");
    assert_true(d > 1.0 / 256);
    d = moved_from_init(ck(&p, "bf16"), p.model);
    printf("%s: the weights moved by %.3g from the graph's initializers\n", precision, d);
    assert_true(d > 0.01);
}

/* --stages names the layers of `dptrain model`: a stage may start after
 * a block's Add (row 10, its final ReLU), not inside the block (row 5). */
static void test_explicit_stages(void **state)
{
    (void)state;
    skip_without_data();
    paths p;
    write_resnet(&p);
    static const char *const lists[2] = {"0-4,5-68", "0-9,10-68"};
    for (int i = 0; i < 2; i++) {
        const char *argv[] = {
            tu_dptrain,     "train", "--model",      p.model,  "--devices",     "2",
            "--pipeline",   "2",     "--stages",     lists[i], "--limit-train", "64",
            "--limit-test", "32",    "--batch-size", "32",     "--threads",     "1",
            "--epochs",     "1",     "--progress",   "never",  "--verbose",     NULL};
        int rc = mu_wait_for(mu_start(argv, p.log), 60);
        char *out = mu_slurp(p.log);
        printf("--stages %s: exit %d\n%s", lists[i], rc, i == 0 ? out : "");
        if (i == 0) {
            assert_int_equal(rc, 1);
            assert_int_equal(mu_count(out, "\n"), 1);
            assert_non_null(strstr(
                out,
                "--stages 0-4,5-68: layer 5 cannot start a stage (it is inside a residual block"));
        } else {
            assert_int_equal(rc, 0);
            assert_non_null(strstr(out, "pipeline stage 1: layers 10-68 on cpu:1"));
        }
        free(out);
    }
}

/* Without batch norm every layout computes the same function of the whole
 * batch, and each equals 1 device: a residual CNN (Conv 1->8 3x3, ReLU,
 * Conv 8->8 3x3, Add of the ReLU's output and the second conv's, ReLU,
 * MaxPool 2, Flatten, Gemm 1568->10) on 2 devices, in 2 pipeline stages of
 * 4 micro-batches, and under mpirun -np 2, 20 steps each. Its rows: conv,
 * relu, conv, add, relu, max_pool2d, reshape, linear; a stage may start
 * at each but the Add (the first ReLU's output and the second conv's
 * cross there). */
static const char *write_residual(void)
{
    static char model[256];
    snprintf(model, sizeof model, "%s/residual.onnx", shared.dir);
    if (access(model, R_OK) == 0)
        return model;
    ou_model om;
    ou_begin(&om, 17);
    ou_input(&om, "input", 4, (const int64_t[]){-1, 1, 28, 28});
    static float w1[8 * 9], w2[8 * 8 * 9], fw[10 * 1568], fb[10];
    dp_rng rng;
    dp_rng_init(&rng, 9, 0);
    for (int i = 0; i < 8 * 9; i++)
        w1[i] = (dp_rng_uniform(&rng) - 0.5f) * 0.6f;
    for (int i = 0; i < 8 * 8 * 9; i++)
        w2[i] = (dp_rng_uniform(&rng) - 0.5f) * 0.2f;
    for (int i = 0; i < 10 * 1568; i++)
        fw[i] = (dp_rng_uniform(&rng) - 0.5f) * 0.05f;
    for (int i = 0; i < 10; i++)
        fb[i] = (dp_rng_uniform(&rng) - 0.5f) * 0.05f;
    ou_init(&om, "conv1.weight", 4, (const int64_t[]){8, 1, 3, 3}, w1);
    ou_init(&om, "conv2.weight", 4, (const int64_t[]){8, 8, 3, 3}, w2);
    ou_init(&om, "fc.weight", 2, (const int64_t[]){10, 1568}, fw);
    ou_init(&om, "fc.bias", 1, (const int64_t[]){10}, fb);
    for (int k = 0; k < 2; k++) {
        Onnx__NodeProto *n = ou_node(&om, "Conv", k ? "conv2" : "conv1",
                                     k ? "r1,conv2.weight" : "input,conv1.weight", k ? "c2" : "c1");
        ou_attr_ints(&om, n, "kernel_shape", 2, (const int64_t[]){3, 3});
        ou_attr_ints(&om, n, "pads", 4, (const int64_t[]){1, 1, 1, 1});
        if (!k)
            ou_node(&om, "Relu", "relu1", "c1", "r1");
    }
    ou_node(&om, "Add", "add", "r1,c2", "s");
    ou_node(&om, "Relu", "relu2", "s", "r2");
    Onnx__NodeProto *n = ou_node(&om, "MaxPool", "pool", "r2", "p");
    ou_attr_ints(&om, n, "kernel_shape", 2, (const int64_t[]){2, 2});
    ou_attr_ints(&om, n, "strides", 2, (const int64_t[]){2, 2});
    n = ou_node(&om, "Flatten", "flatten", "p", "f");
    ou_attr_int(&om, n, "axis", 1);
    n = ou_node(&om, "Gemm", "fc", "f,fc.weight,fc.bias", "logits");
    ou_attr_int(&om, n, "transB", 1);
    ou_output(&om, "logits");
    ou_write(&om, model);
    ou_free(&om);
    return model;
}

static void test_no_batch_norm_equals_one_device(void **state)
{
    (void)state;
    skip_without_data();
    const char *model = write_residual();
    paths p = shared;
    const char *base[] = {ONNX_RUN(model), "--lr", "0.05", NULL};
    const char *pipe4[] = {ONNX_RUN(model),   "--lr", "0.05", "--pipeline", "2",
                           "--micro-batches", "4",    NULL};
    dp_model_def *def;
    assert_int_equal(dp_model_def_load_onnx(&def, model, chw), 0);
    dp_layer_summary *rows;
    int n;
    assert_int_equal(dp_model_summary(def, chw, &rows, &n), 0);
    assert_int_equal(n, 8);
    for (int i = 0; i < n; i++)
        if (rows[i].can_start != (i != 3))
            fail_msg("row %d (%s): a stage may%s start there", i, rows[i].op,
                     rows[i].can_start ? "" : " not");
    assert_string_equal(rows[3].op, "add");
    free(rows);
    dp_model_def_free(def);
    run_once(0, "1", ck(&p, "res_one"), base, &p);
    run_ok(0, "2", ck(&p, "res_two"), base, &p);
    run_ok(0, "2", ck(&p, "res_pipe4"), pipe4, &p);
    double d = mu_max_param_diff(ck(&p, "res_two"), ck(&p, "res_one"));
    report("residual CNN, 2 devices", d, "1 device");
    tu_assert_at_most(d, MU_VS_ONE_PROCESS);
    d = mu_max_param_diff(ck(&p, "res_pipe4"), ck(&p, "res_one"));
    report("residual CNN, --pipeline 2 --micro-batches 4", d, "1 device");
    tu_assert_at_most(d, MU_VS_ONE_PROCESS);
    d = moved_from_init(ck(&p, "res_one"), model);
    printf("residual CNN, 1 device: the weights moved by %.3g from the initializers\n", d);
    assert_true(d > 0.01);
}

static void test_no_batch_norm_ranks(void **state)
{
    (void)state;
    mu_skip_without_mpi();
    const char *model = write_residual();
    paths p = shared;
    const char *base[] = {ONNX_RUN(model), "--lr", "0.05", NULL};
    const char *small[] = {ONNX_RUN(model), "--lr", "0.05", "--bucket-mb", "0.01", NULL};
    run_once(0, "1", ck(&p, "res_one"), base, &p);
    run_ok(2, "1", ck(&p, "res_ranks"), small, &p);
    double d = mu_max_param_diff(ck(&p, "res_ranks"), ck(&p, "res_one"));
    report("residual CNN, mpirun -np 2, --bucket-mb 0.01", d, "1 device");
    tu_assert_at_most(d, MU_VS_ONE_PROCESS);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_devices_pipeline_buckets),
        cmocka_unit_test(test_mpi_ranks),
        cmocka_unit_test(test_pipeline_micro_batches),
        cmocka_unit_test(test_no_cut_refused),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_explicit_stages),
        cmocka_unit_test(test_no_batch_norm_equals_one_device),
        cmocka_unit_test(test_no_batch_norm_ranks),
    };
    return tu_run(argc, argv, tests, group_setup, group_teardown);
}
