/* A shard set's spec into shard paths, and its classes.txt.
 *
 *   "s/train-{000000..000002}.tar" -> s/train-000000.tar, -000001, -000002
 *   "s/{a,b}-{0..1}.tar"           -> s/a-0.tar s/a-1.tar s/b-0.tar s/b-1.tar
 *   "s/"  (a directory)            -> its *.tar files, sorted by name
 *
 * The brace rules are braceexpand's (what WebDataset expands with):
 * a range pads to the wider end's width when an end has a leading zero,
 * counts down when the start is larger, steps by a third number; a brace
 * holding neither a comma nor a range stays as it is; a '{' that no '}'
 * follows is an error. */
#include "data/shards_impl.h"

#include "core/internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct path_list {
    char **p;
    int n, cap;
} path_list;

static void list_free(path_list *l)
{
    for (int i = 0; i < l->n; i++)
        dp__free(l->p[i]);
    dp__free(l->p);
    memset(l, 0, sizeof *l);
}

/* Appends a copy of s[0..len) + tail. */
static int list_add(path_list *l, const char *spec, const char *s, size_t len, const char *tail)
{
    if (l->n == DP_SHARD_MAX_SHARDS) {
        DP_ERROR("%s: more than %d shards", DP_REPR(spec), DP_SHARD_MAX_SHARDS);
        return DP_EINVAL;
    }
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        char **grown = dp__malloc((size_t)cap * sizeof *grown);
        if (!grown)
            return DP_ENOMEM;
        if (l->n)
            memcpy(grown, l->p, (size_t)l->n * sizeof *grown);
        dp__free(l->p);
        l->p = grown;
        l->cap = cap;
    }
    size_t tl = strlen(tail);
    char *p = dp__malloc(len + tl + 1);
    if (!p)
        return DP_ENOMEM;
    memcpy(p, s, len);
    memcpy(p + len, tail, tl + 1);
    l->p[l->n++] = p;
    return 0;
}

/* An integer of at most 18 digits with an optional '-', all of s[0..n). */
static bool parse_int(const char *s, size_t n, long long *v)
{
    size_t i = n && s[0] == '-';
    if (i == n || n - i > 18)
        return false;
    long long x = 0;
    for (size_t j = i; j < n; j++) {
        if (s[j] < '0' || s[j] > '9')
            return false;
        x = x * 10 + (s[j] - '0');
    }
    *v = i ? -x : x;
    return true;
}

static bool leading_zero(const char *s, size_t n)
{
    if (n && s[0] == '-')
        s++, n--;
    return n > 1 && s[0] == '0';
}

/* The alternatives of the brace body b[0..n): a range's numbers, or the
 * comma list's items; false when it is neither (a literal brace). */
static int brace_items(const char *spec, const char *b, size_t n, path_list *items, bool *is_brace)
{
    *is_brace = true;
    if (memchr(b, ',', n)) {
        const char *start = b;
        for (const char *p = b;; p++)
            if (p == b + n || *p == ',') {
                DP_TRY(list_add(items, spec, start, (size_t)(p - start), ""));
                if (p == b + n)
                    return 0;
                start = p + 1;
            }
    }
    const char *dots = n >= 4 ? strstr(b, "..") : NULL;
    if (!dots || dots >= b + n) {
        *is_brace = false;
        return 0;
    }
    const char *left = b, *right = dots + 2, *end = b + n;
    const char *dots2 = strstr(right, "..");
    const char *right_end = dots2 && dots2 < end ? dots2 : end;
    long long lo, hi, step = 1;
    if (!parse_int(left, (size_t)(dots - left), &lo) ||
        !parse_int(right, (size_t)(right_end - right), &hi) ||
        (right_end != end && !parse_int(right_end + 2, (size_t)(end - right_end - 2), &step))) {
        *is_brace = false;
        return 0;
    }
    int width = 0;
    if (leading_zero(left, (size_t)(dots - left)) ||
        leading_zero(right, (size_t)(right_end - right)))
        width = (int)DP_MAX(dots - left, right_end - right);
    if (step < 0)
        step = -step;
    if (step == 0)
        step = 1;
    if ((hi > lo ? hi - lo : lo - hi) / step >= DP_SHARD_MAX_SHARDS) {
        DP_ERROR("%s: the range {%.*s} has more than %d values", DP_REPR(spec), (int)n, b,
                 DP_SHARD_MAX_SHARDS);
        return DP_EINVAL;
    }
    for (long long v = lo; lo <= hi ? v <= hi : v >= hi; v += lo <= hi ? step : -step) {
        char num[32];
        int len = snprintf(num, sizeof num, "%0*lld", width, v);
        DP_TRY(list_add(items, spec, num, (size_t)len, ""));
    }
    return 0;
}

/* Every expansion of pattern s (its prefix `done` already fixed) into out. */
static int expand(const char *spec, const char *done, const char *s, path_list *out)
{
    for (const char *open = strchr(s, '{'); open; open = strchr(open + 1, '{')) {
        const char *close = strchr(open, '}');
        if (!close)
            break;
        const char *inner = memchr(open + 1, '{', (size_t)(close - open - 1));
        if (inner)
            continue; /* braceexpand's nesting is not read here: the inner one first */
        path_list items = {0};
        bool is_brace;
        int rc = brace_items(spec, open + 1, (size_t)(close - open - 1), &items, &is_brace);
        if (rc == 0 && is_brace) {
            size_t dl = strlen(done), pl = (size_t)(open - s);
            for (int i = 0; rc == 0 && i < items.n; i++) {
                size_t il = strlen(items.p[i]);
                char *head = dp__malloc(dl + pl + il + 1);
                if (!head) {
                    rc = DP_ENOMEM;
                    break;
                }
                memcpy(head, done, dl);
                memcpy(head + dl, s, pl);
                memcpy(head + dl + pl, items.p[i], il + 1);
                rc = expand(spec, head, close + 1, out);
                dp__free(head);
            }
        }
        list_free(&items);
        if (rc < 0 || is_brace)
            return rc;
    }
    return list_add(out, spec, done, strlen(done), s);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.tar regular files of dir (those named "<split>-*" when split is
 * given and any are), sorted. */
static int list_tar_dir(const char *dir, const char *split, path_list *out)
{
    DIR *d = opendir(dir);
    if (!d) {
        DP_ERROR("%s: cannot read the directory (%s)", dir, strerror(errno));
        return DP_EIO;
    }
    path_list all = {0}, picked = {0};
    int rc = 0;
    size_t sl = split ? strlen(split) : 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".tar") != 0)
            continue;
        char path[4096];
        struct stat st;
        int len = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (len < 0 || len >= (int)sizeof path || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        rc = list_add(&all, dir, path, (size_t)len, "");
        if (rc == 0 && split && strncmp(e->d_name, split, sl) == 0 && e->d_name[sl] == '-')
            rc = list_add(&picked, dir, path, (size_t)len, "");
    }
    closedir(d);
    path_list *keep = picked.n ? &picked : &all;
    if (rc == 0 && keep->n > 1)
        qsort(keep->p, (size_t)keep->n, sizeof *keep->p, cmp_str);
    if (rc == 0) {
        *out = *keep;
        memset(keep, 0, sizeof *keep);
    }
    list_free(&all);
    list_free(&picked);
    return rc;
}

int dp__shard_spec_expand(const char *spec, const char *split, char ***paths, int *n)
{
    *paths = NULL;
    *n = 0;
    if (!spec || !spec[0]) {
        DP_ERROR("shards: no shards given (a pattern such as 'shards/train-{000000..000099}.tar' "
                 "or a directory of .tar files)");
        return DP_EINVAL;
    }
    path_list l = {0};
    struct stat st;
    bool dir = stat(spec, &st) == 0 && S_ISDIR(st.st_mode);
    const char *open = strrchr(spec, '{');
    if (!dir && open && !strchr(open, '}')) {
        DP_ERROR("%s: a '{' without its '}' (braceexpand's unbalanced braces)", spec);
        return DP_EINVAL;
    }
    int rc = dir ? list_tar_dir(spec, split, &l) : expand(spec, "", spec, &l);
    if (rc == 0 && l.n == 0) {
        DP_ERROR("%s: no shard matched (the directory has no .tar file)", spec);
        rc = DP_ENOENT;
    }
    if (rc < 0) {
        list_free(&l);
        return rc;
    }
    *paths = l.p;
    *n = l.n;
    return 0;
}

int dp__shard_classes_read(const char *dir, char ***names, int *n)
{
    *names = NULL;
    *n = 0;
    char path[4096];
    int len = snprintf(path, sizeof path, "%s/classes.txt", dir);
    if (len < 0 || len >= (int)sizeof path)
        return 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    path_list l = {0};
    int rc = 0;
    char line[4096];
    for (int k = 1; rc == 0 && fgets(line, sizeof line, f); k++) {
        size_t ln = strlen(line);
        bool whole = ln && line[ln - 1] == '\n';
        if (!whole && !feof(f)) {
            DP_ERROR("%s:%d: a class name longer than %zu bytes", path, k, sizeof line - 2);
            rc = DP_EFORMAT;
            break;
        }
        while (ln && (line[ln - 1] == '\n' || line[ln - 1] == '\r'))
            line[--ln] = '\0';
        if (ln == 0) {
            DP_ERROR("%s:%d: an empty line (one class name a line, label k on line k + 1)", path,
                     k);
            rc = DP_EFORMAT;
        } else if (l.n == 100000) {
            DP_ERROR("%s: more than 100000 classes", path);
            rc = DP_EFORMAT;
        } else
            rc = list_add(&l, path, line, ln, "");
    }
    if (rc == 0 && ferror(f)) {
        DP_ERROR("%s: cannot read the file", path);
        rc = DP_EIO;
    }
    fclose(f);
    if (rc == 0 && l.n == 0) {
        DP_ERROR("%s: no class names (one a line)", path);
        rc = DP_EFORMAT;
    }
    if (rc < 0) {
        list_free(&l);
        return rc;
    }
    *names = l.p;
    *n = l.n;
    return 0;
}
