/* Hostile inputs are refused cheaply: each runs `dptrain` in a child whose
 * address space is capped at the baseline plus 32 MB, and must end with
 * its one-line error (or, for a summary, its table), never an out-of-memory
 * message. The baseline is the peak address space of the same command on a
 * small valid input, read from /proc/PID/status as the child exits (the
 * child stops there under ptrace, before its memory is torn down).
 *
 * AddressSanitizer reserves terabytes of address space, so the asan build
 * cannot cap it: there each run is held to the baseline's peak resident
 * size plus 32 MB instead, and no single allocation may exceed 32 MB
 * (ASan's max_allocation_size_mb, returning NULL as malloc would).
 *
 * 32 MB: a refused input usually ends below its baseline (a valid run goes
 * on to open devices and build the model), by up to 140 MB here, so a
 * looser cap would let a header or a file of newlines cost a few hundred
 * megabytes unseen. */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#define HEADROOM_KB (32L * 1024)
enum { MAX_ARGS = 24 };

/* What one run of dptrain left: its exit status, stderr, stdout's start,
 * and its peak address space and resident size (kB). */
typedef struct run_result {
    int status; /* exit code, or 128 + signal */
    char err[4096], out[4096];
    long vm_peak_kb, rss_peak_kb;
} run_result;

static long status_field_kb(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            kb = strtol(line + n + 1, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

static void slurp(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, size - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
}

/* Runs tu_dptrain with args (NULL-terminated) in a child. as_limit_kb > 0
 * caps its address space. The child stops at its exit under ptrace, where
 * its peak sizes are read. */
static void run_dptrain(const char *const *args, long as_limit_kb, run_result *r)
{
    memset(r, 0, sizeof *r);
    const char *out_path = tu_tmp_path("run.out");
    char out_copy[512];
    snprintf(out_copy, sizeof out_copy, "%s", out_path);
    const char *err_path = tu_tmp_path("run.err");
    char *argv[MAX_ARGS + 2] = {tu_dptrain};
    int argc = 1;
    for (; args[argc - 1]; argc++)
        argv[argc] = (char *)args[argc - 1];
    argv[argc] = NULL;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int o = open(out_copy, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(126);
        if (as_limit_kb > 0) {
            struct rlimit lim = {(rlim_t)as_limit_kb * 1024, (rlim_t)as_limit_kb * 1024};
            if (setrlimit(RLIMIT_AS, &lim) != 0)
                _exit(126);
        }
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0)
            _exit(125);
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (WIFEXITED(st))
        fail_msg("the child could not start under ptrace (exit %d)", WEXITSTATUS(st));
    /* Stopped at exec: from here on stop it again at its exit. */
    assert_int_equal(ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)PTRACE_O_TRACEEXIT), 0);
    assert_int_equal(ptrace(PTRACE_CONT, pid, NULL, NULL), 0);
    for (;;) {
        assert_int_equal(waitpid(pid, &st, 0), pid);
        if (WIFEXITED(st) || WIFSIGNALED(st))
            break;
        int sig = 0;
        if (WIFSTOPPED(st) && (st >> 8) == (SIGTRAP | (PTRACE_EVENT_EXIT << 8))) {
            r->vm_peak_kb = status_field_kb(pid, "VmPeak");
            r->rss_peak_kb = status_field_kb(pid, "VmHWM");
        } else if (WIFSTOPPED(st) && WSTOPSIG(st) != SIGTRAP) {
            sig = WSTOPSIG(st); /* pass the child's own signals on */
        }
        ptrace(PTRACE_CONT, pid, NULL, (void *)(long)sig);
    }
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    slurp(err_path, r->err, sizeof r->err);
    slurp(out_copy, r->out, sizeof r->out);
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* Runs `valid` for the baseline, then `hostile` within baseline + 32 MB.
 * want_error: the hostile run must exit non-zero with one line on stderr
 * containing it; NULL: it must succeed and print `want_out`. */
static void expect_cheap(const char *name, const char *const *valid, const char *const *hostile,
                         const char *want_error, const char *want_out)
{
    run_result base, r;
    /* Under ASan: LeakSanitizer stops the world with ptrace, which a traced
     * child cannot (leaks are checked by the rest of the suite), and the
     * hostile run may allocate no more than the headroom at once. */
    const char *had = getenv("ASAN_OPTIONS");
    char opts[1024];
    snprintf(opts, sizeof opts, "%s%sdetect_leaks=0", had ? had : "", had && had[0] ? ":" : "");
    if (UNDER_ASAN)
        setenv("ASAN_OPTIONS", opts, 1);
    run_dptrain(valid, 0, &base);
    if (base.status != 0)
        fail_msg("%s: the baseline run failed (exit %d): %s", name, base.status, base.err);
    assert_true(base.vm_peak_kb > 0 && base.rss_peak_kb > 0);
    if (UNDER_ASAN) {
        size_t len = strlen(opts);
        snprintf(opts + len, sizeof opts - len,
                 ":max_allocation_size_mb=%ld:allocator_may_return_null=1", HEADROOM_KB / 1024);
        setenv("ASAN_OPTIONS", opts, 1);
        run_dptrain(hostile, 0, &r);
        if (had)
            setenv("ASAN_OPTIONS", had, 1);
        else
            unsetenv("ASAN_OPTIONS");
    } else {
        run_dptrain(hostile, base.vm_peak_kb + HEADROOM_KB, &r);
    }
    printf("%s: baseline %ld MB address space, %ld MB resident; hostile run %ld MB, %ld MB "
           "(%s), exit %d: %s",
           name, base.vm_peak_kb / 1024, base.rss_peak_kb / 1024, r.vm_peak_kb / 1024,
           r.rss_peak_kb / 1024,
           UNDER_ASAN ? "ASan: resident size held to the baseline + 32 MB"
                      : "address space capped at the baseline + 32 MB",
           r.status, want_error || r.status ? r.err : "the summary\n");
    if (strstr(r.err, "out of memory") || strstr(r.err, "std::bad_alloc"))
        fail_msg("%s: ran out of memory: %s", name, r.err);
    if (UNDER_ASAN && r.rss_peak_kb > base.rss_peak_kb + HEADROOM_KB)
        fail_msg("%s: %ld MB resident, more than the baseline's %ld MB + 32", name,
                 r.rss_peak_kb / 1024, base.rss_peak_kb / 1024);
    if (want_error) {
        if (r.status == 0 || count_lines(r.err) != 1 || !strstr(r.err, want_error))
            fail_msg("%s: expected one line with '%s' and a non-zero exit, got exit %d: %s", name,
                     want_error, r.status, r.err);
    } else if (r.status != 0 || !strstr(r.out, want_out)) {
        fail_msg("%s: expected success and '%s', got exit %d: %s", name, want_out, r.status, r.err);
    }
}

/* ---- the inputs -------------------------------------------------------------- */

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* An IDX header of unsigned bytes for dims[0..ndims); returns its length. */
static size_t idx_header(uint8_t *h, int ndims, const uint32_t *dims)
{
    h[0] = h[1] = 0, h[2] = 0x08, h[3] = (uint8_t)ndims;
    for (int i = 0; i < ndims; i++)
        put_be32(h + 4 + 4 * i, dims[i]);
    return 4 + 4 * (size_t)ndims;
}

static const char *make_dir(const char *name)
{
    static char paths[4][512];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 512, "%s", tu_tmp_path(name));
    assert_int_equal(mkdir(p, 0755) == 0 || errno == EEXIST, 1);
    return p;
}

#define TRAIN_ARGS(dir)                                                                            \
    "train", "--model", "lenet", "--dataset", "mnist", "--data", dir, "--devices", "1",            \
        "--batch-size", "4", "--epochs", "1", "--progress", "never"

static void test_idx_zero_images_of_16384_squared(void **state)
{
    (void)state;
    const char *good = make_dir("good"), *bad = make_dir("zero");
    tu_write_idx_set(good);
    tu_write_idx_set(bad);
    /* The 16 bytes: [0, 16384, 16384] images, and no labels. */
    uint8_t h[16];
    char path[512];
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte", bad);
    assert_int_equal(tu_write_file(path, h, idx_header(h, 3, (uint32_t[]){0, 16384, 16384})), 0);
    snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte", bad);
    assert_int_equal(tu_write_file(path, h, idx_header(h, 1, (uint32_t[]){0})), 0);
    const char *valid[] = {TRAIN_ARGS(good), NULL}, *hostile[] = {TRAIN_ARGS(bad), NULL};
    expect_cheap("idx [0, 16384, 16384]", valid, hostile, "no images", NULL);
}

static void test_idx_gzip_of_one_256_mb_image(void **state)
{
    (void)state;
    const char *good = make_dir("good"), *bad = make_dir("gzip");
    tu_write_idx_set(good);
    tu_write_idx_set(bad);
    /* A gzip of the header [1, 16384, 16384] and its 256 MiB of zeros:
     * some 261 KB on disk, every byte the header promises there. */
    char path[512];
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte", bad);
    assert_int_equal(unlink(path), 0);
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", bad);
    gzFile gz = gzopen(path, "wb9");
    assert_non_null(gz);
    uint8_t h[16];
    assert_int_equal(gzwrite(gz, h, (unsigned)idx_header(h, 3, (uint32_t[]){1, 16384, 16384})), 16);
    static uint8_t zeros[1 << 20];
    for (int i = 0; i < 256; i++)
        assert_int_equal(gzwrite(gz, zeros, sizeof zeros), (int)sizeof zeros);
    assert_int_equal(gzclose(gz), Z_OK);
    snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte", bad);
    uint8_t one[9];
    idx_header(one, 1, (uint32_t[]){1});
    one[8] = 3;
    assert_int_equal(tu_write_file(path, one, sizeof one), 0);
    const char *valid[] = {TRAIN_ARGS(good), NULL}, *hostile[] = {TRAIN_ARGS(bad), NULL};
    expect_cheap("idx.gz [1, 16384, 16384]", valid, hostile, "16384 x 16384 pixels", NULL);
}

static const char *write_text(const char *name, const char *text, size_t repeat)
{
    static char paths[8][512];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, 512, "%s", tu_tmp_path(name));
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    for (size_t i = 0; i < repeat; i++)
        fputs(text, f);
    assert_int_equal(fclose(f), 0);
    return p;
}

static void test_model_file_of_newlines(void **state)
{
    (void)state;
    const char *good = write_text("good.txt", "Flatten()\nLinear(784, 10)\n", 1);
    const char *bad = write_text("newlines.txt", "\n", (1 << 20) - 1);
    const char *valid[] = {"model", good, NULL}, *hostile[] = {"model", bad, NULL};
    expect_cheap("1 MiB of newlines", valid, hostile, "no modules", NULL);
}

static void test_model_over_the_parameter_bound(void **state)
{
    (void)state;
    const char *good = write_text("good.txt", "Flatten()\nLinear(784, 10)\n", 1);
    const char *valid[] = {"model", good, NULL};
    /* 2,355,000,000 parameters (9.4 GB). */
    const char *linear = write_text("linear.txt", "Flatten()\nLinear(784, 3000000)\n", 1);
    const char *hostile[] = {"model", linear, NULL};
    expect_cheap("Linear(784, 3000000)", valid, hostile,
                 "2355000000 parameters, more than the 1073741824", NULL);
    /* Conv2d(1, 1e9, 1): 1e9 is a float, which Conv2d does not take;
     * written as an integer, with a Linear after it, 12e9 parameters. */
    const char *conv = write_text("conv.txt", "Conv2d(1, 1e9, 1)\n", 1);
    const char *hostile_conv[] = {"model", conv, NULL};
    expect_cheap("Conv2d(1, 1e9, 1)", valid, hostile_conv, "'out_channels' must be an integer",
                 NULL);
    const char *conv_int = write_text("conv_int.txt",
                                      "Conv2d(1, 1000000000, 1)\nAdaptiveAvgPool2d(1)\n"
                                      "Flatten()\nLinear(1000000000, 10)\n",
                                      1);
    const char *hostile_conv_int[] = {"model", conv_int, NULL};
    expect_cheap("Conv2d(1, 1000000000, 1)", valid, hostile_conv_int,
                 "12000000010 parameters, more than the 1073741824", NULL);
}

static void test_summary_of_huge_inputs(void **state)
{
    (void)state;
    /* 128 TiB of activations: a summary needs their shapes only. */
    const char *valid[] = {"model", "resnet18", NULL};
    const char *hostile[] = {"model", "resnet18", "--input", "4096x65536x65536", NULL};
    expect_cheap("resnet18 --input 4096x65536x65536", valid, hostile, NULL,
                 "resnet18 on 4096x65536x65536 inputs");
}

int main(int argc, char **argv)
{
    if (tu_find_dptrain() != 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idx_zero_images_of_16384_squared),
        cmocka_unit_test(test_idx_gzip_of_one_256_mb_image),
        cmocka_unit_test(test_model_file_of_newlines),
        cmocka_unit_test(test_model_over_the_parameter_bound),
        cmocka_unit_test(test_summary_of_huge_inputs),
    };
    return tu_run(argc, argv, tests, tu_setup_tmp, tu_teardown_tmp);
}
