/* An ONNX model's checkpoints: torchvision's ResNet-18 as an ONNX graph
 * (onnxutil.c) trained in a pipeline of 2 stages and 4 micro-batches on 2
 * devices, killed hard (SIGKILL) once its first epoch's checkpoint is on
 * disk and resumed from it, ends with the tensors of a run that was never
 * stopped, bit for bit, having trained only the epochs that were left.
 * Runs the built dptrain (DP_BUILD_DIR). */
#include "mpiutil.h"
#include "onnxutil.h"

#include "dp/safetensors.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static const char *meta(const char *path, const char *key, char *buf, size_t size)
{
    dp_safetensors_t *f;
    assert_int_equal(dp_safetensors_open(&f, path), 0);
    const char *v = dp_safetensors_meta(f, key);
    snprintf(buf, size, "%s", v ? v : "");
    dp_safetensors_close(f);
    return buf;
}

/* dptrain train on the graph, 3 epochs of 10 steps (320 images, batch 32),
 * then `extra` (NULL-terminated). */
static pid_t start(const char *model, const char *log, const char *const *extra)
{
    const char *argv[48] = {
        tu_dptrain,      "train", "--model",         model,   "--epochs",     "3",
        "--limit-train", "320",   "--limit-test",    "64",    "--batch-size", "32",
        "--lr",          "0.01",  "--momentum",      "0.9",   "--devices",    "2",
        "--pipeline",    "2",     "--micro-batches", "4",     "--threads",    "1",
        "--seed",        "5",     "--progress",      "never", "--conv-algo",  "direct"};
    int n = 0;
    while (argv[n])
        n++;
    for (int i = 0; extra[i]; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    return mu_start(argv, log);
}

static void kill_and_resume(void **state)
{
    (void)state;
    if (!tu_have_fashion_mnist())
        tu_skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
    char model[256], whole[256], killed[256], metrics[256], log[256], buf[64];
    snprintf(model, sizeof model, "%s/resnet18.onnx", tu_tmp);
    snprintf(whole, sizeof whole, "%s/whole.safetensors", tu_tmp);
    snprintf(killed, sizeof killed, "%s/killed.safetensors", tu_tmp);
    snprintf(metrics, sizeof metrics, "%s/resumed.jsonl", tu_tmp);
    snprintf(log, sizeof log, "%s/log", tu_tmp);
    ou_model om;
    ou_resnet18(&om, 11, (const int64_t[]){1, 28, 28}, 10);
    ou_write(&om, model);
    ou_free(&om);

    const char *a[] = {"--checkpoint", whole, NULL};
    assert_int_equal(mu_wait_for(start(model, log, a), 120), 0);
    assert_string_equal(meta(whole, "dptrain.epochs_done", buf, sizeof buf), "3");

    /* Killed as soon as its first checkpoint is on disk. */
    const char *b[] = {"--checkpoint", killed, NULL};
    pid_t pid = start(model, log, b);
    struct stat st;
    for (int i = 0; i < 120000 && stat(killed, &st) != 0; i++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(mu_wait_for(pid, 30), 128 + SIGKILL);
    const char *done = meta(killed, "dptrain.epochs_done", buf, sizeof buf);
    printf("killed after %s epoch(s) were checkpointed\n", done);
    assert_true(strcmp(done, "1") == 0 || strcmp(done, "2") == 0);
    int from = atoi(done) + 1;

    const char *c[] = {"--checkpoint", killed, "--resume", killed, "--metrics", metrics, NULL};
    assert_int_equal(mu_wait_for(start(model, log, c), 120), 0);
    assert_string_equal(meta(killed, "dptrain.epochs_done", buf, sizeof buf), "3");
    tu_assert_metrics_epochs(metrics, from, 3);
    tu_assert_same_tensors(whole, killed);
    double d = mu_max_param_diff(killed, whole);
    printf("resumed from epoch %d: max |difference| / max |param| = %g over the "
           "weights and running statistics\n",
           from, d);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(kill_and_resume, tu_setup_tmp, tu_teardown_tmp),
    };
    return tu_run(argc, argv, tests, mu_setup, NULL);
}
