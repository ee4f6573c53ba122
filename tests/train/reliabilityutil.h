/* Helpers of the reliability tests (test_reliability_nonfinite.c,
 * test_reliability_checkpoint.c, test_reliability_memory.c), which run the
 * built dptrain (DP_BUILD_DIR) as a child process: starting it with small
 * common settings, limits and environment, and reading what it left (its
 * output, its checkpoints). */
#ifndef DP_TESTS_RELIABILITYUTIL_H
#define DP_TESTS_RELIABILITYUTIL_H

#include "testutil.h"

#include <sys/types.h>

/* The group setup: finds dptrain (tu_dptrain). */
int setup(void **state);

/* How to start a child. */
typedef struct child_opts {
    const char *err_path;  /* stderr goes here; NULL: /dev/null */
    const char *env;       /* "NAME=VALUE" put into the environment, or NULL */
    long long fsize_limit; /* RLIMIT_FSIZE in bytes (SIGXFSZ ignored), 0 = none */
} child_opts;

/* Starts `dptrain train` with small common settings (kernels fixed: runs
 * are compared bit for bit), then `extra` (NULL-terminated). */
pid_t start(const char *const *extra, const child_opts *c);
/* Waits for pid: its exit status, or 128 + the signal that killed it. */
int wait_exit(pid_t pid);
/* start, then wait_exit. */
int run(const char *const *extra, const child_opts *c);
/* buf (512 bytes) = "<the test's temp dir>/<name>" */
void tmp_path(char *buf, const char *name);
/* The file's first 64 KiB, NUL-terminated, in a static buffer. */
char *slurp(const char *path);
/* Fails unless `text` contains `want`; prints the text first. */
void assert_has(const char *text, const char *want);
/* The checkpoint's "dptrain.epochs_done", or -1 if it has none. */
int epochs_done(const char *path);
void copy_file(const char *from, const char *to);
/* Fails unless the two files hold the same bytes (says where they first
 * differ). */
void assert_same_file(const char *a, const char *b);
/* `dptrain eval` accepts the checkpoint. */
void assert_loadable(const char *path);

/* One run of the built dptrain with any arguments, measured: its exit
 * status (or 128 + the signal that ended it), its wall-clock seconds, its
 * peak resident size (getrusage's ru_maxrss), the start of its stdout and
 * stderr. */
typedef struct cli_run {
    int status;
    double seconds;
    long maxrss_kb;
    char out[8192], err[4096];
} cli_run;
/* The address space run_cli's children get, in GiB (0: unlimited): a
 * test whose guard is broken then fails at an allocation, not by the
 * machine's memory running out. */
extern int cli_as_limit_gb;
/* Runs `dptrain args...` (NULL-terminated) to its end; a run still going
 * after `kill_after` seconds (0: never) gets SIGKILL, which its status
 * shows (128 + 9). */
void run_cli(const char *const *args, double kill_after, cli_run *r);
/* run_cli in the background: the child's pid; cli_finish waits for it and
 * fills *r (seconds from cli_start). */
pid_t cli_start(const char *const *args, double *started);
void cli_finish(pid_t pid, double started, double kill_after, cli_run *r);
/* Lines in text. */
int count_lines(const char *text);

/* ---- hostile runs: one line, a non-zero exit, within 1 s and 64 MB ------- */

/* A sanitizer's build runs several times slower: 10 s are allowed there;
 * and ASan holds freed blocks back (its quarantine, 256 MB) and pads each
 * block, so a run that allocates and frees much (a 100,000-layer chain
 * traced on the meta device) peaks some 70 MB higher there than in the
 * Release build that the 64 MB is stated for: 128 MB there. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif
#define HEADROOM_KB ((SANITIZED ? 128L : 64L) * 1024)
#define SECONDS_ALLOWED (SANITIZED ? 10.0 : 1.0)
#define WANT(...) ((const char *const[]){__VA_ARGS__, NULL})
#define CMD(...) ((const char *const[]){__VA_ARGS__, NULL})

/* The group setup of the hostile runs: the test's directory, an 8 GiB
 * address space for every run (none under a sanitizer), the program's
 * rest (dptrain --version's peak) in resting_kb, a tiny MNIST-style set in
 * data_dir (tu_write_idx_set) and a LeNet checkpoint trained
 * on it in `checkpoint`. */
extern long resting_kb;
extern char data_dir[512], checkpoint[512];
int hostile_setup(void **state);
int hostile_teardown(void **state);
/* `args` must end with one line on stderr holding every string of `want`
 * (NULL-terminated), a non-zero exit, nothing on stdout, within the time
 * allowed and 64 MB over `base_kb` of resident memory (expect_refused:
 * over resting_kb). */
void expect_refused_over(const char *name, const char *const *args, const char *const *want,
                         long base_kb);
void expect_refused(const char *name, const char *const *args, const char *const *want);
/* A 28 x 28 grayscale PNG of value v, written with zlib alone. */
void write_png(const char *path, uint8_t v);
/* DIR/{train,test}/CLASS/0.png for each of the n classes. */
void make_folder(const char *dir, const char *const *classes, int n);
/* A copy of `checkpoint` at tu_tmp_path(name) whose metadata `key` is
 * `value` (NULL: left out), every tensor and other key kept. */
const char *with_meta(const char *name, const char *key, const char *value);

#define NEED_DATA()                                                                                \
    do {                                                                                           \
        if (!tu_have_fashion_mnist()) {                                                            \
            tu_skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");     \
        }                                                                                          \
    } while (0)

#endif
