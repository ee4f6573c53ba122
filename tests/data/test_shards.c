/* Shard sets (dp/shards.h): the spec's brace patterns and directories,
 * the index pass's counts and ids, classes.txt, and each malformed shard's
 * one line naming the shard and the member. Shards are written here with
 * libarchive's writer (shardsutil.c). */
#include "shardsutil.h"
#include "testutil.h"

#include "core/internal.h"
#include "data/shards_impl.h"
#include "dp/dp.h"
#include "dp/shards.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The expansion of spec, as one string "a b c", into out. */
static int expand_str(const char *spec, char *out, size_t size)
{
    char **paths;
    int n;
    int rc = dp__shard_spec_expand(spec, NULL, &paths, &n);
    if (rc < 0)
        return rc;
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        snprintf(out + strlen(out), size - strlen(out), "%s%s", i ? " " : "", paths[i]);
        dp__free(paths[i]);
    }
    dp__free(paths);
    return n;
}

/* braceexpand's results for the same patterns (python3 -c "import
 * braceexpand; print(' '.join(braceexpand.braceexpand(P)))"). */
static void brace_expansion(void **state)
{
    (void)state;
    static const struct {
        const char *spec, *want;
    } cases[] = {
        {"s/train-{000000..000002}.tar",
         "s/train-000000.tar s/train-000001.tar s/train-000002.tar"},
        {"s/{a,b}-{0..1}.tar", "s/a-0.tar s/a-1.tar s/b-0.tar s/b-1.tar"},
        {"{8..10}", "8 9 10"},
        {"{10..8}", "10 9 8"},
        {"{0..10..5}", "0 5 10"},
        {"{01..3}", "01 02 03"},
        {"{8..010}", "008 009 010"},
        {"{-1..1}", "-1 0 1"},
        {"x{,y}", "x xy"},
        {"{x}.tar", "{x}.tar"},
        {"{x}-{1..2}", "{x}-1 {x}-2"},
        {"plain.tar", "plain.tar"},
    };
    char got[1024];
    for (size_t i = 0; i < COUNTOF(cases); i++) {
        assert_true(expand_str(cases[i].spec, got, sizeof got) > 0);
        if (strcmp(got, cases[i].want) != 0)
            fail_msg("%s: got '%s', want '%s'", cases[i].spec, got, cases[i].want);
    }
    tu_quiet_log();
    assert_int_equal(expand_str("{0..999999999}", got, sizeof got), DP_EINVAL);
    tu_assert_error_mentions("more than 1000000 values");
    assert_int_equal(expand_str("", got, sizeof got), DP_EINVAL);
    assert_int_equal(expand_str("s/open-{1..2.tar", got, sizeof got), DP_EINVAL);
    tu_assert_error_mentions("s/open-{1..2.tar: a '{' without its '}'");
}

/* A directory: its *.tar files sorted; with a split, "<split>-*.tar". */
static void directory_spec(void **state)
{
    (void)state;
    const char *dir = tu_tmp_path("d");
    mkdir(dir, 0755);
    static const char *const names[] = {
        "b.tar",           "a.tar",     "train-000001.tar", "train-000000.tar",
        "test-000000.tar", "notes.txt", "x.tar.gz"};
    char p[1024];
    for (size_t i = 0; i < COUNTOF(names); i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        assert_int_equal(tu_write_file(p, "", 0), 0);
    }
    char **paths;
    int n;
    assert_int_equal(dp__shard_spec_expand(dir, "train", &paths, &n), 0);
    assert_int_equal(n, 2);
    snprintf(p, sizeof p, "%s/train-000000.tar", dir);
    assert_string_equal(paths[0], p);
    for (int i = 0; i < n; i++)
        dp__free(paths[i]);
    dp__free(paths);
    assert_int_equal(dp__shard_spec_expand(dir, NULL, &paths, &n), 0);
    assert_int_equal(n, 5);
    static const char *const sorted[] = {"a.tar", "b.tar", "test-000000.tar", "train-000000.tar",
                                         "train-000001.tar"};
    for (int i = 0; i < n; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, sorted[i]);
        assert_string_equal(paths[i], p);
        dp__free(paths[i]);
    }
    dp__free(paths);
    /* a split that no file has: all of them */
    assert_int_equal(dp__shard_spec_expand(dir, "val", &paths, &n), 0);
    assert_int_equal(n, 5);
    for (int i = 0; i < n; i++)
        dp__free(paths[i]);
    dp__free(paths);
}

/* Counts, first ids and the class count from the index pass; members that
 * WebDataset passes over are passed over; nothing counted as a lane's
 * opening. */
static void index_counts(void **state)
{
    (void)state;
    const char *dir = tu_tmp_path("set");
    mkdir(dir, 0755);
    const int counts[] = {2, 3, 1};
    su_write_set(dir, counts, 3);
    char p[1024];
    snprintf(p, sizeof p, "%s/shard-000003.tar", dir);
    const su_member extra[] = {
        {"dir/", "", 0},          {"__meta__", "x", -1}, {"README", "no dot", -1},
        {".hidden.jpg", "x", -1}, {"k1.jpg", "img", -1}, {"k1.cls", " 7\n", -1},
        {"k1.json", "{}", -1},    {"k2.PNG", "png", -1}, {"k2.CLS", "3", -1},
    };
    su_write_tar(p, extra, (int)COUNTOF(extra));
    dp_shard_set_t *set;
    char spec[1100];
    snprintf(spec, sizeof spec, "%s/shard-{000000..000003}.tar", dir);
    assert_int_equal(dp_shard_set_open(&set, spec, NULL), 0);
    assert_int_equal(dp_shard_set_shards(set), 4);
    assert_int_equal(dp_shard_set_samples(set), 8);
    const int64_t want_n[] = {2, 3, 1, 2}, want_first[] = {0, 2, 5, 6};
    for (int s = 0; s < 4; s++) {
        assert_int_equal(dp_shard_set_shard_samples(set, s), want_n[s]);
        assert_int_equal(dp_shard_set_first_id(set, s), want_first[s]);
    }
    assert_string_equal(dp_shard_set_path(set, 3), p);
    assert_int_equal(dp_shard_set_classes(set), 8); /* the largest label, 7, + 1 */
    assert_null(dp_shard_set_class_names(set));
    assert_int_equal(dp_shard_set_opened(set), 0);
    dp_shard_set_close(set);
}

/* classes.txt beside the shards names the classes and bounds the labels. */
static void classes_file(void **state)
{
    (void)state;
    const char *dir = tu_tmp_path("cls");
    mkdir(dir, 0755);
    const int counts[] = {5};
    su_write_set(dir, counts, 1); /* labels 0..4 */
    char p[1024];
    snprintf(p, sizeof p, "%s/classes.txt", dir);
    const char *five = "ant\nbee\ncat\r\ndog\neel";
    assert_int_equal(tu_write_file(p, five, strlen(five)), 0);
    dp_shard_set_t *set;
    assert_int_equal(dp_shard_set_open(&set, dir, NULL), 0);
    assert_int_equal(dp_shard_set_classes(set), 5);
    const char *const *names = dp_shard_set_class_names(set);
    assert_non_null(names);
    assert_string_equal(names[2], "cat");
    assert_string_equal(names[4], "eel");
    dp_shard_set_close(set);
    tu_quiet_log();
    const char *four = "ant\nbee\ncat\ndog\n";
    assert_int_equal(tu_write_file(p, four, strlen(four)), 0);
    assert_int_equal(dp_shard_set_open(&set, dir, NULL), DP_EFORMAT);
    assert_null(set);
    tu_assert_error_mentions("s0/000004.cls': label 4, but classes.txt names 4 classes");
    const char *gap = "ant\n\nbee\n";
    assert_int_equal(tu_write_file(p, gap, strlen(gap)), 0);
    assert_int_equal(dp_shard_set_open(&set, dir, NULL), DP_EFORMAT);
    tu_assert_error_mentions("classes.txt:2: an empty line");
}

/* One broken shard: dp_shard_set_open fails with `code` and one line that
 * begins with the shard's path and holds `says`. */
static void expect_error(const char *name, const su_member *m, int n, long cut, int code,
                         const char *says)
{
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s", tu_tmp_path(name));
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/bad.tar", dir);
    su_write_tar(path, m, n);
    if (cut >= 0)
        su_truncate(path, cut);
    dp_shard_set_t *set = (dp_shard_set_t *)1;
    tu_quiet_log();
    int rc = dp_shard_set_open(&set, path, NULL);
    assert_null(set);
    const char *e = dp_last_error();
    if (rc != code || strncmp(e, path, strlen(path)) != 0 || !strstr(e, says) || strchr(e, '\n'))
        fail_msg("%s: rc %d (want %d), error: %s (want '%s')", name, rc, code, e, says);
}

static void malformed_shards(void **state)
{
    (void)state;
    static char big[3000];
    memset(big, 'j', sizeof big);
    const su_member whole[] = {{"a.jpg", big, sizeof big},
                               {"a.cls", "1", -1},
                               {"b.jpg", big, sizeof big},
                               {"b.cls", "2", -1}};
    /* cut inside b.jpg's data: its header at 4608 (pax: 512 more each) */
    expect_error("cut", whole, 4, 6000, DP_ETRUNC, "b.jpg");
    expect_error("cut_header", whole, 4, 4700, DP_ETRUNC, "cut short");
    /* cut inside b.jpg where its data is zeros, as the end blocks are:
     * libarchive's skip finds the cut */
    static char zeros[3000];
    const su_member zero_images[] = {{"a.jpg", zeros, sizeof zeros},
                                     {"a.cls", "1", -1},
                                     {"b.jpg", zeros, sizeof zeros},
                                     {"b.cls", "2", -1}};
    expect_error("cut_in_zeros", zero_images, 4, 7000, DP_ETRUNC, "member 'b.jpg': Truncated");
    /* cut at b.jpg's header: libarchive sees a clean end; the end blocks are missing */
    expect_error("cut_at_member", whole, 4, 4608, DP_ETRUNC,
                 "after member 'a.cls': the shard ends without tar's end-of-archive blocks");
    const su_member no_label[] = {{"a.jpg", "x", -1},
                                  {"a.cls", "1", -1},
                                  {"b.png", "x", -1},
                                  {"c.jpg", "x", -1},
                                  {"c.cls", "1", -1}};
    expect_error("no_label", no_label, 5, -1, DP_EFORMAT, "key 'b' has no label (.cls)");
    const su_member no_image[] = {{"a.cls", "1", -1}, {"a.txt", "x", -1}};
    expect_error("no_image", no_image, 2, -1, DP_EFORMAT, "key 'a' has no image");
    const su_member nan[] = {{"a.jpg", "x", -1}, {"a.cls", "cat", -1}};
    expect_error("nan", nan, 2, -1, DP_EFORMAT, "member 'a.cls': the label 'cat' is not");
    const su_member negative[] = {{"a.jpg", "x", -1}, {"a.cls", "-1", -1}};
    expect_error("negative", negative, 2, -1, DP_EFORMAT, "the label '-1' is not");
    const su_member empty[] = {{"a.jpg", "x", -1}, {"a.cls", "", 0}};
    expect_error("empty_label", empty, 2, -1, DP_EFORMAT, "the label '' is not");
    const su_member order[] = {
        {"a.jpg", "x", -1}, {"b.jpg", "x", -1}, {"b.cls", "1", -1}, {"a.cls", "1", -1}};
    expect_error("order", order, 4, -1, DP_EFORMAT, "key 'a' has no label");
    const su_member again[] = {{"a.jpg", "x", -1},
                               {"a.cls", "0", -1},
                               {"b.jpg", "x", -1},
                               {"b.cls", "1", -1},
                               {"a.json", "{}", -1}};
    expect_error("again", again, 5, -1, DP_EFORMAT,
                 "member 'a.json': key 'a' again after other keys");
    const su_member two[] = {{"a.jpg", "x", -1}, {"a.png", "x", -1}, {"a.cls", "1", -1}};
    expect_error("two_images", two, 3, -1, DP_EFORMAT, "member 'a.png': key 'a' has a second");
    const su_member nothing[] = {{"readme.txt", "x", -1}, {"a.json", "{}", -1}};
    expect_error("no_sample", nothing, 1, -1, DP_EFORMAT, "no sample in 1 shard");
}

/* No shard matched: a directory without .tar files; a shard missing. */
static void nothing_matched(void **state)
{
    (void)state;
    const char *dir = tu_tmp_path("empty");
    mkdir(dir, 0755);
    dp_shard_set_t *set;
    tu_quiet_log();
    assert_int_equal(dp_shard_set_open(&set, dir, "train"), DP_ENOENT);
    tu_assert_error_mentions("no shard matched");
    char spec[1100];
    snprintf(spec, sizeof spec, "%s/train-{000000..000001}.tar", dir);
    assert_int_equal(dp_shard_set_open(&set, spec, NULL), DP_ENOENT);
    char want[1100];
    snprintf(want, sizeof want, "%s/train-000000.tar: no such shard", dir);
    tu_assert_error_mentions(want);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(brace_expansion),
        cmocka_unit_test_setup_teardown(directory_spec, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(index_counts, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(classes_file, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(malformed_shards, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(nothing_matched, tu_setup_tmp, tu_teardown_tmp),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
