/* What the shard files of src/data/ share (dp/shards.h is the interface):
 * the set as the index pass leaves it, the spec's expansion into paths,
 * and the reader that walks one shard sample by sample (shards_reader.c),
 * for the index pass (data skipped) and the lanes (images read). */
#ifndef DP_DATA_SHARDS_IMPL_H
#define DP_DATA_SHARDS_IMPL_H

#include "dp/shards.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct dp_shard_set {
    int nshards;
    char **paths;      /* [nshards], the spec's order */
    int64_t *counts;   /* [nshards] samples of each shard */
    int64_t *first_id; /* [nshards] prefix sums of counts: shard s's first sample id */
    int64_t samples;
    int classes;
    char **class_names;  /* [classes] from classes.txt, or NULL */
    atomic_llong opened; /* shards opened by lanes (dp_shard_set_opened) */
    int32_t *labels;     /* [samples] each sample's .cls, by id (the index pass reads them) */
};

/* The first n ids lane args->lane emits (the lane's shuffle buffer run on
 * the index's counts alone, no shard opened: its draws are the lane's),
 * into ids[0..n); returns how many (fewer at the lane's end) or DP_ENOMEM. */
int64_t dp__shard_lane_ids(const dp_shard_set_t *set, const dp_shard_lane_args *args,
                           int64_t *ids, int64_t n);

/* The longest member name and key read (a longer one is an error). */
#define DP__SHARD_NAME_CAP 1024

/* The shard paths of `spec` (dp_shard_set_open's rules), malloc'd, each
 * dp__free'd with the array; one line naming the spec when none matched. */
int dp__shard_spec_expand(const char *spec, const char *split, char ***paths, int *n);
/* classes.txt of `dir` into *names / *n: 0 with *names NULL when there is
 * none; an error (naming the file and line) when a line is empty. */
int dp__shard_classes_read(const char *dir, char ***names, int *n);

/* A set of keys (one shard's finished keys: a key seen again is out of
 * order). Owns copies of the keys. */
typedef struct dp__shard_keys {
    char **slots; /* open addressing, cap a power of two (or 0) */
    int64_t n, cap;
} dp__shard_keys;

/* One shard walked sample by sample. */
typedef struct dp__shard_reader {
    void *archive; /* struct archive *, reading the shard */
    const char *path;
    bool read_images;  /* lanes: read each image's bytes; the index pass skips them */
    int32_t max_label; /* a label above this is an error (INT32_MAX: none) */
    uint64_t file_size;
    bool pending; /* a member's header is read, its data not yet consumed */
    void *entry;  /* that member's struct archive_entry *, libarchive's */
    bool done;
    dp__shard_keys seen;
    /* The sample in progress, then the one returned. */
    char key[DP__SHARD_NAME_CAP];
    char member[DP__SHARD_NAME_CAP]; /* its image member's name */
    bool has_image, has_label;
    int32_t label;
    uint8_t *image; /* [image_size] bytes (read_images), capacity image_cap */
    size_t image_size, image_cap;
    char last[DP__SHARD_NAME_CAP]; /* the last member read, for messages */
} dp__shard_reader;

/* Opens `path` (kept, not copied). */
int dp__shard_reader_open(dp__shard_reader *r, const char *path, bool read_images,
                          int32_t max_label);
/* The next sample into r->key, member, label (and image): 1, 0 at the
 * shard's end, or a negative code after one line naming the shard and the
 * member. */
int dp__shard_reader_next(dp__shard_reader *r);
/* Accepts a zeroed or closed reader. */
void dp__shard_reader_close(dp__shard_reader *r);

#endif
