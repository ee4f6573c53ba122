/* The dataset readers over their files (fuzz_entry.h says what an input
 * means): an IDX file (plain or gzip) through dp_idx_read, a CIFAR-10 batch
 * file through dp_cifar10_load, an IDX image set's split through
 * dp__idx_dataset_load, and CIFAR-10's five-file train split through
 * dp_cifar10_load. The files of a split or a batch are written to the
 * scratch directory and removed after. */
#include "fuzz_entry.h"

#include "data/dataset.h"
#include "dp/dp.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* Writes n bytes to dir/name; -1 (said) if it cannot. */
static int fz_put(const char *target, const char *dir, const char *name, const uint8_t *p, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0)
        return fz_bad(target, "cannot write %s: %s", path, strerror(errno));
    return 0;
}

static void fz_remove(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
}

/* A failed load must have logged one error, one line, naming a file in dir. */
static int fz_check_dir_failure(const char *target, int rc, const char *dir)
{
    size_t n = strlen(dir);
    if (fz_errors != 1)
        return fz_bad(target, "the load returned %d and logged %d errors (%s)", rc, fz_errors,
                      fz_last_error);
    if (strncmp(fz_last_error, dir, n) != 0 || fz_last_error[n] != '/' ||
        strchr(fz_last_error, '\n'))
        return fz_bad(target, "the error is not one line naming a file of %s: %s", dir,
                      fz_last_error);
    return 0;
}

/* ---- idx_dataset ------------------------------------------------------------ */

/* One IDX file of the split, gzip-compressed first when `gzip`. */
static int fz_put_idx(const char *dir, const char *name, const uint8_t *p, size_t n, bool gzip)
{
    if (!gzip)
        return fz_put("idx_dataset", dir, name, p, n);
    size_t packed_n;
    uint8_t *packed = fz_gzip(p, n, &packed_n);
    if (!packed)
        return fz_bad("idx_dataset", "zlib could not compress %zu bytes", n);
    char gz[64];
    snprintf(gz, sizeof gz, "%s.gz", name);
    int rc = fz_put("idx_dataset", dir, gz, packed, packed_n);
    free(packed);
    return rc;
}

/* What the loader must make of the two files: well-formed IDX files of
 * [N, R, C] images, N >= 1, sides 1..1024, and N labels below 10. */
static bool fz_idx_set_valid(const uint8_t *im, size_t im_n, const uint8_t *lb, size_t lb_n,
                             int64_t *dims, size_t *im_header)
{
    int ndims, lb_ndims;
    int64_t lb_dims[4];
    size_t lb_header;
    if (!fz_idx_valid(im, im_n, im_header, &ndims, dims) || ndims != 3 ||
        !fz_idx_valid(lb, lb_n, &lb_header, &lb_ndims, lb_dims) || lb_ndims != 1 ||
        lb_dims[0] != dims[0] || dims[0] < 1 || dims[1] < 1 || dims[2] < 1 || dims[1] > 1024 ||
        dims[2] > 1024)
        return false;
    for (size_t i = lb_header; i < lb_n; i++)
        if (lb[i] >= 10)
            return false;
    return true;
}

int fuzz_idx_dataset_input(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    const char *dir = fz_scratch("idx_dataset");
    if (!dir)
        return -1;
    uint8_t mode = data[0];
    size_t im_n = (size_t)data[1] | (size_t)data[2] << 8;
    const uint8_t *im = data + 3;
    im_n = im_n < size - 3 ? im_n : size - 3;
    const uint8_t *lb = im + im_n;
    size_t lb_n = size - 3 - im_n;
    bool train = !(mode & 4);
    char im_name[64], lb_name[64];
    snprintf(im_name, sizeof im_name, "%s-images-idx3-ubyte", train ? "train" : "t10k");
    snprintf(lb_name, sizeof lb_name, "%s-labels-idx1-ubyte", train ? "train" : "t10k");
    int result = fz_put_idx(dir, im_name, im, im_n, mode & 1);
    if (result == 0)
        result = fz_put_idx(dir, lb_name, lb, lb_n, mode & 2);
    if (result != 0)
        return result;

    dp_dataset ds;
    fz_capture_begin();
    int rc = dp__idx_dataset_load(dir, train, NULL, &ds);
    fz_capture_end();

    int64_t dims[4];
    size_t header = 0;
    bool valid = fz_idx_set_valid(im, im_n, lb, lb_n, dims, &header);
    /* A plain file that starts with the gzip magic is inflated by the
     * reader: what it holds is not known here, only how a failure reads. */
    bool known = !(!(mode & 1) && im_n >= 2 && im[0] == 0x1f && im[1] == 0x8b) &&
                 !(!(mode & 2) && lb_n >= 2 && lb[0] == 0x1f && lb[1] == 0x8b);
    if (rc < 0) {
        result = fz_check_dir_failure("idx_dataset", rc, dir);
        if (result == 0 && valid && known)
            result =
                fz_bad("idx_dataset", "a well-formed set of [%lld, %lld, %lld] failed: %s",
                       (long long)dims[0], (long long)dims[1], (long long)dims[2], fz_last_error);
    } else if (!known) {
        /* Loaded: nothing to hold it to. */
    } else if (!valid) {
        result = fz_bad("idx_dataset", "an ill-formed set loaded (%lld samples)", (long long)ds.n);
    } else if (ds.n != dims[0] || ds.rows != dims[1] || ds.cols != dims[2] ||
               dp_dataset_channels(&ds) != 1) {
        result = fz_bad("idx_dataset", "loaded %lld samples of %d x %d, not the header's",
                        (long long)ds.n, ds.rows, ds.cols);
    } else {
        size_t pixels = (size_t)(dims[0] * dims[1] * dims[2]);
        for (size_t i = 0; result == 0 && i < pixels; i++)
            if (ds.images[i] != (float)im[header + i] / 255.0f)
                result = fz_bad("idx_dataset", "pixel %zu is not its byte / 255", i);
        for (int64_t i = 0; result == 0 && i < ds.n; i++)
            if (ds.labels[i] != lb[lb_n - (size_t)ds.n + (size_t)i]) /* after the header */
                result = fz_bad("idx_dataset", "label %lld is not its byte", (long long)i);
    }
    if (rc == 0)
        dp_dataset_close(&ds);
    for (int gz = 0; gz < 2; gz++) {
        char name[80];
        snprintf(name, sizeof name, "%s%s", im_name, gz ? ".gz" : "");
        fz_remove(dir, name);
        snprintf(name, sizeof name, "%s%s", lb_name, gz ? ".gz" : "");
        fz_remove(dir, name);
    }
    return result;
}

/* ---- cifar10_train ---------------------------------------------------------- */

enum { FZ_CIFAR_FILES = 5, FZ_RECORD = 3073, FZ_PIXELS = 3072 };

int fuzz_cifar10_train_input(const uint8_t *data, size_t size)
{
    if (size < 1 + 2 * FZ_CIFAR_FILES)
        return 0;
    const char *scratch = fz_scratch("cifar10_train");
    if (!scratch)
        return -1;
    char dir[300], sub[340];
    snprintf(dir, sizeof dir, "%s", scratch);
    snprintf(sub, sizeof sub, "%s/cifar-10-batches-bin", dir);
    bool in_sub = data[0] & 1;
    if (in_sub && mkdir(sub, 0755) != 0 && errno != EEXIST)
        return fz_bad("cifar10_train", "mkdir %s: %s", sub, strerror(errno));
    const uint8_t *file[FZ_CIFAR_FILES];
    size_t len[FZ_CIFAR_FILES], at = 1 + 2 * FZ_CIFAR_FILES;
    int result = 0;
    for (int i = 0; i < FZ_CIFAR_FILES; i++) {
        size_t want = (size_t)data[1 + 2 * i] | (size_t)data[2 + 2 * i] << 8;
        len[i] = want < size - at ? want : size - at;
        file[i] = data + at;
        at += len[i];
        char name[32];
        snprintf(name, sizeof name, "data_batch_%d.bin", i + 1);
        if (result == 0)
            result = fz_put("cifar10_train", in_sub ? sub : dir, name, file[i], len[i]);
    }

    dp_dataset ds;
    int rc = -1;
    if (result == 0) {
        fz_capture_begin();
        rc = dp_cifar10_load(dir, true, &ds);
        fz_capture_end();
    }
    /* The format's own rules, file by file: whole records, labels 0..9. */
    bool valid = true;
    int64_t records = 0;
    for (int i = 0; i < FZ_CIFAR_FILES; i++) {
        valid = valid && len[i] > 0 && len[i] % FZ_RECORD == 0;
        for (size_t r = 0; valid && r < len[i] / FZ_RECORD; r++)
            valid = file[i][r * FZ_RECORD] <= 9;
        records += (int64_t)(len[i] / FZ_RECORD);
    }
    if (result != 0) {
    } else if (rc < 0) {
        result = fz_check_dir_failure("cifar10_train", rc, dir);
        if (result == 0 && valid)
            result = fz_bad("cifar10_train", "a well-formed split failed: %s", fz_last_error);
    } else if (!valid) {
        result =
            fz_bad("cifar10_train", "an ill-formed split read (%lld samples)", (long long)ds.n);
    } else if (ds.n != records || ds.channels != 3 || ds.rows != 32 || ds.cols != 32) {
        result = fz_bad("cifar10_train", "read %lld samples, the files hold %lld", (long long)ds.n,
                        (long long)records);
    } else {
        /* Sample s is record s of the five files in order. */
        int64_t s = 0;
        for (int i = 0; result == 0 && i < FZ_CIFAR_FILES; i++) {
            for (size_t r = 0; result == 0 && r < len[i] / FZ_RECORD; r++, s++) {
                const uint8_t *rec = file[i] + r * FZ_RECORD;
                if (ds.labels[s] != rec[0])
                    result = fz_bad("cifar10_train", "sample %lld: label %d read as %d",
                                    (long long)s, rec[0], ds.labels[s]);
                for (int k = 0; result == 0 && k < FZ_PIXELS; k++)
                    if (ds.images[(size_t)s * FZ_PIXELS + (size_t)k] != (float)rec[1 + k] / 255.0f)
                        result = fz_bad("cifar10_train", "sample %lld: pixel %d is not its byte",
                                        (long long)s, k);
            }
        }
    }
    if (rc == 0)
        dp_dataset_close(&ds);
    for (int i = 0; i < FZ_CIFAR_FILES; i++) {
        char name[32];
        snprintf(name, sizeof name, "data_batch_%d.bin", i + 1);
        fz_remove(in_sub ? sub : dir, name);
    }
    if (in_sub)
        rmdir(sub);
    return result;
}

/* ---- idx ------------------------------------------------------------------- */

/* Whether `p` (n bytes) is a well-formed IDX file by the format's own rules;
 * *header gets the header's length, dims[0..*ndims) its sizes. */
bool fz_idx_valid(const uint8_t *p, size_t n, size_t *header, int *ndims, int64_t *dims)
{
    if (n < 4 || p[0] != 0 || p[1] != 0 || p[2] != 0x08 || p[3] < 1 || p[3] > 4)
        return false;
    size_t h = 4 + 4 * (size_t)p[3];
    if (n < h)
        return false;
    uint64_t bytes = 1, item = 1; /* item: the sizes with zeros as ones */
    for (int i = 0; i < p[3]; i++) {
        const uint8_t *b = p + 4 + 4 * i;
        uint64_t d = (uint64_t)b[0] << 24 | (uint64_t)b[1] << 16 | (uint64_t)b[2] << 8 | b[3];
        dims[i] = (int64_t)d;
        bytes *= d;
        item *= d ? d : 1;
        if (item > (uint64_t)1 << 30)
            return false;
    }
    *header = h;
    *ndims = p[3];
    return n - h == bytes;
}

/* `src` as one gzip member (level 1); NULL if zlib fails. */
uint8_t *fz_gzip(const uint8_t *src, size_t n, size_t *out_n)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (n > UINT_MAX / 2 || deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return NULL;
    uLong cap = deflateBound(&z, (uLong)n);
    uint8_t *out = malloc(cap);
    if (out) {
        z.next_in = (Bytef *)(uintptr_t)src;
        z.avail_in = (uInt)n;
        z.next_out = out;
        z.avail_out = (uInt)cap;
        if (deflate(&z, Z_FINISH) == Z_STREAM_END) {
            *out_n = z.total_out;
        } else {
            free(out);
            out = NULL;
        }
    }
    deflateEnd(&z);
    return out;
}

int fuzz_idx_input(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    uint8_t mode = data[0];
    const uint8_t *payload = data + 1;
    size_t payload_n = size - 1;
    bool gzip = mode & 1, corrupt_crc = gzip && (mode & 2);
    size_t cut = gzip ? (size_t)(mode >> 2) : 0;

    const uint8_t *file = payload;
    size_t file_n = payload_n;
    uint8_t *packed = NULL;
    if (gzip) {
        packed = fz_gzip(payload, payload_n, &file_n);
        if (!packed)
            return fz_bad("idx", "zlib could not compress %zu bytes", payload_n);
        if (corrupt_crc)
            packed[file_n - 8] ^= 0x5a; /* the trailer: CRC-32, then the length */
        file_n -= cut < file_n ? cut : file_n;
        file = packed;
    }
    const char *path = fz_input_file("idx", file, file_n);
    if (!path) {
        free(packed);
        return -1;
    }

    dp_idx idx;
    fz_capture_begin();
    int rc = dp_idx_read(path, &idx);
    fz_capture_end();

    /* What the reader must make of it, where that is known: a plain file
     * (not starting with the gzip magic), or an intact gzip stream, reads
     * exactly when the bytes are a well-formed IDX file; a damaged gzip
     * stream never reads. */
    size_t header = 0;
    int ndims;
    int64_t dims[4];
    bool valid = fz_idx_valid(payload, payload_n, &header, &ndims, dims);
    bool plain = !gzip && !(payload_n >= 2 && payload[0] == 0x1f && payload[1] == 0x8b);
    bool damaged = gzip && (corrupt_crc || cut > 0);
    int result = 0;
    if (rc < 0) {
        result = fz_check_failure("idx", "dp_idx_read", rc, path);
        if (result == 0 && valid && (plain || (gzip && !damaged)))
            result = fz_bad("idx", "a well-formed IDX file (%s) failed: %s",
                            gzip ? "gzip" : "plain", fz_last_error);
    } else {
        uint64_t bytes = 1;
        for (int i = 0; i < idx.ndims; i++)
            bytes *= (uint64_t)idx.dims[i];
        if (idx.ndims < 1 || idx.ndims > 4 || idx.type != 0x08 || bytes != idx.size)
            result = fz_bad("idx", "read %d dims of %zu bytes, inconsistent", idx.ndims, idx.size);
        else if (damaged)
            result = fz_bad("idx", "a damaged gzip stream read (crc %d, cut %zu)", (int)corrupt_crc,
                            cut);
        else if ((plain || gzip) &&
                 (!valid || idx.size != payload_n - header ||
                  (idx.size && memcmp(idx.data, payload + header, idx.size) != 0)))
            result = fz_bad("idx", "read, but not the bytes of the file");
        /* Every byte is read, so ASan sees any that are not there. */
        volatile unsigned sum = 0;
        for (size_t i = 0; i < idx.size; i++)
            sum += idx.data[i];
        (void)sum;
        dp_idx_close(&idx);
    }
    free(packed);
    return result;
}

/* ---- cifar10 --------------------------------------------------------------- */

enum { FZ_CIFAR_RECORD = 3073, FZ_CIFAR_PIXELS = 3072 };

int fuzz_cifar10_input(const uint8_t *data, size_t size)
{
    const char *dir = fz_scratch("cifar10");
    if (!dir)
        return -1;
    char path[300];
    snprintf(path, sizeof path, "%s/test_batch.bin", dir);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
        return fz_bad("cifar10", "cannot write %s: %s", path, strerror(errno));

    dp_dataset ds;
    fz_capture_begin();
    int rc = dp_cifar10_load(dir, false, &ds);
    fz_capture_end();

    /* The format's own rules: whole records, each label 0..9. */
    bool valid = size > 0 && size % FZ_CIFAR_RECORD == 0;
    for (size_t r = 0; valid && r < size / FZ_CIFAR_RECORD; r++)
        valid = data[r * FZ_CIFAR_RECORD] <= 9;
    int result = 0;
    if (rc < 0) {
        result = fz_check_failure("cifar10", "dp_cifar10_load", rc, path);
        if (result == 0 && valid)
            result = fz_bad("cifar10", "a well-formed file failed: %s", fz_last_error);
    } else if (!valid) {
        result = fz_bad("cifar10", "an ill-formed file of %zu bytes read", size);
    } else if (ds.n != (int64_t)(size / FZ_CIFAR_RECORD) || ds.channels != 3 || ds.rows != 32 ||
               ds.cols != 32) {
        result = fz_bad("cifar10", "read %lld samples of [%d, %d, %d] from %zu bytes",
                        (long long)ds.n, ds.channels, ds.rows, ds.cols, size);
    } else {
        /* Every sample is its record: the label, then the planes in order. */
        for (int64_t r = 0; result == 0 && r < ds.n; r++) {
            const uint8_t *rec = data + (size_t)r * FZ_CIFAR_RECORD;
            if (ds.labels[r] != rec[0])
                result = fz_bad("cifar10", "record %lld: label %d read as %d", (long long)r, rec[0],
                                ds.labels[r]);
            for (int k = 0; result == 0 && k < FZ_CIFAR_PIXELS; k++)
                if (ds.images[(size_t)r * FZ_CIFAR_PIXELS + (size_t)k] !=
                    (float)rec[1 + k] / 255.0f)
                    result = fz_bad("cifar10", "record %lld: pixel %d is not its byte / 255",
                                    (long long)r, k);
        }
    }
    if (rc == 0)
        dp_dataset_close(&ds);
    unlink(path);
    return result;
}
