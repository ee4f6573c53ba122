/* The prefetching batch loader. */
#include "testutil.h"

#include "dp/core.h"
#include "dp/data.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- loader ----------------------------------------------------------------- */

enum { ROWS = 2, COLS = 3, PIX = ROWS * COLS };

/* Sample i has pixels i * 100 + k and label i, so a batch row tells which
 * sample it came from. */
static dp_dataset make_ds(int64_t n)
{
    dp_dataset ds = {.n = n, .rows = ROWS, .cols = COLS};
    ds.images = malloc((size_t)n * PIX * sizeof(float));
    ds.labels = malloc((size_t)n * sizeof(int32_t));
    for (int64_t i = 0; i < n; i++) {
        for (int k = 0; k < PIX; k++)
            ds.images[i * PIX + k] = (float)(i * 100 + k);
        ds.labels[i] = (int32_t)i;
    }
    return ds;
}

static void free_ds(dp_dataset *ds)
{
    free(ds->images);
    free(ds->labels);
}

static void check_batch_rows(const dp_batch *b)
{
    for (int64_t r = 0; r < b->n; r++)
        for (int k = 0; k < PIX; k++)
            assert_true(b->x[r * PIX + k] == (float)(b->y[r] * 100 + k));
}

/* Runs epoch `epoch` from `first`; writes the sample ids in order to `ids`
 * and the batch sizes to `sizes`; returns the number of batches. */
static int64_t run_epoch(dp_loader_t *l, int64_t epoch, int64_t first, int32_t *ids, int64_t *sizes)
{
    assert_int_equal(dp_loader_start_epoch(l, epoch, first), 0);
    dp_batch b;
    int64_t nb = 0, pos = 0;
    int rc;
    while ((rc = dp_loader_next(l, &b)) == 1) {
        assert_int_equal(b.index, first + nb);
        check_batch_rows(&b);
        memcpy(ids + pos, b.y, (size_t)b.n * sizeof *ids);
        pos += b.n;
        if (sizes)
            sizes[nb] = b.n;
        nb++;
    }
    assert_int_equal(rc, 0);
    /* The end stays the end. */
    assert_int_equal(dp_loader_next(l, &b), 0);
    return nb;
}

static void test_loader_batches(void **state)
{
    (void)state;
    dp_dataset ds = make_ds(10);
    dp_loader_t *l;
    dp_loader_options opt = {.batch_size = 4};
    assert_int_equal(dp_loader_init(&l, &ds, &opt), 0);
    assert_int_equal(dp_loader_num_batches(l), 3);
    assert_int_equal(dp_loader_num_samples(l), 10);
    int32_t ids[10];
    int64_t sizes[3];
    assert_int_equal(run_epoch(l, 0, 0, ids, sizes), 3);
    assert_int_equal(sizes[0], 4);
    assert_int_equal(sizes[1], 4);
    assert_int_equal(sizes[2], 2);
    /* No shuffle: file order, every epoch. */
    for (int i = 0; i < 10; i++)
        assert_int_equal(ids[i], i);
    assert_int_equal(run_epoch(l, 5, 0, ids, NULL), 3);
    for (int i = 0; i < 10; i++)
        assert_int_equal(ids[i], i);
    dp_loader_close(l);

    /* Exact multiple; and a batch larger than the data. */
    opt.batch_size = 5;
    assert_int_equal(dp_loader_init(&l, &ds, &opt), 0);
    assert_int_equal(run_epoch(l, 0, 0, ids, sizes), 2);
    assert_int_equal(sizes[1], 5);
    dp_loader_close(l);
    opt.batch_size = 64;
    assert_int_equal(dp_loader_init(&l, &ds, &opt), 0);
    assert_int_equal(run_epoch(l, 0, 0, ids, sizes), 1);
    assert_int_equal(sizes[0], 10);
    dp_loader_close(l);
    free_ds(&ds);
}

static bool is_permutation(const int32_t *ids, int64_t n)
{
    bool *seen = calloc((size_t)n, 1);
    bool ok = true;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= n || seen[ids[i]])
            ok = false;
        else
            seen[ids[i]] = true;
    }
    free(seen);
    return ok;
}

static void test_loader_shuffle(void **state)
{
    (void)state;
    enum { N = 103 };
    dp_dataset ds = make_ds(N);
    dp_loader_t *l;
    dp_loader_options opt = {.batch_size = 8, .shuffle = true, .seed = 42};
    assert_int_equal(dp_loader_init(&l, &ds, &opt), 0);
    int32_t e0[N], e1[N], e1_again[N], other[N];
    assert_int_equal(run_epoch(l, 0, 0, e0, NULL), 13);
    assert_int_equal(run_epoch(l, 1, 0, e1, NULL), 13);
    assert_true(is_permutation(e0, N));
    assert_true(is_permutation(e1, N));
    assert_memory_not_equal(e0, e1, sizeof e0);
    bool in_order = true;
    for (int i = 0; i < N; i++)
        in_order = in_order && e0[i] == i;
    assert_false(in_order);
    /* A pure function of (seed, epoch): again on this loader after another
     * epoch, and on a new loader with another prefetch depth. */
    run_epoch(l, 7, 0, other, NULL);
    run_epoch(l, 1, 0, e1_again, NULL);
    assert_memory_equal(e1, e1_again, sizeof e1);
    dp_loader_close(l);

    opt.prefetch = 5;
    assert_int_equal(dp_loader_init(&l, &ds, &opt), 0);
    run_epoch(l, 1, 0, e1_again, NULL);
    assert_memory_equal(e1, e1_again, sizeof e1);
    dp_loader_close(l);

    /* Another seed, another order. */
    opt.seed = 43;
    assert_int_equal(dp_loader_init(&l, &ds, &opt), 0);
    run_epoch(l, 1, 0, other, NULL);
    assert_true(is_permutation(other, N));
    assert_memory_not_equal(e1, other, sizeof e1);
    dp_loader_close(l);
    free_ds(&ds);
}

/* The caller's order (the Python DataLoader's, drawn as PyTorch draws it):
 * the batches follow it whatever the shuffle flag, the next plain epoch is
 * the loader's own again, and an order that is not a permutation is refused
 * before any batch. */
static void test_loader_caller_order(void **state)
{
    (void)state;
    tu_quiet_log();
    enum { N = 21 };
    dp_dataset ds = make_ds(N);
    int64_t order[N];
    for (int i = 0; i < N; i++)
        order[i] = (i * 8) % N; /* 8 and 21 are coprime: each index once */
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        dp_loader_t *l;
        dp_loader_options opt = {.batch_size = 4, .shuffle = shuffle, .seed = 5, .workers = 3};
        assert_int_equal(dp_loader_init(&l, &ds, &opt), 0);
        assert_int_equal(dp_loader_start_epoch_in_order(l, 2, order), 0);
        dp_batch b;
        int64_t pos = 0;
        while (dp_loader_next(l, &b) == 1) {
            check_batch_rows(&b);
            for (int64_t r = 0; r < b.n; r++)
                assert_int_equal(b.y[r], order[pos + r]);
            pos += b.n;
        }
        assert_int_equal(pos, N);
        int32_t own[N], again[N];
        run_epoch(l, 2, 0, own, NULL);
        bool equals_caller = true;
        for (int i = 0; i < N; i++)
            equals_caller = equals_caller && own[i] == order[i];
        assert_false(equals_caller);
        run_epoch(l, 2, 0, again, NULL);
        assert_memory_equal(own, again, sizeof own);

        int64_t bad[N];
        memcpy(bad, order, sizeof bad);
        bad[5] = bad[6];
        assert_int_equal(dp_loader_start_epoch_in_order(l, 0, bad), DP_EINVAL);
        tu_assert_error_mentions("already in the order");
        bad[5] = N;
        assert_int_equal(dp_loader_start_epoch_in_order(l, 0, bad), DP_EINVAL);
        tu_assert_error_mentions("outside the dataset");
        dp_loader_close(l);
    }
    free_ds(&ds);
}

static void test_loader_limit(void **state)
{
    (void)state;
    dp_dataset ds = make_ds(10);
    dp_loader_t *l;
    dp_loader_options opt = {.batch_size = 3, .shuffle = true, .seed = 1, .limit = 7};
    assert_int_equal(dp_loader_init(&l, &ds, &opt), 0);
    assert_int_equal(dp_loader_num_samples(l), 7);
    assert_int_equal(dp_loader_num_batches(l), 3);
    int32_t ids[10];
    int64_t sizes[4];
    assert_int_equal(run_epoch(l, 2, 0, ids, sizes), 3);
    assert_int_equal(sizes[2], 1);
    assert_true(is_permutation(ids, 7));
    dp_loader_close(l);

    opt.limit = 1000;
    assert_int_equal(dp_loader_init(&l, &ds, &opt), 0);
    assert_int_equal(dp_loader_num_samples(l), 10);
    assert_int_equal(dp_loader_num_batches(l), 4);
    dp_loader_close(l);
    free_ds(&ds);
}

static void test_loader_first_batch(void **state)
{
    (void)state;
    enum { N = 50 };
    dp_dataset ds = make_ds(N);
    dp_loader_t *l;
    dp_loader_options opt = {.batch_size = 6, .shuffle = true, .seed = 9};
    assert_int_equal(dp_loader_init(&l, &ds, &opt), 0);
    int32_t full[N], rest[N];
    int64_t nb = run_epoch(l, 3, 0, full, NULL);
    assert_int_equal(nb, 9);
    for (int64_t first = 1; first <= nb; first++) {
        int64_t got = run_epoch(l, 3, first, rest, NULL);
        assert_int_equal(got, nb - first);
        int64_t left = first * 6 < N ? N - first * 6 : 0;
        if (left > 0)
            assert_memory_equal(rest, full + first * 6, (size_t)left * sizeof *rest);
    }
    tu_quiet_log();
    assert_int_equal(dp_loader_start_epoch(l, 3, nb + 1), DP_EINVAL);
    assert_int_equal(dp_loader_start_epoch(l, 3, -1), DP_EINVAL);
    assert_int_equal(dp_loader_start_epoch(l, -1, 0), DP_EINVAL);
    dp_loader_close(l);
    free_ds(&ds);
}

static void test_loader_prefetch(void **state)
{
    (void)state;
    enum { N = 97 };
    dp_dataset ds = make_ds(N);
    const int depths[] = {1, 0, 2, 3, 16};
    int32_t want[N], got[N];
    for (size_t d = 0; d < sizeof depths / sizeof depths[0]; d++) {
        dp_loader_t *l;
        dp_loader_options opt = {
            .batch_size = 4, .shuffle = true, .seed = 5, .prefetch = depths[d]};
        assert_int_equal(dp_loader_init(&l, &ds, &opt), 0);
        assert_int_equal(dp_loader_start_epoch(l, 2, 0), 0);
        dp_batch b;
        int64_t pos = 0;
        while (dp_loader_next(l, &b) == 1) {
            /* Give the thread time to run ahead: the batch in hand must stay
             * as it was handed out. */
            int32_t copy[4];
            memcpy(copy, b.y, (size_t)b.n * sizeof *copy);
            if (b.index % 8 == 0)
                usleep(2000);
            assert_memory_equal(copy, b.y, (size_t)b.n * sizeof *copy);
            check_batch_rows(&b);
            memcpy(got + pos, b.y, (size_t)b.n * sizeof *got);
            pos += b.n;
        }
        assert_int_equal(pos, N);
        if (d == 0)
            memcpy(want, got, sizeof want);
        else
            assert_memory_equal(want, got, sizeof want);
        dp_loader_close(l);
    }
    free_ds(&ds);
}

static void test_loader_restart_and_close(void **state)
{
    (void)state;
    enum { N = 200 };
    dp_dataset ds = make_ds(N);
    dp_loader_t *l;
    dp_loader_options opt = {.batch_size = 3, .shuffle = true, .seed = 11, .prefetch = 4};
    assert_int_equal(dp_loader_init(&l, &ds, &opt), 0);
    int32_t full[N], again[N];
    run_epoch(l, 4, 0, full, NULL);
    /* Abandon epochs part-way, many times, while the thread is busy. */
    dp_batch b;
    for (int rep = 0; rep < 50; rep++) {
        assert_int_equal(dp_loader_start_epoch(l, rep, 0), 0);
        for (int k = 0; k < rep % 5; k++)
            assert_int_equal(dp_loader_next(l, &b), 1);
    }
    run_epoch(l, 4, 0, again, NULL);
    assert_memory_equal(full, again, sizeof full);
    /* Close mid-epoch, with the ring full and the thread waiting. */
    assert_int_equal(dp_loader_start_epoch(l, 0, 0), 0);
    assert_int_equal(dp_loader_next(l, &b), 1);
    usleep(2000);
    dp_loader_close(l);
    /* Close right after init, and after a start without reading. */
    assert_int_equal(dp_loader_init(&l, &ds, &opt), 0);
    dp_loader_close(l);
    assert_int_equal(dp_loader_init(&l, &ds, &opt), 0);
    assert_int_equal(dp_loader_start_epoch(l, 0, 0), 0);
    dp_loader_close(l);
    dp_loader_close(NULL);
    free_ds(&ds);
}

static void test_loader_invalid(void **state)
{
    (void)state;
    tu_quiet_log();
    dp_dataset ds = make_ds(4);
    dp_loader_t *l = (dp_loader_t *)&ds;
    dp_loader_options opt = {.batch_size = 0};
    assert_int_equal(dp_loader_init(&l, &ds, &opt), DP_EINVAL);
    assert_null(l);
    tu_assert_error_mentions("batch size");
    opt.batch_size = -3;
    assert_int_equal(dp_loader_init(&l, &ds, &opt), DP_EINVAL);
    opt = (dp_loader_options){.batch_size = 2, .limit = -1};
    assert_int_equal(dp_loader_init(&l, &ds, &opt), DP_EINVAL);
    opt = (dp_loader_options){.batch_size = 2, .prefetch = -1};
    assert_int_equal(dp_loader_init(&l, &ds, &opt), DP_EINVAL);

    opt = (dp_loader_options){.batch_size = 2};
    assert_int_equal(dp_loader_init(&l, &ds, &opt), 0);
    dp_batch b;
    assert_int_equal(dp_loader_next(l, &b), DP_EINVAL);
    dp_loader_close(l);

    /* An empty data set has no batches. */
    dp_dataset empty = {0};
    assert_int_equal(dp_loader_init(&l, &empty, &opt), 0);
    assert_int_equal(dp_loader_num_batches(l), 0);
    assert_int_equal(dp_loader_start_epoch(l, 0, 0), 0);
    assert_int_equal(dp_loader_next(l, &b), 0);
    dp_loader_close(l);
    free_ds(&ds);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loader_batches),           cmocka_unit_test(test_loader_shuffle),
        cmocka_unit_test(test_loader_caller_order),      cmocka_unit_test(test_loader_limit),
        cmocka_unit_test(test_loader_first_batch),       cmocka_unit_test(test_loader_prefetch),
        cmocka_unit_test(test_loader_restart_and_close), cmocka_unit_test(test_loader_invalid),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
