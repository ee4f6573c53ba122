/* The convolution kernels' cache file (dp/conv_cache.h): read into the
 * process's choices before anything is measured, and merged into under an
 * flock with an atomic replace. Its I/O lives here, beside the
 * checkpoints'; the device layer keeps only the table (conv_choice.c).
 *
 * In memory the file is its sections in the order it has them, each a key
 * and its lines (one shape each, dp_conv_choices_save's format). */
#include "dp/conv_cache.h"

#include "core/internal.h"
#include "dp/dp.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
    KEY_MAX = 2048,
    LINE_MAX_CHARS = 4096,     /* a shape's line is under 200 characters */
    FILE_MAX_BYTES = 16 << 20, /* ~100,000 shapes */
};

static const char file_comment[] =
    "# dptrain's convolution kernel choices (conv_algo auto), one section per machine key:\n"
    "# [dptrain version; CPU, its flags and oneDNN's instruction set; oneDNN version; "
    "DNNL_MAX_CPU_ISA]\n";

typedef struct section {
    char *key;
    char **lines;
    size_t n, cap;
} section;

typedef struct cache_file {
    section *s;
    size_t n, cap;
} cache_file;

static void file_free(cache_file *f)
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

static section *add_section(cache_file *f, const char *key, size_t len)
{
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 4;
        section *s = realloc(f->s, cap * sizeof *s);
        if (!s)
            return NULL;
        f->s = s;
        f->cap = cap;
    }
    section *s = &f->s[f->n];
    memset(s, 0, sizeof *s);
    if (!(s->key = strndup_checked(key, len)))
        return NULL;
    f->n++;
    return s;
}

/* Takes `line` (malloc'd) into s; frees it when out of memory. */
static int add_line(section *s, char *line)
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

static section *find_section(cache_file *f, const char *key)
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
static int parse_file(const char *text, size_t size, const char *ours, cache_file *f, int *bad,
                      const char **why)
{
    memset(f, 0, sizeof *f);
    section *cur = NULL;
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
            /* a key written twice (by hand) continues its section */
            char *k = strndup_checked(p + 1, len - 2);
            if (!k)
                return DP_ENOMEM;
            cur = find_section(f, k);
            if (!cur)
                cur = add_section(f, k, len - 2);
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

int dp_conv_algo_cache_path(const char *setting, char *buf, size_t size)
{
    buf[0] = '\0';
    if (!setting || !*setting)
        setting = getenv("DPTRAIN_CONV_ALGO_CACHE");
    if (setting && strcmp(setting, "off") == 0)
        return 1;
    int n;
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (setting && *setting)
        n = snprintf(buf, size, "%s", setting);
    else if (xdg && *xdg == '/') /* the XDG spec: a relative value is ignored */
        n = snprintf(buf, size, "%s/dptrain/conv-algos.txt", xdg);
    else if (home && *home)
        n = snprintf(buf, size, "%s/.cache/dptrain/conv-algos.txt", home);
    else
        return 1;
    if (n < 0 || (size_t)n >= size) {
        DP_ERROR("the convolution kernels' cache path is longer than %zu bytes", size - 1);
        buf[0] = '\0';
        return DP_EINVAL;
    }
    return 0;
}

int dp_conv_algo_cache_key(char *buf, size_t size)
{
    int n = snprintf(buf, size, "dptrain=%s; ", DP_VERSION_STRING);
    return n + dp_conv_choices_key(buf + DP_MIN((size_t)n, size), size - DP_MIN((size_t)n, size));
}

/* Why `theirs` is not this machine's key: its first field that differs
 * ("onednn=3.1.0 (x) there, 3.0.0 (y) here"), into buf. Fields are
 * "name=value" separated by "; ". */
static void key_difference(const char *theirs, const char *ours, char *buf, size_t size)
{
    for (const char *t = theirs, *o = ours; *t || *o;) {
        size_t tl = strcspn(t, ";"), ol = strcspn(o, ";");
        if (tl != ol || strncmp(t, o, tl) != 0) {
            size_t name = strcspn(o, "=");
            snprintf(buf, size, "%.*s there, %.*s here", (int)tl, t,
                     (int)(ol > name ? ol - name - 1 : 0), o + DP_MIN(name + 1, ol));
            return;
        }
        t += tl + (t[tl] ? 1 : 0);
        o += ol + (o[ol] ? 1 : 0);
        t += strspn(t, " ");
        o += strspn(o, " ");
    }
    snprintf(buf, size, "the same key twice");
}

/* How many passes a choices text holds (each is "pass=impl"). */
static int count_passes(const char *text)
{
    int n = 0;
    for (const char *p = text; (p = strchr(p, '=')); p++)
        n++;
    return n;
}

/* The file read into *f: empty when there is none, or when it is corrupt
 * (warned where warn_corrupt: when the cache is read, not again when it is
 * added to). DP_EIO: it cannot be read (warned). */
static int read_file(const char *path, const char *key, cache_file *f, bool warn_corrupt)
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
        file_free(f);
        return 0;
    }
    if (rc < 0)
        file_free(f);
    return rc;
}

int dp_conv_algo_cache_read(const char *path)
{
    char key[KEY_MAX];
    dp_conv_algo_cache_key(key, sizeof key);
    cache_file f;
    int read = read_file(path, key, &f, true);
    if (read == DP_EIO)
        return 0; /* warned: measured afresh */
    DP_TRY(read);
    section *ours = NULL;
    for (size_t i = 0; i < f.n; i++) {
        if (strcmp(f.s[i].key, key) == 0) {
            ours = &f.s[i];
            continue;
        }
        char why[KEY_MAX];
        key_difference(f.s[i].key, key, why, sizeof why);
        DP_INFO("the convolution kernels' cache %s: passed over %zu choices of another machine "
                "or version (%s)",
                path, f.s[i].n, why);
    }
    size_t len = 1;
    for (size_t i = 0; ours && i < ours->n; i++)
        len += strlen(ours->lines[i]) + 1;
    char *mine = malloc(len), *before = dp_conv_choices_save();
    int rc = mine && before ? 0 : DP_ENOMEM, installed = 0;
    if (rc == 0) {
        size_t at = 0;
        mine[0] = '\0';
        for (size_t i = 0; ours && i < ours->n; i++)
            at += (size_t)snprintf(mine + at, len - at, "%s\n", ours->lines[i]);
        /* The file's lines, then the table's own again over them: the
         * choices made before (a checkpoint's, rank 0's) win. */
        rc = dp_conv_choices_load(mine);
        if (rc == 0)
            rc = dp_conv_choices_load(before);
        char *after = rc == 0 ? dp_conv_choices_save() : NULL;
        if (rc == 0 && !after)
            rc = DP_ENOMEM;
        if (rc == 0)
            installed = count_passes(after) - count_passes(before);
        free(after);
    }
    if (rc == 0)
        DP_INFO("the convolution kernels' cache %s: %d choices of this machine taken (%zu shapes "
                "in its section)",
                path, installed, ours ? ours->n : 0);
    free(mine);
    free(before);
    file_free(&f);
    return rc < 0 ? rc : installed;
}

/* ---- adding: merge under the lock, replace atomically ---------------------- */

/* Creates the folders of `path` that are missing (mkdir -p of its
 * dirname); 0, or errno's value. */
static int make_parents(const char *path)
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
static int merge_lines(section *s, const char *lines)
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
static int replace_file(const char *path, const cache_file *f, const char **step)
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

int dp_conv_algo_cache_add(const char *path, const char *lines)
{
    for (const char *p = lines; *p; p += strcspn(p, "\n"), p += *p ? 1 : 0)
        if (*p != '\n' && dp_conv_choices_check(p) < 0) {
            DP_ERROR("the convolution kernels' cache: '%.*s' is not a choice",
                     (int)DP_MIN(strcspn(p, "\n"), 120), p);
            return DP_EINVAL;
        }
    if (!*lines)
        return 0;
    char key[KEY_MAX], lock_path[4096];
    dp_conv_algo_cache_key(key, sizeof key);
    const char *step = "create its folder";
    int e = make_parents(path), lock = -1;
    if (!e && snprintf(lock_path, sizeof lock_path, "%s.lock", path) >= (int)sizeof lock_path)
        e = ENAMETOOLONG;
    if (!e) {
        step = "open its lock file";
        lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        e = lock < 0 ? errno : 0;
    }
    if (!e) {
        step = "lock it";
        while ((e = flock(lock, LOCK_EX) < 0 ? errno : 0) == EINTR)
            ;
    }
    int rc = 0;
    if (!e) {
        /* Read under the lock: what another process added since this one
         * read the file stays. */
        cache_file f;
        rc = read_file(path, key, &f, false);
        /* a file that cannot be read (warned) is not replaced */
        section *s = rc == 0 ? find_section(&f, key) : NULL;
        if (rc == 0 && !s && !(s = add_section(&f, key, strlen(key))))
            rc = DP_ENOMEM;
        if (rc == 0)
            rc = merge_lines(s, lines);
        if (rc == 0)
            e = replace_file(path, &f, &step);
        file_free(&f);
    }
    if (rc == DP_EIO)
        e = 0;
    if (lock >= 0)
        close(lock); /* and with it the lock */
    if (e) {
        DP_WARN("the convolution kernels' cache %s: cannot %s (%s); the choices measured here "
                "are not kept",
                path, step, strerror(e));
        return DP_EIO;
    }
    return rc;
}
