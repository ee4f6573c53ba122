/* IDX files (http://yann.lecun.com/exdb/mnist/), plain or gzip-compressed.
 *
 * Layout: two zero bytes, a type byte (0x08: unsigned byte, the only type
 * read here), a byte with the number of dimensions (1..4), that many
 * big-endian uint32 sizes, then the elements, row-major, and nothing after.
 *
 * Both kinds of file go through zlib's gzread: it looks at the first two bytes
 * itself and inflates when they are the gzip magic 0x1f 0x8b, and copies the
 * bytes through unchanged otherwise. A short read is then told apart by
 * gzerror: Z_BUF_ERROR means the gzip stream ended early (truncated),
 * Z_DATA_ERROR that it is corrupt (bad header, bad deflate data, bad CRC). */
#include "data/dataset.h"

#include "core/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* Larger element counts than this are taken for a corrupt header. */
#define IDX_MAX_BYTES ((uint64_t)1 << 30)
/* gzread takes an unsigned int and returns an int: read in pieces. */
#define IDX_CHUNK ((size_t)1 << 26)
/* The data buffer starts this large and doubles as bytes arrive, so a short
 * file whose header promises up to IDX_MAX_BYTES costs what it holds. */
#define IDX_FIRST_ALLOC ((size_t)1 << 20)

/* Reads up to `n` bytes; `*got` says how many arrived. Returns the zlib error
 * state after the read: Z_OK (a short read then means end of a plain file),
 * Z_BUF_ERROR (gzip stream cut short), Z_DATA_ERROR, Z_ERRNO, ... */
static int read_bytes(gzFile f, void *buf, size_t n, size_t *got)
{
    uint8_t *p = buf;
    *got = 0;
    while (*got < n) {
        size_t want = DP_MIN(n - *got, IDX_CHUNK);
        int r = gzread(f, p + *got, (unsigned)want);
        if (r < 0)
            break;
        *got += (size_t)r;
        if ((size_t)r < want)
            break;
    }
    int err = Z_OK;
    gzerror(f, &err);
    return err;
}

/* Turns a short or failed read of `what` into a status with a message. */
static int read_failure(gzFile f, const char *path, const char *what, size_t want, size_t got,
                        int err)
{
    const char *zmsg = gzerror(f, &err);
    switch (err) {
    case Z_OK:
    case Z_BUF_ERROR:
        DP_ERROR("%s: truncated %s: expected %zu bytes, found %zu%s", path, what, want, got,
                 err == Z_BUF_ERROR ? " (gzip stream ends early)" : "");
        return DP_ETRUNC;
    case Z_ERRNO:
        DP_ERROR("%s: read error in %s: %s", path, what, strerror(errno));
        return DP_EIO;
    case Z_MEM_ERROR:
        DP_ERROR("%s: out of memory inflating %s", path, what);
        return DP_ENOMEM;
    default:
        DP_ERROR("%s: corrupt gzip stream in %s: %s", path, what, zmsg ? zmsg : "?");
        return DP_EFORMAT;
    }
}

static int open_gz(const char *path, gzFile *out)
{
    int fd = dp__open_regular(path, NULL);
    if (fd < 0)
        return fd;
    gzFile f = gzdopen(fd, "rb");
    if (!f) {
        DP_ERROR("%s: cannot open: out of memory", path);
        close(fd);
        return DP_ENOMEM;
    }
    gzbuffer(f, 1u << 17);
    *out = f;
    return DP_OK;
}

/* Reads magic and sizes into `idx` (data not yet allocated). */
static int read_header(gzFile f, const char *path, dp_idx *idx)
{
    uint8_t magic[4];
    size_t got;
    int err = read_bytes(f, magic, sizeof magic, &got);
    if (got < sizeof magic)
        return read_failure(f, path, "header", sizeof magic, got, err);
    if (magic[0] != 0 || magic[1] != 0) {
        DP_ERROR("%s: wrong IDX magic: expected 00 00 08 0N, found %02x %02x %02x %02x", path,
                 magic[0], magic[1], magic[2], magic[3]);
        return DP_EFORMAT;
    }
    if (magic[2] != 0x08) {
        DP_ERROR("%s: unsupported IDX element type 0x%02x (only 0x08, unsigned byte, is read)",
                 path, magic[2]);
        return DP_EFORMAT;
    }
    if (magic[3] < 1 || magic[3] > 4) {
        DP_ERROR("%s: bad IDX number of dimensions %d (expected 1..4)", path, magic[3]);
        return DP_EFORMAT;
    }
    idx->type = magic[2];
    idx->ndims = magic[3];

    uint8_t be[16];
    size_t want = 4 * (size_t)idx->ndims;
    err = read_bytes(f, be, want, &got);
    if (got < want)
        return read_failure(f, path, "header sizes", want, got, err);
    /* Every size is below 2^32 and the running product is checked against
     * 2^30 at each step, so the product cannot overflow 64 bits. A zero
     * size makes the data empty, but the others still say what one item
     * is ([0, 16384, 16384]: no images of 256 MiB each), and its readers
     * size an item by them: they are held to the same cap, as if the zero
     * were a one. */
    uint64_t bytes = 1, item = 1;
    for (int i = 0; i < idx->ndims; i++) {
        const uint8_t *b = be + 4 * i;
        uint64_t d = (uint64_t)b[0] << 24 | (uint64_t)b[1] << 16 | (uint64_t)b[2] << 8 | b[3];
        idx->dims[i] = (int64_t)d;
        bytes *= d;
        item *= d ? d : 1;
        if (item > IDX_MAX_BYTES) {
            DP_ERROR("%s: IDX header promises more than %llu bytes %s (dimension %d is %llu): "
                     "absurd size",
                     path, (unsigned long long)IDX_MAX_BYTES, bytes ? "of data" : "per item", i,
                     (unsigned long long)d);
            return DP_EFORMAT;
        }
    }
    idx->size = (size_t)bytes;
    return DP_OK;
}

/* Reads the `want` data bytes into *out, in a buffer grown as they arrive. */
static int read_data(gzFile f, const char *path, size_t want, uint8_t **out)
{
    size_t cap = DP_MIN(want, IDX_FIRST_ALLOC), have = 0;
    uint8_t *buf = dp__malloc(cap);
    if (!buf)
        return DP_ENOMEM;
    for (;;) {
        size_t got;
        int err = read_bytes(f, buf + have, cap - have, &got);
        have += got;
        if (have < cap) {
            dp__free(buf);
            return read_failure(f, path, "data", want, have, err);
        }
        if (cap == want)
            break;
        cap = DP_MIN(want, 2 * cap);
        uint8_t *grown = dp__malloc(cap);
        if (!grown) {
            dp__free(buf);
            return DP_ENOMEM;
        }
        memcpy(grown, buf, have);
        dp__free(buf);
        buf = grown;
    }
    *out = buf;
    return DP_OK;
}

int dp__idx_open(dp__idx_file *file, const char *path)
{
    DP_ASSERT(file && path);
    memset(file, 0, sizeof *file);
    gzFile f = NULL;
    DP_TRY(open_gz(path, &f));
    int rc = read_header(f, path, &file->header);
    if (rc < 0) {
        gzclose(f);
        return rc;
    }
    file->gz = f;
    file->path = path;
    return DP_OK;
}

int dp__idx_read_data(dp__idx_file *file, dp_idx *out)
{
    DP_ASSERT(file && file->gz && out);
    memset(out, 0, sizeof *out);
    gzFile f = file->gz;
    const char *path = file->path;
    dp_idx idx = file->header;
    int rc = read_data(f, path, idx.size, &idx.data);
    if (rc < 0)
        return rc;
    /* One more byte: there must be none, and for gzip this read also makes
     * zlib check the stream's trailer (CRC and length). */
    uint8_t extra;
    size_t got;
    int err = read_bytes(f, &extra, 1, &got);
    if (got > 0) {
        DP_ERROR("%s: trailing bytes after the %zu data bytes the IDX header promises", path,
                 idx.size);
        rc = DP_EFORMAT;
    } else if (err == Z_BUF_ERROR) {
        DP_ERROR("%s: truncated: the gzip stream ends before its trailer (after all %zu data "
                 "bytes)",
                 path, idx.size);
        rc = DP_ETRUNC;
    } else if (err != Z_OK) {
        rc = read_failure(f, path, "gzip trailer", 0, 0, err);
    }
    if (rc < 0) {
        dp__free(idx.data);
        return rc;
    }
    *out = idx;
    return DP_OK;
}

void dp__idx_file_close(dp__idx_file *file)
{
    if (file && file->gz)
        gzclose(file->gz);
    if (file)
        memset(file, 0, sizeof *file);
}

int dp_idx_read(const char *path, dp_idx *out)
{
    DP_ASSERT(path && out);
    memset(out, 0, sizeof *out);
    dp__idx_file file;
    DP_TRY(dp__idx_open(&file, path));
    int rc = dp__idx_read_data(&file, out);
    dp__idx_file_close(&file);
    return rc;
}

void dp_idx_close(dp_idx *idx)
{
    if (!idx)
        return;
    dp__free(idx->data);
    memset(idx, 0, sizeof *idx);
}
