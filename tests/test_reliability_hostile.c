/* Hostile input, third round: each input below ends the command with one
 * line on stderr naming the file and the cause, a non-zero exit, within
 * 1 s and within 64 MB of resident memory over the program's rest (the
 * peak of `dptrain --version`, measured first). Every input is made here.
 *
 * Under a sanitizer the program runs several times slower: the time
 * allowed is 10 s there, the memory the same 64 MB over its own rest. */
#include "reliabilityutil.h"

#include "dp/dp.h"
#include "dp/safetensors.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

#define HEADROOM_KB (64L * 1024)
#define SECONDS_ALLOWED (SANITIZED ? 10.0 : 1.0)

static long resting_kb;
/* The group's files: a tiny MNIST-style data set and a LeNet checkpoint
 * trained on it. */
static char data_dir[512], checkpoint[512];

/* ---- the tiny data set and its checkpoint ---------------------------------- */

static void write_idx_set(const char *dir)
{
    static const char *const split[2] = {"train", "t10k"};
    static const uint32_t count[2] = {8, 4};
    char path[600];
    assert_int_equal(mkdir(dir, 0755) == 0 || errno == EEXIST, 1);
    for (int s = 0; s < 2; s++) {
        uint32_t dims[3] = {count[s], 28, 28};
        size_t len;
        uint8_t *px = calloc((size_t)count[s] * 784, 1), labels[8] = {0, 1, 2, 3, 4, 5, 6, 7};
        uint8_t *f = tu_make_idx(3, dims, px, &len);
        snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, split[s]);
        assert_int_equal(tu_write_file(path, f, len), 0);
        free(f);
        free(px);
        f = tu_make_idx(1, dims, labels, &len);
        snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, split[s]);
        assert_int_equal(tu_write_file(path, f, len), 0);
        free(f);
    }
}

static int group_setup(void **state)
{
    if (setup(state) < 0 || tu_setup_tmp(state) < 0)
        return -1;
    cli_run r;
    const char *version[] = {"--version", NULL};
    run_cli(version, 30, &r);
    if (r.status != 0)
        return -1;
    resting_kb = r.maxrss_kb;
    snprintf(data_dir, sizeof data_dir, "%s", tu_tmp_path("tiny"));
    write_idx_set(data_dir);
    snprintf(checkpoint, sizeof checkpoint, "%s", tu_tmp_path("lenet.st"));
    const char *train[] = {
        "train",        "--dataset", "mnist",      "--data", data_dir,       "--epochs", "1",
        "--batch-size", "4",         "--progress", "never",  "--checkpoint", checkpoint, NULL};
    run_cli(train, 120, &r);
    printf("dptrain --version rests at %ld MB; the tiny set's checkpoint: exit %d\n",
           resting_kb / 1024, r.status);
    return r.status == 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
    return tu_teardown_tmp(state);
}

/* `args` must end with one line on stderr holding every string of `want`
 * (NULL-terminated), a non-zero exit, nothing on stdout, within the time
 * and memory allowed. */
static void expect_refused(const char *name, const char *const *args, const char *const *want)
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
    if (r.maxrss_kb > resting_kb + HEADROOM_KB)
        fail_msg("%s: %ld MB resident, more than the rest's %ld MB + 64", name, r.maxrss_kb / 1024,
                 resting_kb / 1024);
}

#define WANT(...) ((const char *const[]){__VA_ARGS__, NULL})
#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ---- 4. a FIFO (or any file that is not a regular one) is never opened to
 * be read: open() of a FIFO waits for a writer, forever --------------------- */

static const char *fifo(const char *name)
{
    static char paths[4][512];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 512, "%s", tu_tmp_path(name));
    unlink(p);
    assert_int_equal(mkfifo(p, 0644), 0);
    return p;
}

static void fifo_inputs(void **state)
{
    (void)state;
    const char *png = fifo("image.png");
    expect_refused("predict a FIFO image", ARGS("predict", "--checkpoint", checkpoint, png),
                   WANT(png, "not a regular file (a FIFO)"));
    const char *npy = fifo("batch.npy");
    expect_refused("predict a FIFO .npy", ARGS("predict", "--checkpoint", checkpoint, npy),
                   WANT(npy, "not a regular file (a FIFO)"));
    const char *st = fifo("weights.st");
    expect_refused("eval a FIFO checkpoint", ARGS("eval", "--checkpoint", st),
                   WANT(st, "not a regular file (a FIFO)"));
    expect_refused("predict with a FIFO checkpoint",
                   ARGS("predict", "--checkpoint", st, "/dev/null.png"),
                   WANT(st, "not a regular file (a FIFO)"));
    expect_refused("train --init a FIFO",
                   ARGS("train", "--dataset", "mnist", "--data", data_dir, "--init", st),
                   WANT(st, "not a regular file (a FIFO)"));
    expect_refused("train --resume a FIFO",
                   ARGS("train", "--dataset", "mnist", "--data", data_dir, "--resume", st),
                   WANT(st, "not a regular file (a FIFO)"));
    const char *txt = fifo("model.txt");
    expect_refused("model a FIFO model file", ARGS("model", txt),
                   WANT(txt, "not a regular file (a FIFO)"));
    const char *onnx = fifo("model.onnx");
    expect_refused("model a FIFO ONNX file", ARGS("model", onnx),
                   WANT(onnx, "not a regular file (a FIFO)"));
    expect_refused("a character device as a checkpoint", ARGS("eval", "--checkpoint", "/dev/zero"),
                   WANT("/dev/zero", "not a regular file (a character device)"));
    /* A data set whose training images are a FIFO. */
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("fifo-set"));
    write_idx_set(dir);
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte", dir);
    unlink(path);
    assert_int_equal(mkfifo(path, 0644), 0);
    expect_refused("train on a FIFO of images", ARGS("train", "--dataset", "mnist", "--data", dir),
                   WANT(path, "not a regular file (a FIFO)"));
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fifo_inputs),
    };
    return tu_run(argc, argv, tests, group_setup, group_teardown);
}
