/* Helpers of the test_shards*.c programs: tar shards written member by
 * member with libarchive's writer (the reader's own library), well-formed
 * or broken on purpose, and a set of samples whose bytes and labels are
 * known from their ids. */
#ifndef DP_TESTS_SHARDSUTIL_H
#define DP_TESTS_SHARDSUTIL_H

#include <stddef.h>
#include <stdint.h>

/* One member: its name and data (size bytes; size -1: strlen(data)). */
typedef struct su_member {
    const char *name;
    const char *data;
    long size;
} su_member;

/* members[0..n) as the tar file `path`; fails the test if it cannot. */
void su_write_tar(const char *path, const su_member *members, int n);
/* Sample `id`'s image bytes (su_image_size(id) bytes, made from the id)
 * and label (id % 5). */
size_t su_image_size(int64_t id);
void su_image(int64_t id, uint8_t *out);
int32_t su_label(int64_t id);
/* dir/shard-000000.tar ... with counts[s] samples each, ids in order,
 * members KEY.jpg (su_image) and KEY.cls (su_label). */
void su_write_set(const char *dir, const int *counts, int nshards);
/* The file's first `keep` bytes kept, the rest cut off. */
void su_truncate(const char *path, long keep);

#endif
