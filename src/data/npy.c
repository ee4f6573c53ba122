/* NumPy's .npy files (numpy.lib.format), read by hand: the format is a
 * magic string, a version, a header length and a Python dict literal,
 * then the array's bytes. Every field is checked and anything np.save
 * would not have written for the four dtypes read here is refused with
 * one line naming the file:
 *
 *   "\x93NUMPY" major minor   major 1: header length u16 LE; 2 or 3: u32 LE
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 28, 28), }
 *   ... spaces, '\n' (the header), then exactly prod(shape) x itemsize bytes
 *
 * The header is read and checked before a byte of data is allocated, and
 * the data go straight into their own buffer (no second copy). */
#include "data/dataset.h"

#include "core/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
/* numpy itself refuses headers past this (max_header_size, 10000), and a
 * shape of DP_NPY_MAX_DIMS numbers fits in far less. */
#define NPY_MAX_HEADER 10000
/* The most data one file may hold: 64 GiB. */
#define NPY_MAX_BYTES ((uint64_t)1 << 36)

static const struct {
    const char *descr;
    dp_npy_dtype dtype;
    size_t itemsize;
} npy_dtypes[] = {
    {"|u1", DP_NPY_U8, 1},
    {"<i4", DP_NPY_I32, 4},
    {"<i8", DP_NPY_I64, 8},
    {"<f4", DP_NPY_F32, 4},
};

static size_t itemsize(dp_npy_dtype t)
{
    for (size_t i = 0; i < DP_COUNTOF(npy_dtypes); i++)
        if (npy_dtypes[i].dtype == t)
            return npy_dtypes[i].itemsize;
    return 0;
}

/* The header dict, s[0..n) (NUL-free, checked by the caller). */
typedef struct npy_parser {
    const char *path;
    const char *s;
    size_t n, pos;
} npy_parser;

static int npy_bad(const npy_parser *p, const char *what)
{
    DP_ERROR("%s: bad .npy header at byte %zu of the dict: %s", p->path, p->pos, what);
    return DP_EFORMAT;
}

static void skip_ws(npy_parser *p)
{
    while (p->pos < p->n && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t'))
        p->pos++;
}

static bool take(npy_parser *p, char c)
{
    skip_ws(p);
    if (p->pos < p->n && p->s[p->pos] == c) {
        p->pos++;
        return true;
    }
    return false;
}

/* A Python string literal in single or double quotes, no escapes (np.save
 * writes none), into buf. */
static int parse_str(npy_parser *p, char *buf, size_t size, const char *what)
{
    skip_ws(p);
    char q = p->pos < p->n ? p->s[p->pos] : 0;
    if (q != '\'' && q != '"')
        return npy_bad(p, what);
    size_t start = ++p->pos;
    while (p->pos < p->n && p->s[p->pos] != q && p->s[p->pos] != '\\')
        p->pos++;
    if (p->pos >= p->n || p->s[p->pos] != q || p->pos - start >= size)
        return npy_bad(p, what);
    memcpy(buf, p->s + start, p->pos - start);
    buf[p->pos - start] = '\0';
    p->pos++;
    return 0;
}

/* A non-negative decimal integer that fits in int64. */
static int parse_dim(npy_parser *p, int64_t *out)
{
    skip_ws(p);
    if (p->pos >= p->n || p->s[p->pos] < '0' || p->s[p->pos] > '9')
        return npy_bad(p, "expected a size in 'shape'");
    int64_t v = 0;
    while (p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
        int d = p->s[p->pos++] - '0';
        if (v > (INT64_MAX - d) / 10)
            return npy_bad(p, "a size in 'shape' is too large");
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* "(N, ...)" or "()" or "(N,)": Python's tuple, with its one-element comma. */
static int parse_shape(npy_parser *p, dp_npy *a)
{
    if (!take(p, '('))
        return npy_bad(p, "'shape' is not a tuple");
    a->ndim = 0;
    if (take(p, ')'))
        return 0;
    for (;;) {
        if (a->ndim == DP_NPY_MAX_DIMS)
            return npy_bad(p, "'shape' has more than 8 dimensions");
        DP_TRY(parse_dim(p, &a->shape[a->ndim++]));
        if (take(p, ')'))
            return a->ndim == 1 ? npy_bad(p, "a 1-tuple needs its comma: (N,)") : 0;
        if (!take(p, ','))
            return npy_bad(p, "expected ',' or ')' in 'shape'");
        if (take(p, ')'))
            return 0;
    }
}

static int parse_descr(npy_parser *p, dp_npy *a)
{
    char d[16];
    DP_TRY(parse_str(p, d, sizeof d, "'descr' is not a short string"));
    for (size_t i = 0; i < DP_COUNTOF(npy_dtypes); i++) {
        if (strcmp(d, npy_dtypes[i].descr) == 0) {
            a->dtype = npy_dtypes[i].dtype;
            return 0;
        }
    }
    DP_ERROR("%s: dtype %s is not read: the images must be uint8 ('|u1') or float32 ('<f4'), "
             "the labels int64 ('<i8'), int32 ('<i4') or uint8",
             p->path, DP_REPR(d));
    return DP_EFORMAT;
}

/* The dict: exactly the keys descr, fortran_order and shape. */
static int parse_dict(npy_parser *p, dp_npy *a)
{
    if (!take(p, '{'))
        return npy_bad(p, "expected '{'");
    bool seen[3] = {false, false, false};
    while (!take(p, '}')) {
        char key[16];
        DP_TRY(parse_str(p, key, sizeof key, "expected a key in quotes"));
        if (!take(p, ':'))
            return npy_bad(p, "expected ':' after a key");
        int k = strcmp(key, "descr") == 0           ? 0
                : strcmp(key, "fortran_order") == 0 ? 1
                : strcmp(key, "shape") == 0         ? 2
                                                    : -1;
        if (k < 0 || seen[k])
            return npy_bad(p, k < 0 ? "a key other than 'descr', 'fortran_order' and 'shape'"
                                    : "a key given twice");
        seen[k] = true;
        if (k == 0) {
            DP_TRY(parse_descr(p, a));
        } else if (k == 1) {
            skip_ws(p);
            if (p->n - p->pos >= 4 && memcmp(p->s + p->pos, "True", 4) == 0) {
                DP_ERROR("%s: the array is in Fortran order: save np.ascontiguousarray(x)",
                         p->path);
                return DP_EFORMAT;
            }
            if (p->n - p->pos < 5 || memcmp(p->s + p->pos, "False", 5) != 0)
                return npy_bad(p, "'fortran_order' is not True or False");
            p->pos += 5;
        } else {
            DP_TRY(parse_shape(p, a));
        }
        if (!take(p, ',')) {
            if (!take(p, '}'))
                return npy_bad(p, "expected ',' or '}'");
            break;
        }
    }
    if (!seen[0] || !seen[1] || !seen[2])
        return npy_bad(p, "'descr', 'fortran_order' and 'shape' are all required");
    skip_ws(p);
    if (p->pos != p->n)
        return npy_bad(p, "more after the dict");
    return 0;
}

/* Reads exactly n bytes; DP_ETRUNC when the file ends first. */
static int read_all(int fd, const char *path, void *buf, size_t n, size_t *got)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = read(fd, (char *)buf + done, n - done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            DP_ERROR("%s: read error: %s", path, strerror(errno));
            return DP_EIO;
        }
        if (r == 0)
            break;
        done += (size_t)r;
    }
    *got = done;
    return 0;
}

/* The preamble and the header; *data_at gets where the data start. */
static int read_header(int fd, const char *path, dp_npy *a, size_t *data_at)
{
    uint8_t pre[12];
    size_t got;
    DP_TRY(read_all(fd, path, pre, 10, &got));
    if (got < 8 || memcmp(pre, NPY_MAGIC, NPY_MAGIC_LEN) != 0) {
        DP_ERROR("%s: not a .npy file (it does not start with \\x93NUMPY)", path);
        return DP_EFORMAT;
    }
    int major = pre[6], minor = pre[7];
    if (major < 1 || major > 3 || minor != 0) {
        DP_ERROR("%s: .npy format version %d.%d: only 1.0, 2.0 and 3.0 are read", path, major,
                 minor);
        return DP_EFORMAT;
    }
    size_t pre_len = major == 1 ? 10 : 12, hlen;
    if (got < 10 || (major > 1 && (read_all(fd, path, pre + 10, 2, &got) < 0 || got < 2))) {
        DP_ERROR("%s: truncated: the file ends inside the .npy preamble", path);
        return DP_ETRUNC;
    }
    if (major == 1)
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    else
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    if (hlen == 0 || hlen > NPY_MAX_HEADER) {
        DP_ERROR("%s: .npy header length %zu: expected 1 to %d bytes", path, hlen, NPY_MAX_HEADER);
        return DP_EFORMAT;
    }
    char *h = dp__malloc(hlen);
    if (!h)
        return DP_ENOMEM;
    int rc = read_all(fd, path, h, hlen, &got);
    if (rc == 0 && got < hlen) {
        DP_ERROR("%s: truncated: the file ends inside the .npy header (%zu of %zu bytes)", path,
                 got, hlen);
        rc = DP_ETRUNC;
    }
    /* The header ends in '\n'; versions 1 and 2 are ASCII, 3 UTF-8, and
     * a NUL in it is never np.save's. */
    if (rc == 0 && (h[hlen - 1] != '\n' || memchr(h, '\0', hlen))) {
        DP_ERROR("%s: bad .npy header: %s", path,
                 h[hlen - 1] != '\n' ? "it does not end in a newline" : "it holds a NUL byte");
        rc = DP_EFORMAT;
    }
    if (rc == 0) {
        npy_parser p = {.path = path, .s = h, .n = hlen - 1};
        rc = parse_dict(&p, a);
    }
    dp__free(h);
    *data_at = pre_len + hlen;
    return rc;
}

int dp__npy_read_header(const char *path, dp_npy *out)
{
    memset(out, 0, sizeof *out);
    int fd = dp__open_regular(path, NULL);
    if (fd < 0)
        return fd;
    size_t data_at;
    int rc = read_header(fd, path, out, &data_at);
    close(fd);
    return rc;
}

int dp_npy_read(const char *path, dp_npy *out)
{
    DP_ASSERT(path && out);
    memset(out, 0, sizeof *out);
    uint64_t file_size;
    int fd = dp__open_regular(path, &file_size);
    if (fd < 0)
        return fd;
    dp_npy a = {0};
    size_t data_at = 0;
    int rc = read_header(fd, path, &a, &data_at);
    uint64_t bytes = itemsize(a.dtype);
    for (int d = 0; rc == 0 && d < a.ndim; d++) {
        /* Each factor fits int64: stop before the product passes the cap. */
        if (a.shape[d] != 0 && bytes > NPY_MAX_BYTES / (uint64_t)a.shape[d]) {
            char s[160];
            DP_ERROR("%s: shape %s: more than %llu bytes of data", path,
                     dp__shape_str(s, sizeof s, a.ndim, a.shape),
                     (unsigned long long)NPY_MAX_BYTES);
            rc = DP_EFORMAT;
        }
        bytes *= (uint64_t)a.shape[d];
    }
    uint64_t have = rc == 0 && file_size >= data_at ? file_size - data_at : 0;
    if (rc == 0 && have != bytes) {
        char s[160];
        dp__shape_str(s, sizeof s, a.ndim, a.shape);
        if (have < bytes)
            DP_ERROR("%s: truncated: shape %s needs %llu bytes of data, the file has %llu", path, s,
                     (unsigned long long)bytes, (unsigned long long)have);
        else
            DP_ERROR("%s: %llu bytes after the data of shape %s", path,
                     (unsigned long long)(have - bytes), s);
        rc = have < bytes ? DP_ETRUNC : DP_EFORMAT;
    }
    if (rc == 0) {
        a.size = (size_t)bytes;
        a.data = dp__malloc(a.size ? a.size : 1);
        size_t got = 0;
        rc = a.data ? read_all(fd, path, a.data, a.size, &got) : DP_ENOMEM;
        if (rc == 0 && got != a.size) {
            DP_ERROR("%s: truncated: the file shrank while it was read", path);
            rc = DP_ETRUNC;
        }
    }
    close(fd);
    if (rc < 0) {
        dp_npy_close(&a);
        return rc;
    }
    *out = a;
    return 0;
}

void dp_npy_close(dp_npy *a)
{
    if (!a)
        return;
    dp__free(a->data);
    memset(a, 0, sizeof *a);
}

/* ---- writing ------------------------------------------------------------- */

int dp_npy_write(const char *path, const dp_npy *a)
{
    DP_ASSERT(path && a);
    size_t size = itemsize(a->dtype);
    const char *descr = NULL;
    for (size_t i = 0; i < DP_COUNTOF(npy_dtypes); i++)
        if (npy_dtypes[i].dtype == a->dtype)
            descr = npy_dtypes[i].descr;
    /* The dict as np.save writes it: "(N, K)", "(N,)" for one dimension. */
    char dict[512];
    int len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                       descr ? descr : "?");
    bool shaped = descr && a->ndim >= 0 && a->ndim <= DP_NPY_MAX_DIMS;
    for (int d = 0; shaped && d < a->ndim; d++) {
        /* As the reader: no more than NPY_MAX_BYTES, checked before the product. */
        shaped =
            a->shape[d] >= 0 && (a->shape[d] == 0 || size <= NPY_MAX_BYTES / (uint64_t)a->shape[d]);
        size *= (size_t)(shaped ? a->shape[d] : 0);
        len += snprintf(dict + len, sizeof dict - (size_t)len, "%s%lld%s", d ? ", " : "",
                        (long long)a->shape[d], a->ndim == 1 ? "," : "");
    }
    if (!shaped || size != a->size) {
        DP_ERROR("%s: an array of %zu bytes does not fit its dtype and shape", path, a->size);
        return DP_EINVAL;
    }
    len += snprintf(dict + len, sizeof dict - (size_t)len, "), }");
    /* Magic, version 1.0, the header's length (u16 LE), the dict padded
     * with spaces and ended by '\n' so that the data start at a multiple
     * of 64 bytes. */
    size_t hlen = ((size_t)len + 1 + 10 + 63) / 64 * 64 - 10;
    uint8_t pre[10] = {
        0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)(hlen & 0xff), (uint8_t)(hlen >> 8)};
    memset(dict + len, ' ', hlen - (size_t)len - 1);
    dict[hlen - 1] = '\n';
    /* Written beside the path and renamed over it: a write cut short
     * (disk full, a signal) leaves the path as it was. */
    struct stat st;
    size_t plen = strlen(path) + 32;
    if (!path[0] || (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) ||
        path[strlen(path) - 1] == '/') {
        DP_ERROR("%s: cannot write: %s", path, strerror(path[0] ? EISDIR : ENOENT));
        return DP_EIO;
    }
    char *tmp = dp__malloc(plen);
    if (!tmp)
        return DP_ENOMEM;
    snprintf(tmp, plen, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        DP_ERROR("%s: cannot write: %s", path, strerror(errno));
        dp__free(tmp);
        return DP_EIO;
    }
    bool ok = fwrite(pre, 1, sizeof pre, f) == sizeof pre && fwrite(dict, 1, hlen, f) == hlen &&
              (a->size == 0 || fwrite(a->data, 1, a->size, f) == a->size);
    int e = ok ? 0 : errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        e = errno;
    }
    if (!ok) {
        DP_ERROR("%s: cannot write: %s", path, strerror(e ? e : EIO));
        remove(tmp);
    }
    dp__free(tmp);
    return ok ? 0 : DP_EIO;
}
