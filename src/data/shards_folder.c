/* dptrain shards' work: an ImageFolder directory as shards.
 *
 *   DIR/train/cat/1.jpg ...   ->  OUT/train-000000.tar ... (KEY.jpg + KEY.cls)
 *   DIR/test/cat/9.png ...    ->  OUT/test-000000.tar ...
 *                                 OUT/classes.txt (the train split's classes)
 *
 * The files are listed by the folder reader's own rules (folder.c), so
 * that the shards hold exactly the samples, in the order and with the
 * labels, that --dataset folder reads. The output is checked before any
 * work, and an error leaves no shard of the run behind. */
#include "data/dataset.h"
#include "data/shards_impl.h"

#include "core/internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The folder reader's listing (src/data/folder.c): the images of
 * DIR/train or DIR/test in ImageFolder's order with their labels, and the
 * class names; each path, name and array dp__free'd by the caller. Until
 * folder.c defines it, this weak one says that it is missing. */
int dp__image_folder_list(const char *dir, bool train, char ***paths, int32_t **labels, int64_t *n,
                          char ***class_names, int *classes);
__attribute__((weak)) int dp__image_folder_list(const char *dir, bool train, char ***paths,
                                                int32_t **labels, int64_t *n, char ***class_names,
                                                int *classes)
{
    (void)train, (void)paths, (void)labels, (void)n, (void)class_names, (void)classes;
    DP_ERROR("%s: listing an image folder for shards needs the folder reader's listing "
             "(dp__image_folder_list), which this build lacks",
             dir);
    return DP_ENOTSUP;
}

typedef struct split_list {
    char **paths;
    int32_t *labels;
    int64_t n;
    char **names;
    int classes;
} split_list;

static void split_free(split_list *s)
{
    for (int64_t i = 0; i < s->n; i++)
        dp__free(s->paths[i]);
    for (int k = 0; s->names && k < s->classes; k++)
        dp__free(s->names[k]);
    dp__free(s->paths);
    dp__free(s->labels);
    dp__free(s->names);
    memset(s, 0, sizeof *s);
}

/* OUT: made when missing (its parent must exist); else a directory
 * holding no shard or classes.txt yet. *made says whether we made it. */
static int check_out(const char *out, bool *made)
{
    struct stat st;
    *made = false;
    if (stat(out, &st) != 0) {
        if (mkdir(out, 0777) != 0) {
            DP_ERROR("%s: cannot make the output directory (%s)", out, strerror(errno));
            return DP_EIO;
        }
        *made = true;
        return 0;
    }
    if (!S_ISDIR(st.st_mode)) {
        DP_ERROR("%s: not a directory (the shards' output directory)", out);
        return DP_EINVAL;
    }
    if (access(out, W_OK | X_OK) != 0) {
        DP_ERROR("%s: cannot write in the directory (%s)", out, strerror(errno));
        return DP_EIO;
    }
    DIR *d = opendir(out);
    if (!d) {
        DP_ERROR("%s: cannot read the directory (%s)", out, strerror(errno));
        return DP_EIO;
    }
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        bool tar = n > 4 && strcmp(e->d_name + n - 4, ".tar") == 0;
        if ((tar &&
             (strncmp(e->d_name, "train-", 6) == 0 || strncmp(e->d_name, "test-", 5) == 0)) ||
            strcmp(e->d_name, "classes.txt") == 0) {
            DP_ERROR("%s/%s: the output directory holds shards already (remove them or choose "
                     "another)",
                     out, e->d_name);
            rc = DP_EINVAL;
        }
    }
    closedir(d);
    return rc;
}

static void remove_shards(const char *out, const char *prefix, int n)
{
    char path[4096];
    for (int s = 0; s < n; s++) {
        snprintf(path, sizeof path, "%s/%s-%06d.tar", out, prefix, s);
        unlink(path);
    }
}

int dp_shards_from_folder(const char *dir, const char *out_dir, const dp_shard_write_options *opt)
{
    DP_ASSERT(dir && out_dir && opt);
    char train_dir[4096], test_dir[4096];
    snprintf(train_dir, sizeof train_dir, "%s/train", dir);
    snprintf(test_dir, sizeof test_dir, "%s/test", dir);
    DP_TRY(dp__data_check_dir(dir));
    DP_TRY(dp__data_check_dir(train_dir));
    struct stat st;
    bool has_test = stat(test_dir, &st) == 0 && S_ISDIR(st.st_mode);
    bool made;
    DP_TRY(check_out(out_dir, &made));
    split_list train = {0}, test = {0};
    int rc = dp__image_folder_list(dir, true, &train.paths, &train.labels, &train.n, &train.names,
                                   &train.classes);
    if (rc == 0 && has_test)
        rc = dp__image_folder_list(dir, false, &test.paths, &test.labels, &test.n, &test.names,
                                   &test.classes);
    /* One classes.txt serves both splits: their class directories agree. */
    for (int k = 0; rc == 0 && has_test && k < DP_MAX(test.classes, train.classes); k++)
        if (k >= train.classes || k >= test.classes || strcmp(test.names[k], train.names[k]) != 0) {
            DP_ERROR("%s: class %s is not train's class %d (%s): the splits must have the same "
                     "class directories",
                     test_dir, k < test.classes ? DP_REPR(test.names[k]) : "none", k,
                     k < train.classes ? DP_REPR(train.names[k]) : "none");
            rc = DP_EFORMAT;
        }
    int train_shards = 0, test_shards = 0;
    if (rc == 0)
        rc = dp_shards_write(out_dir, "train", (const char *const *)train.paths, train.labels,
                             train.n, opt, &train_shards);
    if (rc == 0 && has_test)
        rc = dp_shards_write(out_dir, "test", (const char *const *)test.paths, test.labels, test.n,
                             opt, &test_shards);
    if (rc == 0)
        rc = dp_shards_write_classes(out_dir, (const char *const *)train.names, train.classes);
    if (rc < 0) {
        remove_shards(out_dir, "train", train_shards);
        remove_shards(out_dir, "test", test_shards);
        if (made)
            rmdir(out_dir);
    }
    split_free(&train);
    split_free(&test);
    return rc;
}
