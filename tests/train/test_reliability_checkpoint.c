/* Reliability of long runs (issue 7), against the built dptrain
 * (DP_BUILD_DIR):
 * - a checkpoint that cannot be written (file size limit, a full tmpfs)
 *   leaves the previous one loadable; --on-checkpoint-error says whether
 *   the run stops or goes on;
 * - --deterministic runs repeat bit for bit, also when one is killed
 *   (SIGKILL, at a random moment after its first checkpoint) and resumed
 *   from its last checkpoint. */
#include "reliabilityutil.h"

#include "dp/dp.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A checkpoint after epoch 1, then a resumed run whose writes fail. */
static void checkpoint_write_fails(const char *ck, const char *policy, long long fsize_limit,
                                   int want_exit, const char *want_cause)
{
    char kept[512], err[512];
    snprintf(kept, sizeof kept, "%s.kept", ck);
    tmp_path(err, "err.txt");
    remove(ck);
    const char *one[] = {"--epochs", "1", "--checkpoint", ck, NULL};
    assert_int_equal(run(one, NULL), 0);
    copy_file(ck, kept);
    const char *a[] = {"--epochs", "3", "--checkpoint", ck, "--resume", ck, "--on-checkpoint-error",
                       policy,     NULL};
    child_opts c = {.err_path = err, .fsize_limit = fsize_limit};
    assert_int_equal(run(a, &c), want_exit);
    const char *text = slurp(err);
    printf("--on-checkpoint-error %s: %s", policy, text);
    assert_has(text, want_cause);
    assert_has(text, "is intact");
    assert_int_equal(epochs_done(ck), 1);
    tu_assert_same_tensors(ck, kept);
    assert_loadable(ck);
    remove(kept);
}

/* RLIMIT_FSIZE below a checkpoint's size: every write fails with EFBIG,
 * as on a full disk, without needing privileges. */
static void checkpoint_file_size_limit(void **state)
{
    (void)state;
    NEED_DATA();
    char ck[512], err[512];
    tmp_path(ck, "limited.safetensors");
    tmp_path(err, "err.txt");
    checkpoint_write_fails(ck, "stop", 100000, 1, "File too large");
    assert_has(slurp(err), "stopped (--on-checkpoint-error stop");
    checkpoint_write_fails(ck, "continue", 100000, 0, "File too large");
    const char *text = slurp(err);
    assert_has(text, "no checkpoint after epoch 2; the last checkpoint (");
    assert_has(text, "no checkpoint after epoch 3; the last checkpoint (");
    assert_has(text, "training goes on");
}

/* A real full file system: a tmpfs with room for one checkpoint, so the
 * second (written beside the first, then renamed over it) finds no space. */
static void checkpoint_full_tmpfs(void **state)
{
    (void)state;
    NEED_DATA();
    char dir[512];
    tmp_path(dir, "tmpfs");
    assert_int_equal(mkdir(dir, 0755), 0);
    /* LeNet without momentum: 129,068 floats, 517 kB a checkpoint. */
    if (mount("tmpfs", dir, "tmpfs", 0, "size=800k") != 0) {
        int err = errno;
        rmdir(dir);
        tu_skip("cannot mount a tmpfs here (%s); checkpoint_file_size_limit covers the failed "
                "write",
                strerror(err));
    }
    char ck[600];
    snprintf(ck, sizeof ck, "%s/ck.safetensors", dir);
    char err[512];
    tmp_path(err, "err.txt");
    const char *one[] = {"--epochs", "1", "--checkpoint", ck, NULL};
    assert_int_equal(run(one, NULL), 0);
    char kept[512]; /* outside the small file system */
    tmp_path(kept, "tmpfs-kept.safetensors");
    copy_file(ck, kept);
    const char *a[] = {"--epochs", "2", "--checkpoint", ck, "--resume", ck, NULL};
    child_opts c = {.err_path = err};
    assert_int_equal(run(a, &c), 1);
    const char *text = slurp(err);
    printf("full tmpfs: %s", text);
    assert_has(text, "No space left on device");
    assert_has(text, "ck.safetensors, epoch 1) is intact");
    assert_int_equal(epochs_done(ck), 1);
    tu_assert_same_tensors(ck, kept);
    assert_loadable(ck);
    const char *b[] = {"--epochs", "3", "--checkpoint", ck, "--resume", ck, "--on-checkpoint-error",
                       "continue", NULL};
    assert_int_equal(run(b, &c), 0);
    assert_int_equal(epochs_done(ck), 1);
    tu_assert_same_tensors(ck, kept);
    remove(ck);
    remove(kept);
    assert_int_equal(umount(dir), 0);
    rmdir(dir);
}

/* Unmounts the tmpfs also when the test failed half-way. */
static int unmount_teardown(void **state)
{
    umount(tu_tmp_path("tmpfs"));
    return tu_teardown_tmp(state);
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0->tv_nsec);
}

/* --deterministic: two runs give the same bits; a run killed with SIGKILL
 * at a random moment after its first checkpoint and resumed from whatever
 * checkpoint it left gives them too. The kill waits for that checkpoint
 * (killed before it, the run would only start again and prove nothing
 * about resume), and must land before the run ends. The resumed run's
 * metrics hold only the epochs after the checkpoint: one retrained from
 * the seed would end with the same bits. */
static void kill_at_random_deterministic(void **state)
{
    (void)state;
    NEED_DATA();
    char whole[512], again[512], killed[512], metrics[512];
    tmp_path(whole, "whole.safetensors");
    tmp_path(again, "again.safetensors");
    tmp_path(killed, "killed.safetensors");
    tmp_path(metrics, "resumed.jsonl");
    const char *common[] = {"--epochs",        "4",           "--lr",      "0.05",
                            "--momentum",      "0.9",         "--devices", "2",
                            "--deterministic", "--checkpoint"};
#define ARGS(path, ...)                                                                            \
    {                                                                                              \
        common[0], common[1], common[2], common[3], common[4], common[5], common[6], common[7],    \
            common[8], common[9], path, __VA_ARGS__ NULL                                           \
    }
    const char *a[] = ARGS(whole, );
    assert_int_equal(run(a, NULL), 0);
    /* The second run, with warm caches, times the run to kill. */
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const char *b[] = ARGS(again, );
    assert_int_equal(run(b, NULL), 0);
    double seconds = seconds_since(&t0);
    printf("two --deterministic runs: ");
    tu_assert_same_tensors(whole, again);

    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    const char *env_seed = getenv("DP_TEST_KILL_SEED");
    if (env_seed)
        seed = (unsigned)strtoul(env_seed, NULL, 10);
    srand(seed);
    const char *c[] = ARGS(killed, );
    /* The kill lands after the first checkpoint and, drawn within three
     * quarters of what the timed run says the rest takes, usually before
     * the end; a run faster than the timed one (a machine whose load
     * changed) may end first: then again, the window halved, up to 4
     * times. */
    int status = 0;
    for (int attempt = 0; attempt < 4 && status != 128 + SIGKILL; attempt++) {
        unlink(killed);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        pid_t pid = start(c, NULL);
        struct stat st;
        while (stat(killed, &st) != 0) {
            if (waitpid(pid, &status, WNOHANG) == pid)
                fail_msg("the run ended before its first checkpoint");
            if (seconds_since(&t0) > 120) {
                kill(pid, SIGKILL);
                fail_msg("no checkpoint after 120 s");
            }
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        }
        /* About 3 of the 4 epochs are left. */
        double first = seconds_since(&t0), left = (seconds - first) / (double)(1 << attempt);
        double at = left > 0 ? left * 0.75 * (double)rand() / RAND_MAX : 0;
        printf("first checkpoint after %.2f s of a %.2f s run; killing %.2f s later "
               "(DP_TEST_KILL_SEED=%u)\n",
               first, seconds, at, seed);
        struct timespec d = {(time_t)at, (long)((at - (double)(time_t)at) * 1e9)};
        nanosleep(&d, NULL);
        kill(pid, SIGKILL);
        status = wait_exit(pid);
        if (status != 128 + SIGKILL)
            printf("the run ended (status %d) before the kill: again\n", status);
    }
    if (status != 128 + SIGKILL)
        fail_msg("the run ended (status %d) before the kill 4 times: nothing was resumed", status);
    int done = epochs_done(killed);
    printf("killed with %d epoch(s) checkpointed; resuming\n", done);
    assert_true(done >= 1 && done < 4);
    const char *r[] = ARGS(killed, "--resume", killed, "--metrics", metrics, );
    assert_int_equal(run(r, NULL), 0);
    assert_int_equal(epochs_done(killed), 4);
    tu_assert_metrics_epochs(metrics, done + 1, 4);
    tu_assert_same_tensors(whole, killed);
#undef ARGS
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(checkpoint_file_size_limit, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(checkpoint_full_tmpfs, tu_setup_tmp, unmount_teardown),
        cmocka_unit_test_setup_teardown(kill_at_random_deterministic, tu_setup_tmp,
                                        tu_teardown_tmp),
    };
    return tu_run(argc, argv, tests, setup, NULL);
}
