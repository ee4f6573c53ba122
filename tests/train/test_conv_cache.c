/* The convolution kernels' cache file (dp/conv_cache.h):
 *   - two processes adding at once lose nothing (the flock, the merge under
 *     it), and leave no temporary file behind;
 *   - a pass already in the file keeps its choice; a new one joins its
 *     shape's line; the table's own choices (a checkpoint's, rank 0's) win
 *     over the file's when it is read;
 *   - a section of another key (another oneDNN, another DNNL_MAX_CPU_ISA)
 *     is not read, and stays in the file, byte for byte, when it is added
 *     to;
 *   - a corrupt file is a warning naming the file and the line, none of it
 *     is read, and adding rewrites it; a folder that cannot be made is a
 *     warning and DP_EIO, nothing else;
 *   - the passes a process measured are what it would add; loaded ones are
 *     not, and reading the cache leaves a measured pass measured. */
#include "testutil.h"

#include "dp/dp.h"

#include <dirent.h>
#include <oneapi/dnnl/dnnl_version.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { WRITES = 40 };

/* The warnings logged since the last clear, one per line. */
static char warned[8192];

static void keep_warnings(dp_log_level level, const char *msg, void *user)
{
    (void)user;
    size_t n = strlen(warned);
    if (level == DP_LOG_WARN && n + strlen(msg) + 2 < sizeof warned)
        snprintf(warned + n, sizeof warned - n, "%s\n", msg);
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* Writer `who`: WRITES lines of shapes of its own (k = who + 1), one add
 * each, as fast as it can. */
static void writer(const char *path, int who)
{
    for (int i = 0; i < WRITES; i++) {
        char line[128];
        snprintf(line, sizeof line, "f32 %dx9x9 k%d 3x3 s1x1 p1x1: forward=direct\n", i + 1,
                 who + 1);
        if (dp_conv_algo_cache_add(path, line) != 0)
            _exit(1);
    }
    _exit(0);
}

static void two_writers_lose_nothing(void **state)
{
    (void)state;
    const char *path = tu_tmp_path("cache/conv-algos.txt");
    pid_t pids[2];
    for (int who = 0; who < 2; who++) {
        pids[who] = fork();
        assert_true(pids[who] >= 0);
        if (pids[who] == 0)
            writer(path, who);
    }
    for (int who = 0; who < 2; who++) {
        int status;
        assert_int_equal(waitpid(pids[who], &status, 0), pids[who]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    dp_conv_choices_clear();
    assert_int_equal(dp_conv_algo_cache_read(path), 2 * WRITES);
    char *all = dp_conv_choices_save();
    for (int who = 0; who < 2; who++)
        for (int i = 0; i < WRITES; i++) {
            char line[128];
            snprintf(line, sizeof line, "f32 %dx9x9 k%d 3x3 s1x1 p1x1: forward=direct\n", i + 1,
                     who + 1);
            assert_non_null(strstr(all, line));
        }
    free(all);
    /* the folder holds the file and its lock file, no temporary file */
    DIR *d = opendir(tu_tmp_path("cache"));
    assert_non_null(d);
    int entries = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') {
            entries++;
            assert_true(strcmp(e->d_name, "conv-algos.txt") == 0 ||
                        strcmp(e->d_name, "conv-algos.txt.lock") == 0);
        }
    closedir(d);
    assert_int_equal(entries, 2);
    dp_conv_choices_clear();
}

static void the_files_choice_stays_and_the_tables_wins(void **state)
{
    (void)state;
    const char *path = tu_tmp_path("conv-algos.txt");
    const char *shape = "f32 6x14x14 k16 5x5 s1x1 p0x0:";
    assert_int_equal(
        dp_conv_algo_cache_add(path, "f32 6x14x14 k16 5x5 s1x1 p0x0: forward=direct\n"), 0);
    assert_int_equal(dp_conv_algo_cache_add(path, "f32 6x14x14 k16 5x5 s1x1 p0x0: forward=gemm "
                                                  "backward_data=gemm\n"),
                     0);
    char *text = read_all(path);
    assert_non_null(strstr(text, "f32 6x14x14 k16 5x5 s1x1 p0x0: forward=direct "
                                 "backward_data=gemm\n"));
    assert_null(strstr(strstr(text, shape) + 1, shape)); /* one line for the shape */
    /* the table's choice for forward (a checkpoint's) wins; the file fills in backward_data */
    dp_conv_choices_clear();
    assert_int_equal(dp_conv_choices_load("f32 6x14x14 k16 5x5 s1x1 p0x0: forward=blocked\n"), 0);
    assert_int_equal(dp_conv_algo_cache_read(path), 1);
    char *now = dp_conv_choices_save();
    assert_string_equal(now, "f32 6x14x14 k16 5x5 s1x1 p0x0: forward=blocked backward_data=gemm\n");
    free(now);
    /* loaded choices are not this process's measurements */
    char *measured = dp_conv_choices_save_measured();
    assert_string_equal(measured, "");
    free(measured);
    dp_conv_choices_clear();
}

/* `text` with the value of the key field `field` ("onednn=") replaced by
 * "0.0.0 (elsewhere)", into buf. */
static void other_key(const char *text, const char *field, char *buf, size_t size)
{
    const char *at = strstr(text, field);
    assert_non_null(at);
    const char *end = at + strcspn(at, ";]");
    snprintf(buf, size, "%.*s%s0.0.0 (elsewhere)%s", (int)(at - text), text, field, end);
}

static void another_key_is_passed_over_and_kept(void **state)
{
    (void)state;
    const char *path = tu_tmp_path("conv-algos.txt");
    /* the key names the oneDNN this process runs, and dptrain's version */
    char key[2048], want[64];
    dp_conv_algo_cache_key(key, sizeof key);
    snprintf(want, sizeof want, "; onednn=%d.%d.%d ", DNNL_VERSION_MAJOR, DNNL_VERSION_MINOR,
             DNNL_VERSION_PATCH);
    assert_non_null(strstr(key, want));
    assert_non_null(strstr(key, "dptrain=" DP_VERSION_STRING ";"));
    print_message("this machine's key: %s\n", key);
    const char *fields[] = {"onednn=", "isa=", "cpu=", "dptrain=", "max_cpu_isa="};
    for (size_t i = 0; i < COUNTOF(fields); i++) {
        unlink(path);
        assert_int_equal(dp_conv_algo_cache_add(path, "f32 1x28x28 k6 5x5 s1x1 p2x2: "
                                                      "forward=gemm\n"),
                         0);
        static char edited[1 << 16];
        other_key(read_all(path), fields[i], edited, sizeof edited);
        assert_int_equal(tu_write_file(path, edited, strlen(edited)), 0);
        dp_conv_choices_clear();
        assert_int_equal(dp_conv_algo_cache_read(path), 0);
        char *none = dp_conv_choices_save();
        assert_string_equal(none, "");
        free(none);
        /* adding keeps the other section as it was, and starts this one */
        assert_int_equal(dp_conv_algo_cache_add(path, "f32 6x14x14 k16 5x5 s1x1 p0x0: "
                                                      "forward=direct\n"),
                         0);
        char *after = read_all(path);
        assert_non_null(strstr(after, edited + strcspn(edited, "[")));
        assert_int_equal(dp_conv_algo_cache_read(path), 1);
    }
    /* DNNL_MAX_CPU_ISA is in the key: an imitated CPU reads nothing of the real one's */
    unlink(path);
    unsetenv("DNNL_MAX_CPU_ISA");
    assert_int_equal(dp_conv_algo_cache_add(path, "f32 1x28x28 k6 5x5 s1x1 p2x2: forward=gemm\n"),
                     0);
    setenv("DNNL_MAX_CPU_ISA", "AVX2", 1);
    dp_conv_choices_clear();
    assert_int_equal(dp_conv_algo_cache_read(path), 0);
    unsetenv("DNNL_MAX_CPU_ISA");
    assert_int_equal(dp_conv_algo_cache_read(path), 1);
    dp_conv_choices_clear();
}

static void corrupt_and_unwritable_are_warnings(void **state)
{
    (void)state;
    const char *path = tu_tmp_path("conv-algos.txt");
    const char *corrupt[] = {
        "hello\n",
        "[dptrain=0.1.0\nf32 1x28x28 k6 5x5 s1x1 p2x2: forward=gemm\n",
        "\x01\x02\x03 binary\n",
    };
    dp_log_set(keep_warnings, NULL);
    for (size_t i = 0; i < COUNTOF(corrupt); i++) {
        assert_int_equal(tu_write_file(path, corrupt[i], strlen(corrupt[i])), 0);
        warned[0] = '\0';
        dp_conv_choices_clear();
        assert_int_equal(dp_conv_algo_cache_read(path), 0);
        char where[4200];
        snprintf(where, sizeof where, "%s:1:", path);
        assert_non_null(strstr(warned, where));
        assert_int_equal(strchr(warned, '\n') - warned + 1, (long)strlen(warned)); /* one line */
        /* the next add rewrites it whole */
        assert_int_equal(dp_conv_algo_cache_add(path, "f32 6x14x14 k16 5x5 s1x1 p0x0: "
                                                      "forward=direct\n"),
                         0);
        assert_int_equal(dp_conv_algo_cache_read(path), 1);
        assert_null(strstr(read_all(path), corrupt[i]));
    }
    /* a line of this machine's section that is not a choice */
    char key[2048], text[4200];
    dp_conv_algo_cache_key(key, sizeof key);
    snprintf(text, sizeof text, "[%s]\nf32 6x14x14 k16 5x5 s1x1 p0x0: forward=fastest\n", key);
    assert_int_equal(tu_write_file(path, text, strlen(text)), 0);
    warned[0] = '\0';
    dp_conv_choices_clear();
    assert_int_equal(dp_conv_algo_cache_read(path), 0);
    char where[4200];
    snprintf(where, sizeof where, "%s:2:", path);
    assert_non_null(strstr(warned, where));
    /* a folder that cannot be made: its parent is a file */
    assert_int_equal(tu_write_file(tu_tmp_path("plain"), "x", 1), 0);
    char below[4200];
    snprintf(below, sizeof below, "%s/dptrain/conv-algos.txt", tu_tmp_path("plain"));
    warned[0] = '\0';
    assert_int_equal(dp_conv_algo_cache_add(below, "f32 6x14x14 k16 5x5 s1x1 p0x0: "
                                                   "forward=direct\n"),
                     DP_EIO);
    assert_non_null(strstr(warned, below));
    assert_int_equal(dp_conv_algo_cache_read(below), 0);
    dp_log_set(NULL, NULL);
    dp_conv_choices_clear();
}

/* A measured pass is this process's own until a load replaces its choice;
 * reading the cache (which puts the table's choices back over the file's)
 * leaves it so. */
static void measured_passes_are_what_a_process_adds(void **state)
{
    (void)state;
    dp_device_t *dev;
    assert_int_equal(dp_device_open(&dev, "cpu:0", 1), 0);
    dp_conv_choices_clear();
    dp_conv_algo old = dp_get_conv_algo();
    dp_set_conv_algo(DP_CONV_ALGO_AUTO);
    float x[1 * 3 * 8 * 8] = {0}, w[4 * 3 * 3 * 3] = {0};
    int64_t xs[4] = {1, 3, 8, 8}, ws[4] = {4, 3, 3, 3};
    dp_tensor_t *tx, *tw, *ty = NULL;
    assert_int_equal(dp_tensor_from_host(&tx, dev, DP_F32, 4, xs, x), 0);
    assert_int_equal(dp_tensor_from_host(&tw, dev, DP_F32, 4, ws, w), 0);
    assert_int_equal(dp_conv2d(&ty, tx, tw, NULL, &(dp_conv2d_params){.pad_h = 1, .pad_w = 1}), 0);
    assert_int_equal(dp_device_sync(dev), 0);
    dp_set_conv_algo(old);
    char *measured = dp_conv_choices_save_measured();
    assert_non_null(strstr(measured, "f32 3x8x8 k4 3x3 s1x1 p1x1: forward="));
    /* a cache with another choice for it: the table's stays, still measured here */
    const char *path = tu_tmp_path("conv-algos.txt");
    char line[128];
    snprintf(line, sizeof line, "f32 3x8x8 k4 3x3 s1x1 p1x1: forward=%s\n",
             strstr(measured, "forward=direct") ? "gemm" : "direct");
    assert_int_equal(dp_conv_algo_cache_add(path, line), 0);
    assert_int_equal(dp_conv_algo_cache_read(path), 0);
    char *again = dp_conv_choices_save_measured();
    assert_string_equal(again, measured);
    free(again);
    /* a load that changes the choice: no longer this process's measurement */
    assert_int_equal(dp_conv_choices_load(line), 0);
    again = dp_conv_choices_save_measured();
    assert_string_equal(again, "");
    free(again);
    free(measured);
    dp_tensor_free(ty);
    dp_tensor_free(tw);
    dp_tensor_free(tx);
    dp_device_close(dev);
    dp_conv_choices_clear();
}

static void the_path_follows_xdg(void **state)
{
    (void)state;
    char path[4096];
    unsetenv("DPTRAIN_CONV_ALGO_CACHE");
    setenv("XDG_CACHE_HOME", "/x/cache", 1);
    assert_int_equal(dp_conv_algo_cache_path(NULL, path, sizeof path), 0);
    assert_string_equal(path, "/x/cache/dptrain/conv-algos.txt");
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/u", 1);
    assert_int_equal(dp_conv_algo_cache_path(NULL, path, sizeof path), 0);
    assert_string_equal(path, "/home/u/.cache/dptrain/conv-algos.txt");
    setenv("DPTRAIN_CONV_ALGO_CACHE", "/y.txt", 1);
    assert_int_equal(dp_conv_algo_cache_path(NULL, path, sizeof path), 0);
    assert_string_equal(path, "/y.txt");
    assert_int_equal(dp_conv_algo_cache_path("/z.txt", path, sizeof path), 0);
    assert_string_equal(path, "/z.txt");
    assert_int_equal(dp_conv_algo_cache_path("off", path, sizeof path), 1);
    setenv("DPTRAIN_CONV_ALGO_CACHE", "off", 1);
    assert_int_equal(dp_conv_algo_cache_path(NULL, path, sizeof path), 1);
    unsetenv("DPTRAIN_CONV_ALGO_CACHE");
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(two_writers_lose_nothing, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(the_files_choice_stays_and_the_tables_wins, tu_setup_tmp,
                                        tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(another_key_is_passed_over_and_kept, tu_setup_tmp,
                                        tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(corrupt_and_unwritable_are_warnings, tu_setup_tmp,
                                        tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(measured_passes_are_what_a_process_adds, tu_setup_tmp,
                                        tu_teardown_tmp),
        cmocka_unit_test(the_path_follows_xdg),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
