/* Checkpoints and resume: a run killed hard (SIGKILL) after a checkpoint
 * and resumed from it ends with the same weights, bit for bit, as a run
 * that was never stopped. Runs the built dptrain (DP_BUILD_DIR). */
#include "testutil.h"

#include "dp/dp.h"
#include "dp/safetensors.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define dptrain tu_dptrain

static int setup(void **state)
{
    (void)state;
    if (tu_find_dptrain() < 0)
        return -1;
    return 0;
}

/* Starts `dptrain train` with the common small settings and `extra`
 * arguments; returns the child's pid. */
static pid_t start_train(const char *const *extra)
{
    const char *args[40] = {dptrain,         "train",     "--epochs",     "3",
                            "--limit-train", "2048",      "--limit-test", "256",
                            "--batch-size",  "64",        "--lr",         "0.1",
                            "--momentum",    "0.9",       "--devices",    "2",
                            "--threads",     "1",         "--seed",       "5",
                            "--progress",    "never"};
    int n = 22;
    for (int i = 0; extra[i]; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        freopen("/dev/null", "w", stdout);
        execv(dptrain, (char *const *)args);
        _exit(127);
    }
    return pid;
}

static int wait_exit(pid_t pid)
{
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static const char *meta(const char *path, const char *key, char *buf, size_t size)
{
    dp_safetensors_t *f;
    assert_int_equal(dp_safetensors_open(&f, path), 0);
    const char *v = dp_safetensors_meta(f, key);
    snprintf(buf, size, "%s", v ? v : "");
    dp_safetensors_close(f);
    return buf;
}

static void kill_and_resume(void **state)
{
    (void)state;
    if (!tu_have_fashion_mnist()) {
        tu_skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
    }
    char *dir = tu_tempdir("resume");
    char whole[256], killed[256], buf[64];
    snprintf(whole, sizeof whole, "%s/whole.safetensors", dir);
    snprintf(killed, sizeof killed, "%s/killed.safetensors", dir);

    const char *a[] = {"--checkpoint", whole, NULL};
    assert_int_equal(wait_exit(start_train(a)), 0);
    assert_string_equal(meta(whole, "dptrain.epochs_done", buf, sizeof buf), "3");

    /* Kill the second run as soon as its first checkpoint is on disk. */
    const char *b[] = {"--checkpoint", killed, NULL};
    pid_t pid = start_train(b);
    struct stat st;
    for (int i = 0; i < 60000 && stat(killed, &st) != 0; i++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(wait_exit(pid), 128 + SIGKILL);
    const char *done = meta(killed, "dptrain.epochs_done", buf, sizeof buf);
    printf("killed after %s epoch(s) were checkpointed\n", done);
    assert_true(strcmp(done, "1") == 0 || strcmp(done, "2") == 0);

    const char *c[] = {"--checkpoint", killed, "--resume", killed, NULL};
    assert_int_equal(wait_exit(start_train(c)), 0);
    assert_string_equal(meta(killed, "dptrain.epochs_done", buf, sizeof buf), "3");
    tu_assert_same_tensors(whole, killed);

    /* SIGTERM: the run finishes its step, saves itself (mid-epoch, with the
     * batch to go on from) and exits 143; resumed, it ends where an
     * uninterrupted run does. */
    char stopped[256];
    snprintf(stopped, sizeof stopped, "%s/stopped.safetensors", dir);
    const char *e[] = {"--checkpoint", stopped, NULL};
    pid = start_train(e);
    nanosleep(&(struct timespec){0, 700000000}, NULL);
    assert_int_equal(kill(pid, SIGTERM), 0);
    assert_int_equal(wait_exit(pid), 143);
    char batch[64];
    printf("SIGTERM: stopped before epoch %d batch %s\n",
           atoi(meta(stopped, "dptrain.epochs_done", buf, sizeof buf)) + 1,
           meta(stopped, "dptrain.batch", batch, sizeof batch));
    const char *g[] = {"--checkpoint", stopped, "--resume", stopped, NULL};
    assert_int_equal(wait_exit(start_train(g)), 0);
    tu_assert_same_tensors(whole, stopped);
    remove(stopped);

    /* Resuming a finished run asks for more epochs; a corrupt file is an
     * error naming it. */
    const char *d[] = {"--resume", killed, NULL};
    assert_int_equal(wait_exit(start_train(d)), 1);
    FILE *f = fopen(killed, "r+b");
    assert_non_null(f);
    fseek(f, 8 + 10, SEEK_SET);
    fputs("@@@@", f);
    fclose(f);
    assert_int_equal(wait_exit(start_train(d)), 1);

    remove(whole);
    remove(killed);
    remove(dir);
    free(dir);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(kill_and_resume)};
    return tu_run(argc, argv, tests, setup, NULL);
}
