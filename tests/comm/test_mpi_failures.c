/* Many processes when something goes wrong: a rank that dies or fails
 * ends every rank within seconds with a message naming it, SIGTERM to
 * mpirun checkpoints every rank at the same step, and a checkpoint of 2
 * ranks resumes in 1 (and the other way). Runs the built dptrain
 * (DP_BUILD_DIR) under Open MPI's mpirun; skips, saying so, in a build
 * without MPI. */
#include "mpiutil.h"

#include "dp/dp.h"
#include "dp/safetensors.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The README's "all gone 2 s later": from rank 1's SIGKILL until rank 0
 * and mpirun have both ended. mpirun sees rank 1 die at once and signals
 * the other ranks SIGCONT, SIGTERM, SIGKILL, odls_base_sigkill_timeout
 * (1 s by default) apart; rank 0, blocked in the allreduce of its step,
 * takes SIGTERM as a request to stop after that step, so SIGKILL ends it,
 * 2 s after. The gradients go in 3 buckets (--bucket-mb 0.05), so rank 0
 * is caught with buckets in flight wherever the kill lands: the first
 * bucket of its step whose MPI_Iallreduce needs rank 1 never completes,
 * its communication path tests it every 100 us while the backward pass
 * goes on and queues the other buckets behind it, and the step waits for
 * them all. */
#define KILLED_RANK_ALL_GONE_S 5.0

/* Whether a line of `out` starts with `prefix` and ends with `suffix`. */
static bool has_line(const char *out, const char *prefix, const char *suffix)
{
    size_t lp = strlen(prefix), ls = strlen(suffix);
    for (const char *p = out; *p;) {
        size_t n = strcspn(p, "\n");
        if (n >= lp + ls && strncmp(p, prefix, lp) == 0 && strncmp(p + n - ls, suffix, ls) == 0)
            return true;
        p += n + (p[n] != '\0');
    }
    return false;
}

static void killed_rank_ends_all(void **state)
{
    (void)state;
    mu_skip_without_mpi();
    char log[256];
    snprintf(log, sizeof log, "%s", tu_tmp_path("log"));
    char np[] = "2";
    const char *argv[] = {mu_mpirun, "-np",         np,     tu_dptrain,   "train", "--epochs",
                          "5",       "--threads",   "1",    "--progress", "never", "--limit-test",
                          "100",     "--bucket-mb", "0.05", "--verbose",  NULL};
    pid_t pid = mu_start(argv, log);
    /* Both ranks training: wait for both, then a little longer. */
    pid_t victim = -1, other = -1;
    for (int i = 0; i < 1000 && (victim < 0 || other < 0); i++) {
        nanosleep(&(struct timespec){0, 10000000}, NULL);
        victim = mu_find_rank(pid, 1);
        other = mu_find_rank(pid, 0);
    }
    if (victim < 0 || other < 0)
        mu_wait_for(pid, 0);
    assert_true(victim > 0);
    assert_true(other > 0); /* without rank 0's pid nothing is measured */
    /* Kill once rank 0 has set its buckets up (--verbose prints them), so
     * both ranks are past their setup however loaded the machine is. */
    for (int i = 0; i < 600; i++) {
        char *said = mu_slurp(log);
        int buckets = mu_count(said, ":   bucket ");
        free(said);
        if (buckets >= 3)
            break;
        nanosleep(&(struct timespec){0, 100000000}, NULL);
    }
    nanosleep(&(struct timespec){0, 500000000}, NULL);
    assert_int_equal(kill(victim, SIGKILL), 0);
    double t0 = mu_now();
    bool rank0_gone = mu_gone(other, 30);
    double rank0_took = mu_now() - t0;
    int rc = mu_wait_for(pid, 30);
    double took = mu_now() - t0;
    char *out = mu_slurp(log);
    printf("rank 1 killed: rank 0 gone after %.2f s, mpirun exited %d after %.2f s; it said:\n%s",
           rank0_took, rc, took, out);
    assert_true(rank0_gone);
    assert_true(rc > 0); /* -1: still running 30 s after rank 0 */
    /* A rank killed by SIGKILL says nothing: mpirun's own notice names it
     * (a bare "rank 1" would match any Open MPI message). */
    assert_true(has_line(out, "mpirun noticed that process rank 1 with PID ",
                         " exited on signal 9 (Killed)."));
    /* Rank 0 had set its buckets up (--verbose) before the kill. */
    assert_int_equal(mu_count(out, ":   bucket "), 3);
    if (!(took <= KILLED_RANK_ALL_GONE_S))
        fail_msg("all ranks gone %.2f s after the SIGKILL; at most %.0f s expected", took,
                 KILLED_RANK_ALL_GONE_S);
    free(out);
}

/* Rank 1 fails on its own: its error and dptrain's "ending all" line name
 * it (dptrain's lines, not Open MPI's, which also say "rank 1"), and every
 * rank is gone within the README's 5 s of that line (MPI_Abort: "at
 * once"), timed from the line rather than from the start, which loading
 * under a loaded machine or a sanitizer may stretch. */
static void failing_rank_ends_all(void **state)
{
    (void)state;
    mu_skip_without_mpi();
    char log[256];
    snprintf(log, sizeof log, "%s", tu_tmp_path("log"));
    /* Rank 1 alone is given a data directory that does not exist. */
    const char *argv[] = {mu_mpirun,    "-np",       "1",         tu_dptrain,
                          "train",      "--threads", "1",         "--progress",
                          "never",      ":",         "-np",       "1",
                          tu_dptrain,   "train",     "--threads", "1",
                          "--progress", "never",     "--data",    "/nonexistent/fashion",
                          NULL};
    double t0 = mu_now(), said = -1;
    pid_t pid = mu_start(argv, log);
    while (!mu_gone(pid, 0.01) && mu_now() - t0 < 30) {
        if (said < 0) {
            char *now = mu_slurp(log);
            if (strstr(now, "ending all 2 ranks"))
                said = mu_now();
            free(now);
        }
    }
    double gone = mu_now();
    int rc = mu_wait_for(pid, 30);
    if (said < 0) /* the line came with the exit */
        said = gone;
    char *out = mu_slurp(log);
    printf("rank 1 fails: mpirun exited %d after %.1f s, %.2f s after \"ending all\"; it "
           "said:\n%s",
           rc, gone - t0, gone - said, out);
    assert_true(rc > 0);
    assert_true(
        has_line(out, "dptrain: rank 1 on ", ": error: /nonexistent/fashion: no such directory"));
    assert_true(has_line(out, "dptrain: rank 1 on ", " failed (exit 1): ending all 2 ranks"));
    if (!(gone - said <= KILLED_RANK_ALL_GONE_S))
        fail_msg("all ranks gone %.2f s after \"ending all 2 ranks\"; at most %.0f s expected",
                 gone - said, KILLED_RANK_ALL_GONE_S);
    free(out);

    /* SyncBatchNorm across ranks needs every rank in every batch: a last
     * batch of 1 sample over 2 ranks is refused before the first step. */
    const char *sync[] = {
        mu_mpirun,      "-np",       "2",         tu_dptrain, "train",         "--model",
        "resnet18",     "--sync-bn", "--threads", "1",        "--limit-train", "65",
        "--batch-size", "64",        NULL};
    rc = mu_wait_for(mu_start(sync, log), 60);
    out = mu_slurp(log);
    printf("--sync-bn on 2 ranks, a last batch of 1: exit %d\n%s", rc, out);
    assert_true(rc > 0);
    assert_non_null(strstr(out, "--sync-bn across 2 ranks: the last batch of each epoch holds 1 "
                                "of the 65 training samples"));
    free(out);
}

/* SIGTERM to mpirun reaches every rank; they agree on the step, rank 0
 * saves, and resumed with 2 ranks the run ends exactly where an
 * uninterrupted one does, having trained only the epochs that were left
 * (its metrics say which: a rerun from the seed would end there too). */
static void sigterm_checkpoints_all_ranks(void **state)
{
    (void)state;
    mu_skip_without_mpi();
    char log[256], whole[256], ck[256];
    snprintf(log, sizeof log, "%s", tu_tmp_path("log"));
    snprintf(whole, sizeof whole, "%s", tu_tmp_path("whole.safetensors"));
    snprintf(ck, sizeof ck, "%s", tu_tmp_path("ck.safetensors"));
    const char *three_epochs[] = {"--epochs", "3", "--limit-train", "12288", NULL};
    assert_int_equal(mu_run(2, "1", whole, NULL, three_epochs, log), 0);

    const char *argv[] = {
        mu_mpirun, "-np",           "2",     tu_dptrain,     "train",  "--epochs",
        "3",       "--limit-train", "12288", "--limit-test", "500",    "--batch-size",
        "64",      "--lr",          "0.1",   "--momentum",   "0.9",    "--threads",
        "1",       "--seed",        "3",     "--progress",   "never",  "--devices",
        "1",       "--checkpoint",  ck,      "--conv-algo",  "direct", NULL};
    pid_t pid = mu_start(argv, log);
    /* Stop it in its second epoch: right after the first checkpoint. */
    struct stat st;
    for (int i = 0; i < 30000 && stat(ck, &st) != 0; i++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    assert_int_equal(kill(pid, SIGTERM), 0);
    int rc = mu_wait_for(pid, 60);
    char *out = mu_slurp(log);
    printf("SIGTERM to mpirun: exit %d; it said:\n%s", rc, out);
    assert_true(rc != 0 && rc != -1);
    assert_non_null(strstr(out, "stopped by SIGTERM before epoch"));
    assert_non_null(strstr(out, "--resume"));
    free(out);

    dp_safetensors_t *f;
    assert_int_equal(dp_safetensors_open(&f, ck), 0);
    const char *v = dp_safetensors_meta(f, "dptrain.epochs_done");
    int done = v ? atoi(v) : -1;
    dp_safetensors_close(f);
    assert_true(done >= 1 && done < 3);
    char metrics[256];
    snprintf(metrics, sizeof metrics, "%s", tu_tmp_path("resumed.jsonl"));
    const char *resume[] = {"--epochs", "3", "--limit-train", "12288", "--resume", ck, NULL};
    assert_int_equal(mu_run(2, "1", ck, metrics, resume, log), 0);
    tu_assert_metrics_epochs(metrics, done + 1, 3);
    double d = tu_max_rel_diff(ck, whole);
    printf("stopped and resumed with 2 ranks vs uninterrupted: max |difference| = %.3g; ", d);
    tu_assert_same_tensors(ck, whole);
}

/* A checkpoint written by 2 ranks goes on in 1 process (and the other way
 * round) and ends where 1 process alone does: 10 steps, then 10 more (the
 * resumed run's metrics hold epoch 2 alone). (Over hundreds of steps any
 * change of summation order grows: 1 process on 2 devices and 2 ranks
 * agree exactly with each other, and both drift from 1 device by 4e-4
 * after 40 steps here.) */
static void resume_with_other_rank_count(void **state)
{
    (void)state;
    mu_skip_without_mpi();
    char log[256], whole[256], ck[256];
    snprintf(log, sizeof log, "%s", tu_tmp_path("log"));
    snprintf(whole, sizeof whole, "%s", tu_tmp_path("whole.safetensors"));
    snprintf(ck, sizeof ck, "%s", tu_tmp_path("ck.safetensors"));
    char metrics[256];
    snprintf(metrics, sizeof metrics, "%s", tu_tmp_path("resumed.jsonl"));
    const char *two[] = {"--epochs", "2", "--limit-train", "640", NULL};
    assert_int_equal(mu_run(0, "1", whole, NULL, two, log), 0);
    static const struct {
        int first, second;
    } plans[] = {{2, 0}, {0, 2}};
    for (int i = 0; i < 2; i++) {
        const char *one[] = {"--limit-train", "640", NULL};
        assert_int_equal(mu_run(plans[i].first, "1", ck, NULL, one, log), 0);
        const char *resume[] = {"--epochs", "2", "--limit-train", "640", "--resume", ck, NULL};
        assert_int_equal(mu_run(plans[i].second, "1", ck, metrics, resume, log), 0);
        tu_assert_metrics_epochs(metrics, 2, 2);
        remove(metrics);
        double d = tu_max_rel_diff(ck, whole);
        printf("epoch 1 on %d rank(s), epoch 2 on %d: max |difference| / max |param| vs 1 "
               "process = %.3g\n",
               plans[i].first ? plans[i].first : 1, plans[i].second ? plans[i].second : 1, d);
        tu_assert_at_most(d, MU_VS_ONE_PROCESS);
        remove(ck);
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(killed_rank_ends_all, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(failing_rank_ends_all, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(sigterm_checkpoints_all_ranks, tu_setup_tmp,
                                        tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(resume_with_other_rank_count, tu_setup_tmp,
                                        tu_teardown_tmp),
    };
    return tu_run(argc, argv, tests, mu_setup, NULL);
}
