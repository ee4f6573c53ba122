/* dptrain shards' work: an ImageFolder directory as shards.
 *
 *   DIR/train/cat/1.jpg ...   ->  OUT/train-000000.tar ... (KEY.jpg + KEY.cls)
 *   DIR/test/cat/9.png ...    ->  OUT/test-000000.tar ...
 *                                 OUT/classes.txt (the train split's classes)
 *
 * The files are listed by the folder reader's own rules (folder.c), so
 * that the shards hold exactly the samples, with the labels, that
 * --dataset folder reads (written in the seed's shuffled order,
 * shards_write.c). The output is checked before any
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
    /* The folder reader's own listing (folder.c): the same files, order
     * and labels as --dataset folder reads. */
    dp__folder_files train = {0}, test = {0};
    int rc = dp__folder_list(dir, true, &train);
    if (rc == 0 && has_test)
        rc = dp__folder_list(dir, false, &test);
    /* One classes.txt serves both splits: their class directories agree. */
    for (int k = 0; rc == 0 && has_test && k < DP_MAX(test.classes, train.classes); k++)
        if (k >= train.classes || k >= test.classes ||
            strcmp(test.class_names[k], train.class_names[k]) != 0) {
            DP_ERROR("%s: class %s is not train's class %d (%s): the splits must have the same "
                     "class directories",
                     test_dir, k < test.classes ? DP_REPR(test.class_names[k]) : "none", k,
                     k < train.classes ? DP_REPR(train.class_names[k]) : "none");
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
        rc =
            dp_shards_write_classes(out_dir, (const char *const *)train.class_names, train.classes);
    if (rc < 0) {
        remove_shards(out_dir, "train", train_shards);
        remove_shards(out_dir, "test", test_shards);
        if (made)
            rmdir(out_dir);
    }
    dp__folder_files_close(&train);
    dp__folder_files_close(&test);
    return rc;
}
