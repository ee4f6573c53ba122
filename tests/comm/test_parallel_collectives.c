/* Data parallelism's collectives: torch.chunk sizes, scatter and gather,
 * and both allreduce algorithms (their table, bad input, and d2l's
 * rebinding bug). */
#include "testutil.h"

#include "dp/dp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* torch.arange(B).chunk(N) sizes for B = 0..40 (rows) and N = 1..8 (columns),
 * printed by PyTorch 1.13. */
static const char *const torch_chunks[41] = {
    "0 0,0 0,0,0 0,0,0,0 0,0,0,0,0 0,0,0,0,0,0 0,0,0,0,0,0,0 0,0,0,0,0,0,0,0",
    "1 1 1 1 1 1 1 1",
    "2 1,1 1,1 1,1 1,1 1,1 1,1 1,1",
    "3 2,1 1,1,1 1,1,1 1,1,1 1,1,1 1,1,1 1,1,1",
    "4 2,2 2,2 1,1,1,1 1,1,1,1 1,1,1,1 1,1,1,1 1,1,1,1",
    "5 3,2 2,2,1 2,2,1 1,1,1,1,1 1,1,1,1,1 1,1,1,1,1 1,1,1,1,1",
    "6 3,3 2,2,2 2,2,2 2,2,2 1,1,1,1,1,1 1,1,1,1,1,1 1,1,1,1,1,1",
    "7 4,3 3,3,1 2,2,2,1 2,2,2,1 2,2,2,1 1,1,1,1,1,1,1 1,1,1,1,1,1,1",
    "8 4,4 3,3,2 2,2,2,2 2,2,2,2 2,2,2,2 2,2,2,2 1,1,1,1,1,1,1,1",
    "9 5,4 3,3,3 3,3,3 2,2,2,2,1 2,2,2,2,1 2,2,2,2,1 2,2,2,2,1",
    "10 5,5 4,4,2 3,3,3,1 2,2,2,2,2 2,2,2,2,2 2,2,2,2,2 2,2,2,2,2",
    "11 6,5 4,4,3 3,3,3,2 3,3,3,2 2,2,2,2,2,1 2,2,2,2,2,1 2,2,2,2,2,1",
    "12 6,6 4,4,4 3,3,3,3 3,3,3,3 2,2,2,2,2,2 2,2,2,2,2,2 2,2,2,2,2,2",
    "13 7,6 5,5,3 4,4,4,1 3,3,3,3,1 3,3,3,3,1 2,2,2,2,2,2,1 2,2,2,2,2,2,1",
    "14 7,7 5,5,4 4,4,4,2 3,3,3,3,2 3,3,3,3,2 2,2,2,2,2,2,2 2,2,2,2,2,2,2",
    "15 8,7 5,5,5 4,4,4,3 3,3,3,3,3 3,3,3,3,3 3,3,3,3,3 2,2,2,2,2,2,2,1",
    "16 8,8 6,6,4 4,4,4,4 4,4,4,4 3,3,3,3,3,1 3,3,3,3,3,1 2,2,2,2,2,2,2,2",
    "17 9,8 6,6,5 5,5,5,2 4,4,4,4,1 3,3,3,3,3,2 3,3,3,3,3,2 3,3,3,3,3,2",
    "18 9,9 6,6,6 5,5,5,3 4,4,4,4,2 3,3,3,3,3,3 3,3,3,3,3,3 3,3,3,3,3,3",
    "19 10,9 7,7,5 5,5,5,4 4,4,4,4,3 4,4,4,4,3 3,3,3,3,3,3,1 3,3,3,3,3,3,1",
    "20 10,10 7,7,6 5,5,5,5 4,4,4,4,4 4,4,4,4,4 3,3,3,3,3,3,2 3,3,3,3,3,3,2",
    "21 11,10 7,7,7 6,6,6,3 5,5,5,5,1 4,4,4,4,4,1 3,3,3,3,3,3,3 3,3,3,3,3,3,3",
    "22 11,11 8,8,6 6,6,6,4 5,5,5,5,2 4,4,4,4,4,2 4,4,4,4,4,2 3,3,3,3,3,3,3,1",
    "23 12,11 8,8,7 6,6,6,5 5,5,5,5,3 4,4,4,4,4,3 4,4,4,4,4,3 3,3,3,3,3,3,3,2",
    "24 12,12 8,8,8 6,6,6,6 5,5,5,5,4 4,4,4,4,4,4 4,4,4,4,4,4 3,3,3,3,3,3,3,3",
    "25 13,12 9,9,7 7,7,7,4 5,5,5,5,5 5,5,5,5,5 4,4,4,4,4,4,1 4,4,4,4,4,4,1",
    "26 13,13 9,9,8 7,7,7,5 6,6,6,6,2 5,5,5,5,5,1 4,4,4,4,4,4,2 4,4,4,4,4,4,2",
    "27 14,13 9,9,9 7,7,7,6 6,6,6,6,3 5,5,5,5,5,2 4,4,4,4,4,4,3 4,4,4,4,4,4,3",
    "28 14,14 10,10,8 7,7,7,7 6,6,6,6,4 5,5,5,5,5,3 4,4,4,4,4,4,4 4,4,4,4,4,4,4",
    "29 15,14 10,10,9 8,8,8,5 6,6,6,6,5 5,5,5,5,5,4 5,5,5,5,5,4 4,4,4,4,4,4,4,1",
    "30 15,15 10,10,10 8,8,8,6 6,6,6,6,6 5,5,5,5,5,5 5,5,5,5,5,5 4,4,4,4,4,4,4,2",
    "31 16,15 11,11,9 8,8,8,7 7,7,7,7,3 6,6,6,6,6,1 5,5,5,5,5,5,1 4,4,4,4,4,4,4,3",
    "32 16,16 11,11,10 8,8,8,8 7,7,7,7,4 6,6,6,6,6,2 5,5,5,5,5,5,2 4,4,4,4,4,4,4,4",
    "33 17,16 11,11,11 9,9,9,6 7,7,7,7,5 6,6,6,6,6,3 5,5,5,5,5,5,3 5,5,5,5,5,5,3",
    "34 17,17 12,12,10 9,9,9,7 7,7,7,7,6 6,6,6,6,6,4 5,5,5,5,5,5,4 5,5,5,5,5,5,4",
    "35 18,17 12,12,11 9,9,9,8 7,7,7,7,7 6,6,6,6,6,5 5,5,5,5,5,5,5 5,5,5,5,5,5,5",
    "36 18,18 12,12,12 9,9,9,9 8,8,8,8,4 6,6,6,6,6,6 6,6,6,6,6,6 5,5,5,5,5,5,5,1",
    "37 19,18 13,13,11 10,10,10,7 8,8,8,8,5 7,7,7,7,7,2 6,6,6,6,6,6,1 5,5,5,5,5,5,5,2",
    "38 19,19 13,13,12 10,10,10,8 8,8,8,8,6 7,7,7,7,7,3 6,6,6,6,6,6,2 5,5,5,5,5,5,5,3",
    "39 20,19 13,13,13 10,10,10,9 8,8,8,8,7 7,7,7,7,7,4 6,6,6,6,6,6,3 5,5,5,5,5,5,5,4",
    "40 20,20 14,14,12 10,10,10,10 8,8,8,8,8 7,7,7,7,7,5 6,6,6,6,6,6,4 5,5,5,5,5,5,5,5",
};

static void chunk_sizes_match_torch(void **state)
{
    (void)state;
    for (int64_t B = 0; B <= 40; B++) {
        const char *p = torch_chunks[B];
        for (int N = 1; N <= 8; N++) {
            int64_t sizes[8];
            int count = dp_chunk_sizes(B, N, sizes);
            char got[64] = "";
            for (int k = 0; k < count; k++)
                snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", k ? "," : "",
                         (long long)sizes[k]);
            size_t len = strcspn(p, " ");
            if (strlen(got) != len || strncmp(got, p, len) != 0)
                fail_msg("B=%lld N=%d: dptrain %s, torch %.*s", (long long)B, N, got, (int)len, p);
            p += len + (p[len] == ' ');
        }
    }
}

/* n CPU devices ("N" would mean GPUs on a machine with N of them). */
static void scatter_gather_roundtrip(void **state)
{
    (void)state;
    dp_device_t *devs[3];
    tu_open_cpu_devices(devs, 3);
    float v[7 * 3];
    for (int i = 0; i < 21; i++)
        v[i] = (float)i;
    int64_t shape[2] = {7, 3};
    dp_tensor_t *x;
    assert_int_equal(dp_tensor_from_host(&x, devs[0], DP_F32, 2, shape, v), 0);
    assert_int_equal(dp_tensor_set_requires_grad(x, NULL), 0);
    dp_tape_t *tape;
    assert_int_equal(dp_tape_init(&tape, true), 0);
    dp_tape_begin(tape);
    dp_tensor_t *pieces[3], *back, *loss, *labels;
    int n;
    assert_int_equal(dp_scatter(pieces, &n, x, devs, 3), 0);
    assert_int_equal(n, 3); /* 3, 3, 1 */
    int64_t expect[3] = {3, 3, 1}, offset = 0;
    for (int k = 0; k < 3; k++) {
        assert_int_equal(dp_tensor_dim(pieces[k], 0), expect[k]);
        assert_ptr_equal(dp_tensor_device(pieces[k]), devs[k]);
        float got[9];
        assert_int_equal(dp_tensor_to_host(pieces[k], got, (size_t)expect[k] * 3 * sizeof(float)),
                         0);
        for (int i = 0; i < expect[k] * 3; i++)
            assert_true(got[i] == v[offset * 3 + i]);
        offset += expect[k];
    }
    assert_int_equal(dp_gather(&back, pieces, 3, devs[1]), 0);
    float got[21];
    assert_int_equal(dp_tensor_to_host(back, got, sizeof got), 0);
    assert_memory_equal(got, v, sizeof v);
    /* The gradient comes back through gather and scatter: sum cross-entropy
     * of the gathered rows, on device 1, differentiated w.r.t. x on device 0. */
    int32_t lab[7] = {0, 1, 2, 0, 1, 2, 0};
    int64_t seven = 7;
    assert_int_equal(dp_tensor_from_host(&labels, devs[1], DP_I32, 1, &seven, lab), 0);
    assert_int_equal(dp_cross_entropy(&loss, back, labels, DP_REDUCE_SUM), 0);
    dp_zero_grad(&x, 1);
    assert_int_equal(dp_backward(loss), 0);
    float g[21];
    assert_int_equal(dp_tensor_to_host(dp_tensor_grad(x), g, sizeof g), 0);
    for (int r = 0; r < 7; r++) {
        double z[3], m = 0, s = 0;
        for (int j = 0; j < 3; j++)
            z[j] = v[r * 3 + j], m = fmax(m, z[j]);
        for (int j = 0; j < 3; j++)
            s += exp(z[j] - m);
        for (int j = 0; j < 3; j++)
            tu_assert_close(g[r * 3 + j], exp(z[j] - m) / s - (j == lab[r]), 1e-5, 1e-6);
    }
    dp_tape_end(tape);
    dp_tape_close(tape);
    dp_tensor_free(labels);
    dp_tensor_free(x);
    dp_devices_close(devs, 3);
}

static void check_allreduce(int n, int64_t len, dp_allreduce_algo algo, int rounds)
{
    dp_device_t *devs[8];
    tu_open_cpu_devices(devs, n);
    dp_tensor_t *bufs[8];
    float *host = malloc((size_t)len * sizeof *host);
    for (int k = 0; k < n; k++) {
        for (int64_t i = 0; i < len; i++)
            host[i] = (float)((k + 1) * 1000 + i % 97);
        assert_int_equal(dp_tensor_from_host(&bufs[k], devs[k], DP_F32, 1, &len, host), 0);
    }
    /* Several allreduces back to back, nothing waited in between: each
     * must see the previous one's result. */
    for (int r = 0; r < rounds; r++)
        assert_int_equal(dp_allreduce_sum(bufs, n, algo), 0);
    double factor = pow(n, rounds - 1);
    for (int k = 0; k < n; k++) {
        assert_int_equal(dp_tensor_to_host(bufs[k], host, (size_t)len * sizeof *host), 0);
        for (int64_t i = 0; i < len; i++) {
            double want = factor * (1000.0 * n * (n + 1) / 2 + (double)n * (double)(i % 97));
            if (!tu_close(host[i], want, 1e-6, 0))
                fail_msg("%s n=%d len=%lld rounds=%d: device %d element %lld is %g, want %g",
                         algo == DP_ALLREDUCE_RING ? "ring" : "naive", n, (long long)len, rounds, k,
                         (long long)i, host[i], want);
        }
    }
    for (int k = 0; k < n; k++)
        dp_tensor_free(bufs[k]);
    free(host);
    dp_devices_close(devs, n);
}

static void allreduce_sums_everywhere(void **state)
{
    (void)state;
    const int64_t lens[] = {1, 2, 7, 1000, 4099};
    for (int algo = 0; algo < 2; algo++)
        for (int n = 1; n <= 5; n++)
            for (size_t l = 0; l < sizeof lens / sizeof *lens; l++)
                check_allreduce(n, lens[l], (dp_allreduce_algo)algo, 1);
    check_allreduce(4, 100000, DP_ALLREDUCE_RING, 5);
    check_allreduce(3, 100000, DP_ALLREDUCE_NAIVE, 5);
}

/* The algorithms' table: every name parses back to its algorithm, and nccl
 * over CPU devices (which have no collective library) is refused before
 * anything runs. */
static void allreduce_algorithm_table(void **state)
{
    (void)state;
    const dp_allreduce_algo all[] = {DP_ALLREDUCE_AUTO, DP_ALLREDUCE_RING, DP_ALLREDUCE_NAIVE,
                                     DP_ALLREDUCE_MPI, DP_ALLREDUCE_NCCL};
    int algo;
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        assert_int_equal(
            dp_name_parse(&dp_allreduce_algo_names, dp_allreduce_algo_name(all[i]), &algo), 0);
        assert_int_equal(algo, all[i]);
    }
    assert_int_equal(dp_name_parse(&dp_allreduce_algo_names, "tree", &algo), DP_EINVAL);
    assert_string_equal(dp_allreduce_algo_name((dp_allreduce_algo)7), "?");
    tu_quiet_log();
    dp_device_t *devs[2];
    tu_open_cpu_devices(devs, 2);
    dp_tensor_t *bufs[2];
    int64_t len = 3;
    for (int k = 0; k < 2; k++)
        assert_int_equal(dp_tensor_new(&bufs[k], devs[k], DP_F32, 1, &len), 0);
    assert_int_equal(dp_allreduce_sum(bufs, 2, DP_ALLREDUCE_NCCL), DP_ENOTSUP);
    assert_non_null(strstr(dp_last_error(), "not a GPU"));
    assert_int_equal(dp_allreduce_sum(bufs, 2, (dp_allreduce_algo)7), DP_EINVAL);
    for (int k = 0; k < 2; k++)
        dp_tensor_free(bufs[k]);
    dp_devices_close(devs, 2);
    dp_log_set(NULL, NULL);
}

/* d2l's first allreduce (seed 000) ended with `data[i] = data[0].to(...)`,
 * which rebinds the list entry: the buffer on device 1 never got the sum.
 * Every device's own buffer must hold it. */
static void allreduce_regression_d2l_rebinding(void **state)
{
    (void)state;
    for (int algo = 0; algo < 2; algo++) {
        dp_device_t *devs[2];
        tu_open_cpu_devices(devs, 2);
        dp_tensor_t *data[2];
        int64_t shape[2] = {1, 2};
        for (int i = 0; i < 2; i++) {
            float v[2] = {(float)(i + 1), (float)(i + 1)};
            assert_int_equal(dp_tensor_from_host(&data[i], devs[i], DP_F32, 2, shape, v), 0);
        }
        dp_tensor_t *seen_by_device_1 = data[1];
        assert_int_equal(dp_allreduce_sum(data, 2, (dp_allreduce_algo)algo), 0);
        assert_ptr_equal(data[1], seen_by_device_1);
        float got[2];
        assert_int_equal(dp_tensor_to_host(seen_by_device_1, got, sizeof got), 0);
        assert_true(got[0] == 3.0f && got[1] == 3.0f);
        for (int i = 0; i < 2; i++)
            dp_tensor_free(data[i]);
        dp_devices_close(devs, 2);
    }
}

static void allreduce_rejects_bad_input(void **state)
{
    (void)state;
    tu_quiet_log();
    dp_device_t *devs[2];
    tu_open_cpu_devices(devs, 2);
    dp_tensor_t *a, *b, *c;
    int64_t three = 3, four = 4;
    assert_int_equal(dp_tensor_new(&a, devs[0], DP_F32, 1, &three), 0);
    assert_int_equal(dp_tensor_new(&b, devs[1], DP_F32, 1, &four), 0);
    assert_int_equal(dp_tensor_new(&c, devs[0], DP_F32, 1, &three), 0);
    dp_tensor_t *diff[2] = {a, b}, *same[2] = {a, c};
    assert_int_equal(dp_allreduce_sum(diff, 2, DP_ALLREDUCE_RING), DP_ESHAPE);
    assert_int_equal(dp_allreduce_sum(same, 2, DP_ALLREDUCE_RING), DP_EINVAL);
    assert_non_null(strstr(dp_last_error(), "same device"));
    dp_tensor_free(a);
    dp_tensor_free(b);
    dp_tensor_free(c);
    dp_devices_close(devs, 2);
    dp_log_set(NULL, NULL);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(chunk_sizes_match_torch),
        cmocka_unit_test(scatter_gather_roundtrip),
        cmocka_unit_test(allreduce_sums_everywhere),
        cmocka_unit_test(allreduce_regression_d2l_rebinding),
        cmocka_unit_test(allreduce_rejects_bad_input),
        cmocka_unit_test(allreduce_algorithm_table),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
