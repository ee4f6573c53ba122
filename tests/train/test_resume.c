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

/* Where the next start_train sends the child's stderr (NULL: inherited). */
static const char *child_stderr;

/* Starts `dptrain train` with the common small settings and `extra`
 * arguments; returns the child's pid. The kernels are fixed (--conv-algo
 * direct): runs in two processes are compared bit for bit. */
static pid_t start_train(const char *const *extra)
{
    const char *args[40] = {
        dptrain,        "train", "--epochs",     "3",     "--limit-train", "2048",
        "--limit-test", "256",   "--batch-size", "64",    "--lr",          "0.1",
        "--momentum",   "0.9",   "--devices",    "2",     "--threads",     "1",
        "--seed",       "5",     "--progress",   "never", "--conv-algo",   "direct"};
    int n = 24;
    for (int i = 0; extra[i]; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        freopen("/dev/null", "w", stdout);
        if (child_stderr)
            freopen(child_stderr, "w", stderr);
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

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Waits (up to 120 s) until the metrics file `path` has a line that holds
 * `want`: with "{\"step\": 3," the run is past its start and training
 * (the step lines reach the file with the epoch's line, at its end); with
 * "{\"epoch\": 1," epoch 1 has ended and its checkpoint is being written. */
static void wait_for_line(const char *path, const char *want)
{
    for (int i = 0; i < 12000; i++) {
        FILE *f = fopen(path, "r");
        char line[512];
        bool seen = false;
        while (f && !seen && fgets(line, sizeof line, f))
            seen = strstr(line, want) != NULL;
        if (f)
            fclose(f);
        if (seen)
            return;
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    fail_msg("%s never showed '%s'", path, want);
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

    /* Retrained from the seed, the run would end with the same bits: its
     * metrics must hold only the epochs after the checkpoint. */
    char metrics[256];
    snprintf(metrics, sizeof metrics, "%s/resumed.jsonl", dir);
    int from = atoi(done) + 1;
    const char *c[] = {"--checkpoint", killed, "--resume", killed, "--metrics", metrics, NULL};
    assert_int_equal(wait_exit(start_train(c)), 0);
    assert_string_equal(meta(killed, "dptrain.epochs_done", buf, sizeof buf), "3");
    tu_assert_metrics_epochs(metrics, from, 3);
    tu_assert_same_tensors(whole, killed);
    remove(metrics);

    /* SIGTERM: the run finishes its step, saves itself (mid-epoch, with the
     * batch to go on from), says so and exits 143 itself (a run that did
     * not handle the signal would die by it, and waitpid says which); resumed,
     * it trains only the rest of its epoch and those after, and ends where
     * an uninterrupted run does. The signal is sent once epoch 1's metrics
     * line is out, so the stop comes after a step of epoch 2 (or, on a
     * loaded machine, 3): at a batch > 0. */
    char stopped[256], stop_metrics[256], err[256];
    snprintf(stopped, sizeof stopped, "%s/stopped.safetensors", dir);
    snprintf(stop_metrics, sizeof stop_metrics, "%s/stop_metrics.jsonl", dir);
    snprintf(err, sizeof err, "%s/stderr.log", dir);
    const char *e[] = {"--checkpoint", stopped, "--metrics", stop_metrics, NULL};
    child_stderr = err;
    pid = start_train(e);
    child_stderr = NULL;
    wait_for_line(stop_metrics, "{\"epoch\": 1,");
    assert_int_equal(kill(pid, SIGTERM), 0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status))
        fail_msg("SIGTERM: the run died by signal %d instead of saving and exiting 143",
                 WIFSIGNALED(status) ? WTERMSIG(status) : -1);
    assert_int_equal(WEXITSTATUS(status), 143);
    FILE *f = fopen(err, "r");
    assert_non_null(f);
    char line[1024] = "";
    char *said = fgets(line, sizeof line, f);
    fclose(f);
    assert_non_null(said);
    printf("SIGTERM: exit 143, said: %s", line);
    assert_non_null(strstr(line, "dptrain: stopped by SIGTERM before epoch "));
    assert_non_null(strstr(line, stopped));
    char batch[64];
    from = atoi(meta(stopped, "dptrain.epochs_done", buf, sizeof buf)) + 1;
    int at = atoi(meta(stopped, "dptrain.batch", batch, sizeof batch));
    printf("SIGTERM: stopped before epoch %d batch %d of 32\n", from, at);
    assert_true(from == 2 || from == 3);
    assert_true(at > 0 && at <= 32); /* 2048 samples in batches of 64 */
    const char *g[] = {"--checkpoint", stopped, "--resume", stopped, "--metrics", metrics, NULL};
    assert_int_equal(wait_exit(start_train(g)), 0);
    tu_assert_metrics_epochs(metrics, from, 3);
    tu_assert_same_tensors(whole, stopped);
    remove(stopped);
    remove(stop_metrics);
    remove(err);
    remove(metrics);

    /* Resuming a finished run asks for more epochs; a corrupt file is an
     * error naming it. */
    const char *d[] = {"--resume", killed, NULL};
    assert_int_equal(wait_exit(start_train(d)), 1);
    f = fopen(killed, "r+b");
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

/* Whether process pid has a SIGINT pending that no thread has taken yet
 * (/proc/PID/status's ShdPnd, a hexadecimal mask of signals 1..64). */
static bool sigint_pending(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    bool pending = false;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "ShdPnd:", 7) == 0)
            pending = (strtoull(line + 7, NULL, 16) >> (SIGINT - 1)) & 1;
    if (f)
        fclose(f);
    return pending;
}

/* Ctrl-C, as the README says: the first SIGINT lets the step finish, saves
 * the run (with the batch to go on from), prints where it stopped and exits
 * 130; a second SIGINT during that ends the run at once, by the signal. */
static void sigint_saves_then_second_ends(void **state)
{
    (void)state;
    if (!tu_have_fashion_mnist())
        tu_skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
    char *dir = tu_tempdir("sigint");
    char ck[256], log[256], steps[256], buf[64], batch[64];
    snprintf(ck, sizeof ck, "%s/ck.safetensors", dir);
    snprintf(log, sizeof log, "%s/stderr.log", dir);
    snprintf(steps, sizeof steps, "%s/steps.jsonl", dir);

    const char *a[] = {"--checkpoint", ck, "--metrics", steps, "--log-steps", NULL};
    child_stderr = log;
    pid_t pid = start_train(a);
    wait_for_line(steps, "{\"step\": 3,");
    assert_int_equal(kill(pid, SIGINT), 0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 130);
    FILE *f = fopen(log, "r");
    assert_non_null(f);
    char line[1024] = "";
    char *got = fgets(line, sizeof line, f);
    fclose(f);
    assert_non_null(got);
    printf("first SIGINT: exit 130, said: %s", line);
    assert_non_null(strstr(line, "dptrain: stopped by SIGINT before epoch "));
    assert_non_null(strstr(line, ck));
    printf("saved at epoch %s + batch %s\n", meta(ck, "dptrain.epochs_done", buf, sizeof buf),
           meta(ck, "dptrain.batch", batch, sizeof batch));
    assert_true(atoi(batch) > 0);

    /* Two signals, the second 20 ms after a thread took the first: steps of
     * 1024 images take about 0.1 s, so the second hits while the first's
     * step and save are still under way, and ends the process by SIGINT
     * itself. */
    remove(ck);
    remove(steps);
    const char *big[] = {"--checkpoint", ck,     "--metrics", steps, "--log-steps",
                         "--batch-size", "1024", NULL};
    pid = start_train(big);
    wait_for_line(steps, "{\"step\": 3,");
    assert_int_equal(kill(pid, SIGINT), 0);
    /* The second only once a thread has taken the first: two pending at
     * once are one (a loaded machine may not run the child within 20 ms). */
    for (int i = 0; i < 500 && sigint_pending(pid); i++)
        nanosleep(&(struct timespec){0, 2000000}, NULL);
    nanosleep(&(struct timespec){0, 20000000}, NULL);
    double t0 = now();
    assert_int_equal(kill(pid, SIGINT), 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    double took = now() - t0;
    printf("second SIGINT: %s %d after %.3f s\n",
           WIFSIGNALED(status) ? "killed by signal" : "exited",
           WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), took);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGINT);
    assert_true(took < 1.0);
    child_stderr = NULL;
    remove(steps);
    remove(log);
    remove(ck);
    remove(dir);
    free(dir);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(kill_and_resume),
                                       cmocka_unit_test(sigint_saves_then_second_ends)};
    return tu_run(argc, argv, tests, setup, NULL);
}
