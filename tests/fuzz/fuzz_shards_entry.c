/* The tar shard reader (fuzz_entry.h says what an input means): a shard
 * through the index pass (dp_shard_set_open) and, when it opens, one lane
 * read to its end, which must emit exactly the samples the index counted,
 * each id once, with labels below the class count and images no larger
 * than the shard. */
#include "fuzz_entry.h"

#include "dp/dp.h"
#include "dp/shards.h"

#include <stdlib.h>
#include <string.h>

int fuzz_shards_input(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    int64_t buffer = data[0] % 8 + 1;
    bool shuffle = data[0] & 8;
    const char *path = fz_input_file("shards", data + 1, size - 1);
    if (!path)
        return -1;
    dp_shard_set_t *set;
    fz_capture_begin();
    int rc = dp_shard_set_open(&set, path, NULL);
    fz_capture_end();
    if (rc < 0)
        return fz_check_failure("shards", "dp_shard_set_open", rc, path);
    int64_t n = dp_shard_set_samples(set);
    int classes = dp_shard_set_classes(set);
    int result = 0;
    if (n < 1 || dp_shard_set_shards(set) != 1 || classes < 1)
        result = fz_bad("shards", "opened with %lld samples in %d shards, %d classes", (long long)n,
                        dp_shard_set_shards(set), classes);
    /* Each sample is at least two 512-byte headers. */
    uint8_t *seen = result == 0 && (uint64_t)n <= size / 1024 ? calloc((size_t)n, 1) : NULL;
    if (result == 0 && !seen)
        result = fz_bad("shards", "%lld samples in a shard of %zu bytes", (long long)n, size - 1);
    dp_shard_lane_args a = {
        .seed = data[0], .lane = 0, .lanes = 1, .shuffle_buffer = buffer, .shuffle = shuffle};
    dp_shard_lane_t *lane = NULL;
    fz_capture_begin();
    if (result == 0 && dp_shard_lane_open(&lane, set, &a) < 0)
        result = fz_bad("shards", "the lane did not open: %s", fz_last_error);
    int64_t got = 0;
    dp_shard_sample s;
    while (result == 0 && (rc = dp_shard_lane_next(lane, &s)) == 1) {
        if (s.id < 0 || s.id >= n || seen[s.id]++ || s.label < 0 || s.label >= classes ||
            s.image_size > size)
            result = fz_bad("shards", "sample %lld: id %lld, label %d, %zu bytes", (long long)got,
                            (long long)s.id, (int)s.label, s.image_size);
        got++;
    }
    if (result == 0 && rc < 0)
        result = fz_bad("shards", "the lane failed after the index pass passed: %s", fz_last_error);
    else if (result == 0 && got != n)
        result = fz_bad("shards", "the lane emitted %lld samples, the index counted %lld",
                        (long long)got, (long long)n);
    fz_capture_end();
    dp_shard_lane_close(lane);
    dp_shard_set_close(set);
    free(seen);
    return result;
}
