/* The fuzz targets' inputs without libFuzzer: every file of
 * tests/fuzz/corpus/<target>/ (the seeds) and tests/fuzz/regress/<target>/
 * (inputs that once crashed a target or broke one of its checks) goes
 * through the same entry point as in the fuzzer (tests/fuzz/fuzz_entry.h),
 * which must end cleanly: success, or an error that names the file. In
 * `make test` this runs under gcc and again under ASan+UBSan, so a fixed
 * crash stays fixed in every build, with or without clang. The regression
 * inputs are listed below: each must be there (a missing directory or file
 * fails, rather than counting as none), and a file not listed fails too,
 * so that the list and the folder stay one. */
#include "testutil.h"

/* The entry points and the command line's parsers are compiled into this
 * test: tests/CMakeLists.txt links each test with the library only. */
#include "cli_sources.c"
#include "fuzz_cli_entry.c"
#include "fuzz_data_entry.c"
#include "fuzz_entry.c"
#include "fuzz_image_entry.c"
#include "fuzz_model_entry.c"
#include "fuzz_onnx_entry.c"
#include "fuzz_parse_entry.c"
#include "fuzz_shards_entry.c"
#include "fuzz_table.c"
#include "fuzz_transform_entry.c"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* tests/fuzz, from CTest's DP_SOURCE_DIR or else this file's folder. */
static void fuzz_dir(char *buf, size_t size)
{
    const char *src = getenv("DP_SOURCE_DIR");
    if (src && src[0]) {
        snprintf(buf, size, "%s/tests/fuzz", src);
        return;
    }
    snprintf(buf, size, "%s", __FILE__);
    char *slash = strrchr(buf, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(buf, size, ".");
}

/* Every input of tests/fuzz/regress/, as TARGET/FILE: what fuzzing found,
 * kept so that it stays fixed. A new one is added here with its file. */
static const char *const regress_inputs[] = {
    "checkpoint/epochs-done-past-int", "devices/cpu-is-cpu-0",
    "devices/newline-in-list",         "idx/promises-1gib-holds-3",
    "model/63-digits-then-point",      "onnx/if-bodies-nested-past-100",
    "onnx/int64-through-a-double",     "onnx/node-without-op-type",
    "onnx/reshape-one-input",          "onnx/scalar-initializer",
    "stages/newline-in-list",
};

/* How many of regress_inputs are `target`'s. */
static int listed_for(const char *target)
{
    int n = 0;
    size_t len = strlen(target);
    for (size_t i = 0; i < sizeof regress_inputs / sizeof *regress_inputs; i++)
        n += strncmp(regress_inputs[i], target, len) == 0 && regress_inputs[i][len] == '/';
    return n;
}

/* Fails unless `dir` (tests/fuzz/regress/<target>) holds exactly the files
 * regress_inputs lists for target, naming the first missing or unlisted
 * one. */
static void assert_listed_inputs(const char *target, const char *dir)
{
    size_t len = strlen(target);
    for (size_t i = 0; i < sizeof regress_inputs / sizeof *regress_inputs; i++) {
        if (strncmp(regress_inputs[i], target, len) != 0 || regress_inputs[i][len] != '/')
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, regress_inputs[i] + len + 1);
        if (access(path, R_OK) != 0)
            fail_msg("%s: the regression input is missing", path);
    }
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        char name[512];
        snprintf(name, sizeof name, "%s/%s", target, e->d_name);
        bool listed = e->d_name[0] == '.';
        for (size_t i = 0; !listed && i < sizeof regress_inputs / sizeof *regress_inputs; i++)
            listed = strcmp(regress_inputs[i], name) == 0;
        if (!listed) {
            closedir(d);
            fail_msg("%s/%s is not in test_fuzz_regress.c's regress_inputs: add it there", dir,
                     e->d_name);
        }
    }
    if (d)
        closedir(d);
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs `entry` on every file of `dir` in name order; returns how many, or
 * -1 if the directory is missing. Fails the test at the first input that
 * does not end cleanly, naming it. */
static int run_dir(fuzz_entry_fn entry, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            names = realloc(names, cap * sizeof *names);
            assert_non_null(names);
        }
        names[n] = strdup(e->d_name);
        assert_non_null(names[n]);
        n++;
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, compare_names);
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "rb");
        if (!f)
            fail_msg("cannot open %s", path);
        unsigned char *data = NULL;
        size_t len = 0, size = 0;
        for (;;) {
            if (len == size) {
                size = size ? 2 * size : 4096;
                data = realloc(data, size);
                assert_non_null(data);
            }
            size_t got = fread(data + len, 1, size - len, f);
            if (got == 0)
                break;
            len += got;
        }
        fclose(f);
        /* An exact-size copy, so that ASan sees a read past the input. */
        unsigned char *exact = malloc(len ? len : 1);
        assert_non_null(exact);
        if (len)
            memcpy(exact, data, len);
        free(data);
        int rc = entry(exact, len);
        free(exact);
        if (rc != 0)
            fail_msg("%s: did not end cleanly (see the line above)", path);
        free(names[i]);
    }
    free(names);
    return (int)n;
}

static void run_target(const char *target)
{
    fuzz_entry_fn entry = fuzz_entry(target);
    assert_non_null(entry);
    char base[3000], dir[3100];
    fuzz_dir(base, sizeof base);
    snprintf(dir, sizeof dir, "%s/corpus/%s", base, target);
    int seeds = run_dir(entry, dir);
    if (seeds <= 0)
        fail_msg("%s: no seed inputs (missing or empty)", dir);
    snprintf(dir, sizeof dir, "%s/regress/%s", base, target);
    int listed = listed_for(target);
    assert_listed_inputs(target, dir);
    int regress = run_dir(entry, dir); /* -1: no directory (a target with none listed) */
    if (listed > 0 && regress != listed)
        fail_msg("%s: %d regression input(s) ran, %d listed", dir, regress, listed);
    print_message("fuzz %s: %d seed input(s), %d regression input(s), all clean\n", target, seeds,
                  listed);
}

/* One cmocka test per target; its state is the target's name. */
static void test_target(void **state)
{
    run_target(*state);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        /* clang-format off */
        cmocka_unit_test_prestate(test_target, "idx"),
        cmocka_unit_test_prestate(test_target, "safetensors"),
        cmocka_unit_test_prestate(test_target, "checkpoint"),
        cmocka_unit_test_prestate(test_target, "cli"),
        cmocka_unit_test_prestate(test_target, "cifar10"),
        cmocka_unit_test_prestate(test_target, "model"),
        cmocka_unit_test_prestate(test_target, "idx_dataset"),
        cmocka_unit_test_prestate(test_target, "cifar10_train"),
        cmocka_unit_test_prestate(test_target, "model_cli"),
        cmocka_unit_test_prestate(test_target, "devices"),
        cmocka_unit_test_prestate(test_target, "stages"),
        cmocka_unit_test_prestate(test_target, "model_build"),
        cmocka_unit_test_prestate(test_target, "npy"),
        cmocka_unit_test_prestate(test_target, "image"),
        cmocka_unit_test_prestate(test_target, "onnx"),
        cmocka_unit_test_prestate(test_target, "shards"),
        cmocka_unit_test_prestate(test_target, "transform"),
        /* clang-format on */
    };
    /* Every target of fuzz_table.c has its test here (each test's name is
     * looked up there, so none is unknown). */
    if (fuzz_target_count() != sizeof tests / sizeof *tests) {
        fprintf(stderr, "fuzz_table.c knows %zu targets, this test runs %zu\n", fuzz_target_count(),
                sizeof tests / sizeof *tests);
        return 1;
    }
    int failed = tu_run(argc, argv, tests, NULL, NULL);
    fuzz_teardown();
    return failed;
}
