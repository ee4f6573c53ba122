/* The dataset loaders over their files (fuzz_entry.h says what an input
 * means): an IDX image set's split through dp__idx_dataset_load, and
 * CIFAR-10's five-file train split through dp_cifar10_load. Each input's
 * files are written to the scratch directory and removed after. */
#include "fuzz_entry.h"

#include "data/dataset.h"
#include "dp/dp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
