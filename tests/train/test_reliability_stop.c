/* SIGTERM and SIGINT end a run promptly at any stage: while it loads the
 * data, allocates and draws a large model's weights, or measures the
 * convolution kernels, the process ends within 2 s of the signal, exit
 * 128 + the signal, with one line saying so, and nothing of the run on
 * disk (no checkpoint, no metrics file, no temporary file). Between steps
 * a signal still finishes the step and saves the run (test_resume,
 * test_reliability_checkpoint). Before, a run ignored SIGTERM until its
 * first step: 20 s and more while it loaded or allocated. */
#include "reliabilityutil.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Files in the test's directory whose name holds `part`. */
static int files_named(const char *part)
{
    DIR *d = opendir(tu_tmp);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strstr(e->d_name, part) != NULL;
    closedir(d);
    return n;
}

/* Starts `args`, waits until `after` seconds have passed or its stderr
 * holds `marker` (NULL: the time alone), sends `signo`, and checks the
 * end: exit 128 + signo within 2 s of the signal, one line naming the
 * signal, and no output file. */
static void stop_while(const char *stage, const char *const *args, double after, const char *marker,
                       int signo)
{
    char err[512];
    tmp_path(err, "cli.err");
    double started;
    pid_t pid = cli_start(args, &started);
    for (;;) {
        usleep(10000);
        if (now() - started >= after && (!marker || strstr(slurp(err), marker)))
            break;
        if (now() - started > 120)
            fail_msg("%s: no '%s' after 120 s: %s", stage, marker, slurp(err));
    }
    double sent = now();
    assert_int_equal(kill(pid, signo), 0);
    cli_run r;
    cli_finish(pid, started, 60, &r);
    double took = now() - sent;
    const char *name = signo == SIGINT ? "SIGINT" : "SIGTERM";
    /* The marker's lines (--verbose) came before; the signal's is last. */
    const char *last = r.err;
    for (const char *p = r.err; *p; p++)
        if (p[0] == '\n' && p[1])
            last = p + 1;
    printf("%s: %s at %.2f s, exit %d %.2f s later: %s", stage, name, sent - started, r.status,
           took, last);
    if (r.status != 128 + signo)
        fail_msg("%s: exit %d, not %d: %s", stage, r.status, 128 + signo, r.err);
    if (took > (SANITIZED ? 10.0 : 2.0))
        fail_msg("%s: ended %.2f s after the signal", stage, took);
    char want[64];
    snprintf(want, sizeof want, "dptrain: stopped by %s\n", name);
    assert_string_equal(last, want);
    assert_int_equal(files_named("ck.st"), 0);
    assert_int_equal(files_named("m.jsonl"), 0);
    assert_int_equal(files_named(".tmp"), 0);
}

static void stopped_while_loading(void **state)
{
    (void)state;
    NEED_DATA();
    char ck[512], metrics[512];
    tmp_path(ck, "ck.st");
    tmp_path(metrics, "m.jsonl");
    /* Fashion-MNIST's 60,000 training images take half a second or more. */
    stop_while("loading Fashion-MNIST",
               CMD("train", "--checkpoint", ck, "--metrics", metrics, "--progress", "never"), 0.15,
               NULL, SIGTERM);
    stop_while("loading Fashion-MNIST",
               CMD("train", "--checkpoint", ck, "--metrics", metrics, "--progress", "never"), 0.15,
               NULL, SIGINT);
}

static void stopped_while_allocating(void **state)
{
    (void)state;
    char dir[512], model[512], ck[512], metrics[512];
    tmp_path(dir, "tiny");
    tmp_path(model, "wide.txt");
    tmp_path(ck, "ck.st");
    tmp_path(metrics, "m.jsonl");
    tu_write_idx_set(dir);
    /* 118 million parameters (470 MB) allocated and drawn, then their
     * gradients and the replica's update: a second or two before the
     * first step. */
    static const char wide[] = "Flatten()\nLinear(784, 150000)\nLinear(150000, 10)\n";
    assert_int_equal(tu_write_file(model, wide, sizeof wide - 1), 0);
    stop_while("allocating a 470 MB model",
               CMD("train", "--model", model, "--dataset", "mnist", "--data", dir, "--batch-size",
                   "4", "--checkpoint", ck, "--metrics", metrics, "--progress", "never"),
               0.3, NULL, SIGTERM);
}

static void stopped_while_measuring_kernels(void **state)
{
    (void)state;
    NEED_DATA();
    char ck[512], metrics[512];
    tmp_path(ck, "ck.st");
    tmp_path(metrics, "m.jsonl");
    /* ResNet-18's convolutions timed one by one at batch 256: seconds;
     * --verbose names each as it is measured. */
    stop_while("measuring ResNet-18's kernels",
               CMD("train", "--model", "resnet18", "--conv-algo", "auto", "--limit-train", "512",
                   "--checkpoint", ck, "--metrics", metrics, "--progress", "never", "--verbose"),
               0, "cpu:0: convolution f32 64x28x28", SIGTERM);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(stopped_while_loading, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(stopped_while_allocating, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(stopped_while_measuring_kernels, tu_setup_tmp,
                                        tu_teardown_tmp),
    };
    return tu_run(argc, argv, tests, setup, NULL);
}
