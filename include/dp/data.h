/* dp/data.h - IDX files, Fashion-MNIST, and the prefetching batch loader. */
#ifndef DP_DATA_H
#define DP_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One IDX file in memory (http://yann.lecun.com/exdb/mnist/ format). */
typedef struct dp_idx {
    uint8_t type;       /* element type code: 0x08 unsigned byte is the only one read */
    int ndims;          /* 1..4 */
    int64_t dims[4];    /* big-endian sizes from the header */
    uint8_t *data;      /* dims[0] * ... * dims[ndims-1] bytes */
    size_t size;        /* bytes in data */
} dp_idx;

/* Reads an IDX file, gzip-compressed or plain (told apart by the gzip magic).
 * Errors: DP_ENOENT (missing), DP_EFORMAT (wrong magic, bad type or dims,
 * corrupt gzip), DP_ETRUNC (fewer bytes than the header promises), each
 * logged with the file name and what is wrong. */
int dp_idx_read(const char *path, dp_idx *out);
void dp_idx_close(dp_idx *idx);

/* Images with labels, pixels scaled to [0, 1]. */
typedef struct dp_dataset {
    int64_t n;       /* samples */
    int rows, cols;  /* 28 x 28 for Fashion-MNIST */
    float *images;   /* [n, rows, cols], one channel */
    int32_t *labels; /* [n], 0..9 */
} dp_dataset;

/* Where Debian's dataset-fashion-mnist package puts the files. */
#define DP_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

/* Loads the train (60000) or test (10000) split from `dir` (NULL: the Debian
 * directory), finding `train-images-idx3-ubyte` with or without `.gz`.
 * Checks that images and labels agree in count and labels are below 10. */
int dp_fashion_mnist_load(const char *dir, bool train, dp_dataset *out);
void dp_dataset_close(dp_dataset *ds);

/* The ten class names, as d2l's get_fashion_mnist_labels. */
const char *dp_fashion_mnist_label(int label);

/* ---- loader -------------------------------------------------------------
 * Shuffles with a seed (a new permutation each epoch, a pure function of
 * seed and epoch), cuts batches (the last one partial), and prepares the next
 * batches on its own thread while the caller trains on the current one. */
typedef struct dp_loader dp_loader_t;

typedef struct dp_loader_options {
    int64_t batch_size; /* > 0 */
    bool shuffle;       /* false: file order */
    uint64_t seed;
    int64_t limit;      /* use the first `limit` samples; 0 = all */
    int prefetch;       /* batches prepared ahead; 0 = default (2) */
} dp_loader_options;

typedef struct dp_batch {
    const float *x;   /* [n, 1, rows, cols] */
    const int32_t *y; /* [n] */
    int64_t n;        /* samples in this batch (<= batch_size) */
    int64_t index;    /* batch number within the epoch, from 0 */
} dp_batch;

int dp_loader_init(dp_loader_t **out, const dp_dataset *ds, const dp_loader_options *opt);
/* Starts epoch `epoch` (from 0) at batch `first_batch` (0 normally; resuming
 * passes where it stopped). */
int dp_loader_start_epoch(dp_loader_t *l, int64_t epoch, int64_t first_batch);
/* 1 and the next batch, or 0 at the end of the epoch. The batch's memory
 * stays valid until the next call of dp_loader_next or dp_loader_start_epoch. */
int dp_loader_next(dp_loader_t *l, dp_batch *out);
int64_t dp_loader_num_batches(const dp_loader_t *l);
int64_t dp_loader_num_samples(const dp_loader_t *l);
void dp_loader_close(dp_loader_t *l);

#ifdef __cplusplus
}
#endif
#endif /* DP_DATA_H */
