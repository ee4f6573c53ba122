/* dp/shards.h - tar shards in WebDataset's convention: a set of shards,
 * each read sequentially (libarchive), and the lanes that stream them.
 *
 * A shard is a tar file; a sample is the members that share a key, the
 * path up to the first dot of the basename ("a/000123.jpg" and
 * "a/000123.cls" are key "a/000123", extensions "jpg" and "cls"), and a
 * key's members must be adjacent, as WebDataset requires. Each sample has
 * one image (.jpg, .jpeg or .png, bytes as encoded) and one label (.cls:
 * the class index in ASCII decimal). Other members (.json, .txt, ...) are
 * passed over, as are members that are not regular files, names without a
 * dot in the basename or starting with one, and WebDataset's meta members
 * (__name__ at the top level).
 *
 * Class names: classes.txt beside the shards (in the directory of the
 * first shard), one name per line, label k naming line k (0-based); the
 * labels must then be below the line count. Without it, the class count is
 * the largest label + 1 and there are no names. `dptrain shards` writes it.
 *
 * Determinism: a lane's stream is a pure function of (the set, seed,
 * epoch, lane, lanes, shuffle buffer, shuffle); nothing else that runs
 * changes it. */
#ifndef DP_SHARDS_H
#define DP_SHARDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dp_shard_set dp_shard_set_t;
typedef struct dp_shard_lane dp_shard_lane_t;

/* The most shards one set holds, and the largest member read. */
#define DP_SHARD_MAX_SHARDS 1000000
#define DP_SHARD_MAX_MEMBER ((int64_t)1 << 30)

/* Opens a shard set and reads every shard's headers (the index pass: the
 * members' data is skipped, only the .cls labels are read) to count and
 * check the samples. `spec` is
 *   - a brace pattern, as WebDataset's braceexpand: numeric ranges
 *     "train-{000000..000099}.tar" (zero-padded to the wider end when one
 *     end has a leading zero; "{0..10..2}" steps), lists "{a,b}", several
 *     braces giving their product, left to right; a brace with neither is
 *     literal ("{x}"); a '{' with no '}' after it is DP_EINVAL;
 *   - or a directory: its *.tar files, sorted by name; where `split` is
 *     not NULL, only those whose name begins with "<split>-" (dptrain
 *     shards' "train-000000.tar"), if any do. `split` is ignored for a
 *     pattern.
 * Errors (DP_E* code, one line naming the shard and the member): no shard
 * matched, a shard missing, a shard cut mid-file (DP_ETRUNC), a key
 * without a label or without an image, two images or labels in one key,
 * a label that is not a number or not below classes.txt's count, a key's
 * members not adjacent (DP_EFORMAT), no sample at all. */
int dp_shard_set_open(dp_shard_set_t **out, const char *spec, const char *split);
/* Accepts NULL. */
void dp_shard_set_close(dp_shard_set_t *set);

/* Samples in the set, and the shards. */
int64_t dp_shard_set_samples(const dp_shard_set_t *set);
int dp_shard_set_shards(const dp_shard_set_t *set);
/* Shard s (0 <= s < shards): its path and sample count; its samples'
 * ids are first_id .. first_id + count - 1 (the set's order). */
const char *dp_shard_set_path(const dp_shard_set_t *set, int s);
int64_t dp_shard_set_shard_samples(const dp_shard_set_t *set, int s);
int64_t dp_shard_set_first_id(const dp_shard_set_t *set, int s);
/* The class count (see above), and the names (NULL without classes.txt). */
int dp_shard_set_classes(const dp_shard_set_t *set);
const char *const *dp_shard_set_class_names(const dp_shard_set_t *set);
/* How many times lanes of this set have opened a shard to read it (the
 * index pass is not counted): a rank that reads whole lanes opens only
 * its own shards. Thread-safe. */
int64_t dp_shard_set_opened(const dp_shard_set_t *set);

/* One sample as a lane emits it. The pointers stay valid until the next
 * dp_shard_lane_next or dp_shard_lane_close of its lane. */
typedef struct dp_shard_sample {
    const uint8_t *image; /* the image member's bytes, as encoded */
    size_t image_size;
    const char *member; /* the image member's name in the shard: "000123.jpg" */
    const char *shard;  /* the shard's path */
    const char *key;    /* "000123" */
    int32_t label;      /* the .cls value */
    int64_t id;         /* ordinal in the set (index pass order): the loader's sample index */
} dp_shard_sample;

/* Lane `lane` of `lanes` for epoch `epoch`: the set's shards, permuted by
 * (seed, epoch) when `shuffle`, dealt round-robin (shard j of the order to
 * lane j % lanes); the lane reads its shards in that order through a
 * shuffle buffer of `shuffle_buffer` samples (WebDataset's shuffle(B): fill
 * to B, then emit a random one and put the next sample in its place),
 * drawn from (seed, epoch, lane). shuffle false: set order, no buffer.
 * shuffle_buffer 1 emits the shards' own order. Opens nothing yet. */
typedef struct dp_shard_lane_args {
    uint64_t seed;
    int64_t epoch;
    int lane, lanes;        /* 0 <= lane < lanes */
    int64_t shuffle_buffer; /* B >= 1 */
    bool shuffle;
} dp_shard_lane_args;
int dp_shard_lane_open(dp_shard_lane_t **out, const dp_shard_set_t *set,
                       const dp_shard_lane_args *args);
/* The samples a lane will emit (from the index; the sum over lanes is
 * the set's count), without opening it. */
int64_t dp_shard_lane_samples(const dp_shard_set_t *set, const dp_shard_lane_args *args);
/* The shards lane `args->lane` reads, in its order, into shards[0..n) (n
 * at most dp_shard_set_shards); returns n. */
int dp_shard_lane_shards(const dp_shard_set_t *set, const dp_shard_lane_args *args, int *shards);
/* The next sample: 1 with *sample set, 0 at the lane's end, or a negative
 * DP_E* code (one line naming the shard and the member) when a shard no
 * longer reads as the index pass found it. */
int dp_shard_lane_next(dp_shard_lane_t *lane, dp_shard_sample *sample);
/* Accepts NULL. */
void dp_shard_lane_close(dp_shard_lane_t *lane);

/* ---- training: dataset "tar" ------------------------------------------ */

struct dp_dataset;
struct dp_transform_list;

typedef struct dp_shard_dataset_options {
    int channels;                              /* 1 or 3; 0: the first image's */
    const struct dp_transform_list *transform; /* NULL or empty: none */
    int jpeg_scale;                            /* dp_jpeg_scale: 0 auto, 1 off */
    /* N, the whole read's buffer: ceil(N / lanes) a lane (>= 1; 0: 1000) */
    int64_t shuffle_buffer;
    int lanes; /* 0: the largest L <= 8 dividing the batch and the shard count that keeps
                * 9/10 of one lane's batches, else 1 */
    /* One lane in the set's order, every sample kept (the last batch
     * short), each rank reading the whole stream for its rows: the test
     * split, whose accuracy is over all its samples. */
    bool every_sample;
} dp_shard_dataset_options;

/* The default shuffle buffer: WebDataset's examples' shuffle(1000). */
#define DP_SHARD_SHUFFLE_BUFFER 1000

/* One split of a shard set as a streamed dataset: `spec` a directory
 * (DIR/<train|test>-*.tar) or a pattern (the train split's shards; the
 * test split is then the pattern's directory's test-*.tar). Each sample is
 * its image's bytes decoded with dp_transform_decode, the transform index
 * its id (the index pass's ordinal); labels and classes from the set.
 * The order is the lanes' (docs/shards.md, "Training"): the loader asks the
 * source for it, and an epoch holds whole batches of B/L rows of each lane.
 * The shards are opened as the lanes reach them. */
int dp_shard_dataset_open(const char *spec, bool train, const dp_shard_dataset_options *opt,
                          struct dp_dataset *out);

/* ---- writing: dptrain shards ------------------------------------------ */

typedef struct dp_shard_write_options {
    int64_t shard_size; /* samples per shard (>= 1) */
    int64_t max_bytes;  /* a shard ends before it would pass this many bytes (0: no limit) */
    uint64_t seed;      /* the samples' order: dp_shards_write_order(seed) */
    /* Progress: called after each shard is written (NULL: none). */
    void (*progress)(void *user, const char *shard, int64_t samples_done, int64_t samples);
    void *user;
} dp_shard_write_options;

/* The order dp_shards_write writes n samples in: order[0..n) a
 * permutation of 0..n-1, a pure function of (seed, n). */
void dp_shards_write_order(uint64_t seed, int64_t *order, int64_t n);
/* Writes the files paths[0..n) with labels[0..n) as OUT/<prefix>-000000.tar,
 * -000001.tar, ..., in the order dp_shards_write_order(opt->seed) gives:
 * sample i's members are KEY.<its extension, lowercase> (the bytes copied,
 * not re-encoded) and KEY.cls, KEY i zero-padded to 8 digits. Each shard
 * is written to a temporary file and renamed into place when whole; on
 * error none of the shards of this call is left. *shards gets how many were written. */
int dp_shards_write(const char *out_dir, const char *prefix, const char *const *paths,
                    const int32_t *labels, int64_t n, const dp_shard_write_options *opt,
                    int *shards);
/* classes.txt in out_dir: names[0..n), one a line (atomically as above).
 * A name holding a newline is DP_EINVAL. */
int dp_shards_write_classes(const char *out_dir, const char *const *names, int n);
/* dptrain shards: the ImageFolder directory `dir` (DIR/train/CLASS/...,
 * DIR/test/CLASS/..., listed by the folder reader's rules) as
 * OUT/train-*.tar, OUT/test-*.tar (where DIR/test exists) and
 * OUT/classes.txt (the train split's classes). out_dir must be a
 * directory (made if missing) holding no shards yet. */
int dp_shards_from_folder(const char *dir, const char *out_dir, const dp_shard_write_options *opt);

#ifdef __cplusplus
}
#endif

#endif
