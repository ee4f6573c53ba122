/* An image folder's source, streamed (folder_stream.c) or cached
 * (folder_cache.c): what both hold. */
#ifndef DP_DATA_FOLDER_SOURCE_H
#define DP_DATA_FOLDER_SOURCE_H

#include "data/dataset.h"
#include "dp/transform.h"

#include <stdatomic.h>

typedef struct dp__folder_source {
    dp__folder_files files;
    dp_transform_list transform;
    dp_jpeg_scale jpeg_scale;
    int decode_channels; /* every file is decoded to these (the first's, or asked) */
    int chw[3];          /* each sample's shape after the transforms */
    /* Files read for samples, all threads together: each sample's read
     * counts one, whether it opened its file or took first_bytes; the
     * look at the first image alone is not counted (a rank that never
     * reads sample 0 opened one file more than it counts). */
    atomic_llong opened;
    /* File 0's bytes, read for the look at the first image (the samples'
     * shape) and kept for sample 0's first read, which takes them (NULL
     * after): each file is opened once an epoch, the first one too.
     * first_len is set before any worker runs. */
    _Atomic(void *) first_bytes;
    size_t first_len;
    /* Cached only: [n] decoded images (their own size each), and the
     * line of each file that did not decode (NULL where it did). */
    dp_image *images;
    char **errors;
} dp__folder_source;

/* The bytes of the file at `path` into *buf (dp__free it). */
int dp__folder_read_file(const char *path, void **buf, size_t *len);
/* File i's bytes into *buf (dp__free it), counted in `opened`: the kept
 * first_bytes for i = 0 the first time, else read from the file. */
int dp__folder_take_bytes(dp__folder_source *src, int64_t i, void **buf, size_t *len);
/* 0 if a sample of file i came out as chw, else DP_EINVAL with its line. */
int dp__folder_check_shape(const dp__folder_source *src, int64_t i, const int chw[3]);
/* Decodes every file into src->images (folder_cache.c). */
int dp__folder_cache_all(dp__folder_source *src);
void dp__folder_source_close(void *self);
extern const dp__source_ops dp__folder_cache_ops;

#endif
