/* The convolution kernels' cache file in memory (conv_cache_file.c), for
 * conv_cache.c: its sections in the order the file has them, each a key
 * (dp_conv_algo_cache_key's text) and its lines (one shape each,
 * dp_conv_choices_save's format). */
#ifndef DP_TRAIN_CONV_CACHE_FILE_H
#define DP_TRAIN_CONV_CACHE_FILE_H

#include <stdbool.h>
#include <stddef.h>

enum { DP__CACHE_KEY_MAX = 2048 };

typedef struct dp__cache_section {
    char *key;
    char **lines;
    size_t n, cap;
} dp__cache_section;

typedef struct dp__cache_file {
    dp__cache_section *s;
    size_t n, cap;
} dp__cache_file;

void dp__cache_file_free(dp__cache_file *f);
/* The section of `key`, or NULL; a new empty one (NULL without memory). */
dp__cache_section *dp__cache_section_find(dp__cache_file *f, const char *key);
dp__cache_section *dp__cache_section_add(dp__cache_file *f, const char *key, size_t len);

/* The file at `path` into *f: empty when there is none, or when it is
 * corrupt (one warning naming the file and line where warn_corrupt: when
 * the cache is read, not again when it is added to). The lines of the
 * section `key` must be choices (dp_conv_choices_check); other sections'
 * are kept as they are (another dptrain may write what this one does not
 * read). DP_EIO when it cannot be read (warned), DP_ENOMEM. */
int dp__cache_file_read(const char *path, const char *key, dp__cache_file *f, bool warn_corrupt);

/* `lines` into s: each shape's line merged into the one s has (the passes
 * s lacks join it; those it has keep their choice), or added. */
int dp__cache_section_merge(dp__cache_section *s, const char *lines);

/* Creates the missing folders above `path` (mkdir -p of its dirname); 0,
 * or errno's value. */
int dp__cache_make_parents(const char *path);

/* f written to `path` whole or not at all: a temporary file beside it,
 * flushed to the disk, renamed over it, and the folder flushed (the rename
 * itself). 0, or errno's value, with *step naming what failed. */
int dp__cache_file_replace(const char *path, const dp__cache_file *f, const char **step);

#endif
