/* Reading safetensors files (layout in include/dp/safetensors.h).
 *
 * Reading loads the whole file into one buffer, placed so that the data
 * section starts 64-byte aligned: a tensor whose begin offset is a multiple
 * of its element size then has aligned data (Python's writer orders tensors
 * so that this holds; ours keeps the caller's order, where it holds when one
 * dtype is used or the wider ones come first). The header is parsed by
 * safetensors_header.c, in place inside the buffer; then the ranges, names
 * and metadata are checked here. The names, metadata and data pointers
 * handed out all point into that one buffer.
 *
 * Tensor bytes are stored little-endian and handed over as they are: this
 * code assumes a little-endian host, as every platform dptrain builds on is. */
#include "io/safetensors.h"

#include "core/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

/* ---- consistency of the parsed header ---------------------------------------- */

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
        if (!dp__st_shape_bytes(e->dtype, e->ndim, e->shape, &need)) {
            DP_ERROR("%s: tensor %s: the byte count of shape %s overflows", path, DP_REPR(e->name),
                     shape);
            return DP_EFORMAT;
        }
        if (e->begin > e->end) {
            DP_ERROR("%s: tensor %s: data_offsets [%" PRIu64 ", %" PRIu64 "] end before they "
                     "begin",
                     path, DP_REPR(e->name), e->begin, e->end);
            return DP_EFORMAT;
        }
        if (e->end - e->begin != need) {
            DP_ERROR("%s: tensor %s: shape %s needs %" PRIu64 " bytes, data_offsets give %" PRIu64,
                     path, DP_REPR(e->name), shape, need, e->end - e->begin);
            return DP_EFORMAT;
        }
        if (e->end > f->data_size) {
            DP_ERROR("%s: tensor %s: data_offsets [%" PRIu64 ", %" PRIu64 "] run past the end of "
                     "the data section (%" PRIu64 " bytes): file truncated",
                     path, DP_REPR(e->name), e->begin, e->end, f->data_size);
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
                     "%" PRIu64 ") belong to no tensor; tensor %s starts after them",
                     path, pos, e->begin, f->data_start + pos, DP_REPR(e->name));
            rc = DP_EFORMAT;
        } else if (e->begin < pos) {
            const struct st_entry *q = &f->tensors[prev];
            DP_ERROR("%s: tensor %s [%" PRIu64 ", %" PRIu64 ") overlaps tensor %s [%" PRIu64
                     ", %" PRIu64 ")",
                     path, DP_REPR(e->name), e->begin, e->end, DP_REPR(q->name), q->begin, q->end);
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
                DP_ERROR("%s: tensor %s appears twice in the header", path,
                         DP_REPR(f->by_name[i].name));
                return DP_EFORMAT;
            }
        }
    }
    if (f->nmeta > 1) {
        qsort(f->meta, (size_t)f->nmeta, sizeof *f->meta, cmp_meta);
        for (int i = 1; i < f->nmeta; i++) {
            if (strcmp(f->meta[i - 1].key, f->meta[i].key) == 0) {
                DP_ERROR("%s: metadata key %s appears twice", path, DP_REPR(f->meta[i].key));
                return DP_EFORMAT;
            }
        }
    }
    return 0;
}

/* ---- the file ----------------------------------------------------------------- */

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

/* Loads the file (an open regular file of `size` bytes) into f->alloc and sets the header (*hdr,
 * *hlen) and data section; checks only the size field against the file's length. Without `whole`,
 * only the header is read: the data section is the file's rest, counted but not loaded (f->data
 * NULL). */
static int load(dp_safetensors_t *f, int fd, uint64_t size, const char *path, bool whole,
                char **hdr, size_t *hlen)
{
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
    size_t want = whole ? (size_t)size : 8 + (size_t)n;
    f->alloc = dp__malloc(pad + want);
    if (!f->alloc)
        return DP_ENOMEM;
    uint8_t *base = f->alloc + pad;
    memcpy(base, prefix, sizeof prefix);
    if (read_full(fd, base + 8, want - 8, &got) < 0) {
        DP_ERROR("%s: read failed: %s", path, strerror(errno));
        return DP_EIO;
    }
    if (got < n) { /* the file shrank since it was opened */
        DP_ERROR("%s: truncated: header size %" PRIu64 " but only %zu bytes follow", path, n, got);
        return DP_ETRUNC;
    }
    *hdr = (char *)base + 8;
    *hlen = (size_t)n;
    f->data = whole ? base + 8 + n : NULL;
    f->data_size = whole ? got - n : size - 8 - n;
    f->data_start = 8 + n;
    return 0;
}

static int open_file(dp_safetensors_t **out, const char *path, bool whole)
{
    DP_ASSERT(out && path);
    *out = NULL;
    uint64_t size;
    int fd = dp__open_regular(path, &size);
    if (fd < 0)
        return fd;
    dp_safetensors_t *f = dp__calloc(1, sizeof *f);
    if (!f) {
        close(fd);
        return DP_ENOMEM;
    }
    char *hdr = NULL;
    size_t hlen = 0;
    int rc = load(f, fd, size, path, whole, &hdr, &hlen);
    close(fd);
    if (rc == 0) {
        dp__json_parser p = {.path = path, .doc = "header", .base = 8, .s = hdr, .len = hlen};
        rc = dp__st_parse_header(&p, f);
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

int dp_safetensors_open(dp_safetensors_t **out, const char *path)
{
    return open_file(out, path, true);
}

int dp_safetensors_open_header(dp_safetensors_t **out, const char *path)
{
    return open_file(out, path, false);
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
    out->data = f->data ? f->data + e->begin : NULL;
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
