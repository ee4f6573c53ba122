/* What the dataset readers of src/data/ share: the IDX image sets' loader
 * (Fashion-MNIST and MNIST differ only in where their files come from),
 * file and directory checks, and the allocation of a dataset's buffers. */
#ifndef DP_DATA_DATASET_H
#define DP_DATA_DATASET_H

#include "dp/data.h"

/* Longest path the readers build from a directory and a file name. */
#define DP__DATA_PATH_CAP 4096

/* Whether `path` names something that is not a directory: the file a
 * loader then opens, which refuses what is not a regular file (a FIFO)
 * with its own line rather than as missing. */
bool dp__data_is_file(const char *path);
/* 0 if `dir` is a directory, else DP_ENOENT with "<dir>: no such directory". */
int dp__data_check_dir(const char *dir);
/* For a dataset no package installs: `dir` must be given (else DP_EINVAL,
 * "<name>: the data directory is required ...; <where_to_get>") and be a
 * directory. */
int dp__data_require_dir(const char *dir, const char *name, const char *where_to_get);

/* Allocates images [n, channels, rows, cols] and labels [n] (zeroed) into
 * *ds and sets its sizes; DP_ENOMEM (or DP_EINVAL for a size that does not
 * fit in memory), with `what` naming the data in the message. */
int dp__dataset_alloc(dp_dataset *ds, int64_t n, int channels, int rows, int cols,
                      const char *what);
/* The same, the images as bytes (ds->pixels) when `bytes`. */
int dp__dataset_alloc_as(dp_dataset *ds, int64_t n, int channels, int rows, int cols, bool bytes,
                         const char *what);
/* Fashion-MNIST's ten class names, in label order. */
const char *const *dp__fashion_mnist_names(void);

/* An IDX file opened with its header read and checked (sizes within the
 * reader's cap), its data not yet: a caller that holds several files to
 * one another checks their headers before paying for any data. */
typedef struct dp__idx_file {
    void *gz; /* the gzFile */
    const char *path;
    dp_idx header; /* type, ndims, dims and size; data NULL */
} dp__idx_file;
/* Opens `path` and reads its header (errors as dp_idx_read's). */
int dp__idx_open(dp__idx_file *file, const char *path);
/* The data the header promises, and nothing after it, into *out (free with
 * dp_idx_close). */
int dp__idx_read_data(dp__idx_file *file, dp_idx *out);
/* Accepts a zeroed or closed file. */
void dp__idx_file_close(dp__idx_file *file);

/* One split of an IDX image set in `dir`: "<split>-images-idx3-ubyte" and
 * "<split>-labels-idx1-ubyte", each with or without ".gz" (split is "train"
 * or "t10k"); one channel, bytes / 255, labels below 10. A missing file's
 * error ends with `where_to_get` when it is not NULL. */
int dp__idx_dataset_load(const char *dir, bool train, const char *where_to_get, dp_dataset *out);

/* dp_dataset_sample_shape's work for each kind: the training split's
 * (C, H, W) and sample count from its files' headers (idx_dataset.c,
 * cifar10.c, npy_dataset.c), and an .npy file's header alone (npy.c: its
 * dtype, ndim and shape; data NULL). */
int dp__idx_dataset_peek(const char *dir, const char *where_to_get, int64_t chw[3], int64_t *n);
int dp__cifar10_peek(const char *dir, int64_t chw[3], int64_t *n);
int dp__npy_dataset_peek(const char *dir, int64_t chw[3], int64_t *n);
int dp__npy_read_header(const char *path, dp_npy *out);
/* A streamed dataset's source: an object with its own ops, whatever kind
 * of storage it reads (a folder of files, tar shards). The loader calls
 * `read` from several threads at once, each with its own `out`.
 *
 *   read   sample i (0..n) of `epoch` for a run seeded with `seed`:
 *          [channels, rows, cols] floats into out (cap floats), the
 *          sample's draws a function of (seed, epoch, i) alone. 0, or the
 *          negative DP_E* code of a sample that cannot be read, its one
 *          line logged naming the file.
 *   opened how many files it has opened (may be NULL: 0)
 *   close  frees self (accepts what init left half-built)
 *
 * A source read front to back (tar shards) sets the epoch's order itself
 * and says how long an epoch is; both NULL for a source read in any order
 * (the loader then permutes 0..n):
 *   layout the samples of every epoch for global batches of batch_size
 *          split over `ranks` (this is `rank`), at most `limit` (0: all);
 *          or a DP_E* code with its line when the source cannot serve
 *          that split. Called once per loader, before any plan.
 *   plan   epoch `epoch`'s order: perm[p] the id of the sample at position
 *          p (p < layout's count); reading starts at position `first` (a
 *          resumed epoch). Called with no read in progress; reads then
 *          ask for ids of that plan, each once. */
typedef struct dp__source_ops {
    int (*read)(void *self, int64_t i, uint64_t seed, int64_t epoch, float *out, size_t cap);
    int64_t (*opened)(const void *self);
    void (*close)(void *self);
    int64_t (*layout)(void *self, int64_t batch_size, int rank, int ranks, int64_t limit);
    int (*plan)(void *self, uint64_t seed, int64_t epoch, bool shuffle, int64_t first,
                int64_t *perm);
} dp__source_ops;

struct dp_dataset_source {
    const dp__source_ops *ops;
    void *self;
};

/* A source of ops over self into ds->source (self closed on failure). */
int dp__dataset_set_source(dp_dataset *ds, const dp__source_ops *ops, void *self);

/* One split of an image folder as a list: paths [n] in ImageFolder's
 * order, labels [n], the class names [classes] (folder.c). */
typedef struct dp__folder_files {
    char **paths;
    int32_t *labels;
    int64_t n;
    char **class_names;
    int classes;
} dp__folder_files;
int dp__folder_list(const char *dir, bool train, dp__folder_files *out);
void dp__folder_files_close(dp__folder_files *f);

/* The IDX sets' sources, for a missing file's message (mnist.c). */
extern const char dp__mnist_where[];

#endif
