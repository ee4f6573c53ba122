/* A folder of images as torchvision's ImageFolder reads one:
 *
 *   DIR/train/cat/1.png          classes: the directories of DIR/train,
 *   DIR/train/cat/more/2.jpg     sorted by name (label k is the k-th);
 *   DIR/train/dog/3.jpeg         files: .png, .jpg, .jpeg (any case) of a
 *   DIR/test/cat/...             class and its subdirectories, in
 *                                sorted(os.walk(class_dir)) order
 *
 * Files of other extensions are passed over (ImageFolder's
 * IMG_EXTENSIONS beside these are not decoded here, and said once).
 * Listing the files is this file's work (dp__folder_list); streaming them
 * is folder_stream.c's, caching them folder_cache.c's. dp_image_folder_load
 * (the API's first reader, kept) decodes all images up front, as bytes:
 * n x channels x rows x cols, every image the first one's size. */
#include "data/dataset.h"

#include "core/internal.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* Deeper subdirectories than this are a loop of links, not a dataset. */
#define FOLDER_MAX_DEPTH 32
#define FOLDER_MAX_CLASSES 100000

typedef struct file_list {
    char **paths; /* full paths, in ImageFolder's order */
    int32_t *labels;
    int64_t n, cap;
    int64_t skipped_images; /* other image formats passed over */
    char skipped_example[DP__DATA_PATH_CAP];
} file_list;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "dir/name" into path (DP__DATA_PATH_CAP bytes); DP_EINVAL if too long. */
static int join(char *path, const char *dir, const char *name)
{
    int len = snprintf(path, DP__DATA_PATH_CAP, "%s/%s", dir, name);
    if (len < 0 || len >= DP__DATA_PATH_CAP) {
        DP_ERROR("%s: a path in it is longer than %d bytes", dir, DP__DATA_PATH_CAP - 1);
        return DP_EINVAL;
    }
    return 0;
}

static bool has_ext(const char *name, const char *const *exts, size_t n)
{
    const char *dot = strrchr(name, '.');
    for (size_t i = 0; dot && i < n; i++)
        if (strcasecmp(dot, exts[i]) == 0)
            return true;
    return false;
}

static void free_names(char **names, int n)
{
    for (int i = 0; i < n; i++)
        dp__free(names[i]);
    dp__free(names);
}

/* The names in `dir` (without . and ..), sorted; each entry is a
 * directory (dirs) or a regular file (!dirs), links followed. A link to
 * nothing counts as a file, as os.walk lists it: walk() names it. */
static int list_dir(const char *dir, bool dirs, char ***out, int *n)
{
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        DP_ERROR("%s: cannot read the directory", dir);
        return DP_EIO;
    }
    char **names = NULL;
    int count = 0, cap = 0, rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char path[DP__DATA_PATH_CAP];
        int len = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (len < 0 || len >= (int)sizeof path)
            continue;
        bool dangling = stat(path, &st) != 0;
        if (dangling ? dirs || lstat(path, &st) != 0 || !S_ISLNK(st.st_mode)
                     : (dirs ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)))
            continue;
        if (count == cap) {
            cap = cap ? 2 * cap : 16;
            char **grown = dp__malloc((size_t)cap * sizeof *grown);
            if (!grown) {
                rc = DP_ENOMEM;
                break;
            }
            if (count)
                memcpy(grown, names, (size_t)count * sizeof *grown);
            dp__free(names);
            names = grown;
        }
        if (!(names[count] = dp__strdup(e->d_name)))
            rc = DP_ENOMEM;
        else
            count++;
    }
    closedir(d);
    if (rc < 0) {
        free_names(names, count);
        return rc;
    }
    if (count)
        qsort(names, (size_t)count, sizeof *names, cmp_str);
    *out = names;
    *n = count;
    return 0;
}

static int add_file(file_list *l, const char *path, int32_t label)
{
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 64;
        char **paths = dp__malloc((size_t)cap * sizeof *paths);
        int32_t *labels = dp__malloc((size_t)cap * sizeof *labels);
        if (!paths || !labels) {
            dp__free(paths);
            dp__free(labels);
            return DP_ENOMEM;
        }
        if (l->n) {
            memcpy(paths, l->paths, (size_t)l->n * sizeof *paths);
            memcpy(labels, l->labels, (size_t)l->n * sizeof *labels);
        }
        dp__free(l->paths);
        dp__free(l->labels);
        l->paths = paths;
        l->labels = labels;
        l->cap = cap;
    }
    if (!(l->paths[l->n] = dp__strdup(path)))
        return DP_ENOMEM;
    l->labels[l->n++] = label;
    return 0;
}

/* `dir` and its subdirectories, links followed, into *dirs (a list of
 * paths, unsorted). */
static int collect_dirs(file_list *dirs, const char *dir, int depth)
{
    if (depth > FOLDER_MAX_DEPTH) {
        DP_ERROR("%s: more than %d directories deep (a loop of links?)", dir, FOLDER_MAX_DEPTH);
        return DP_EINVAL;
    }
    DP_TRY(add_file(dirs, dir, 0));
    char **subs;
    int ns;
    DP_TRY(list_dir(dir, true, &subs, &ns));
    int rc = 0;
    for (int i = 0; rc == 0 && i < ns; i++) {
        char path[DP__DATA_PATH_CAP];
        rc = join(path, dir, subs[i]);
        if (rc == 0)
            rc = collect_dirs(dirs, path, depth + 1);
    }
    free_names(subs, ns);
    return rc;
}

static void free_list(file_list *l);

/* The images of class directory `dir` and its subdirectories, in the
 * order of ImageFolder's sorted(os.walk(dir)): the directories by their
 * whole path (so "a/x" comes after "a-b", '-' sorting before '/'), each
 * one's files by name. */
static int walk(file_list *l, const char *dir, int32_t label)
{
    static const char *const exts[] = {".png", ".jpg", ".jpeg"};
    static const char *const other[] = {".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"};
    file_list dirs = {0};
    int rc = collect_dirs(&dirs, dir, 0);
    if (rc == 0 && dirs.n > 1)
        qsort(dirs.paths, (size_t)dirs.n, sizeof *dirs.paths, cmp_str);
    for (int64_t d = 0; rc == 0 && d < dirs.n; d++) {
        char **files;
        int nf;
        rc = list_dir(dirs.paths[d], false, &files, &nf);
        for (int i = 0; rc == 0 && i < nf; i++) {
            char path[DP__DATA_PATH_CAP];
            if ((rc = join(path, dirs.paths[d], files[i])) < 0)
                break;
            struct stat st;
            if (has_ext(files[i], exts, DP_COUNTOF(exts)) && stat(path, &st) != 0) {
                /* torchvision's ImageFolder lists it, then fails to open it. */
                char to[DP__DATA_PATH_CAP];
                ssize_t n = readlink(path, to, sizeof to - 1);
                to[n > 0 ? n : 0] = '\0';
                DP_ERROR("%s: a symbolic link to %s, which is not there", path, DP_REPR(to));
                rc = DP_ENOENT;
            } else if (has_ext(files[i], exts, DP_COUNTOF(exts))) {
                rc = add_file(l, path, label);
            } else if (has_ext(files[i], other, DP_COUNTOF(other)) && l->skipped_images++ == 0)
                snprintf(l->skipped_example, sizeof l->skipped_example, "%s", path);
        }
        free_names(files, nf);
    }
    free_list(&dirs);
    return rc;
}

static void free_list(file_list *l)
{
    for (int64_t i = 0; i < l->n; i++)
        dp__free(l->paths[i]);
    dp__free(l->paths);
    dp__free(l->labels);
}

/* Decodes every file of l into ds (allocated from the first image's size
 * and `channels`). */
static int decode_all(const file_list *l, int channels, dp_dataset *ds)
{
    dp_image first;
    DP_TRY(dp_image_read(l->paths[0], channels, &first));
    int rc =
        dp__dataset_alloc_as(ds, l->n, first.channels, first.rows, first.cols, true, l->paths[0]);
    size_t per = (size_t)first.channels * (size_t)first.rows * (size_t)first.cols;
    if (rc == 0)
        memcpy(ds->pixels, first.pixels, per);
    for (int64_t i = 1; rc == 0 && i < l->n; i++) {
        dp_image img;
        rc = dp_image_read(l->paths[i], first.channels, &img);
        if (rc == 0 && (img.rows != first.rows || img.cols != first.cols)) {
            DP_ERROR("%s: %dx%d pixels (width x height), but the first image, %s, has %dx%d: "
                     "every image must have one size (resize them first)",
                     l->paths[i], img.cols, img.rows, l->paths[0], first.cols, first.rows);
            rc = DP_EINVAL;
        }
        if (rc == 0)
            memcpy(ds->pixels + (size_t)i * per, img.pixels, per);
        dp_image_close(&img);
    }
    dp_image_close(&first);
    if (rc == 0)
        memcpy(ds->labels, l->labels, (size_t)l->n * sizeof *l->labels);
    return rc;
}

int dp__folder_list(const char *dir, bool train, dp__folder_files *out)
{
    memset(out, 0, sizeof *out);
    if (!dir) {
        DP_ERROR("folder: `data_dir` is required (DIR/train/CLASS/*.png and "
                 "DIR/test/CLASS/*.png)");
        return DP_EINVAL;
    }
    char root[DP__DATA_PATH_CAP];
    int len = snprintf(root, sizeof root, "%s/%s", dir, train ? "train" : "test");
    if (len < 0 || len >= (int)sizeof root) {
        DP_ERROR("%s: directory name too long", dir);
        return DP_EINVAL;
    }
    DP_TRY(dp__data_check_dir(root));
    char **classes;
    int nc;
    DP_TRY(list_dir(root, true, &classes, &nc));
    file_list l = {0};
    int rc = 0;
    if (nc == 0 || nc > FOLDER_MAX_CLASSES) {
        DP_ERROR("%s: %d class directories: expected 1 to %d (DIR/%s/CLASS/image.png)", root, nc,
                 FOLDER_MAX_CLASSES, train ? "train" : "test");
        rc = DP_EFORMAT;
    }
    for (int k = 0; rc == 0 && k < nc; k++) {
        char path[DP__DATA_PATH_CAP];
        if ((rc = join(path, root, classes[k])) < 0)
            break;
        int64_t before = l.n;
        rc = walk(&l, path, k);
        if (rc == 0 && l.n == before) {
            DP_ERROR("%s: no .png, .jpg or .jpeg file in the class directory", path);
            rc = DP_EFORMAT;
        }
    }
    if (rc == 0 && l.skipped_images)
        DP_WARN("%s and %lld other files: only PNG and JPEG images are read; passed over",
                l.skipped_example, (long long)l.skipped_images - 1);
    if (rc < 0) {
        free_list(&l);
        free_names(classes, nc);
        return rc;
    }
    out->paths = l.paths;
    out->labels = l.labels;
    out->n = l.n;
    out->class_names = classes;
    out->classes = nc;
    return 0;
}

void dp__folder_files_close(dp__folder_files *f)
{
    for (int64_t i = 0; f->paths && i < f->n; i++)
        dp__free(f->paths[i]);
    dp__free(f->paths);
    dp__free(f->labels);
    free_names(f->class_names, f->classes);
    memset(f, 0, sizeof *f);
}

int dp_image_folder_load(const char *dir, bool train, int channels, dp_dataset *out)
{
    DP_ASSERT(out);
    memset(out, 0, sizeof *out);
    dp__folder_files f;
    DP_TRY(dp__folder_list(dir, train, &f));
    file_list l = {.paths = f.paths, .labels = f.labels, .n = f.n};
    dp_dataset ds = {0};
    int rc = decode_all(&l, channels, &ds);
    if (rc < 0) {
        dp__folder_files_close(&f);
        dp_dataset_close(&ds);
        return rc;
    }
    ds.classes = f.classes;
    ds.class_names = f.class_names;
    f.class_names = NULL;
    f.classes = 0;
    dp__folder_files_close(&f);
    *out = ds;
    return 0;
}
