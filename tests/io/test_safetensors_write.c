/* safetensors, writing: bad input refused, and the atomic write: the old
 * file kept and no temporary left on every failure (a missing or read-only
 * directory, a rename that fails, a file size limit reached midway). */
#include "safetensorsutil.h"

#include "dp/core.h"
#include "dp/safetensors.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- writing ---------------------------------------------------------------- */

static void test_write_rejects_bad_input(void **state)
{
    (void)state;
    tu_quiet_log();
    const float v[4] = {0};
    const char *path = tu_tmp_path("bad.safetensors");
    char long_name[DP_ST_MAX_NAME + 2];
    memset(long_name, 'x', DP_ST_MAX_NAME + 1);
    long_name[DP_ST_MAX_NAME + 1] = '\0';
    struct {
        dp_st_tensor t[2];
        int n;
        const char *want;
    } cases[] = {
        {{make_tensor("a", DP_ST_F32, 1, (int64_t[]){2}, v),
          make_tensor("a", DP_ST_F32, 1, (int64_t[]){2}, v)},
         2,
         "two tensors are called 'a'"},
        {{make_tensor("", DP_ST_F32, 1, (int64_t[]){2}, v)}, 1, "empty name"},
        {{make_tensor(NULL, DP_ST_F32, 1, (int64_t[]){2}, v)}, 1, "empty name"},
        {{make_tensor(long_name, DP_ST_F32, 1, (int64_t[]){2}, v)}, 1, "longer than 256"},
        {{make_tensor("\xff", DP_ST_F32, 1, (int64_t[]){2}, v)}, 1, "not valid UTF-8"},
        {{make_tensor("__metadata__", DP_ST_F32, 1, (int64_t[]){2}, v)}, 1, "reserved"},
        {{make_tensor("a", DP_ST_F32, 1, (int64_t[]){2}, NULL)}, 1, "data is NULL"},
        {{make_tensor("a", DP_ST_F32, 1, (int64_t[]){-2}, v)}, 1, "negative dimension"},
    };
    for (size_t i = 0; i < COUNTOF(cases); i++) {
        int rc = dp_safetensors_write(path, cases[i].t, cases[i].n, NULL, 0);
        if (rc != DP_EINVAL || !strstr(dp_last_error(), cases[i].want))
            fail_msg("case %zu: rc %d, message \"%s\"", i, rc, dp_last_error());
    }

    dp_st_tensor t = make_tensor("a", DP_ST_F32, 1, (int64_t[]){2}, v);
    t.bytes = 12;
    assert_int_equal(dp_safetensors_write(path, &t, 1, NULL, 0), DP_EINVAL);
    assert_error_has("tensor 'a': shape [2] of F32 needs 8 bytes, given 12");
    t = make_tensor("a", DP_ST_F32, 1, (int64_t[]){2}, v);
    t.ndim = 9;
    assert_int_equal(dp_safetensors_write(path, &t, 1, NULL, 0), DP_EINVAL);
    assert_error_has("ndim 9");
    t.ndim = 2;
    t.shape[0] = t.shape[1] = INT64_MAX;
    assert_int_equal(dp_safetensors_write(path, &t, 1, NULL, 0), DP_EINVAL);
    assert_error_has("overflows");
    t = make_tensor("a", DP_ST_F32, 1, (int64_t[]){2}, v);
    t.dtype = (dp_st_dtype)9;
    assert_int_equal(dp_safetensors_write(path, &t, 1, NULL, 0), DP_EINVAL);
    assert_error_has("unknown dtype 9");

    t = make_tensor("a", DP_ST_F32, 1, (int64_t[]){2}, v);
    const char *dup_meta[] = {"k", "1", "k", "2"};
    assert_int_equal(dp_safetensors_write(path, &t, 1, dup_meta, 2), DP_EINVAL);
    assert_error_has("metadata key 'k' given twice");
    const char *null_meta[] = {"k", NULL};
    assert_int_equal(dp_safetensors_write(path, &t, 1, null_meta, 1), DP_EINVAL);
    assert_error_has("metadata value 0 is NULL");
    const char *bad_meta[] = {"k", "\xc3"};
    assert_int_equal(dp_safetensors_write(path, &t, 1, bad_meta, 1), DP_EINVAL);
    assert_error_has("not valid UTF-8");
    assert_int_equal(dp_safetensors_write(path, &t, -1, NULL, 0), DP_EINVAL);
    assert_int_equal(dp_safetensors_write(path, NULL, 1, NULL, 0), DP_EINVAL);
    assert_int_equal(dp_safetensors_write(path, &t, 1, NULL, 1), DP_EINVAL);

    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(count_temp_files(tu_tmp), 0);
    dp_log_set(NULL, NULL);
}

static const float old_v[2] = {1.0f, 2.0f};

/* A small file at path whose content check_old_file recognises. */
static void write_old_file(const char *path)
{
    dp_st_tensor t = make_tensor("old", DP_ST_F32, 1, (int64_t[]){2}, old_v);
    assert_int_equal(dp_safetensors_write(path, &t, 1, NULL, 0), 0);
}

static void check_old_file(const char *path)
{
    dp_safetensors_t *f = NULL;
    assert_int_equal(dp_safetensors_open(&f, path), 0);
    assert_int_equal(dp_safetensors_count(f), 1);
    dp_st_tensor t;
    assert_int_equal(dp_safetensors_find(f, "old", &t), 0);
    assert_memory_equal(t.data, old_v, sizeof old_v);
    dp_safetensors_close(f);
}

static void test_write_replaces_existing(void **state)
{
    (void)state;
    const char *path = tu_tmp_path("ckpt.safetensors");
    write_old_file(path);
    check_old_file(path);
    const int64_t k[3] = {1, 2, 3};
    dp_st_tensor t = make_tensor("new", DP_ST_I64, 1, (int64_t[]){3}, k);
    assert_int_equal(dp_safetensors_write(path, &t, 1, NULL, 0), 0);
    dp_safetensors_t *f = NULL;
    assert_int_equal(dp_safetensors_open(&f, path), 0);
    assert_int_equal(dp_safetensors_count(f), 1);
    assert_int_equal(dp_safetensors_find(f, "old", NULL), DP_ENOENT);
    dp_st_tensor got;
    assert_int_equal(dp_safetensors_find(f, "new", &got), 0);
    assert_same_tensor(&got, &t);
    dp_safetensors_close(f);
    assert_int_equal(count_temp_files(tu_tmp), 0);

    /* A bare file name (no directory part) is written in the current one. */
    char *cwd = getcwd(NULL, 0);
    assert_int_equal(chdir(tu_tmp), 0);
    int rc = dp_safetensors_write("bare.safetensors", &t, 1, NULL, 0);
    int ok = access("bare.safetensors", R_OK);
    assert_int_equal(chdir(cwd), 0);
    free(cwd);
    assert_int_equal(rc, 0);
    assert_int_equal(ok, 0);
}

static void test_write_missing_directory(void **state)
{
    (void)state;
    tu_quiet_log();
    const char *path = tu_tmp_path("missing/ckpt.safetensors");
    dp_st_tensor t = make_tensor("a", DP_ST_F32, 1, (int64_t[]){2}, old_v);
    assert_int_equal(dp_safetensors_write(path, &t, 1, NULL, 0), DP_EIO);
    assert_error_has(path);
    assert_error_has("No such file or directory");
    assert_int_equal(count_temp_files(tu_tmp), 0);
    dp_log_set(NULL, NULL);
}

/* rename() over a directory fails after the data was written and synced:
 * the temporary file goes, the directory stays. */
static void test_write_rename_fails(void **state)
{
    (void)state;
    tu_quiet_log();
    const char *path = tu_tmp_path("dir.safetensors");
    assert_int_equal(mkdir(path, 0755), 0);
    char inner[600];
    snprintf(inner, sizeof inner, "%s/keep", path);
    assert_int_equal(tu_write_file(inner, "x", 1), 0);
    dp_st_tensor t = make_tensor("a", DP_ST_F32, 1, (int64_t[]){2}, old_v);
    assert_int_equal(dp_safetensors_write(path, &t, 1, NULL, 0), DP_EIO);
    assert_error_has(path);
    assert_error_has("rename failed");
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(access(inner, F_OK), 0);
    assert_int_equal(count_temp_files(tu_tmp), 0);
    dp_log_set(NULL, NULL);
}

/* A directory without write permission: the temporary file cannot be made
 * and the old file stays. Root ignores permissions, so root skips. */
static void test_write_readonly_directory(void **state)
{
    (void)state;
    if (geteuid() == 0) {
        tu_skip("running as root, which ignores directory permissions");
    }
    tu_quiet_log();
    const char *dir = tu_tmp_path("ro");
    assert_int_equal(mkdir(dir, 0755), 0);
    char path[600];
    snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
    write_old_file(path);
    assert_int_equal(chmod(dir, 0555), 0);
    dp_st_tensor t = make_tensor("new", DP_ST_U8, 1, (int64_t[]){1}, "x");
    int rc = dp_safetensors_write(path, &t, 1, NULL, 0);
    assert_int_equal(chmod(dir, 0755), 0);
    assert_int_equal(rc, DP_EIO);
    assert_error_has(path);
    assert_error_has("Permission denied");
    check_old_file(path);
    assert_int_equal(count_temp_files(dir), 0);
    dp_log_set(NULL, NULL);
}

/* A write that fails halfway (the file-size limit stops it with EFBIG, as a
 * full disk would with ENOSPC): old file intact, no temporary left. */
static void test_write_fails_midway(void **state)
{
    (void)state;
    tu_quiet_log();
    const char *path = tu_tmp_path("ckpt.safetensors");
    write_old_file(path);
    static uint8_t big[1 << 16];
    memset(big, 0xab, sizeof big);
    dp_st_tensor t = make_tensor("big", DP_ST_U8, 1, (int64_t[]){sizeof big}, big);

    struct rlimit old_limit, limit;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
    if (old_limit.rlim_max != RLIM_INFINITY && old_limit.rlim_max < 4096) {
        tu_skip("the hard file-size limit is already below 4096 bytes");
    }
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    limit = old_limit;
    limit.rlim_cur = 4096;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &limit), 0);
    int rc = dp_safetensors_write(path, &t, 1, NULL, 0);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old_limit), 0);
    signal(SIGXFSZ, old_handler);

    assert_int_equal(rc, DP_EIO);
    assert_error_has(path);
    assert_error_has("write failed: File too large");
    check_old_file(path);
    assert_int_equal(count_temp_files(tu_tmp), 0);
    dp_log_set(NULL, NULL);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_write_rejects_bad_input, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_write_replaces_existing, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_write_missing_directory, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_write_rename_fails, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_write_readonly_directory, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_write_fails_midway, tu_setup_tmp, tu_teardown_tmp),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
