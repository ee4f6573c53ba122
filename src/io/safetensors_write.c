/* Writing safetensors files (layout in include/dp/safetensors.h).
 *
 * Writing builds the whole header in memory (the size field, the JSON in the
 * caller's order with "__metadata__" first, spaces up to a multiple of 8 as
 * Python's safetensors pads it), then writes it and the tensors' bytes to a
 * temporary file beside the target and renames it over the target, so a
 * reader sees either the old file or the new one, never half of one.
 *
 * Tensor bytes are written as they are: little-endian on every host dptrain
 * builds on. */
#include "io/safetensors.h"

#include "core/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int cmp_strings(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A growing byte buffer; after a failed allocation it stays `oom` and
 * ignores further appends, so the builder checks once at the end. */
struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
};

static void sb_put(struct sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (n > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < n) {
            if (cap > SIZE_MAX / 2) {
                b->oom = true;
                return;
            }
            cap *= 2;
        }
        char *q = dp__malloc(cap);
        if (!q) {
            b->oom = true;
            return;
        }
        if (b->len)
            memcpy(q, b->p, b->len);
        dp__free(b->p);
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void sb_str(struct sbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

static void sb_int(struct sbuf *b, int64_t v)
{
    char num[24];
    snprintf(num, sizeof num, "%" PRId64, v);
    sb_str(b, num);
}

static void sb_put_bytes(void *b, const char *s, size_t n)
{
    sb_put(b, s, n);
}

static void sb_json_string(struct sbuf *b, const char *s)
{
    dp__json_string(s, strlen(s), sb_put_bytes, b);
}

/* Whether `strs` (n of them) has a repeat; the first one found goes to *dup. */
static int find_duplicate(const char *const *strs, int n, const char **dup)
{
    *dup = NULL;
    if (n < 2)
        return 0;
    const char **sorted = dp__malloc((size_t)n * sizeof *sorted);
    if (!sorted)
        return DP_ENOMEM;
    memcpy(sorted, strs, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_strings);
    for (int i = 1; i < n && !*dup; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0)
            *dup = sorted[i];
    dp__free(sorted);
    return 0;
}

static int check_tensor(const char *path, int i, const dp_st_tensor *t)
{
    const char *name = t->name;
    if (!name || !name[0]) {
        DP_ERROR("%s: tensor %d has an empty name", path, i);
        return DP_EINVAL;
    }
    if (strlen(name) > DP_ST_MAX_NAME) {
        DP_ERROR("%s: tensor %d: name '%.40s...' is longer than %d bytes", path, i, name,
                 DP_ST_MAX_NAME);
        return DP_EINVAL;
    }
    if (!dp__utf8_valid(name)) {
        DP_ERROR("%s: tensor %d: name is not valid UTF-8", path, i);
        return DP_EINVAL;
    }
    if (strcmp(name, ST_META_KEY) == 0) {
        DP_ERROR("%s: tensor %d: the name '%s' is reserved for metadata", path, i, ST_META_KEY);
        return DP_EINVAL;
    }
    if (!dp__st_dtype_name(t->dtype)) {
        DP_ERROR("%s: tensor '%s': unknown dtype %d", path, name, (int)t->dtype);
        return DP_EINVAL;
    }
    if (t->ndim < 0 || t->ndim > DP_ST_MAX_DIMS) {
        DP_ERROR("%s: tensor '%s': ndim %d is outside [0, %d]", path, name, t->ndim,
                 DP_ST_MAX_DIMS);
        return DP_EINVAL;
    }
    char shape[ST_SHAPE_STR];
    dp__shape_str(shape, sizeof shape, t->ndim, t->shape);
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0) {
            DP_ERROR("%s: tensor '%s': negative dimension in shape %s", path, name, shape);
            return DP_EINVAL;
        }
    }
    uint64_t need;
    if (!dp__st_shape_bytes(t->dtype, t->ndim, t->shape, &need) || need > (uint64_t)INT64_MAX) {
        DP_ERROR("%s: tensor '%s': the byte count of shape %s overflows", path, name, shape);
        return DP_EINVAL;
    }
    if (need != (uint64_t)t->bytes) {
        DP_ERROR("%s: tensor '%s': shape %s of %s needs %" PRIu64 " bytes, given %zu", path, name,
                 shape, dp__st_dtype_name(t->dtype), need, t->bytes);
        return DP_EINVAL;
    }
    if (t->bytes > 0 && !t->data) {
        DP_ERROR("%s: tensor '%s': data is NULL", path, name);
        return DP_EINVAL;
    }
    return 0;
}

static int check_inputs(const char *path, const dp_st_tensor *tensors, int n,
                        const char *const *meta, int nmeta)
{
    for (int i = 0; i < n; i++)
        DP_TRY(check_tensor(path, i, &tensors[i]));
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (tensors[i].bytes > (uint64_t)INT64_MAX - total) {
            DP_ERROR("%s: the tensors' bytes add up past 2^63", path);
            return DP_EINVAL;
        }
        total += tensors[i].bytes;
    }
    for (int i = 0; i < 2 * nmeta; i++) {
        if (!meta[i]) {
            DP_ERROR("%s: metadata %s %d is NULL", path, i % 2 ? "value" : "key", i / 2);
            return DP_EINVAL;
        }
        if (!dp__utf8_valid(meta[i])) {
            DP_ERROR("%s: metadata %s %d is not valid UTF-8", path, i % 2 ? "value" : "key", i / 2);
            return DP_EINVAL;
        }
    }

    const char *dup;
    if (n > 0) {
        const char **names = dp__malloc((size_t)n * sizeof *names);
        if (!names)
            return DP_ENOMEM;
        for (int i = 0; i < n; i++)
            names[i] = tensors[i].name;
        int rc = find_duplicate(names, n, &dup);
        dp__free(names);
        DP_TRY(rc);
        if (dup) {
            DP_ERROR("%s: two tensors are called '%s'", path, dup);
            return DP_EINVAL;
        }
    }
    if (nmeta > 0) {
        const char **keys = dp__malloc((size_t)nmeta * sizeof *keys);
        if (!keys)
            return DP_ENOMEM;
        for (int i = 0; i < nmeta; i++)
            keys[i] = meta[2 * i];
        int rc = find_duplicate(keys, nmeta, &dup);
        dp__free(keys);
        DP_TRY(rc);
        if (dup) {
            DP_ERROR("%s: metadata key '%s' given twice", path, dup);
            return DP_EINVAL;
        }
    }
    return 0;
}

/* The size field, the JSON header and its padding, into b. */
static int build_header(struct sbuf *b, const char *path, const dp_st_tensor *tensors, int n,
                        const char *const *meta, int nmeta)
{
    sb_put(b, "\0\0\0\0\0\0\0\0", 8);
    sb_put(b, "{", 1);
    if (nmeta > 0) {
        sb_str(b, "\"" ST_META_KEY "\":{");
        for (int i = 0; i < nmeta; i++) {
            if (i)
                sb_put(b, ",", 1);
            sb_json_string(b, meta[2 * i]);
            sb_put(b, ":", 1);
            sb_json_string(b, meta[2 * i + 1]);
        }
        sb_put(b, "}", 1);
    }
    int64_t offset = 0;
    for (int i = 0; i < n; i++) {
        const dp_st_tensor *t = &tensors[i];
        if (i || nmeta > 0)
            sb_put(b, ",", 1);
        sb_json_string(b, t->name);
        sb_str(b, ":{\"dtype\":\"");
        sb_str(b, dp__st_dtype_name(t->dtype));
        sb_str(b, "\",\"shape\":[");
        for (int d = 0; d < t->ndim; d++) {
            if (d)
                sb_put(b, ",", 1);
            sb_int(b, t->shape[d]);
        }
        sb_str(b, "],\"data_offsets\":[");
        sb_int(b, offset);
        sb_put(b, ",", 1);
        offset += (int64_t)t->bytes;
        sb_int(b, offset);
        sb_str(b, "]}");
    }
    sb_put(b, "}", 1);
    while (!b->oom && (b->len - 8) % 8 != 0)
        sb_put(b, " ", 1);
    if (b->oom) {
        DP_ERROR("%s: out of memory building the header", path);
        return DP_ENOMEM;
    }
    uint64_t hlen = b->len - 8;
    if (hlen > ST_MAX_HEADER) {
        DP_ERROR("%s: header of %" PRIu64 " bytes is over the %" PRIu64 "-byte limit", path, hlen,
                 ST_MAX_HEADER);
        return DP_EINVAL;
    }
    for (int i = 0; i < 8; i++)
        b->p[i] = (char)(unsigned char)(hlen >> (8 * i));
    return 0;
}

/* Writes all n bytes through short writes and EINTR; -1 with errno set. */
static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, DP_MIN(n, ST_IO_CHUNK));
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (w == 0) {
            errno = EIO;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int fsync_retry(int fd)
{
    int r;
    do
        r = fsync(fd);
    while (r < 0 && errno == EINTR);
    return r;
}

/* Makes the rename of a file in path's directory durable. Filesystems that
 * cannot sync a directory (EINVAL) are let be. */
static int sync_parent_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = dp__strdup(!slash ? "." : slash == path ? "/" : path);
    if (!dir)
        return DP_ENOMEM;
    if (slash && slash != path)
        dir[slash - path] = '\0';
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = 0;
    if (fd < 0 || (fsync_retry(fd) < 0 && errno != EINVAL)) {
        DP_ERROR("%s: fsync of directory %s failed: %s (the new file is in place but may not "
                 "survive a crash)",
                 path, dir, strerror(errno));
        rc = DP_EIO;
    }
    if (fd >= 0)
        close(fd);
    dp__free(dir);
    return rc;
}

/* Writes header then data to "<path>.tmp.<pid>", syncs, closes and renames
 * it over path. On failure the temporary file is removed and path is left
 * as it was. */
/* "<path>.tmp.<pid>", the temporary file a write goes to (dp__free it). */
static char *temporary_name(const char *path)
{
    int len = snprintf(NULL, 0, "%s.tmp.%ld", path, (long)getpid());
    char *tmp = dp__malloc((size_t)len + 1);
    if (tmp)
        snprintf(tmp, (size_t)len + 1, "%s.tmp.%ld", path, (long)getpid());
    return tmp;
}

/* Creates the temporary file of a write to path; -1 with the one-line
 * error logged when it cannot be. */
static int create_temporary(const char *path, const char *tmp)
{
    int fd = open(tmp, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0)
        DP_ERROR("%s: cannot create %s: %s", path, tmp, strerror(errno));
    return fd;
}

int dp_safetensors_check_writable(const char *path)
{
    struct stat st;
    if (!path || !path[0]) {
        DP_ERROR("dp_safetensors_check_writable: no path");
        return DP_EINVAL;
    }
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        DP_ERROR("%s: is a directory", path);
        return DP_EIO;
    }
    char *tmp = temporary_name(path);
    if (!tmp)
        return DP_ENOMEM;
    int fd = create_temporary(path, tmp);
    if (fd >= 0) {
        close(fd);
        unlink(tmp);
    }
    dp__free(tmp);
    return fd >= 0 ? 0 : DP_EIO;
}

static int write_atomically(const char *path, const struct sbuf *header,
                            const dp_st_tensor *tensors, int n)
{
    char *tmp = temporary_name(path);
    if (!tmp)
        return DP_ENOMEM;
    int fd = create_temporary(path, tmp);
    if (fd < 0) {
        dp__free(tmp);
        return DP_EIO;
    }
    const char *step = "write";
    int closed, err;
    if (write_all(fd, header->p, header->len) < 0)
        goto fail;
    for (int i = 0; i < n; i++)
        if (tensors[i].bytes > 0 && write_all(fd, tensors[i].data, tensors[i].bytes) < 0)
            goto fail;
    step = "fsync";
    if (fsync_retry(fd) < 0)
        goto fail;
    step = "close";
    closed = close(fd);
    fd = -1;
    if (closed < 0)
        goto fail;
    step = "rename";
    if (rename(tmp, path) < 0)
        goto fail;
    dp__free(tmp);
    return sync_parent_dir(path);

fail:
    err = errno;
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    DP_ERROR("%s: %s failed: %s", path, step, strerror(err));
    dp__free(tmp);
    return DP_EIO;
}

int dp_safetensors_write(const char *path, const dp_st_tensor *tensors, int n,
                         const char *const *meta, int nmeta)
{
    if (!path || n < 0 || nmeta < 0 || (n > 0 && !tensors) || (nmeta > 0 && !meta)) {
        DP_ERROR("dp_safetensors_write: invalid arguments (path %s, %d tensors, %d metadata)",
                 path ? path : "NULL", n, nmeta);
        return DP_EINVAL;
    }
    DP_TRY(check_inputs(path, tensors, n, meta, nmeta));
    struct sbuf header = {0};
    int rc = build_header(&header, path, tensors, n, meta, nmeta);
    if (rc == 0)
        rc = write_atomically(path, &header, tensors, n);
    dp__free(header.p);
    return rc;
}
