/* Reliability of long runs (issue 7), against the built dptrain
 * (DP_BUILD_DIR):
 * - a NaN in a gradient (injected, or from an lr that overflows) stops the
 *   run naming the step and the parameter, and the last checkpoint stays as
 *   it was; --skip-nonfinite skips such a step and counts it;
 * - a checkpoint that cannot be written (file size limit, a full tmpfs)
 *   leaves the previous one loadable; --on-checkpoint-error says whether
 *   the run stops or goes on;
 * - --deterministic runs repeat bit for bit, also when one is killed
 *   (SIGKILL, at a random moment) and resumed from its last checkpoint;
 * - 30 epochs with a checkpoint each keep a flat memory profile. */
#include "testutil.h"

#include "dp/dp.h"
#include "dp/safetensors.h"


#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
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

/* How to start a child. */
typedef struct child_opts {
    const char *err_path;  /* stderr goes here; NULL: /dev/null */
    const char *env;       /* "NAME=VALUE" put into the environment, or NULL */
    long long fsize_limit; /* RLIMIT_FSIZE in bytes (SIGXFSZ ignored), 0 = none */
} child_opts;

/* Starts `dptrain train` with small common settings (kernels fixed: runs
 * are compared bit for bit), then `extra`. */
static pid_t start(const char *const *extra, const child_opts *c)
{
    const char *args[64] = {
        dptrain,  "train", "--limit-test", "256",   "--batch-size",  "64",  "--threads", "1",
        "--seed", "7",     "--progress",   "never", "--limit-train", "2048", "--conv-algo", "direct"};
    int n = 16;
    for (int i = 0; extra[i]; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout) ||
            !freopen(c && c->err_path ? c->err_path : "/dev/null", "w", stderr))
            _exit(126);
        if (c && c->env)
            putenv((char *)c->env);
        if (c && c->fsize_limit > 0) {
            /* Writes past the limit fail with EFBIG instead of killing. */
            signal(SIGXFSZ, SIG_IGN);
            struct rlimit rl = {(rlim_t)c->fsize_limit, (rlim_t)c->fsize_limit};
            if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
                _exit(126);
        }
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

static int run(const char *const *extra, const child_opts *c)
{
    return wait_exit(start(extra, c));
}

/* buf (512 bytes) = "<the test's temp dir>/<name>" */
static void tmp_path(char *buf, const char *name)
{
    snprintf(buf, 512, "%s", tu_tmp_path(name));
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Fails unless `text` contains `want`; prints the text first. */
static void assert_has(const char *text, const char *want)
{
    if (!strstr(text, want))
        fail_msg("expected '%s' in:\n%s", want, text);
}

static int epochs_done(const char *path)
{
    dp_safetensors_t *f;
    assert_int_equal(dp_safetensors_open(&f, path), 0);
    const char *v = dp_safetensors_meta(f, "dptrain.epochs_done");
    int e = v ? atoi(v) : -1;
    dp_safetensors_close(f);
    return e;
}

static void copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    assert_int_equal(fclose(out), 0);
}

/* `dptrain eval` accepts the checkpoint. */
static void assert_loadable(const char *path)
{
    const char *args[] = {dptrain, "eval", "--checkpoint", path, "--limit-test", "256", "--threads",
                          "1",     NULL};
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout))
            _exit(126);
        execv(dptrain, (char *const *)args);
        _exit(127);
    }
    assert_int_equal(wait_exit(pid), 0);
}

/* The device check and the SGD kernel on their own: the first bad element
 * of a buffer (in and across the check's blocks) is found, and an update
 * over a bad gradient changes neither weights nor momentum. */
static void sgd_skips_nonfinite_gradient(void **state)
{
    (void)state;
    dp_device_t *dev[1];
    int ndev;
    /* Two threads run the check's OpenMP path; OMP_NUM_THREADS=1 (the
     * ThreadSanitizer run, which cannot see libgomp's barriers) keeps one. */
    const char *omp = getenv("OMP_NUM_THREADS");
    int threads = omp && atoi(omp) == 1 ? 1 : 2;
    assert_int_equal(dp_devices_open(dev, &ndev, "1", threads), 0);
    /* Larger than the check's parallel threshold. */
    enum { N = 300001 };
    dp_param_spec spec[2] = {{"a", 1, {1000}, DP_INIT_NORMAL, 1.0f},
                             {"b", 1, {N - 1000}, DP_INIT_NORMAL, 1.0f}};
    dp_params_t *p;
    assert_int_equal(dp_params_init(&p, dev[0], spec, 2, true), 0);
    assert_int_equal(dp_params_init_random(p, 1), 0);
    dp_sgd_t *sgd;
    dp_sgd_options o = {.lr = 0.1f, .momentum = 0.9f};
    assert_int_equal(dp_sgd_init(&sgd, p, &o), 0);
    assert_true(dp_sgd_can_check_finite(sgd));
    assert_int_equal(dp_sgd_check_finite(sgd), 0);
    float *g = calloc(N, sizeof *g), *w0 = calloc(N, sizeof *g), *w1 = calloc(N, sizeof *g);
    float *v = calloc(N, sizeof *g);
    assert_non_null(g);
    assert_non_null(w0);
    assert_non_null(w1);
    assert_non_null(v);
    for (int64_t i = 0; i < N; i++)
        g[i] = 1e-3f * (float)(i % 97) - 0.05f;
    const int64_t bad_at[] = {0, 999, 1000, 4095, 4096, 150001, N - 1};
    const float bad_values[] = {NAN, INFINITY, -INFINITY};
    int64_t first;
    for (int k = 0; k < (int)(sizeof bad_at / sizeof *bad_at); k++) {
        float keep = g[bad_at[k]];
        g[bad_at[k]] = bad_values[k % 3];
        if (k > 0)
            g[N - 1] = NAN; /* a later bad element does not hide the first */
        assert_int_equal(dp_tensor_copy_from_host(dp_params_grads(p), g, N * sizeof *g), 0);
        assert_int_equal(dp_params_get_all(p, w0), 0);
        assert_int_equal(dp_sgd_step(sgd, 1.0f), 0);
        assert_int_equal(dp_sgd_read_first_nonfinite_async(sgd, &first), 0);
        assert_int_equal(dp_waitall(), 0); /* the copy is enqueued */
        assert_int_equal(dp_params_get_all(p, w1), 0);
        assert_int_equal(first, bad_at[k]);
        assert_memory_equal(w0, w1, N * sizeof *w0);
        assert_int_equal(dp_tensor_to_host(dp_sgd_velocity(sgd), v, N * sizeof *v), 0);
        for (int64_t i = 0; i < N; i++)
            assert_true(v[i] == 0.0f); /* no update ever reached the momentum */
        g[bad_at[k]] = keep;
        g[N - 1] = 0.0f;
    }
    /* A finite gradient: the check says n and the update happens. */
    assert_int_equal(dp_tensor_copy_from_host(dp_params_grads(p), g, N * sizeof *g), 0);
    assert_int_equal(dp_sgd_step(sgd, 1.0f), 0);
    assert_int_equal(dp_sgd_read_first_nonfinite_async(sgd, &first), 0);
    assert_int_equal(dp_waitall(), 0);
    assert_int_equal(dp_params_get_all(p, w1), 0);
    assert_int_equal(first, N);
    tu_assert_close(w1[1], w0[1] - 0.1f * g[1], 1e-6, 1e-7);
    free(g);
    free(w0);
    free(w1);
    free(v);
    dp_sgd_close(sgd);
    dp_params_close(p);
    dp_devices_close(dev, ndev);
}

#define NEED_DATA()                                                                                \
    do {                                                                                           \
        if (!tu_have_fashion_mnist()) {                                                            \
            tu_skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");     \
        }                                                                                          \
    } while (0)

/* 2048 samples in batches of 64: 32 steps an epoch. Step 40 is epoch 2's
 * batch 7; the checkpoint of epoch 1 must survive unchanged. */
static void injected_nan_stops(void **state)
{
    (void)state;
    NEED_DATA();
    char ck[512], kept[512], err[512];
    tmp_path(ck, "nan.safetensors");
    tmp_path(kept, "kept.safetensors");
    tmp_path(err, "err.txt");
    const char *one[] = {"--epochs", "1", "--checkpoint", ck, NULL};
    assert_int_equal(run(one, NULL), 0);
    copy_file(ck, kept);

    const char *a[] = {"--epochs", "3", "--checkpoint", ck, NULL};
    child_opts c = {.err_path = err, .env = "DP_INJECT_NAN=40:W2"};
    assert_int_equal(run(a, &c), 1);
    const char *text = slurp(err);
    printf("injected: %s", text);
    assert_has(text, "step 40 (epoch 2, batch 7): gradient of W2 is not finite (NaN or Inf)");
    assert_has(text, "stopped without applying it; the last checkpoint (");
    assert_has(text, "nan.safetensors, epoch 1) is intact");
    assert_int_equal(epochs_done(ck), 1);
    assert_loadable(ck);

    /* Resumed without the injection, it goes on from epoch 1 to the end. */
    const char *b[] = {"--epochs", "3", "--checkpoint", ck, "--resume", ck, NULL};
    assert_int_equal(run(b, NULL), 0);
    assert_int_equal(epochs_done(ck), 3);

    /* A realistic one: an lr so large that the weights overflow. */
    const char *d[] = {"--epochs", "1", "--lr", "1e6", NULL};
    c = (child_opts){.err_path = err};
    assert_int_equal(run(d, &c), 1);
    text = slurp(err);
    printf("lr 1e6: %s", text);
    assert_has(text, "is not finite (NaN or Inf)");
    assert_has(text, "stopped without applying it; no --checkpoint was given");
}

/* --skip-nonfinite: the bad step is dropped, the run ends normally, the
 * epoch's metrics count it. */
static void skip_nonfinite(void **state)
{
    (void)state;
    NEED_DATA();
    char err[512], metrics[512];
    tmp_path(err, "err.txt");
    tmp_path(metrics, "m.jsonl");
    const char *a[] = {"--epochs", "2", "--skip-nonfinite", "--metrics", metrics, NULL};
    child_opts c = {.err_path = err, .env = "DP_INJECT_NAN=5:b4"};
    assert_int_equal(run(a, &c), 0);
    const char *text = slurp(err);
    printf("%s", text);
    assert_has(text, "step 5 (epoch 1, batch 4): gradient of b4 is not finite (NaN or Inf); "
                     "skipped it (--skip-nonfinite)");
    text = slurp(metrics);
    printf("%s", text);
    const char *line2 = strchr(text, '\n');
    assert_non_null(line2);
    const char *skipped = strstr(text, "\"skipped_steps\": 1");
    assert_non_null(skipped); /* exactly 1: the next character ends the number */
    skipped += strlen("\"skipped_steps\": 1");
    assert_true(*skipped == ',' || *skipped == '}');
    assert_true(skipped < line2); /* on epoch 1's line */
    assert_null(strstr(line2, "skipped_steps")); /* epoch 2 skipped none */
}

/* A skipped step changes nothing: with --no-shuffle, 2 steps of which the
 * second is poisoned and skipped end with the weights and the momentum
 * (the checkpoint's tensors) of a run that made only the first step, bit
 * for bit; on 1 device and on 2. And on 2 devices a NaN in one replica's
 * gradient stops the run with the same message as on 1. */
static void skipped_step_changes_nothing(void **state)
{
    (void)state;
    NEED_DATA();
    char skipped[512], one_step[512], err[512], err1[512];
    tmp_path(skipped, "skipped.safetensors");
    tmp_path(one_step, "one_step.safetensors");
    tmp_path(err, "err.txt");
    tmp_path(err1, "err1.txt");
    const char *devices[] = {"1", "2"};
    for (int d = 0; d < 2; d++) {
        const char *a[] = {"--epochs",   "1",          "--limit-train", "128", "--no-shuffle",
                           "--momentum", "0.9",        "--devices",     devices[d],
                           "--skip-nonfinite",          "--checkpoint", skipped, NULL};
        child_opts c = {.err_path = err, .env = "DP_INJECT_NAN=2:W1"};
        assert_int_equal(run(a, &c), 0);
        assert_has(slurp(err), "step 2 (epoch 1, batch 1): gradient of W1 is not finite");
        const char *b[] = {"--epochs",   "1",   "--limit-train", "64", "--no-shuffle",
                           "--momentum", "0.9", "--devices",     devices[d],
                           "--checkpoint", one_step, NULL};
        assert_int_equal(run(b, NULL), 0);
        printf("%s device(s), step 2 skipped vs 1 step only: ", devices[d]);
        tu_assert_same_tensors(skipped, one_step);
    }
    const char *stop1[] = {"--epochs", "1", "--devices", "1", NULL};
    const char *stop2[] = {"--epochs", "1", "--devices", "2", NULL};
    child_opts c1 = {.err_path = err1, .env = "DP_INJECT_NAN=3:W2"};
    child_opts c2 = {.err_path = err, .env = "DP_INJECT_NAN=3:W2"};
    assert_int_equal(run(stop1, &c1), 1);
    assert_int_equal(run(stop2, &c2), 1);
    char *on_one = strdup(slurp(err1));
    const char *on_two = slurp(err);
    printf("1 device:  %s2 devices: %s", on_one, on_two);
    assert_has(on_one, "step 3 (epoch 1, batch 2): gradient of W2 is not finite (NaN or Inf)");
    assert_string_equal(on_two, on_one);
    free(on_one);
}

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

/* --deterministic: two runs give the same bits; a run killed with SIGKILL
 * at a random moment and resumed from whatever checkpoint it left gives
 * them too. */
static void kill_at_random_deterministic(void **state)
{
    (void)state;
    NEED_DATA();
    char whole[512], again[512], killed[512];
    tmp_path(whole, "whole.safetensors");
    tmp_path(again, "again.safetensors");
    tmp_path(killed, "killed.safetensors");
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
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const char *b[] = ARGS(again, );
    assert_int_equal(run(b, NULL), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("two --deterministic runs: ");
    tu_assert_same_tensors(whole, again);

    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    const char *env_seed = getenv("DP_TEST_KILL_SEED");
    if (env_seed)
        seed = (unsigned)strtoul(env_seed, NULL, 10);
    srand(seed);
    double at = seconds * (0.05 + 0.75 * (double)rand() / RAND_MAX);
    printf("killing after %.2f s of a %.2f s run (DP_TEST_KILL_SEED=%u)\n", at, seconds, seed);
    const char *c[] = ARGS(killed, );
    pid_t pid = start(c, NULL);
    struct timespec d = {(time_t)at, (long)((at - (double)(time_t)at) * 1e9)};
    nanosleep(&d, NULL);
    kill(pid, SIGKILL);
    int status = wait_exit(pid);
    struct stat st;
    if (stat(killed, &st) == 0) {
        int done = epochs_done(killed);
        printf("%s with %d epoch(s) checkpointed; resuming\n",
               status == 128 + SIGKILL ? "killed" : "finished before the kill", done);
        if (done < 4) {
            const char *r[] = ARGS(killed, "--resume", killed, );
            assert_int_equal(run(r, NULL), 0);
        }
    } else {
        assert_int_equal(status, 128 + SIGKILL);
        printf("killed before the first checkpoint; starting again\n");
        assert_int_equal(run(c, NULL), 0);
    }
    assert_int_equal(epochs_done(killed), 4);
    tu_assert_same_tensors(whole, killed);
#undef ARGS
}

/* Reads "key": number from the JSON line of epoch `epoch`. */
static double metric(const char *text, int epoch, const char *key)
{
    char head[32], k[64];
    snprintf(head, sizeof head, "{\"epoch\": %d,", epoch);
    snprintf(k, sizeof k, "\"%s\": ", key);
    const char *line = strstr(text, head);
    assert_non_null(line);
    const char *end = strchr(line, '\n');
    const char *v = strstr(line, k);
    if (!v || (end && v > end))
        fail_msg("no %s in the line of epoch %d", key, epoch);
    return atof(v + strlen(k));
}

/* 30 epochs with a checkpoint after each: the memory of the last epoch is
 * that of the second (within 5%), both the peak and the current RSS. */
static void memory_flat_over_30_epochs(void **state)
{
    (void)state;
    NEED_DATA();
    char metrics[512];
    tmp_path(metrics, "m.jsonl");
    char ck[512];
    tmp_path(ck, "rss.safetensors");
    const char *a[] = {"--epochs", "30",        "--limit-train", "4096",      "--checkpoint",
                       ck,         "--metrics", metrics,         "--devices", "2",
                       "--lr",     "0.05",      "--momentum",    "0.9",       NULL};
#if defined(__SANITIZE_ADDRESS__)
    /* Under AddressSanitizer, freed memory waits in its quarantine (up to
     * 256 MB) before it can be reused, and counts in RSS until then: a
     * 1 MB quarantine makes the figures the process's own again. */
    const char *asan = getenv("ASAN_OPTIONS");
    char *saved = asan ? strdup(asan) : NULL;
    char opts[1024];
    snprintf(opts, sizeof opts, "%s%squarantine_size_mb=1", asan ? asan : "", asan ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
#endif
    int rc = run(a, NULL);
#if defined(__SANITIZE_ADDRESS__)
    if (saved)
        setenv("ASAN_OPTIONS", saved, 1);
    else
        unsetenv("ASAN_OPTIONS");
    free(saved);
#endif
    assert_int_equal(rc, 0);
    const char *text = slurp(metrics);
    double peak2 = metric(text, 2, "peak_rss_mb"), peak30 = metric(text, 30, "peak_rss_mb");
    double rss2 = metric(text, 2, "rss_mb"), rss30 = metric(text, 30, "rss_mb");
    printf("peak RSS: epoch 2 %.1f MB, epoch 30 %.1f MB (%+.2f%%)\n", peak2, peak30,
           100.0 * (peak30 - peak2) / peak2);
    printf("RSS:      epoch 2 %.1f MB, epoch 30 %.1f MB (%+.2f%%)\n", rss2, rss30,
           100.0 * (rss30 - rss2) / rss2);
    assert_true(peak30 <= peak2 * 1.05);
    assert_true(rss30 <= rss2 * 1.05);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sgd_skips_nonfinite_gradient),
        cmocka_unit_test_setup_teardown(injected_nan_stops, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(skip_nonfinite, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(skipped_step_changes_nothing, tu_setup_tmp,
                                        tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(checkpoint_file_size_limit, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(checkpoint_full_tmpfs, tu_setup_tmp, unmount_teardown),
        cmocka_unit_test_setup_teardown(kill_at_random_deterministic, tu_setup_tmp,
                                        tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(memory_flat_over_30_epochs, tu_setup_tmp, tu_teardown_tmp),
    };
    return tu_run(argc, argv, tests, setup, NULL);
}
