/* Writing shards: dp_shards_write's shards, in the seed's shuffled order,
 * read back through a lane with every file's bytes and label, split by
 * --shard-size and --max-bytes, nothing left behind on an error; and
 * `dptrain shards DIR OUT` on an image folder, round trip and bad
 * arguments. */
#include "shardsutil.h"
#include "testutil.h"

#include "dp/dp.h"
#include "dp/shards.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* n files dir/f<i>.<jpg|png|JPEG> of su_image(i)'s bytes, their paths
 * into paths[i] (malloc'd). */
static void write_files(const char *dir, int n, char **paths)
{
    static const char *const ext[] = {"jpg", "png", "JPEG"};
    mkdir(dir, 0755);
    uint8_t bytes[1024];
    for (int i = 0; i < n; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/f%02d.%s", dir, i, ext[i % 3]);
        su_image(i, bytes);
        assert_int_equal(tu_write_file(p, bytes, su_image_size(i)), 0);
        paths[i] = strdup(p);
    }
}

/* How many names in dir begin with prefix. */
static int count_files(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

/* Every sample of the set at spec, through one lane in set order: the
 * one at place i has key order[i] (dp_shards_write_order(seed)), its
 * bytes su_image(key), its label labels[key], its member's extension the
 * file's, lowercased; every file comes back once. */
static void check_round_trip(const char *spec, const char *split, int n, const int32_t *labels,
                             uint64_t seed)
{
    dp_shard_set_t *set;
    assert_int_equal(dp_shard_set_open(&set, spec, split), 0);
    assert_int_equal(dp_shard_set_samples(set), n);
    dp_shard_lane_args a = {.lane = 0, .lanes = 1, .shuffle_buffer = 1};
    dp_shard_lane_t *lane;
    assert_int_equal(dp_shard_lane_open(&lane, set, &a), 0);
    dp_shard_sample s;
    uint8_t want[1024];
    int64_t order[64];
    bool seen[64] = {0};
    assert_true(n <= 64);
    dp_shards_write_order(seed, order, n);
    static const char *const ext[] = {".jpg", ".png", ".jpeg"};
    for (int i = 0; i < n; i++) {
        assert_int_equal(dp_shard_lane_next(lane, &s), 1);
        assert_int_equal(s.id, i);
        char *end;
        long f = strtol(s.key, &end, 10);
        assert_int_equal(*end, '\0');
        assert_int_equal(strlen(s.key), 8);
        assert_int_equal(f, order[i]);
        assert_false(seen[f]);
        seen[f] = true;
        su_image((int)f, want);
        assert_int_equal(s.image_size, su_image_size((int)f));
        assert_memory_equal(s.image, want, s.image_size);
        assert_int_equal(s.label, labels[f]);
        assert_non_null(strstr(s.member, ext[f % 3]));
    }
    assert_int_equal(dp_shard_lane_next(lane, &s), 0);
    dp_shard_lane_close(lane);
    dp_shard_set_close(set);
}

/* Whether two files hold the same bytes. */
static bool same_bytes(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    assert_non_null(fa);
    assert_non_null(fb);
    int ca, cb;
    do {
        ca = fgetc(fa);
        cb = fgetc(fb);
    } while (ca == cb && ca != EOF);
    fclose(fa);
    fclose(fb);
    return ca == cb;
}

/* The written order: a permutation of the list, the same for a seed and
 * another for another seed, and shuffled: 1000 samples listed class by
 * class (100 of each of 10 classes) are written with few in place, and
 * every run of 100 in the written order holds most of the classes. */
static void written_order_is_shuffled(void **state)
{
    (void)state;
    enum { N = 1000 };
    static int64_t a[N], b[N], c[N];
    dp_shards_write_order(0, a, N);
    dp_shards_write_order(0, b, N);
    dp_shards_write_order(1, c, N);
    assert_memory_equal(a, b, sizeof a);
    bool seen[N] = {0};
    int in_place = 0, moved_by_other_seed = 0;
    for (int i = 0; i < N; i++) {
        assert_true(a[i] >= 0 && a[i] < N);
        assert_false(seen[a[i]]);
        seen[a[i]] = true;
        in_place += a[i] == i;
        moved_by_other_seed += a[i] != c[i];
    }
    assert_true(in_place < 10); /* a uniform permutation: 1 expected */
    assert_true(moved_by_other_seed > N - 10);
    for (int from = 0; from < N; from += 100) {
        bool cls[10] = {0};
        int classes = 0;
        for (int i = from; i < from + 100; i++) {
            classes += !cls[a[i] / 100];
            cls[a[i] / 100] = true;
        }
        if (classes < 8)
            fail_msg("written places %d..%d hold %d of the 10 classes", from, from + 99, classes);
    }
    int64_t one;
    dp_shards_write_order(5, &one, 1);
    assert_int_equal(one, 0);
    dp_shards_write_order(5, &one, 0); /* nothing written */
}

static void write_and_read_back(void **state)
{
    (void)state;
    enum { N = 10 };
    char *paths[N];
    int32_t labels[N];
    write_files(tu_tmp_path("in"), N, paths);
    for (int i = 0; i < N; i++)
        labels[i] = (i * 7) % 4;
    const char *out = tu_tmp_path("out");
    mkdir(out, 0755);
    dp_shard_write_options o = {.shard_size = 3};
    int shards;
    assert_int_equal(
        dp_shards_write(out, "train", (const char *const *)paths, labels, N, &o, &shards), 0);
    assert_int_equal(shards, 4); /* 3 + 3 + 3 + 1 */
    assert_int_equal(count_files(out, "train-"), 4);
    assert_int_equal(count_files(out, "."), 2); /* . and ..: no temporary file left */
    char spec[1100];
    snprintf(spec, sizeof spec, "%s/train-{000000..000003}.tar", out);
    check_round_trip(spec, NULL, N, labels, 0);
    /* the same seed, the same bytes; another seed, another order */
    char first[1100], again[1100], other[1100]; /* tu_tmp_path's buffer is reused */
    snprintf(first, sizeof first, "%s", out);
    snprintf(again, sizeof again, "%s", tu_tmp_path("again"));
    snprintf(other, sizeof other, "%s", tu_tmp_path("other"));
    mkdir(again, 0755);
    mkdir(other, 0755);
    assert_int_equal(
        dp_shards_write(again, "train", (const char *const *)paths, labels, N, &o, &shards), 0);
    o.seed = 9;
    assert_int_equal(
        dp_shards_write(other, "train", (const char *const *)paths, labels, N, &o, &shards), 0);
    for (int s = 0; s < 4; s++) {
        char x[1200], y[1200], z[1200];
        snprintf(x, sizeof x, "%s/train-%06d.tar", first, s);
        snprintf(y, sizeof y, "%s/train-%06d.tar", again, s);
        snprintf(z, sizeof z, "%s/train-%06d.tar", other, s);
        assert_true(same_bytes(x, y));
        if (s == 0)
            assert_false(same_bytes(x, z));
    }
    check_round_trip(other, "train", N, labels, 9);
    /* --max-bytes: each sample here is 512 + 1024 + 1024 bytes at most,
     * so 6000 bytes hold two (with the 1024 closing ones) */
    const char *out2 = tu_tmp_path("out2");
    mkdir(out2, 0755);
    o = (dp_shard_write_options){.shard_size = 1000, .max_bytes = 6000, .seed = 4};
    assert_int_equal(
        dp_shards_write(out2, "test", (const char *const *)paths, labels, N, &o, &shards), 0);
    assert_int_equal(shards, 5);
    check_round_trip(out2, "test", N, labels, 4);
    const char *const names[] = {"ant", "bee", "cat", "dog"};
    assert_int_equal(dp_shards_write_classes(out2, names, 4), 0);
    dp_shard_set_t *set;
    assert_int_equal(dp_shard_set_open(&set, out2, NULL), 0);
    assert_int_equal(dp_shard_set_classes(set), 4);
    assert_string_equal(dp_shard_set_class_names(set)[3], "dog");
    dp_shard_set_close(set);
    /* an unreadable input half-way: no shard left, one line naming it */
    const char *out3 = tu_tmp_path("out3");
    mkdir(out3, 0755);
    free(paths[7]);
    paths[7] = strdup(tu_tmp_path("in/missing.jpg"));
    tu_quiet_log();
    o = (dp_shard_write_options){.shard_size = 2};
    assert_true(dp_shards_write(out3, "train", (const char *const *)paths, labels, N, &o, &shards) <
                0);
    tu_assert_error_mentions("missing.jpg");
    assert_int_equal(count_files(out3, ""), 2); /* only . and .. */
    for (int i = 0; i < N; i++)
        free(paths[i]);
}

/* `cmd` through the shell with stdout and stderr into out; exit status. */
static int run(char *out, size_t size, const char *cmd)
{
    char full[8192];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, size - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* dptrain shards on DIR/{train,test}/{ant,bee} --seed 3: the train
 * split's files, keyed by their place in ImageFolder's order (classes
 * sorted, files sorted), come back in dp_shards_write_order(3)'s order
 * with their bytes and class indexes, and classes.txt names them. */
static void cli_round_trip(void **state)
{
    (void)state;
    assert_int_equal(tu_find_dptrain(), 0);
    char dir[1024], p[1200], out[16384], cmd[4096];
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("folder"));
    mkdir(dir, 0755);
    static const char *const subdirs[] = {"train", "train/bee", "train/ant",
                                          "test",  "test/ant",  "test/bee"};
    for (size_t i = 0; i < COUNTOF(subdirs); i++) {
        snprintf(p, sizeof p, "%s/%s", dir, subdirs[i]);
        mkdir(p, 0755);
    }
    /* ImageFolder's order: ant/f00.jpg ant/f01.png ant/f02.JPEG bee/f03.jpg ... */
    enum { N = 7 };
    int32_t labels[N];
    uint8_t bytes[1024];
    static const char *const ext[] = {"jpg", "png", "JPEG"};
    for (int i = 0; i < N; i++) {
        labels[i] = i < 3 ? 0 : 1;
        snprintf(p, sizeof p, "%s/train/%s/f%02d.%s", dir, labels[i] ? "bee" : "ant", i,
                 ext[i % 3]);
        su_image(i, bytes);
        assert_int_equal(tu_write_file(p, bytes, su_image_size(i)), 0);
    }
    snprintf(p, sizeof p, "%s/train/ant/notes.txt", dir);
    assert_int_equal(tu_write_file(p, "x", 1), 0);
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/test/%s/t.jpg", dir, i ? "bee" : "ant");
        assert_int_equal(tu_write_file(p, "y", 1), 0);
    }
    const char *shards = tu_tmp_path("shards");
    snprintf(cmd, sizeof cmd, "%s shards %s %s --shard-size 2 --seed 3", tu_dptrain, dir, shards);
    int st = run(out, sizeof out, cmd);
    if (st != 0 && strstr(out, "which this build lacks"))
        tu_skip("the folder reader's listing is not in this build: %s", out);
    if (st != 0)
        fail_msg("%s: exit %d: %s", cmd, st, out);
    assert_non_null(strstr(out, "train 7 samples in 4 shards, test 2 in 1, 2 classes"));
    check_round_trip(shards, "train", N, labels, 3);
    dp_shard_set_t *set;
    assert_int_equal(dp_shard_set_open(&set, shards, "test"), 0);
    assert_int_equal(dp_shard_set_samples(set), 2);
    assert_string_equal(dp_shard_set_class_names(set)[1], "bee");
    dp_shard_set_close(set);
    /* again into the same OUT: refused before any work, one line */
    st = run(out, sizeof out, cmd);
    assert_int_equal(st, 1);
    assert_non_null(strstr(out, "the output directory holds shards already"));
    assert_int_equal(strchr(out, '\n'), out + strlen(out) - 1);
}

/* Bad arguments: exit 2 or 1 with one line, and nothing written. */
static void cli_bad_arguments(void **state)
{
    (void)state;
    assert_int_equal(tu_find_dptrain(), 0);
    char out[4096], cmd[4096];
    const char *file = tu_tmp_path("a-file");
    assert_int_equal(tu_write_file(file, "x", 1), 0);
    static const struct {
        const char *args;
        int status;
        const char *says;
    } cases[] = {
        {"", 2, "shards needs DIR and OUT"},
        {"DIR OUT --shard-size 0", 2, "--shard-size 0"},
        {"DIR OUT THIRD", 2, "got a third"},
        {"DIR OUT --seed -1", 2, "--seed -1"},
        {"%s/nowhere %s/o", 1, "nowhere: no such directory"},
    };
    for (size_t i = 0; i < COUNTOF(cases); i++) {
        char args[2048];
        snprintf(args, sizeof args, cases[i].args, tu_tmp, tu_tmp);
        snprintf(cmd, sizeof cmd, "%s shards %s", tu_dptrain, args);
        int st = run(out, sizeof out, cmd);
        if (st != cases[i].status || !strstr(out, cases[i].says) ||
            strchr(out, '\n') != out + strlen(out) - 1)
            fail_msg("%s: exit %d: %s", cmd, st, out);
    }
    /* OUT a file: refused (the folder exists) */
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/f", tu_tmp);
    mkdir(dir, 0755);
    snprintf(cmd, sizeof cmd, "%s/train", dir);
    mkdir(cmd, 0755);
    snprintf(cmd, sizeof cmd, "%s shards %s %s", tu_dptrain, dir, file);
    assert_int_equal(run(out, sizeof out, cmd), 1);
    assert_non_null(strstr(out, "a-file: not a directory"));
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(written_order_is_shuffled),
        cmocka_unit_test_setup_teardown(write_and_read_back, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(cli_round_trip, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(cli_bad_arguments, tu_setup_tmp, tu_teardown_tmp),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
