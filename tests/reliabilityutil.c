/* Helpers of the reliability tests (see reliabilityutil.h). */
#include "reliabilityutil.h"

#include "dp/dp.h"
#include "dp/safetensors.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define dptrain tu_dptrain

int setup(void **state)
{
    (void)state;
    if (tu_find_dptrain() < 0)
        return -1;
    return 0;
}

/* Starts `dptrain train` with small common settings (kernels fixed: runs
 * are compared bit for bit), then `extra`. */
pid_t start(const char *const *extra, const child_opts *c)
{
    const char *args[64] = {dptrain,         "train", "--limit-test", "256",
                            "--batch-size",  "64",    "--threads",    "1",
                            "--seed",        "7",     "--progress",   "never",
                            "--limit-train", "2048",  "--conv-algo",  "direct"};
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

int wait_exit(pid_t pid)
{
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int run(const char *const *extra, const child_opts *c)
{
    return wait_exit(start(extra, c));
}

/* buf (512 bytes) = "<the test's temp dir>/<name>" */
void tmp_path(char *buf, const char *name)
{
    snprintf(buf, 512, "%s", tu_tmp_path(name));
}

char *slurp(const char *path)
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
void assert_has(const char *text, const char *want)
{
    if (!strstr(text, want))
        fail_msg("expected '%s' in:\n%s", want, text);
}

int epochs_done(const char *path)
{
    dp_safetensors_t *f;
    assert_int_equal(dp_safetensors_open(&f, path), 0);
    const char *v = dp_safetensors_meta(f, "dptrain.epochs_done");
    int e = v ? atoi(v) : -1;
    dp_safetensors_close(f);
    return e;
}

void copy_file(const char *from, const char *to)
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

void assert_same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    assert_non_null(fa);
    assert_non_null(fb);
    long long at = 0;
    int ca, cb;
    do {
        ca = getc(fa);
        cb = getc(fb);
        if (ca != cb) {
            fclose(fa);
            fclose(fb);
            fail_msg("%s and %s differ at byte %lld%s", a, b, at,
                     ca == EOF || cb == EOF ? " (one ends there)" : "");
        }
        at++;
    } while (ca != EOF);
    fclose(fa);
    fclose(fb);
    printf("%s: the same %lld bytes as %s\n", a, at - 1, b);
}

/* `dptrain eval` accepts the checkpoint. */
void assert_loadable(const char *path)
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

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int cli_as_limit_gb;

pid_t cli_start(const char *const *args, double *started)
{
    char out_path[512], err_path[512];
    tmp_path(out_path, "cli.out");
    tmp_path(err_path, "cli.err");
    const char *argv[64] = {dptrain};
    int n = 1;
    for (; args[n - 1] && n < 63; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    fflush(stdout);
    *started = now_seconds();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (!freopen(out_path, "w", stdout) || !freopen(err_path, "w", stderr))
            _exit(126);
        struct rlimit as = {(rlim_t)cli_as_limit_gb << 30, (rlim_t)cli_as_limit_gb << 30};
        if (cli_as_limit_gb > 0 && setrlimit(RLIMIT_AS, &as) != 0)
            _exit(126);
        execv(dptrain, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

void cli_finish(pid_t pid, double started, double kill_after, cli_run *r)
{
    memset(r, 0, sizeof *r);
    int status;
    struct rusage ru;
    for (;;) {
        pid_t got = wait4(pid, &status, kill_after > 0 ? WNOHANG : 0, &ru);
        assert_true(got == pid || got == 0);
        if (got == pid)
            break;
        if (now_seconds() - started > kill_after) {
            kill(pid, SIGKILL);
            kill_after = 0;
        }
        usleep(2000);
    }
    r->seconds = now_seconds() - started;
    r->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r->maxrss_kb = ru.ru_maxrss;
    char path[512];
    tmp_path(path, "cli.out");
    snprintf(r->out, sizeof r->out, "%s", slurp(path));
    tmp_path(path, "cli.err");
    snprintf(r->err, sizeof r->err, "%s", slurp(path));
}

void run_cli(const char *const *args, double kill_after, cli_run *r)
{
    double started;
    pid_t pid = cli_start(args, &started);
    cli_finish(pid, started, kill_after, r);
}

int count_lines(const char *text)
{
    int n = 0;
    for (; *text; text++)
        n += *text == '\n';
    return n;
}
