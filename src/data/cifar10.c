/* CIFAR-10, binary version (https://www.cs.toronto.edu/~kriz/cifar.html).
 *
 * A split is one or more files of records, nothing else: each record is a
 * label byte (0..9), then 3 x 32 x 32 pixel bytes, the red plane, the green
 * plane, the blue plane, each row-major. That is already the [3, 32, 32]
 * (channels, rows, cols) layout of one sample, so a record's pixels go to
 * its sample in order, scaled by 1/255. A file's size must be a whole
 * number of records, which is checked before anything is read. */
#include "data/dataset.h"

#include "core/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CIFAR_CHANNELS 3
#define CIFAR_SIDE 32
#define CIFAR_PIXELS (CIFAR_CHANNELS * CIFAR_SIDE * CIFAR_SIDE)
#define CIFAR_RECORD (1 + CIFAR_PIXELS) /* 3073 bytes */
#define CIFAR_CLASSES 10
#define CIFAR_TRAIN_FILES 5
/* Larger files than this are taken for something else (a split is 150 MB). */
#define CIFAR_MAX_FILE ((int64_t)1 << 30)

#define CIFAR_SUBDIR "cifar-10-batches-bin"
#define CIFAR_WHERE "CIFAR-10 is at https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"

/* One file of the split: its path and records. */
typedef struct cifar_file {
    char path[DP__DATA_PATH_CAP];
    int64_t records;
} cifar_file;

/* The split's file names: data_batch_1.bin .. data_batch_5.bin, or
 * test_batch.bin. */
static int split_names(bool train, char names[CIFAR_TRAIN_FILES][32])
{
    if (!train) {
        snprintf(names[0], 32, "test_batch.bin");
        return 1;
    }
    for (int i = 0; i < CIFAR_TRAIN_FILES; i++)
        snprintf(names[i], 32, "data_batch_%d.bin", i + 1);
    return CIFAR_TRAIN_FILES;
}

/* "<dir>/<name>", or with the tarball's folder between them when the file
 * is there and not in dir itself; DP_ENOENT when it is in neither. */
static int find_file(const char *dir, const char *name, char path[DP__DATA_PATH_CAP])
{
    int n = snprintf(path, DP__DATA_PATH_CAP, "%s/" CIFAR_SUBDIR "/%s", dir, name);
    if (n < 0 || n >= DP__DATA_PATH_CAP) {
        DP_ERROR("%s: directory name too long", dir);
        return DP_EINVAL;
    }
    char direct[DP__DATA_PATH_CAP];
    snprintf(direct, sizeof direct, "%s/%s", dir, name);
    if (dp__data_is_file(direct)) {
        memcpy(path, direct, strlen(direct) + 1);
        return 0;
    }
    if (dp__data_is_file(path))
        return 0;
    DP_ERROR("%s: no such file (nor %s); " CIFAR_WHERE, direct, path);
    return DP_ENOENT;
}

/* The number of records in f->path, from its size. */
static int count_records(cifar_file *f)
{
    uint64_t bytes;
    int fd = dp__open_regular(f->path, &bytes);
    if (fd < 0)
        return fd;
    close(fd);
    if (bytes > (uint64_t)CIFAR_MAX_FILE) {
        DP_ERROR("%s: %llu bytes: too large for a CIFAR-10 batch file", f->path,
                 (unsigned long long)bytes);
        return DP_EFORMAT;
    }
    int64_t size = (int64_t)bytes;
    if (size == 0 || size % CIFAR_RECORD != 0) {
        DP_ERROR("%s: truncated record: %lld bytes is not a whole number of %d-byte records "
                 "(the last has %lld)",
                 f->path, (long long)size, CIFAR_RECORD,
                 (long long)(size == 0 ? 0 : size % CIFAR_RECORD));
        return DP_ETRUNC;
    }
    f->records = size / CIFAR_RECORD;
    return 0;
}

/* Reads exactly `n` bytes from fd; DP_ETRUNC if the file ends first (it
 * shrank since it was measured). */
static int read_exact(int fd, const char *path, uint8_t *buf, size_t n)
{
    for (size_t done = 0; done < n;) {
        ssize_t r = read(fd, buf + done, n - done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            DP_ERROR("%s: read error: %s", path, strerror(errno));
            return DP_EIO;
        }
        if (r == 0) {
            DP_ERROR("%s: truncated record: the file ends after %zu of %zu bytes", path, done, n);
            return DP_ETRUNC;
        }
        done += (size_t)r;
    }
    return 0;
}

/* The records of f into samples [first, first + f->records) of ds. */
static int read_records(const cifar_file *f, dp_dataset *ds, int64_t first)
{
    int fd = dp__open_regular(f->path, NULL);
    if (fd < 0)
        return fd;
    size_t bytes = (size_t)f->records * CIFAR_RECORD;
    uint8_t *buf = dp__malloc(bytes);
    int rc = buf ? read_exact(fd, f->path, buf, bytes) : DP_ENOMEM;
    for (int64_t r = 0; rc == 0 && r < f->records; r++) {
        const uint8_t *rec = buf + (size_t)r * CIFAR_RECORD;
        if (rec[0] >= CIFAR_CLASSES) {
            DP_ERROR("%s: label %d at record %lld is over %d", f->path, rec[0], (long long)r,
                     CIFAR_CLASSES - 1);
            rc = DP_EFORMAT;
            break;
        }
        ds->labels[first + r] = rec[0];
        float *x = ds->images + (size_t)(first + r) * CIFAR_PIXELS;
        for (int k = 0; k < CIFAR_PIXELS; k++)
            x[k] = (float)rec[1 + k] / 255.0f;
    }
    dp__free(buf);
    close(fd);
    return rc;
}

/* The split's files found and their records counted into files[0..*n). */
static int find_split(const char *dir, bool train, cifar_file **files, int *nfiles, int64_t *n)
{
    DP_TRY(dp__data_require_dir(dir, "CIFAR-10", CIFAR_WHERE));
    char names[CIFAR_TRAIN_FILES][32];
    *nfiles = split_names(train, names);
    *files = dp__calloc((size_t)*nfiles, sizeof **files);
    if (!*files)
        return DP_ENOMEM;
    *n = 0;
    int rc = 0;
    for (int i = 0; rc == 0 && i < *nfiles; i++) {
        rc = find_file(dir, names[i], (*files)[i].path);
        if (rc == 0)
            rc = count_records(&(*files)[i]);
        *n += (*files)[i].records;
    }
    return rc;
}

int dp__cifar10_peek(const char *dir, int64_t chw[3], int64_t *n)
{
    cifar_file *files = NULL;
    int nfiles;
    int rc = find_split(dir, true, &files, &nfiles, n);
    dp__free(files);
    chw[0] = CIFAR_CHANNELS;
    chw[1] = chw[2] = CIFAR_SIDE;
    return rc;
}

int dp_cifar10_load(const char *dir, bool train, dp_dataset *out)
{
    DP_ASSERT(out);
    memset(out, 0, sizeof *out);
    cifar_file *files = NULL;
    int nfiles;
    int64_t n;
    int rc = find_split(dir, train, &files, &nfiles, &n);
    dp_dataset ds = {0};
    if (rc == 0)
        rc = dp__dataset_alloc(&ds, n, CIFAR_CHANNELS, CIFAR_SIDE, CIFAR_SIDE, files[0].path);
    int64_t first = 0;
    for (int i = 0; rc == 0 && i < nfiles; first += files[i].records, i++)
        rc = read_records(&files[i], &ds, first);
    dp__free(files);
    if (rc < 0) {
        dp_dataset_close(&ds);
        return rc;
    }
    *out = ds;
    return 0;
}
