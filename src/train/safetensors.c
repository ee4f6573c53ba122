/* Reading and writing safetensors files (layout in include/dp/safetensors.h).
 *
 * Writing builds the whole header in memory (the size field, the JSON in the
 * caller's order with "__metadata__" first, spaces up to a multiple of 8 as
 * Python's safetensors pads it), then writes it and the tensors' bytes to a
 * temporary file beside the target and renames it over the target, so a
 * reader sees either the old file or the new one, never half of one.
 *
 * Reading loads the whole file into one buffer, placed so that the data
 * section starts 64-byte aligned: a tensor whose begin offset is a multiple
 * of its element size then has aligned data (Python's writer orders tensors
 * so that this holds; ours keeps the caller's order, where it holds when one
 * dtype is used or the wider ones come first). The header is parsed by a
 * small strict parser for exactly the subset the format uses: one object of
 * objects whose values are strings or arrays of integers. It never recurses and checks every index
 * against the header's length, since its input is untrusted. Strings are
 * decoded in place inside the buffer (decoding never lengthens a string, so
 * the terminating NUL lands at or before the closing quote); the names,
 * metadata and data pointers handed out all point into that one buffer.
 *
 * Tensor bytes are stored little-endian and handed over as they are: this
 * code assumes a little-endian host, as every platform dptrain builds on is. */
#include "dp/safetensors.h"

#include "core/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Longer headers are taken for corruption (Python's library uses 100 MB). */
#define ST_MAX_HEADER ((uint64_t)100 << 20)
#define ST_META_KEY "__metadata__"
/* One read() or write() moves at most this much (Linux caps near 2 GiB). */
#define ST_IO_CHUNK ((size_t)1 << 30)
/* Room for "[d0, d1, ..., d7]" with 8 signed 64-bit dimensions. */
#define ST_SHAPE_STR (DP_ST_MAX_DIMS * 22 + 4)

/* ---- shared helpers -------------------------------------------------------- */

size_t dp_st_dtype_size(dp_st_dtype dtype)
{
    switch (dtype) {
    case DP_ST_F32:
    case DP_ST_I32:
        return 4;
    case DP_ST_I64:
        return 8;
    case DP_ST_U8:
        return 1;
    }
    return 0;
}

static const char *dtype_name(dp_st_dtype dtype)
{
    switch (dtype) {
    case DP_ST_F32:
        return "F32";
    case DP_ST_I32:
        return "I32";
    case DP_ST_I64:
        return "I64";
    case DP_ST_U8:
        return "U8";
    }
    return NULL;
}

static int dtype_from_name(const char *s, dp_st_dtype *out)
{
    static const dp_st_dtype all[] = {DP_ST_F32, DP_ST_I32, DP_ST_I64, DP_ST_U8};
    for (size_t i = 0; i < DP_COUNTOF(all); i++) {
        if (strcmp(s, dtype_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    }
    return -1;
}

/* The byte count of a tensor: element size times the dimensions, multiplied
 * in order with an overflow check at each step (as Python's library does).
 * Dimensions must be non-negative. false on overflow. */
static bool shape_bytes(dp_st_dtype dtype, int ndim, const int64_t *shape, uint64_t *out)
{
    uint64_t n = dp_st_dtype_size(dtype);
    for (int i = 0; i < ndim; i++) {
        uint64_t d = (uint64_t)shape[i];
        if (d != 0 && n > UINT64_MAX / d)
            return false;
        n *= d;
    }
    *out = n;
    return true;
}

/* The length of the well-formed UTF-8 sequence of a non-ASCII lead byte at
 * s[0], with `avail` bytes readable; 0 if malformed (overlong forms,
 * surrogates and code points past U+10FFFF included). */
static size_t utf8_len(const unsigned char *s, size_t avail)
{
    unsigned char c = s[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF; /* range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else {
        return 0;
    }
    if (avail < n || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return n;
}

static bool valid_utf8(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t len = strlen(str);
    for (size_t i = 0; i < len;) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = utf8_len(s + i, len - i);
        if (k == 0)
            return false;
        i += k;
    }
    return true;
}

static int cmp_strings(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* ---- writing --------------------------------------------------------------- */

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
    if (!valid_utf8(name)) {
        DP_ERROR("%s: tensor %d: name is not valid UTF-8", path, i);
        return DP_EINVAL;
    }
    if (strcmp(name, ST_META_KEY) == 0) {
        DP_ERROR("%s: tensor %d: the name '%s' is reserved for metadata", path, i, ST_META_KEY);
        return DP_EINVAL;
    }
    if (!dtype_name(t->dtype)) {
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
    if (!shape_bytes(t->dtype, t->ndim, t->shape, &need) || need > (uint64_t)INT64_MAX) {
        DP_ERROR("%s: tensor '%s': the byte count of shape %s overflows", path, name, shape);
        return DP_EINVAL;
    }
    if (need != (uint64_t)t->bytes) {
        DP_ERROR("%s: tensor '%s': shape %s of %s needs %" PRIu64 " bytes, given %zu", path, name,
                 shape, dtype_name(t->dtype), need, t->bytes);
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
        if (!valid_utf8(meta[i])) {
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
        sb_str(b, dtype_name(t->dtype));
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
static int write_atomically(const char *path, const struct sbuf *header,
                            const dp_st_tensor *tensors, int n)
{
    int len = snprintf(NULL, 0, "%s.tmp.%ld", path, (long)getpid());
    char *tmp = dp__malloc((size_t)len + 1);
    if (!tmp)
        return DP_ENOMEM;
    snprintf(tmp, (size_t)len + 1, "%s.tmp.%ld", path, (long)getpid());

    int fd = open(tmp, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) {
        DP_ERROR("%s: cannot create %s: %s", path, tmp, strerror(errno));
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

/* ---- reading: the loaded file ------------------------------------------------ */

struct st_entry {
    const char *name;
    dp_st_dtype dtype;
    int ndim;
    int64_t shape[DP_ST_MAX_DIMS];
    uint64_t begin, end; /* [begin, end) in the data section */
};

struct st_meta {
    const char *key, *value;
};

struct st_name {
    const char *name;
    int index; /* into tensors */
};

struct dp_safetensors {
    uint8_t *alloc;      /* the whole file, at an offset that aligns data */
    const uint8_t *data; /* the data section: data_size bytes */
    uint64_t data_size;
    uint64_t data_start;      /* file offset of the data section, for messages */
    struct st_entry *tensors; /* n, in file order */
    int n, cap;
    struct st_name *by_name; /* the n names, sorted, for lookup */
    struct st_meta *meta;    /* nmeta, sorted by key after parsing */
    int nmeta, meta_cap;
};

/* Room for one more element in arr (n used, *cap allocated): the array,
 * possibly moved, or NULL (arr is then unchanged and still the caller's). */
static void *reserve_one(void *arr, int n, int *cap, size_t elem)
{
    if (n < *cap)
        return arr;
    if (*cap > INT_MAX / 2)
        return NULL;
    int ncap = *cap ? 2 * *cap : 16;
    void *p = dp__calloc((size_t)ncap, elem);
    if (!p)
        return NULL;
    if (n)
        memcpy(p, arr, (size_t)n * elem);
    dp__free(arr);
    *cap = ncap;
    return p;
}

/* ---- reading: the JSON header parser ---------------------------------------- */

struct parser {
    const char *path;
    char *s;    /* the header's bytes, decoded in place */
    size_t len; /* header length; s[len] may not be read */
    size_t pos;
};

/* Error messages give offsets in the file: the header starts at byte 8. */
static int syntax_error(const struct parser *p, const char *what)
{
    DP_ERROR("%s: bad header at byte %zu: %s", p->path, p->pos + 8, what);
    return DP_EFORMAT;
}

static int peek(const struct parser *p)
{
    return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1;
}

static void skip_ws(struct parser *p)
{
    for (int c = peek(p); c == ' ' || c == '\t' || c == '\n' || c == '\r'; c = peek(p))
        p->pos++;
}

static int expect(struct parser *p, char c, const char *what)
{
    skip_ws(p);
    if (peek(p) != (unsigned char)c)
        return syntax_error(p, what);
    p->pos++;
    return 0;
}

/* After a value inside an object or array: 1 for ',', 0 for the closer. */
static int next_or_close(struct parser *p, char closer, const char *what)
{
    skip_ws(p);
    int c = peek(p);
    if (c == ',' || c == (unsigned char)closer) {
        p->pos++;
        return c == ',';
    }
    return syntax_error(p, what);
}

static int hex4(const struct parser *p, size_t at, uint32_t *out)
{
    if (at > p->len || p->len - at < 4)
        return -1;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p->s[at + i];
        uint32_t d;
        if (c >= '0' && c <= '9')
            d = (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            d = (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            d = (uint32_t)(c - 'A' + 10);
        else
            return -1;
        v = v * 16 + d;
    }
    *out = v;
    return 0;
}

/* A \uXXXX escape (or a surrogate pair of two) at p->pos; advances past it. */
static int parse_u_escape(struct parser *p, uint32_t *cp)
{
    uint32_t u, lo;
    if (hex4(p, p->pos + 2, &u) < 0)
        return syntax_error(p, "bad \\u escape");
    if (u >= 0xDC00 && u <= 0xDFFF)
        return syntax_error(p, "unpaired surrogate in a \\u escape");
    if (u >= 0xD800 && u <= 0xDBFF) {
        size_t at = p->pos + 6; /* <= len, as hex4 read up to there */
        if (p->len - at < 2 || p->s[at] != '\\' || p->s[at + 1] != 'u' ||
            hex4(p, at + 2, &lo) < 0 || lo < 0xDC00 || lo > 0xDFFF)
            return syntax_error(p, "unpaired surrogate in a \\u escape");
        u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
        p->pos += 6;
    }
    if (u == 0)
        return syntax_error(p, "\\u0000 in a string is not supported");
    p->pos += 6;
    *cp = u;
    return 0;
}

static size_t encode_utf8(char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A JSON string, decoded in place and NUL-terminated; *out points into the
 * header. The write index w never passes the read index p->pos: an escape
 * of k bytes decodes to at most k bytes (6 -> 3, a 12-byte pair -> 4). */
static int parse_string(struct parser *p, const char **out)
{
    skip_ws(p);
    if (peek(p) != '"')
        return syntax_error(p, "expected a string");
    p->pos++;
    char *s = p->s;
    size_t start = p->pos, w = p->pos;
    for (;;) {
        int c = peek(p);
        if (c < 0)
            return syntax_error(p, "unterminated string");
        if (c == '"')
            break;
        if (c < 0x20)
            return syntax_error(p, "control character in a string");
        if (c >= 0x80) {
            size_t k = utf8_len((const unsigned char *)s + p->pos, p->len - p->pos);
            if (k == 0)
                return syntax_error(p, "invalid UTF-8 in a string");
            memmove(s + w, s + p->pos, k);
            w += k;
            p->pos += k;
            continue;
        }
        if (c != '\\') {
            s[w++] = (char)c;
            p->pos++;
            continue;
        }
        if (p->len - p->pos < 2)
            return syntax_error(p, "unterminated string");
        char e = s[p->pos + 1], d;
        switch (e) {
        case '"':
        case '\\':
        case '/':
            d = e;
            break;
        case 'b':
            d = '\b';
            break;
        case 'f':
            d = '\f';
            break;
        case 'n':
            d = '\n';
            break;
        case 'r':
            d = '\r';
            break;
        case 't':
            d = '\t';
            break;
        case 'u': {
            uint32_t cp;
            DP_TRY(parse_u_escape(p, &cp));
            w += encode_utf8(s + w, cp);
            continue;
        }
        default:
            return syntax_error(p, "bad escape in a string");
        }
        s[w++] = d;
        p->pos += 2;
    }
    s[w] = '\0';
    p->pos++;
    *out = s + start;
    return 0;
}

/* A JSON integer (no fraction, no exponent, no leading zeros) in int64. */
static int parse_int(struct parser *p, int64_t *out)
{
    skip_ws(p);
    size_t start = p->pos;
    bool neg = peek(p) == '-';
    if (neg)
        p->pos++;
    int c = peek(p);
    if (c < '0' || c > '9')
        return syntax_error(p, "expected an integer");
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t v = 0;
    if (c == '0') {
        p->pos++;
    } else {
        for (; c >= '0' && c <= '9'; c = peek(p)) {
            uint64_t d = (uint64_t)(c - '0');
            if (v > (limit - d) / 10) {
                p->pos = start;
                return syntax_error(p, "integer overflows int64");
            }
            v = v * 10 + d;
            p->pos++;
        }
    }
    c = peek(p);
    if ((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E')
        return syntax_error(p, "expected an integer (no leading zeros, fractions or exponents)");
    *out = !neg ? (int64_t)v : v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    return 0;
}

/* An array of at most max integers of tensor `name`'s `field`. */
static int parse_int_array(struct parser *p, const char *name, const char *field, int64_t *vals,
                           int max, int *count)
{
    DP_TRY(expect(p, '[', "expected '[' for an array of integers"));
    int n = 0;
    skip_ws(p);
    if (peek(p) == ']') {
        p->pos++;
    } else {
        for (;;) {
            int64_t v;
            DP_TRY(parse_int(p, &v));
            if (n == max) {
                DP_ERROR("%s: tensor '%s': %s has more than %d entries (byte %zu)", p->path, name,
                         field, max, p->pos + 8);
                return DP_EFORMAT;
            }
            vals[n++] = v;
            int more = next_or_close(p, ']', "expected ',' or ']' in an array");
            DP_TRY(more);
            if (!more)
                break;
        }
    }
    *count = n;
    return 0;
}

static int tensor_error(const struct parser *p, const char *name, const char *what,
                        const char *detail)
{
    DP_ERROR("%s: tensor '%s': %s%s (byte %zu)", p->path, name, what, detail, p->pos + 8);
    return DP_EFORMAT;
}

/* {"dtype": "F32", "shape": [..], "data_offsets": [b, e]} in any order. */
static int parse_tensor(struct parser *p, dp_safetensors_t *f, const char *name)
{
    struct st_entry e = {.name = name};
    bool have_dtype = false, have_shape = false, have_offsets = false;
    DP_TRY(expect(p, '{', "expected '{' for a tensor"));
    skip_ws(p);
    if (peek(p) == '}')
        p->pos++;
    else
        for (;;) {
            const char *key;
            DP_TRY(parse_string(p, &key));
            DP_TRY(expect(p, ':', "expected ':' after a key"));
            bool *seen = strcmp(key, "dtype") == 0          ? &have_dtype
                         : strcmp(key, "shape") == 0        ? &have_shape
                         : strcmp(key, "data_offsets") == 0 ? &have_offsets
                                                            : NULL;
            if (!seen)
                return tensor_error(p, name, "unknown key ", key);
            if (*seen)
                return tensor_error(p, name, "repeated key ", key);
            *seen = true;
            if (seen == &have_dtype) {
                const char *dtype;
                DP_TRY(parse_string(p, &dtype));
                if (dtype_from_name(dtype, &e.dtype) < 0) {
                    DP_ERROR("%s: tensor '%s': unsupported dtype '%s'", p->path, name, dtype);
                    return DP_EFORMAT;
                }
            } else if (seen == &have_shape) {
                DP_TRY(parse_int_array(p, name, "shape", e.shape, DP_ST_MAX_DIMS, &e.ndim));
            } else {
                int64_t off[2];
                int k;
                DP_TRY(parse_int_array(p, name, "data_offsets", off, 2, &k));
                if (k != 2)
                    return tensor_error(p, name, "data_offsets must be [begin, end]", "");
                if (off[0] < 0 || off[1] < 0)
                    return tensor_error(p, name, "negative data offset", "");
                e.begin = (uint64_t)off[0];
                e.end = (uint64_t)off[1];
            }
            int more = next_or_close(p, '}', "expected ',' or '}' in a tensor");
            DP_TRY(more);
            if (!more)
                break;
        }
    if (!have_dtype || !have_shape || !have_offsets)
        return tensor_error(p, name, "missing ",
                            !have_dtype   ? "\"dtype\""
                            : !have_shape ? "\"shape\""
                                          : "\"data_offsets\"");
    for (int d = 0; d < e.ndim; d++) {
        if (e.shape[d] < 0) {
            char shape[ST_SHAPE_STR];
            dp__shape_str(shape, sizeof shape, e.ndim, e.shape);
            return tensor_error(p, name, "negative dimension in shape ", shape);
        }
    }
    struct st_entry *tensors = reserve_one(f->tensors, f->n, &f->cap, sizeof *tensors);
    if (!tensors) {
        DP_ERROR("%s: out of memory for %d tensors", p->path, f->n + 1);
        return DP_ENOMEM;
    }
    f->tensors = tensors;
    f->tensors[f->n++] = e;
    return 0;
}

/* {"key": "value", ...}: nothing else is allowed inside "__metadata__". */
static int parse_meta(struct parser *p, dp_safetensors_t *f)
{
    DP_TRY(expect(p, '{', "expected '{' for __metadata__"));
    skip_ws(p);
    if (peek(p) == '}') {
        p->pos++;
        return 0;
    }
    for (;;) {
        struct st_meta m;
        DP_TRY(parse_string(p, &m.key));
        DP_TRY(expect(p, ':', "expected ':' after a key"));
        skip_ws(p);
        if (peek(p) != '"')
            return syntax_error(p, "__metadata__ values must be strings");
        DP_TRY(parse_string(p, &m.value));
        struct st_meta *meta = reserve_one(f->meta, f->nmeta, &f->meta_cap, sizeof *meta);
        if (!meta) {
            DP_ERROR("%s: out of memory for %d metadata entries", p->path, f->nmeta + 1);
            return DP_ENOMEM;
        }
        f->meta = meta;
        f->meta[f->nmeta++] = m;
        int more = next_or_close(p, '}', "expected ',' or '}' in __metadata__");
        DP_TRY(more);
        if (!more)
            return 0;
    }
}

static int parse_header(struct parser *p, dp_safetensors_t *f)
{
    bool have_meta = false;
    DP_TRY(expect(p, '{', "expected '{' at the start of the header"));
    skip_ws(p);
    if (peek(p) == '}')
        p->pos++;
    else
        for (;;) {
            const char *key;
            DP_TRY(parse_string(p, &key));
            if (!key[0])
                return syntax_error(p, "empty tensor name");
            DP_TRY(expect(p, ':', "expected ':' after a key"));
            if (strcmp(key, ST_META_KEY) == 0) {
                if (have_meta)
                    return syntax_error(p, "second __metadata__");
                have_meta = true;
                DP_TRY(parse_meta(p, f));
            } else {
                DP_TRY(parse_tensor(p, f, key));
            }
            int more = next_or_close(p, '}', "expected ',' or '}' after a tensor");
            DP_TRY(more);
            if (!more)
                break;
        }
    skip_ws(p);
    if (p->pos != p->len)
        return syntax_error(p, "bytes after the end of the header object");
    return 0;
}

/* ---- reading: consistency of the parsed header --------------------------- */

struct st_range {
    uint64_t begin, end;
    int index;
};

static int cmp_ranges(const void *a, const void *b)
{
    const struct st_range *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(((const struct st_name *)a)->name, ((const struct st_name *)b)->name);
}

static int cmp_meta(const void *a, const void *b)
{
    return strcmp(((const struct st_meta *)a)->key, ((const struct st_meta *)b)->key);
}

/* Every tensor's byte range matches its shape and lies in the data section. */
static int check_ranges(const dp_safetensors_t *f, const char *path)
{
    for (int i = 0; i < f->n; i++) {
        const struct st_entry *e = &f->tensors[i];
        char shape[ST_SHAPE_STR];
        dp__shape_str(shape, sizeof shape, e->ndim, e->shape);
        uint64_t need;
        if (!shape_bytes(e->dtype, e->ndim, e->shape, &need)) {
            DP_ERROR("%s: tensor '%s': the byte count of shape %s overflows", path, e->name, shape);
            return DP_EFORMAT;
        }
        if (e->begin > e->end) {
            DP_ERROR("%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] end before they "
                     "begin",
                     path, e->name, e->begin, e->end);
            return DP_EFORMAT;
        }
        if (e->end - e->begin != need) {
            DP_ERROR("%s: tensor '%s': shape %s needs %" PRIu64
                     " bytes, data_offsets give %" PRIu64,
                     path, e->name, shape, need, e->end - e->begin);
            return DP_EFORMAT;
        }
        if (e->end > f->data_size) {
            DP_ERROR("%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] run past the end of "
                     "the data section (%" PRIu64 " bytes): file truncated",
                     path, e->name, e->begin, e->end, f->data_size);
            return DP_ETRUNC;
        }
    }
    return 0;
}

/* The ranges, sorted, tile the data section: no overlap, no hole, no tail. */
static int check_tiling(const dp_safetensors_t *f, const char *path)
{
    if (f->n == 0) {
        if (f->data_size > 0) {
            DP_ERROR("%s: %" PRIu64 " data bytes but no tensors", path, f->data_size);
            return DP_EFORMAT;
        }
        return 0;
    }
    struct st_range *r = dp__malloc((size_t)f->n * sizeof *r);
    if (!r)
        return DP_ENOMEM;
    for (int i = 0; i < f->n; i++)
        r[i] = (struct st_range){f->tensors[i].begin, f->tensors[i].end, i};
    qsort(r, (size_t)f->n, sizeof *r, cmp_ranges);
    int rc = 0;
    uint64_t pos = 0;
    int prev = -1; /* the tensor that ends at pos */
    for (int i = 0; i < f->n && rc == 0; i++) {
        const struct st_entry *e = &f->tensors[r[i].index];
        if (e->begin > pos) {
            DP_ERROR("%s: hole in the data section: bytes [%" PRIu64 ", %" PRIu64 ") (file offset "
                     "%" PRIu64 ") belong to no tensor; tensor '%s' starts after them",
                     path, pos, e->begin, f->data_start + pos, e->name);
            rc = DP_EFORMAT;
        } else if (e->begin < pos) {
            const struct st_entry *q = &f->tensors[prev];
            DP_ERROR("%s: tensor '%s' [%" PRIu64 ", %" PRIu64 ") overlaps tensor '%s' [%" PRIu64
                     ", %" PRIu64 ")",
                     path, e->name, e->begin, e->end, q->name, q->begin, q->end);
            rc = DP_EFORMAT;
        } else {
            /* Zero-length tensors at pos leave it where it is. */
            if (e->end > pos || prev < 0)
                prev = r[i].index;
            pos = e->end;
        }
    }
    dp__free(r);
    if (rc == 0 && pos < f->data_size) {
        DP_ERROR("%s: bytes [%" PRIu64 ", %" PRIu64 ") at the end of the data section belong to "
                 "no tensor",
                 path, pos, f->data_size);
        rc = DP_EFORMAT;
    }
    return rc;
}

static int check_names(dp_safetensors_t *f, const char *path)
{
    if (f->n > 0) {
        f->by_name = dp__malloc((size_t)f->n * sizeof *f->by_name);
        if (!f->by_name)
            return DP_ENOMEM;
        for (int i = 0; i < f->n; i++)
            f->by_name[i] = (struct st_name){f->tensors[i].name, i};
        qsort(f->by_name, (size_t)f->n, sizeof *f->by_name, cmp_names);
        for (int i = 1; i < f->n; i++) {
            if (strcmp(f->by_name[i - 1].name, f->by_name[i].name) == 0) {
                DP_ERROR("%s: tensor '%s' appears twice in the header", path, f->by_name[i].name);
                return DP_EFORMAT;
            }
        }
    }
    if (f->nmeta > 1) {
        qsort(f->meta, (size_t)f->nmeta, sizeof *f->meta, cmp_meta);
        for (int i = 1; i < f->nmeta; i++) {
            if (strcmp(f->meta[i - 1].key, f->meta[i].key) == 0) {
                DP_ERROR("%s: metadata key '%s' appears twice", path, f->meta[i].key);
                return DP_EFORMAT;
            }
        }
    }
    return 0;
}

/* ---- reading: the file ------------------------------------------------------ */

/* Reads up to n bytes, through EINTR, until end of file; *got says how many. */
static int read_full(int fd, uint8_t *buf, size_t n, size_t *got)
{
    *got = 0;
    while (*got < n) {
        ssize_t r = read(fd, buf + *got, DP_MIN(n - *got, ST_IO_CHUNK));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0)
            break;
        *got += (size_t)r;
    }
    return 0;
}

/* Loads the file into f->alloc and sets the header (*hdr, *hlen) and data
 * section; checks only the size field against the file's length. */
static int load(dp_safetensors_t *f, int fd, const char *path, char **hdr, size_t *hlen)
{
    struct stat st;
    if (fstat(fd, &st) < 0) {
        DP_ERROR("%s: cannot stat: %s", path, strerror(errno));
        return DP_EIO;
    }
    if (!S_ISREG(st.st_mode)) {
        DP_ERROR("%s: not a regular file", path);
        return DP_EIO;
    }
    uint64_t size = (uint64_t)st.st_size;
    uint8_t prefix[8];
    size_t got;
    if (read_full(fd, prefix, sizeof prefix, &got) < 0) {
        DP_ERROR("%s: read failed: %s", path, strerror(errno));
        return DP_EIO;
    }
    if (got < sizeof prefix) {
        DP_ERROR("%s: truncated: %zu bytes, too short for the 8-byte header size", path, got);
        return DP_ETRUNC;
    }
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | prefix[i];
    if (n > ST_MAX_HEADER) {
        DP_ERROR("%s: header size %" PRIu64 " is over the %" PRIu64 "-byte limit", path, n,
                 ST_MAX_HEADER);
        return DP_EFORMAT;
    }
    if (size < 8 || n > size - 8) {
        DP_ERROR("%s: truncated: header size %" PRIu64 " but only %" PRIu64 " bytes follow", path,
                 n, size < 8 ? 0 : size - 8);
        return DP_ETRUNC;
    }
    if (size > SIZE_MAX - 64) {
        DP_ERROR("%s: %" PRIu64 " bytes do not fit in memory", path, size);
        return DP_ENOMEM;
    }
    /* Place the file so that its data section, at 8 + n, is 64-byte aligned. */
    size_t pad = (size_t)((64 - (8 + n) % 64) % 64);
    f->alloc = dp__malloc(pad + (size_t)size);
    if (!f->alloc)
        return DP_ENOMEM;
    uint8_t *base = f->alloc + pad;
    memcpy(base, prefix, sizeof prefix);
    if (read_full(fd, base + 8, (size_t)size - 8, &got) < 0) {
        DP_ERROR("%s: read failed: %s", path, strerror(errno));
        return DP_EIO;
    }
    if (got < n) { /* the file shrank since fstat */
        DP_ERROR("%s: truncated: header size %" PRIu64 " but only %zu bytes follow", path, n, got);
        return DP_ETRUNC;
    }
    *hdr = (char *)base + 8;
    *hlen = (size_t)n;
    f->data = base + 8 + n;
    f->data_size = got - n;
    f->data_start = 8 + n;
    return 0;
}

int dp_safetensors_open(dp_safetensors_t **out, const char *path)
{
    DP_ASSERT(out && path);
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        if (err == ENOENT || err == ENOTDIR) {
            DP_ERROR("%s: no such file", path);
            return DP_ENOENT;
        }
        DP_ERROR("%s: cannot open: %s", path, strerror(err));
        return DP_EIO;
    }
    dp_safetensors_t *f = dp__calloc(1, sizeof *f);
    if (!f) {
        close(fd);
        return DP_ENOMEM;
    }
    char *hdr = NULL;
    size_t hlen = 0;
    int rc = load(f, fd, path, &hdr, &hlen);
    close(fd);
    if (rc == 0) {
        struct parser p = {.path = path, .s = hdr, .len = hlen};
        rc = parse_header(&p, f);
    }
    if (rc == 0)
        rc = check_ranges(f, path);
    if (rc == 0)
        rc = check_names(f, path);
    if (rc == 0)
        rc = check_tiling(f, path);
    if (rc < 0) {
        dp_safetensors_close(f);
        return rc;
    }
    *out = f;
    return 0;
}

void dp_safetensors_close(dp_safetensors_t *f)
{
    if (!f)
        return;
    dp__free(f->meta);
    dp__free(f->by_name);
    dp__free(f->tensors);
    dp__free(f->alloc);
    dp__free(f);
}

int dp_safetensors_count(const dp_safetensors_t *f)
{
    return f ? f->n : 0;
}

static void fill(const dp_safetensors_t *f, const struct st_entry *e, dp_st_tensor *out)
{
    out->name = e->name;
    out->dtype = e->dtype;
    out->ndim = e->ndim;
    memset(out->shape, 0, sizeof out->shape);
    memcpy(out->shape, e->shape, (size_t)e->ndim * sizeof e->shape[0]);
    out->data = f->data + e->begin;
    out->bytes = (size_t)(e->end - e->begin);
}

int dp_safetensors_get(const dp_safetensors_t *f, int i, dp_st_tensor *out)
{
    if (!f || !out || i < 0 || i >= f->n) {
        DP_ERROR("dp_safetensors_get: index %d outside [0, %d)", i, f ? f->n : 0);
        return DP_EINVAL;
    }
    fill(f, &f->tensors[i], out);
    return 0;
}

int dp_safetensors_find(const dp_safetensors_t *f, const char *name, dp_st_tensor *out)
{
    if (!f || !name || f->n == 0)
        return DP_ENOENT;
    struct st_name probe = {.name = name};
    const struct st_name *hit =
        bsearch(&probe, f->by_name, (size_t)f->n, sizeof *f->by_name, cmp_names);
    if (!hit)
        return DP_ENOENT;
    if (out)
        fill(f, &f->tensors[hit->index], out);
    return 0;
}

const char *dp_safetensors_meta(const dp_safetensors_t *f, const char *key)
{
    if (!f || !key || f->nmeta == 0)
        return NULL;
    struct st_meta probe = {.key = key};
    const struct st_meta *hit =
        bsearch(&probe, f->meta, (size_t)f->nmeta, sizeof *f->meta, cmp_meta);
    return hit ? hit->value : NULL;
}
