/* Metrics JSON lines, the progress bar, the PLplot plot and peak RSS. */
#include "testutil.h"

#include "dp/core.h"
#include "dp/train_util.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The whole file as a NUL-terminated string (NULL if unreadable); *size
 * gets its length. */
static char *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n - 1 == 0) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    fclose(f);
    buf[n] = '\0';
    if (size)
        *size = n;
    return buf;
}

static char *path_in(const char *dir, const char *name)
{
    char *p = malloc(strlen(dir) + strlen(name) + 2);
    sprintf(p, "%s/%s", dir, name);
    return p;
}

static dp_epoch_stats example_stats(int epoch)
{
    dp_epoch_stats s = {
        .epoch = epoch,
        .train_loss = 0.9123449,
        .train_acc = 0.65124,
        .test_acc = 0.70206,
        .epoch_seconds = 3.4123,
        .samples_per_second = 17584.24,
        .devices = "[cpu:0, cpu:1]",
        .batch_size = 256,
        .lr = 0.2,
        .peak_rss_mb = 123.44,
    };
    return s;
}

/* Returns line `index` (from 0) of `text` as a fresh string, or NULL. */
static char *nth_line(const char *text, int index)
{
    for (int i = 0; i < index; i++) {
        text = strchr(text, '\n');
        if (!text)
            return NULL;
        text++;
    }
    const char *end = strchr(text, '\n');
    if (!end)
        return NULL;
    size_t n = (size_t)(end - text);
    char *line = malloc(n + 1);
    memcpy(line, text, n);
    line[n] = '\0';
    return line;
}

static void test_metrics_lines(void **state)
{
    (void)state;
    char *dir = tu_tempdir("metrics");
    char *path = path_in(dir, "metrics.jsonl");
    dp_metrics_t *m = NULL;
    assert_int_equal(dp_metrics_open(&m, path), DP_OK);

    assert_int_equal(dp_metrics_write_step(m, 12, 1, 0.6931471805599453, 0.05), DP_OK);
    dp_epoch_stats s = example_stats(1);
    assert_int_equal(dp_metrics_write_epoch(m, &s), DP_OK);

    /* The epoch line is flushed before close. */
    char *text = read_all(path, NULL);
    assert_non_null(text);
    char *line0 = nth_line(text, 0), *line1 = nth_line(text, 1);
    assert_non_null(line0);
    assert_non_null(line1);
    assert_string_equal(line0, "{\"step\": 12, \"epoch\": 1, \"loss\": 0.693147, \"lr\": 0.05}");
    assert_string_equal(line1, "{\"epoch\": 1, \"train_loss\": 0.912345, \"train_acc\": 0.6512, "
                               "\"test_acc\": 0.7021, \"epoch_seconds\": 3.412, "
                               "\"samples_per_second\": 17584.2, \"devices\": [\"cpu:0\", "
                               "\"cpu:1\"], \"batch_size\": 256, \"lr\": 0.2, "
                               "\"peak_rss_mb\": 123.4}");
    free(line0);
    free(line1);
    free(text);

    /* Non-finite numbers become null; unknown RSS is left out; device names
     * are escaped. */
    s = example_stats(2);
    s.train_loss = NAN;
    s.test_acc = INFINITY;
    s.peak_rss_mb = -1.0;
    s.devices = "[cu\"da:0,  back\\slash , ]";
    assert_int_equal(dp_metrics_write_epoch(m, &s), DP_OK);
    assert_int_equal(dp_metrics_write_step(m, 13, 2, NAN, 0.1), DP_OK);
    s = example_stats(3);
    s.devices = "[]";
    assert_int_equal(dp_metrics_write_epoch(m, &s), DP_OK);
    assert_int_equal(dp_metrics_close(m), DP_OK);

    text = read_all(path, NULL);
    assert_non_null(text);
    char *line2 = nth_line(text, 2), *line3 = nth_line(text, 3), *line4 = nth_line(text, 4);
    assert_non_null(line2);
    assert_non_null(line3);
    assert_non_null(line4);
    assert_null(nth_line(text, 5));
    assert_non_null(strstr(line2, "{\"epoch\": 2, \"train_loss\": null, "));
    assert_non_null(strstr(line2, "\"test_acc\": null, "));
    assert_non_null(strstr(line2, "\"devices\": [\"cu\\\"da:0\", \"back\\\\slash\"], "));
    assert_null(strstr(line2, "peak_rss_mb"));
    assert_non_null(strstr(line2, "\"lr\": 0.2}"));
    assert_string_equal(line3, "{\"step\": 13, \"epoch\": 2, \"loss\": null, \"lr\": 0.1}");
    assert_non_null(strstr(line4, "\"devices\": [], "));
    free(line2);
    free(line3);
    free(line4);
    free(text);

    unlink(path);
    rmdir(dir);
    free(path);
    free(dir);
}

static void test_metrics_unwritable(void **state)
{
    (void)state;
    tu_quiet_log();
    dp_metrics_t *m = (dp_metrics_t *)&m;
    const char *bad = "tmp_no_such_dir_for_metrics/sub/metrics.jsonl";
    assert_int_equal(dp_metrics_open(&m, bad), DP_EIO);
    assert_null(m);
    assert_non_null(strstr(dp_last_error(), bad));
    assert_non_null(strstr(dp_last_error(), "No such file or directory"));
    assert_int_equal(dp_metrics_close(NULL), DP_OK);
    dp_log_set(NULL, NULL);
}

/* /dev/full accepts the open and fails every write with ENOSPC. */
static void test_metrics_write_error(void **state)
{
    (void)state;
    if (access("/dev/full", W_OK) != 0)
        tu_skip("/dev/full is not writable here");
    tu_quiet_log();
    dp_metrics_t *m = NULL;
    assert_int_equal(dp_metrics_open(&m, "/dev/full"), DP_OK);
    dp_epoch_stats s = example_stats(1);
    assert_int_equal(dp_metrics_write_epoch(m, &s), DP_EIO);
    assert_non_null(strstr(dp_last_error(), "/dev/full"));
    assert_int_equal(dp_metrics_write_step(m, 1, 1, 0.5, 0.1), DP_EIO);
    assert_int_equal(dp_metrics_close(m), DP_EIO);

    /* Step lines are buffered: the failure shows at close. */
    assert_int_equal(dp_metrics_open(&m, "/dev/full"), DP_OK);
    assert_int_equal(dp_metrics_write_step(m, 1, 1, 0.5, 0.1), DP_OK);
    assert_int_equal(dp_metrics_close(m), DP_EIO);
    assert_non_null(strstr(dp_last_error(), "/dev/full"));
    dp_log_set(NULL, NULL);
}

static void plot_stats(dp_epoch_stats *stats, int count)
{
    for (int i = 0; i < count; i++) {
        stats[i] = example_stats(i + 1);
        stats[i].train_loss = 1.2 / (i + 1);
        stats[i].train_acc = 0.55 + 0.1 * i;
        stats[i].test_acc = 0.6 + 0.08 * i;
    }
}

static void test_plot_png_svg(void **state)
{
    (void)state;
    char *dir = tu_tempdir("plot");
    char *png = path_in(dir, "train.png");
    char *svg = path_in(dir, "train.svg");
    dp_epoch_stats stats[3];
    plot_stats(stats, 3);

    /* Twice each, so that a second plot in one process works too. */
    for (int round = 0; round < 2; round++) {
        assert_int_equal(dp_plot_write(png, 10, stats, 3), DP_OK);
        size_t n = 0;
        char *data = read_all(png, &n);
        assert_non_null(data);
        assert_true(n > 8);
        assert_memory_equal(data, "\x89PNG\r\n\x1a\n", 8);
        free(data);

        assert_int_equal(dp_plot_write(svg, 10, stats, 3), DP_OK);
        data = read_all(svg, &n);
        assert_non_null(data);
        assert_non_null(strstr(data, "<svg"));
        free(data);
    }

    /* No points, one point and a gap still make a file. */
    assert_int_equal(dp_plot_write(png, 1, stats, 0), DP_OK);
    assert_int_equal(dp_plot_write(png, 1, stats, 1), DP_OK);
    stats[1].test_acc = NAN;
    assert_int_equal(dp_plot_write(svg, 3, stats, 3), DP_OK);

    if (!getenv("DP_KEEP_PLOTS")) {
        unlink(png);
        unlink(svg);
        rmdir(dir);
    }
    free(png);
    free(svg);
    free(dir);
}

static void test_plot_bad_path(void **state)
{
    (void)state;
    tu_quiet_log();
    dp_epoch_stats stats[3];
    plot_stats(stats, 3);
    char *dir = tu_tempdir("plotbad");
    char *jpg = path_in(dir, "train.jpg");
    assert_int_equal(dp_plot_write(jpg, 3, stats, 3), DP_EINVAL);
    assert_non_null(strstr(dp_last_error(), jpg));
    assert_non_null(strstr(dp_last_error(), ".png"));
    assert_non_null(strstr(dp_last_error(), ".svg"));
    assert_int_equal(access(jpg, F_OK), -1);
    assert_int_equal(dp_plot_write("train", 3, stats, 3), DP_EINVAL);
    assert_int_equal(dp_plot_write(dir, 3, stats, 3), DP_EINVAL);

    const char *missing = "tmp_no_such_dir_for_plots/train.png";
    assert_int_equal(dp_plot_write(missing, 3, stats, 3), DP_EIO);
    assert_non_null(strstr(dp_last_error(), missing));
    assert_int_equal(dp_plot_write("tmp_no_such_dir_for_plots/t.svg", 3, stats, 3), DP_EIO);
    assert_int_equal(dp_plot_write(NULL, 3, stats, 3), DP_EINVAL);
    assert_int_equal(dp_plot_write("x.png", 3, NULL, 3), DP_EINVAL);

    rmdir(dir);
    free(jpg);
    free(dir);
    dp_log_set(NULL, NULL);
}

/* Runs `fn` with stderr sent to a file; returns what it wrote. */
static char *capture_stderr(void (*fn)(bool), bool arg)
{
    char path[64];
    snprintf(path, sizeof path, "tmp_stderr_%d.txt", (int)getpid());
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (saved < 0 || fd < 0)
        return NULL;
    dup2(fd, STDERR_FILENO);
    close(fd);
    fn(arg);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    char *text = read_all(path, NULL);
    unlink(path);
    return text;
}

static void run_progress(bool enabled)
{
    dp_progress_t *p = NULL;
    if (dp_progress_init(&p, enabled) != DP_OK)
        return;
    /* Within 0.1 s only the first and the last batch are drawn; the last
     * line is one character shorter than the first (a rate of 7 digits,
     * then of 5). */
    for (int64_t b = 1; b <= 235; b++)
        dp_progress_update(p, 3, 10, b, 235, 0.41234, b == 1 ? 1253104.0 : 25310.4);
    dp_progress_done(p);
    dp_progress_close(p);
}

static void test_progress(void **state)
{
    (void)state;
    char *text = capture_stderr(run_progress, false);
    assert_non_null(text);
    assert_string_equal(text, "");
    free(text);

    text = capture_stderr(run_progress, true);
    assert_non_null(text);
    assert_non_null(strstr(text, "\repoch 3/10 [....................] 1/235 loss 0.4123 "
                                 "1253104 samples/s ETA --:--"));
    const char *last = "epoch 3/10 [####################] 235/235 loss 0.4123 "
                       "25310 samples/s ETA 0:00";
    const char *at = strstr(text, last);
    assert_non_null(at);
    assert_int_equal(at[-1], '\r');
    /* Drawn once: what the longer line before it left is blanked by a
     * space and the cursor goes back over it. */
    assert_null(strstr(at + 1, last));
    char tail[128];
    snprintf(tail, sizeof tail, " \b\r%*s\r", (int)strlen(last), "");
    assert_string_equal(at + strlen(last), tail); /* then dp_progress_done's blank */
    /* dp_progress_done blanks the line and returns to its start. */
    size_t n = strlen(text);
    assert_true(n > 2);
    assert_int_equal(text[n - 1], '\r');
    assert_int_equal(text[n - 2], ' ');
    assert_null(strchr(text, '\n'));
    free(text);
    dp_progress_close(NULL);
}

static void test_peak_rss(void **state)
{
    (void)state;
#ifdef __linux__
    double mb = dp_peak_rss_mb();
    assert_true(mb > 0.0);
    assert_true(mb < 1e6);
#else
    tu_skip("peak RSS is read from Linux's getrusage units");
#endif
}

/* Under ASan the process-lifetime Pango/fontconfig caches that PLplot's
 * pngcairo driver leaves would fail this test at exit; tests/lsan.supp
 * explains them and carries the same rule for other programs that plot. */
#if defined(__SANITIZE_ADDRESS__)
#define TU_HAVE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TU_HAVE_ASAN 1
#endif
#endif
#ifdef TU_HAVE_ASAN
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libfontconfig.so\n";
}
#endif

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_lines),
        cmocka_unit_test(test_metrics_unwritable),
        cmocka_unit_test(test_metrics_write_error),
        cmocka_unit_test(test_plot_png_svg),
        cmocka_unit_test(test_plot_bad_path),
        cmocka_unit_test(test_progress),
        cmocka_unit_test(test_peak_rss),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
