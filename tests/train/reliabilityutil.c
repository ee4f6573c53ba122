/* Helpers of the reliability tests (see reliabilityutil.h). */
#include "reliabilityutil.h"

#include "dp/dp.h"
#include "dp/safetensors.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

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

/* ---- hostile runs (test_reliability_hostile.c, test_reliability_metadata.c)
 * ------------------------------------------------------------------------- */

long resting_kb;
char data_dir[512], checkpoint[512];

int hostile_setup(void **state)
{
    if (setup(state) < 0 || tu_setup_tmp(state) < 0)
        return -1;
    /* ASan reserves terabytes of address space: no cap there. */
    cli_as_limit_gb = SANITIZED ? 0 : 8;
    cli_run r;
    const char *version[] = {"--version", NULL};
    run_cli(version, 30, &r);
    if (r.status != 0)
        return -1;
    resting_kb = r.maxrss_kb;
    snprintf(data_dir, sizeof data_dir, "%s", tu_tmp_path("tiny"));
    tu_write_idx_set(data_dir);
    snprintf(checkpoint, sizeof checkpoint, "%s", tu_tmp_path("lenet.st"));
    const char *train[] = {
        "train",        "--dataset", "mnist",      "--data", data_dir,       "--epochs", "1",
        "--batch-size", "4",         "--progress", "never",  "--checkpoint", checkpoint, NULL};
    run_cli(train, 120, &r);
    printf("dptrain --version rests at %ld MB; the tiny set's checkpoint: exit %d\n",
           resting_kb / 1024, r.status);
    return r.status == 0 ? 0 : -1;
}

int hostile_teardown(void **state)
{
    return tu_tmp ? tu_teardown_tmp(state) : 0;
}

void expect_refused_over(const char *name, const char *const *args, const char *const *want,
                         long base_kb)
{
    cli_run r;
    run_cli(args, 30, &r);
    printf("%-40s exit %d, %.2f s, %ld MB (rest %ld MB): %s", name, r.status, r.seconds,
           r.maxrss_kb / 1024, resting_kb / 1024, r.err);
    if (r.status == 0 || r.status >= 128 || count_lines(r.err) != 1 || r.out[0])
        fail_msg("%s: expected one line on stderr and a non-zero exit, got exit %d:\n%s%s", name,
                 r.status, r.err, r.out);
    for (int i = 0; want[i]; i++)
        if (!strstr(r.err, want[i]))
            fail_msg("%s: expected '%s' in: %s", name, want[i], r.err);
    if (r.seconds > SECONDS_ALLOWED)
        fail_msg("%s: took %.2f s, more than %.0f", name, r.seconds, SECONDS_ALLOWED);
    if (r.maxrss_kb > base_kb + HEADROOM_KB)
        fail_msg("%s: %ld MB resident, more than %ld MB + %ld", name, r.maxrss_kb / 1024,
                 base_kb / 1024, HEADROOM_KB / 1024);
}

void expect_refused(const char *name, const char *const *args, const char *const *want)
{
    expect_refused_over(name, args, want, resting_kb);
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

void write_png(const char *path, uint8_t v)
{
    uint8_t raw[28 * 29], z[2048], file[4096];
    for (int r = 0; r < 28; r++) {
        raw[r * 29] = 0; /* filter: none */
        memset(raw + r * 29 + 1, v, 28);
    }
    uLongf zlen = sizeof z;
    assert_int_equal(compress(z, &zlen, raw, sizeof raw), Z_OK);
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    size_t n = 0;
    memcpy(file, sig, 8);
    n = 8;
    const struct {
        const char *type;
        const uint8_t *data;
        size_t len;
    } chunks[3] = {{"IHDR", (const uint8_t[]){0, 0, 0, 28, 0, 0, 0, 28, 8, 0, 0, 0, 0}, 13},
                   {"IDAT", z, zlen},
                   {"IEND", NULL, 0}};
    for (int c = 0; c < 3; c++) {
        put_be32(file + n, (uint32_t)chunks[c].len);
        memcpy(file + n + 4, chunks[c].type, 4);
        if (chunks[c].len)
            memcpy(file + n + 8, chunks[c].data, chunks[c].len);
        uLong crc = crc32(0, file + n + 4, (uInt)(4 + chunks[c].len));
        put_be32(file + n + 8 + chunks[c].len, (uint32_t)crc);
        n += 12 + chunks[c].len;
    }
    assert_int_equal(tu_write_file(path, file, n), 0);
}

void make_folder(const char *dir, const char *const *classes, int n)
{
    static const char *const splits[2] = {"train", "test"};
    char path[1024];
    assert_int_equal(mkdir(dir, 0755), 0);
    for (int s = 0; s < 2; s++) {
        snprintf(path, sizeof path, "%s/%s", dir, splits[s]);
        assert_int_equal(mkdir(path, 0755), 0);
        for (int k = 0; k < n; k++) {
            snprintf(path, sizeof path, "%s/%s/%s", dir, splits[s], classes[k]);
            assert_int_equal(mkdir(path, 0755), 0);
            snprintf(path, sizeof path, "%s/%s/%s/0.png", dir, splits[s], classes[k]);
            write_png(path, (uint8_t)(60 * k));
        }
    }
}

const char *with_meta(const char *name, const char *key, const char *value)
{
    static const char *const keys[] = {"format",
                                       "dptrain.model",
                                       "dptrain.epochs_done",
                                       "dptrain.step",
                                       "dptrain.seed",
                                       "dptrain.batch",
                                       "dptrain.partial",
                                       "dptrain.batch_size",
                                       "dptrain.augment",
                                       "dptrain.normalize",
                                       "dptrain.lr",
                                       "dptrain.momentum",
                                       "dptrain.weight_decay",
                                       "dptrain.precision",
                                       "dptrain.devices",
                                       "dptrain.history",
                                       "dptrain.conv_algos",
                                       "dptrain.lr_schedule",
                                       "dptrain.best",
                                       "dptrain.input",
                                       "dptrain.classes",
                                       "dptrain.optimizer",
                                       "dptrain.optimizer_steps",
                                       "dptrain.model_sha256"};
    static char paths[4][512];
    static int next;
    char *out = paths[next++ % 4];
    snprintf(out, 512, "%s", tu_tmp_path(name));
    dp_safetensors_t *f;
    assert_int_equal(dp_safetensors_open(&f, checkpoint), 0);
    int n = dp_safetensors_count(f), nmeta = 0;
    dp_st_tensor *ts = calloc((size_t)n, sizeof *ts);
    for (int i = 0; i < n; i++)
        assert_int_equal(dp_safetensors_get(f, i, &ts[i]), 0);
    const char *meta[2 * (COUNTOF(keys) + 1)];
    bool put = false;
    for (size_t i = 0; i < COUNTOF(keys); i++) {
        const char *v = strcmp(keys[i], key) == 0 ? value : dp_safetensors_meta(f, keys[i]);
        put = put || strcmp(keys[i], key) == 0;
        if (v) {
            meta[nmeta++] = keys[i];
            meta[nmeta++] = v;
        }
    }
    if (!put && value) {
        meta[nmeta++] = key;
        meta[nmeta++] = value;
    }
    assert_int_equal(dp_safetensors_write(out, ts, n, meta, nmeta / 2), 0);
    free(ts);
    dp_safetensors_close(f);
    return out;
}
