/* The convolution kernels' cache file in memory (conv_cache_file.h): its
 * text parsed into sections, a shape's lines merged, and the whole file
 * written anew beside the old and renamed over it. */
#include "train/conv_cache_file.h"

#include "core/internal.h"
#include "dp/dp.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
    LINE_MAX_CHARS = 4096,     /* a shape's line is under 200 characters */
    FILE_MAX_BYTES = 16 << 20, /* ~100,000 shapes */
};

static const char file_comment[] =
    "# dptrain's convolution kernel choices (conv_algo auto), one section per machine key:\n"
    "# [dptrain version; CPU, its flags and oneDNN's instruction set; oneDNN version; "
    "DNNL_MAX_CPU_ISA]\n";

void dp__cache_file_free(dp__cache_file *f)
{
    for (size_t i = 0; i < f->n; i++) {
        for (size_t j = 0; j < f->s[i].n; j++)
            free(f->s[i].lines[j]);
        free(f->s[i].lines);
        free(f->s[i].key);
    }
    free(f->s);
    memset(f, 0, sizeof *f);
}

static char *strndup_checked(const char *p, size_t len)
{
    char *s = malloc(len + 1);
    if (s) {
        memcpy(s, p, len);
        s[len] = '\0';
    }
    return s;
}

dp__cache_section *dp__cache_section_add(dp__cache_file *f, const char *key, size_t len)
{
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 4;
        dp__cache_section *s = realloc(f->s, cap * sizeof *s);
        if (!s)
            return NULL;
        f->s = s;
        f->cap = cap;
    }
    dp__cache_section *s = &f->s[f->n];
    memset(s, 0, sizeof *s);
    if (!(s->key = strndup_checked(key, len)))
        return NULL;
    f->n++;
    return s;
}

/* Takes `line` (malloc'd) into s; frees it when out of memory. */
static int add_line(dp__cache_section *s, char *line)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        char **l = realloc(s->lines, cap * sizeof *l);
        if (!l) {
            free(line);
            return DP_ENOMEM;
        }
        s->lines = l;
        s->cap = cap;
    }
    s->lines[s->n++] = line;
    return 0;
}

dp__cache_section *dp__cache_section_find(dp__cache_file *f, const char *key)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->s[i].key, key) == 0)
            return &f->s[i];
    return NULL;
}

/* The file's text into *f. A line that no section holds, a key line
 * without its ']', a control character, or a line of our section that is
 * not a choice makes the file corrupt: DP_EFORMAT with *bad (1-based) and
 * *why set. Other keys' lines are kept as they are: another version of
 * dptrain may write what this one does not read. */
static int parse_file(const char *text, size_t size, const char *ours, dp__cache_file *f, int *bad,
                      const char **why)
{
    memset(f, 0, sizeof *f);
    dp__cache_section *cur = NULL;
    int no = 0;
    for (size_t at = 0; at < size;) {
        const char *p = text + at, *end = memchr(p, '\n', size - at);
        size_t len = end ? (size_t)(end - p) : size - at;
        at += len + (end ? 1 : 0);
        *bad = ++no;
        if (len > LINE_MAX_CHARS) {
            *why = "a line longer than any choice";
            return DP_EFORMAT;
        }
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)p[i] < 0x20 && p[i] != '\t') {
                *why = "a control character";
                return DP_EFORMAT;
            }
        if (len == 0 || p[0] == '#')
            continue;
        if (p[0] == '[') {
            if (p[len - 1] != ']' || len < 3) {
                *why = "a key line without its closing ']'";
                return DP_EFORMAT;
            }
            /* a key written twice (by hand) continues its dp__cache_section */
            char *k = strndup_checked(p + 1, len - 2);
            if (!k)
                return DP_ENOMEM;
            cur = dp__cache_section_find(f, k);
            if (!cur)
                cur = dp__cache_section_add(f, k, len - 2);
            free(k);
            if (!cur)
                return DP_ENOMEM;
            continue;
        }
        if (!cur) {
            *why = "a choice before the first [key] line";
            return DP_EFORMAT;
        }
        char *line = strndup_checked(p, len);
        if (!line)
            return DP_ENOMEM;
        if (strcmp(cur->key, ours) == 0 && dp_conv_choices_check(line) < 0) {
            free(line);
            *why = "not a convolution choice (e.g. 'f32 6x14x14 k16 5x5 s1x1 p0x0: "
                   "forward=direct')";
            return DP_EFORMAT;
        }
        DP_TRY(add_line(cur, line));
    }
    *bad = 0;
    return 0;
}

/* The whole file into *text (NUL-terminated), its size into *size:
 * 0, DP_ENOENT when there is none, DP_EIO (logged as a warning), DP_ENOMEM. */
static int read_text(const char *path, char **text, size_t *size)
{
    *text = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        if (errno == ENOENT || errno == ENOTDIR)
            return DP_ENOENT;
        DP_WARN("the convolution kernels' cache %s: cannot read it (%s)", path, strerror(errno));
        return DP_EIO;
    }
    char *buf = malloc(FILE_MAX_BYTES + 1);
    size_t n = buf ? fread(buf, 1, FILE_MAX_BYTES + 1, fp) : 0;
    int err = ferror(fp);
    fclose(fp);
    if (!buf)
        return DP_ENOMEM;
    if (err || n > FILE_MAX_BYTES) {
        DP_WARN("the convolution kernels' cache %s: %s", path,
                err ? "cannot read it" : "larger than 16 MiB");
        free(buf);
        return DP_EIO;
    }
    buf[n] = '\0';
    *text = buf;
    *size = n;
    return 0;
}

/* The file read into *f: empty when there is none, or when it is corrupt
 * (warned where warn_corrupt: when the cache is read, not again when it is
 * added to). DP_EIO: it cannot be read (warned). */
int dp__cache_file_read(const char *path, const char *key, dp__cache_file *f, bool warn_corrupt)
{
    char *text;
    size_t size;
    memset(f, 0, sizeof *f);
    int rc = read_text(path, &text, &size);
    if (rc == DP_ENOENT)
        return 0;
    DP_TRY(rc);
    int bad = 0;
    const char *why = "";
    rc = parse_file(text, size, key, f, &bad, &why);
    free(text);
    if (rc == DP_EFORMAT) {
        if (warn_corrupt)
            DP_WARN("the convolution kernels' cache %s:%d: %s; the file is ignored and rewritten",
                    path, bad, why);
        dp__cache_file_free(f);
        return 0;
    }
    if (rc < 0)
        dp__cache_file_free(f);
    return rc;
}

/* Creates the folders of `path` that are missing (mkdir -p of its
 * dirname); 0, or errno's value. */
int dp__cache_make_parents(const char *path)
{
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
        return ENAMETOOLONG;
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return 0;
    *slash = '\0';
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
            return errno;
        *p = '/';
    }
    return mkdir(dir, 0755) < 0 && errno != EEXIST ? errno : 0;
}

/* The passes of `add` ("shape: pass=impl ...") that `have` lacks, appended
 * to it: the file's choices stay, a new pass joins them. A new string, or
 * NULL without memory. */
static char *merge_line(const char *have, const char *add)
{
    size_t len = strlen(have) + strlen(add) + 1;
    char *out = malloc(len);
    if (!out)
        return NULL;
    size_t at = (size_t)snprintf(out, len, "%s", have);
    const char *passes = strchr(add, ':');
    const char *have_passes = strchr(have, ':');
    for (const char *t = passes ? passes + 1 : ""; *(t += strspn(t, " "));) {
        size_t tl = strcspn(t, " "), name = strcspn(t, "=");
        bool present = false;
        for (const char *h = have_passes ? have_passes + 1 : ""; *(h += strspn(h, " "));) {
            size_t hl = strcspn(h, " ");
            if (strncmp(h, t, DP_MIN(name + 1, tl)) == 0 && hl > name)
                present = true;
            h += hl;
        }
        if (!present)
            at += (size_t)snprintf(out + at, len - at, " %.*s", (int)tl, t);
        t += tl;
    }
    return out;
}

/* `lines` into s: each shape's line merged into the one s has (the part
 * before the colon names the shape), or added. */
int dp__cache_section_merge(dp__cache_section *s, const char *lines)
{
    for (const char *p = lines; *p;) {
        size_t len = strcspn(p, "\n");
        char *line = strndup_checked(p, len);
        if (!line)
            return DP_ENOMEM;
        p += len + (p[len] ? 1 : 0);
        if (len == 0) {
            free(line);
            continue;
        }
        size_t shape = strcspn(line, ":");
        size_t i = 0;
        while (i < s->n && !(strncmp(s->lines[i], line, shape + 1) == 0))
            i++;
        if (i == s->n) {
            DP_TRY(add_line(s, line));
            continue;
        }
        char *merged = merge_line(s->lines[i], line);
        free(line);
        if (!merged)
            return DP_ENOMEM;
        free(s->lines[i]);
        s->lines[i] = merged;
    }
    return 0;
}

/* f written to `path` whole or not at all: a temporary file beside it,
 * flushed to the disk, renamed over it, and the folder flushed too (the
 * rename itself). 0, or errno's value; *step names the step that failed. */
int dp__cache_file_replace(const char *path, const dp__cache_file *f, const char **step)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.XXXXXX", path) >= (int)sizeof tmp)
        return ENAMETOOLONG;
    *step = "create a temporary file beside it";
    int fd = mkstemp(tmp);
    if (fd < 0)
        return errno;
    FILE *fp = fdopen(fd, "w");
    if (!fp) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return e;
    }
    fchmod(fd, 0644);
    fputs(file_comment, fp);
    for (size_t i = 0; i < f->n; i++) {
        fprintf(fp, "[%s]\n", f->s[i].key);
        for (size_t j = 0; j < f->s[i].n; j++)
            fprintf(fp, "%s\n", f->s[i].lines[j]);
    }
    *step = "write it";
    int e = fflush(fp) == 0 && fsync(fd) == 0 ? 0 : errno ? errno : EIO;
    if (fclose(fp) != 0 && !e)
        e = errno;
    if (!e) {
        *step = "rename the temporary file over it";
        e = rename(tmp, path) == 0 ? 0 : errno;
    }
    if (e) {
        unlink(tmp);
        return e;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        slash[slash == dir ? 1 : 0] = '\0';
    int dfd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}
