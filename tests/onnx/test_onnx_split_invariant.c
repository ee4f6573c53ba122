/* The same ONNX ResNet-18 (torchvision's, onnxnets.c: 11.2M parameters,
 * batch norm in training mode) trained for 20 SGD steps of 32 Fashion-MNIST
 * images with momentum on 1 device, on 2 devices and under mpirun -np 2,
 * with --split-invariant 8 --sync-bn: the checkpoints (weights, momentum
 * and running statistics) agree within 1e-5 of the largest parameter; they
 * are in fact equal. Without --split-invariant, 2 devices with --sync-bn
 * normalise with the same statistics but sum the gradients in another
 * order, and 20 steps make that rounding large (printed, and asserted to be
 * more than 1e-5: the comparison can fail).
 *
 * "The same" is every tensor of the checkpoints, byte for byte: the
 * weights, the optimizer's momentum ("_state.") and batch norm's running
 * statistics and num_batches_tracked.
 *
 * A pipeline of 2 stages and 4 micro-batches normalises each micro-batch
 * on its own (GPipe's, and PyTorch's pipelining's, batch norm); with
 * --split-invariant it equals 1 device accumulating the same 4
 * micro-batches (--pipeline 1 --micro-batches 4) and 4 devices, a quarter
 * of the batch each (the naive allreduce's pairwise sums). The seed's
 * LeNet, without batch norm, pipelined equals 1 device on the whole
 * batch; and its split-invariant run is still the op's training: within
 * 1e-5 of the largest parameter of a plain run's (another summation
 * order), so that a blocked pass that computed something else on every
 * split alike fails. */
#include "mpiutil.h"
#include "onnxutil.h"

#include <stdio.h>
#include <stdlib.h>

static const int64_t chw[3] = {1, 28, 28};

/* 20 steps of 32; later flags of mu_run's common ones win (--threads 1). */
#define RUN(model)                                                                                 \
    "--model", model, "--limit-train", "640", "--batch-size", "32", "--lr", "0.01",                \
        "--limit-test", "64"

static char dir[128], model[256], log_path[256];

static int group_setup(void **state)
{
    if (mu_setup(state) != 0)
        return -1;
    char *d = tu_tempdir("onnx_split");
    snprintf(dir, sizeof dir, "%s", d);
    free(d);
    snprintf(model, sizeof model, "%s/resnet18.onnx", dir);
    snprintf(log_path, sizeof log_path, "%s/log", dir);
    ou_model om;
    ou_resnet18(&om, 11, chw, 10);
    ou_write(&om, model);
    ou_free(&om);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    return mu_sh("rm -rf '%s'", dir) == 0 ? 0 : -1;
}

static const char *ck(const char *name)
{
    static char buf[4][300];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s.safetensors", dir, name);
    return buf[k];
}

static void run(int ranks, const char *devices, const char *name, const char *const *extra)
{
    double t = mu_now();
    assert_int_equal(mu_run(ranks, devices, ck(name), NULL, extra, log_path), 0);
    printf("  %s: %.1f s\n", name, mu_now() - t);
}

/* The checkpoints' tensors, weights, momentum and running statistics:
 * within the 1e-5 of the largest, and in fact equal, byte for byte
 * (the flag's promise, which a kernel that picked another order for
 * another share would break by ~1e-8). */
static void report(const char *what, const char *a, const char *vs, const char *b)
{
    double d = mu_max_param_diff(ck(a), ck(b));
    printf("%-46s vs %-34s max |difference| / max |param| = %.3g\n", what, vs, d);
    tu_assert_at_most(d, MU_VS_ONE_PROCESS);
    tu_assert_same_tensors(ck(a), ck(b));
}

static void skip_without_data(void)
{
    if (!tu_have_fashion_mnist())
        tu_skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
}

static void devices_and_ranks(void **state)
{
    (void)state;
    skip_without_data();
    mu_skip_without_mpi();
    const char *si[] = {RUN(model), "--sync-bn", "--split-invariant", "8", NULL};
    const char *plain[] = {RUN(model), "--sync-bn", NULL};
    run(0, "1", "one", si);
    run(0, "2", "two", si);
    run(2, "1", "ranks", si);
    run(0, "2", "two_plain", plain);
    report("2 devices, --sync-bn --split-invariant 8", "two", "1 device, --split-invariant 8",
           "one");
    report("mpirun -np 2, --sync-bn --split-invariant 8", "ranks", "1 device, --split-invariant 8",
           "one");
    double d = mu_max_param_diff(ck("two_plain"), ck("one"));
    printf("%-46s vs %-34s max |difference| / max |param| = %.3g\n", "2 devices, --sync-bn",
           "1 device, --split-invariant 8", d);
    assert_true(d > MU_VS_ONE_PROCESS);
}

static void pipeline(void **state)
{
    (void)state;
    skip_without_data();
    const char *pipe[] = {RUN(model), "--pipeline",        "2", "--micro-batches",
                          "4",        "--split-invariant", "8", NULL};
    const char *accum[] = {RUN(model), "--pipeline",        "1", "--micro-batches",
                           "4",        "--split-invariant", "8", NULL};
    const char *four[] = {RUN(model), "--split-invariant", "8", NULL};
    run(0, "2", "pipe", pipe);
    run(0, "1", "accum", accum);
    run(0, "4", "four", four);
    report("--pipeline 2 --micro-batches 4 (2 devices)", "pipe",
           "--pipeline 1 --micro-batches 4 (1 device)", "accum");
    /* 4 devices update the running statistics once a step from their 4
     * quarters, the pipeline 4 times: the weights and momentum compared */
    double d = mu_max_weight_diff(ck("four"), ck("pipe"));
    printf("%-46s vs %-34s max |difference| / max |weight| = %.3g\n", "4 devices, a quarter each",
           "--pipeline 2 --micro-batches 4", d);
    tu_assert_at_most(d, MU_VS_ONE_PROCESS);
    assert_true(d == 0);
}

/* The seed's LeNet has no batch norm: its pipeline of 4 micro-batches and
 * 4 devices equal 1 device on the whole batch, which needs the kernels to
 * run on blocks of 8 rows whatever the share (its linear layers' products
 * otherwise differ by ~1e-8 for 8 rows against 32). */
static void no_batch_norm(void **state)
{
    (void)state;
    skip_without_data();
    const char *one[] = {RUN("lenet"), "--lr", "0.1", "--split-invariant", "8", NULL};
    const char *pipe[] = {
        RUN("lenet"),        "--lr", "0.1", "--pipeline", "2", "--micro-batches", "4",
        "--split-invariant", "8",    NULL};
    const char *plain[] = {RUN("lenet"), "--lr", "0.1", NULL};
    run(0, "1", "lenet_one", one);
    run(0, "4", "lenet_four", one);
    run(0, "2", "lenet_pipe", pipe);
    run(0, "1", "lenet_plain", plain);
    report("LeNet, 4 devices", "lenet_four", "LeNet, 1 device", "lenet_one");
    report("LeNet, --pipeline 2 --micro-batches 4", "lenet_pipe", "LeNet, 1 device", "lenet_one");
    double d = mu_max_param_diff(ck("lenet_one"), ck("lenet_plain"));
    printf("%-46s vs %-34s max |difference| / max |param| = %.3g\n",
           "LeNet, 1 device, --split-invariant 8", "LeNet, 1 device", d);
    tu_assert_at_most(d, MU_VS_ONE_PROCESS);
    assert_true(mu_moved_from_init(ck("lenet_one"), "lenet", 3) > 1e-2);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(devices_and_ranks),
        cmocka_unit_test(pipeline),
        cmocka_unit_test(no_batch_norm),
    };
    return tu_run(argc, argv, tests, group_setup, group_teardown);
}
