/* Lanes of a shard set (dp/shards.h): every sample exactly once per epoch
 * across the lanes, with its own bytes and label; the counts known before
 * reading; a shuffle buffer of 1 giving the shards' order; the same stream
 * for the same arguments whatever else runs at the same time; each lane
 * opening only its own shards. */
#include "shardsutil.h"
#include "testutil.h"

#include "dp/dp.h"
#include "dp/shards.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* 7 shards of 5, 3, 8, 1, 6, 4 and 2 samples: 29. */
static const int counts[] = {5, 3, 8, 1, 6, 4, 2};
#define TOTAL 29

static dp_shard_set_t *open_set(void)
{
    const char *dir = tu_tmp_path("set");
    mkdir(dir, 0755);
    su_write_set(dir, counts, (int)COUNTOF(counts));
    dp_shard_set_t *set;
    assert_int_equal(dp_shard_set_open(&set, dir, NULL), 0);
    assert_int_equal(dp_shard_set_samples(set), TOTAL);
    return set;
}

/* A lane's whole stream: ids[0..n) and a checksum of each sample's bytes;
 * every sample's bytes and label checked against its id. */
typedef struct stream {
    int64_t ids[TOTAL];
    int n;
} stream;

static void read_lane(const dp_shard_set_t *set, const dp_shard_lane_args *a, stream *out)
{
    dp_shard_lane_t *lane;
    assert_int_equal(dp_shard_lane_open(&lane, set, a), 0);
    out->n = 0;
    dp_shard_sample s;
    int rc;
    uint8_t want[1024];
    while ((rc = dp_shard_lane_next(lane, &s)) == 1) {
        assert_true(out->n < TOTAL);
        assert_true(s.id >= 0 && s.id < TOTAL);
        su_image(s.id, want);
        assert_int_equal(s.image_size, su_image_size(s.id));
        assert_memory_equal(s.image, want, s.image_size);
        assert_int_equal(s.label, su_label(s.id));
        char key[64];
        snprintf(key, sizeof key, "%06lld", (long long)s.id);
        assert_non_null(strstr(s.key, key));
        assert_non_null(strstr(s.member, ".jpg"));
        out->ids[out->n++] = s.id;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(dp_shard_lane_next(lane, &s), 0); /* stays at its end */
    dp_shard_lane_close(lane);
}

/* Every sample once per epoch across 3 lanes, each lane emitting the count
 * announced; and the epochs' streams differ. */
static void lanes_cover_every_sample_once(void **state)
{
    (void)state;
    dp_shard_set_t *set = open_set();
    stream first[3];
    for (int64_t epoch = 0; epoch < 3; epoch++) {
        int seen[TOTAL] = {0};
        for (int l = 0; l < 3; l++) {
            dp_shard_lane_args a = {.seed = 42,
                                    .epoch = epoch,
                                    .lane = l,
                                    .lanes = 3,
                                    .shuffle_buffer = 4,
                                    .shuffle = true};
            stream st;
            read_lane(set, &a, &st);
            assert_int_equal(st.n, dp_shard_lane_samples(set, &a));
            for (int i = 0; i < st.n; i++)
                seen[st.ids[i]]++;
            if (epoch == 0)
                first[l] = st;
            else if (l == 0)
                assert_false(st.n == first[0].n &&
                             memcmp(st.ids, first[0].ids, (size_t)st.n * sizeof *st.ids) == 0);
        }
        for (int i = 0; i < TOTAL; i++)
            assert_int_equal(seen[i], 1);
    }
    dp_shard_set_close(set);
}

/* B = 1: the lane's shards in dp_shard_lane_shards' order, each one's
 * samples in its order. B = 8: not that order (the buffer shuffles). */
static void buffer_of_one_is_shard_order(void **state)
{
    (void)state;
    dp_shard_set_t *set = open_set();
    for (int l = 0; l < 2; l++) {
        dp_shard_lane_args a = {
            .seed = 7, .epoch = 1, .lane = l, .lanes = 2, .shuffle_buffer = 1, .shuffle = true};
        int shards[COUNTOF(counts)];
        int m = dp_shard_lane_shards(set, &a, shards);
        int64_t want[TOTAL];
        int n = 0;
        for (int i = 0; i < m; i++)
            for (int64_t j = 0; j < dp_shard_set_shard_samples(set, shards[i]); j++)
                want[n++] = dp_shard_set_first_id(set, shards[i]) + j;
        stream st;
        read_lane(set, &a, &st);
        assert_int_equal(st.n, n);
        assert_memory_equal(st.ids, want, (size_t)n * sizeof *want);
        a.shuffle_buffer = 8;
        read_lane(set, &a, &st);
        assert_int_equal(st.n, n);
        assert_memory_not_equal(st.ids, want, (size_t)n * sizeof *want);
    }
    /* shuffle off: one lane reads the set in order */
    dp_shard_lane_args a = {.seed = 7, .lane = 0, .lanes = 1, .shuffle_buffer = 8};
    stream st;
    read_lane(set, &a, &st);
    for (int i = 0; i < TOTAL; i++)
        assert_int_equal(st.ids[i], i);
    dp_shard_set_close(set);
}

typedef struct lane_job {
    const dp_shard_set_t *set;
    dp_shard_lane_args args;
    stream out;
} lane_job;

static void *lane_thread(void *p)
{
    lane_job *j = p;
    read_lane(j->set, &j->args, &j->out);
    return NULL;
}

/* The same arguments give the same stream: read alone, again, and while
 * the other lanes (and a copy of this one) read on other threads. */
static void streams_are_deterministic(void **state)
{
    (void)state;
    dp_shard_set_t *set = open_set();
    dp_shard_lane_args a = {
        .seed = 3, .epoch = 2, .lane = 1, .lanes = 3, .shuffle_buffer = 5, .shuffle = true};
    stream alone, again;
    read_lane(set, &a, &alone);
    read_lane(set, &a, &again);
    assert_int_equal(alone.n, again.n);
    assert_memory_equal(alone.ids, again.ids, (size_t)alone.n * sizeof *alone.ids);
    lane_job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (lane_job){.set = set, .args = a};
        jobs[i].args.lane = i % 3;
        assert_int_equal(pthread_create(&th[i], NULL, lane_thread, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(jobs[1].out.n, alone.n);
    assert_memory_equal(jobs[1].out.ids, alone.ids, (size_t)alone.n * sizeof *alone.ids);
    assert_int_equal(jobs[0].out.n, jobs[3].out.n);
    assert_memory_equal(jobs[0].out.ids, jobs[3].out.ids, (size_t)jobs[0].out.n * sizeof(int64_t));
    /* another seed: another stream */
    a.seed = 4;
    read_lane(set, &a, &again);
    assert_false(again.n == alone.n &&
                 memcmp(again.ids, alone.ids, (size_t)alone.n * sizeof *alone.ids) == 0);
    dp_shard_set_close(set);
}

/* Each lane opens its own shards and no other: the set's counter grows by
 * the lane's shard count. */
static void lanes_open_only_their_shards(void **state)
{
    (void)state;
    dp_shard_set_t *set = open_set();
    assert_int_equal(dp_shard_set_opened(set), 0);
    int64_t total = 0;
    for (int l = 0; l < 4; l++) {
        dp_shard_lane_args a = {
            .seed = 9, .epoch = 0, .lane = l, .lanes = 4, .shuffle_buffer = 3, .shuffle = true};
        int shards[COUNTOF(counts)];
        int m = dp_shard_lane_shards(set, &a, shards);
        assert_int_equal(m, l < 3 ? 2 : 1); /* 7 shards dealt to 4 lanes */
        int64_t before = dp_shard_set_opened(set);
        stream st;
        read_lane(set, &a, &st);
        assert_int_equal(dp_shard_set_opened(set) - before, m);
        total += m;
    }
    assert_int_equal(dp_shard_set_opened(set), total);
    assert_int_equal(total, (int64_t)COUNTOF(counts));
    /* a lane beyond the shards emits nothing and opens nothing */
    dp_shard_lane_args a = {.seed = 9, .lane = 9, .lanes = 10, .shuffle_buffer = 3};
    stream st;
    read_lane(set, &a, &st);
    assert_int_equal(st.n, 0);
    assert_int_equal(dp_shard_set_opened(set), total);
    dp_shard_set_close(set);
}

/* A shard that changes after the index pass: the lane says which. */
static void shard_changed_after_index(void **state)
{
    (void)state;
    dp_shard_set_t *set = open_set();
    char path[1100];
    snprintf(path, sizeof path, "%s/shard-000002.tar", tu_tmp_path("set"));
    su_truncate(path, 2700); /* inside 000009.jpg, the shard's second image */
    dp_shard_lane_args a = {.seed = 1, .lane = 0, .lanes = 1, .shuffle_buffer = 1};
    dp_shard_lane_t *lane;
    assert_int_equal(dp_shard_lane_open(&lane, set, &a), 0);
    tu_quiet_log();
    dp_shard_sample s;
    int rc, n = 0;
    while ((rc = dp_shard_lane_next(lane, &s)) == 1)
        n++;
    assert_int_equal(rc, DP_ETRUNC);
    assert_int_equal(n, 5 + 3); /* the error comes as the sample before the cut is due */
    tu_assert_error_mentions("shard-000002.tar: member 's2/000009.jpg'");
    assert_null(strchr(dp_last_error(), '\n'));
    dp_shard_lane_close(lane);
    dp_shard_lane_args bad = {.lane = 2, .lanes = 2, .shuffle_buffer = 1};
    assert_int_equal(dp_shard_lane_open(&lane, set, &bad), DP_EINVAL);
    dp_shard_set_close(set);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(lanes_cover_every_sample_once, tu_setup_tmp,
                                        tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(buffer_of_one_is_shard_order, tu_setup_tmp,
                                        tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(streams_are_deterministic, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(lanes_open_only_their_shards, tu_setup_tmp,
                                        tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(shard_changed_after_index, tu_setup_tmp, tu_teardown_tmp),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
