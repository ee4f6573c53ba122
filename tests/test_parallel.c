/* Data parallelism: torch.chunk sizes, scatter and gather, both allreduce
 * algorithms, and LeNet trained on 1, 2 and 3 devices to the same weights. */
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
            if (fabs(host[i] - want) > 1e-6 * want)
                fail_msg("%s n=%d len=%lld rounds=%d: device %d element %lld is %g, want %g",
                         algo == DP_ALLREDUCE_RING ? "ring" : "naive", n, (long long)len, rounds,
                         k, (long long)i, host[i], want);
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
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        assert_int_equal(dp_allreduce_algo_parse(dp_allreduce_algo_name(all[i])), all[i]);
    assert_int_equal(dp_allreduce_algo_parse("tree"), -2);
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

/* ---- LeNet on 1, 2 and 3 devices ------------------------------------------ */

enum { STEPS = 20, BATCH = 64 };

/* Trains `STEPS` steps of LeNet with DataParallel over n devices on the
 * first STEPS * BATCH training images in file order; returns replica 0's
 * parameters and checks that every replica holds the same ones. */
static float *train_lenet(const dp_dataset *ds, int n, dp_allreduce_algo algo, int64_t *numel)
{
    dp_device_t *devs[3];
    tu_open_cpu_devices(devs, n);
    dp_model_t *model;
    assert_int_equal(dp_model_create(&model, "lenet", devs[0], 7), 0);
    dp_data_parallel_t *dp;
    dp_data_parallel_options opt = {.allreduce = algo, .sgd = {.lr = 0.2f, .momentum = 0.5f}};
    assert_int_equal(dp_data_parallel_init(&dp, model, devs, n, &opt), 0);
    dp_tape_t *tape;
    assert_int_equal(dp_tape_init(&tape, true), 0);
    for (int s = 0; s < STEPS; s++) {
        tu_data_parallel_step(dp, tape, devs[0], ds->images + s * BATCH * 784,
                              ds->labels + s * BATCH, BATCH);
    }
    float *p0 = tu_replica_params(dp, model, n, numel);
    dp_tape_close(tape);
    dp_data_parallel_close(dp);
    dp_model_close(model);
    dp_devices_close(devs, n);
    return p0;
}

static void lenet_n_devices_equals_one(void **state)
{
    (void)state;
    if (!tu_have_fashion_mnist()) {
        tu_skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
    }
    dp_dataset ds;
    assert_int_equal(dp_fashion_mnist_load(NULL, true, &ds), 0);
    int64_t numel;
    float *one = train_lenet(&ds, 1, DP_ALLREDUCE_RING, &numel);
    float *start = tu_lenet_initial_params(7, numel);
    double moved = 0, scale = 0;
    for (int64_t i = 0; i < numel; i++) {
        moved = fmax(moved, fabs(one[i] - start[i]));
        scale = fmax(scale, fabs(one[i]));
    }
    printf("1 device: max |param| %.4f, max change over %d steps %.4f\n", scale, STEPS, moved);
    assert_true(moved > 1e-2);
    for (int algo = 0; algo < 2; algo++) {
        for (int n = 2; n <= 3; n++) {
            float *many = train_lenet(&ds, n, (dp_allreduce_algo)algo, &numel);
            double worst = 0;
            for (int64_t i = 0; i < numel; i++)
                worst = fmax(worst, fabs(many[i] - one[i]) / scale);
            printf("%d devices, %s allreduce: max |difference| / max |param| = %.2e\n", n,
                   algo == DP_ALLREDUCE_RING ? "ring" : "naive", worst);
            assert_true(worst <= 1e-5);
            free(many);
        }
    }
    free(start);
    free(one);
    dp_dataset_close(&ds);
}

/* ResNet-18 in eval mode (running statistics) gives the same logits on 2
 * devices as on 1; after a training step on 2 devices the replicas' running
 * statistics are identical (their average). */
static void resnet_two_devices(void **state)
{
    (void)state;
    enum { N = 6 };
    static float images[N * 784];
    int32_t labels[N] = {0, 1, 2, 3, 4, 5};
    dp_rng rng;
    dp_rng_init(&rng, 3, 0);
    for (int i = 0; i < N * 784; i++)
        images[i] = dp_rng_uniform(&rng);
    float logits[2][N * 10];
    for (int n = 1; n <= 2; n++) {
        dp_device_t *devs[2];
        tu_open_cpu_devices(devs, n);
        dp_model_t *model;
        assert_int_equal(dp_model_create(&model, "resnet18", devs[0], 11), 0);
        dp_data_parallel_t *dp;
        dp_data_parallel_options opt = {.allreduce = DP_ALLREDUCE_RING, .sgd = {.lr = 0.1f}};
        assert_int_equal(dp_data_parallel_init(&dp, model, devs, n, &opt), 0);
        dp_tape_t *tape;
        assert_int_equal(dp_tape_init(&tape, true), 0);
        int64_t xs[4] = {N, 1, 28, 28}, ys = N;
        dp_tensor_t *x, *y, *out, *loss;
        assert_int_equal(dp_tensor_from_host(&x, devs[0], DP_F32, 4, xs, images), 0);
        assert_int_equal(dp_tensor_from_host(&y, devs[0], DP_I32, 1, &ys, labels), 0);
        dp_tape_begin(tape);
        assert_int_equal(dp_data_parallel_forward(dp, x, false, &out), 0);
        assert_int_equal(dp_tensor_to_host(out, logits[n - 1], sizeof logits[0]), 0);
        dp_tape_end(tape);
        dp_tape_reset(tape);
        /* One training step: batch statistics per replica, then the
         * running statistics averaged over the replicas. */
        dp_tape_begin(tape);
        assert_int_equal(dp_data_parallel_forward(dp, x, true, &out), 0);
        assert_int_equal(dp_cross_entropy(&loss, out, y, DP_REDUCE_SUM), 0);
        dp_data_parallel_zero_grad(dp);
        assert_int_equal(dp_backward(loss), 0);
        assert_int_equal(dp_data_parallel_step(dp, 1.0f / N), 0);
        dp_tape_end(tape);
        dp_tape_reset(tape);
        if (n == 2) {
            dp_params_t *b0 = dp_model_buffers(dp_data_parallel_replica(dp, 0));
            dp_params_t *b1 = dp_model_buffers(dp_data_parallel_replica(dp, 1));
            int64_t numel = dp_params_numel(b0);
            float *r0 = malloc((size_t)numel * sizeof *r0), *r1 = malloc((size_t)numel * sizeof *r1);
            assert_int_equal(dp_params_get_all(b0, r0), 0);
            assert_int_equal(dp_params_get_all(b1, r1), 0);
            assert_memory_equal(r0, r1, (size_t)numel * sizeof *r0);
            /* running_mean moved from 0 somewhere: the step did update it */
            int moved = 0;
            for (int64_t i = 0; i < numel; i++)
                moved |= r0[i] != 0.0f && r0[i] != 1.0f;
            assert_true(moved);
            free(r0);
            free(r1);
        }
        dp_tensor_free(x);
        dp_tensor_free(y);
        dp_tape_close(tape);
        dp_data_parallel_close(dp);
        dp_model_close(model);
        dp_devices_close(devs, n);
    }
    double worst = 0, scale = 0;
    for (int i = 0; i < N * 10; i++) {
        worst = fmax(worst, fabs(logits[0][i] - logits[1][i]));
        scale = fmax(scale, fabs(logits[0][i]));
    }
    printf("ResNet-18 eval logits, 2 devices vs 1: max |difference| %.3g (max |logit| %.3g)\n",
           worst, scale);
    assert_true(worst <= 1e-5 * fmax(scale, 1e-3));
}

/* ResNet-18's running statistics after one forward in training mode on
 * images[first .. first+rows) on one device, from the init of seed 11
 * (rows 0: the init's own, 0 and 1). Into out[numel]; returns numel. */
static int64_t resnet_running_stats(const float *images, int first, int rows, float *out)
{
    dp_device_t *dev;
    assert_int_equal(dp_device_open(&dev, "cpu:0", 1), 0);
    dp_model_t *model;
    assert_int_equal(dp_model_create(&model, "resnet18", dev, 11), 0);
    if (rows > 0) {
        dp_tape_t *tape;
        assert_int_equal(dp_tape_init(&tape, true), 0);
        int64_t xs[4] = {rows, 1, 28, 28};
        dp_tensor_t *x, *logits;
        assert_int_equal(dp_tensor_from_host(&x, dev, DP_F32, 4, xs, images + first * 784), 0);
        dp_tape_begin(tape);
        assert_int_equal(dp_model_forward(model, x, true, &logits), 0);
        dp_tape_end(tape);
        dp_tape_reset(tape);
        dp_tape_close(tape);
        dp_tensor_free(x);
    }
    int64_t numel = dp_params_numel(dp_model_buffers(model));
    assert_int_equal(dp_params_get_all(dp_model_buffers(model), out), 0);
    dp_model_close(model);
    dp_device_close(dev);
    return numel;
}

/* DataParallel's running statistics are the mean of what each replica's
 * shard alone gives (one device run per shard here), and a replica that got
 * no rows contributes the statistics it held before the step: 4 images on 3
 * devices are chunked 2, 2 and none (torch.chunk), so the mean is
 * (shard 1 + shard 2 + unchanged) / 3. */
static void running_stats_are_replica_mean(void **state)
{
    (void)state;
    enum { N = 4, MAXBUF = 1 << 16 };
    static float images[N * 784];
    int32_t labels[N] = {0, 1, 2, 3};
    dp_rng rng;
    dp_rng_init(&rng, 5, 0);
    for (int i = 0; i < N * 784; i++)
        images[i] = dp_rng_uniform(&rng);
    static float shard[3][MAXBUF], got[3][MAXBUF];
    const struct { int devices, first[3], rows[3]; } cases[] = {
        {2, {0, 2, 0}, {2, 2, 0}},
        {3, {0, 2, 0}, {2, 2, 0}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int n = cases[c].devices;
        int64_t numel = 0;
        for (int k = 0; k < n; k++)
            numel = resnet_running_stats(images, cases[c].first[k], cases[c].rows[k], shard[k]);
        assert_true(numel <= MAXBUF);
        dp_device_t *devs[3];
        tu_open_cpu_devices(devs, n);
        dp_model_t *model;
        assert_int_equal(dp_model_create(&model, "resnet18", devs[0], 11), 0);
        dp_data_parallel_t *dp;
        dp_data_parallel_options opt = {.allreduce = DP_ALLREDUCE_RING, .sgd = {.lr = 0.1f}};
        assert_int_equal(dp_data_parallel_init(&dp, model, devs, n, &opt), 0);
        dp_tape_t *tape;
        assert_int_equal(dp_tape_init(&tape, true), 0);
        tu_data_parallel_step(dp, tape, devs[0], images, labels, N);
        for (int k = 0; k < n; k++)
            assert_int_equal(
                dp_params_get_all(dp_model_buffers(dp_data_parallel_replica(dp, k)), got[k]), 0);
        double worst = 0, moved = 0;
        for (int64_t i = 0; i < numel; i++) {
            double mean = 0;
            for (int k = 0; k < n; k++)
                mean += shard[k][i];
            mean /= n;
            for (int k = 0; k < n; k++)
                worst = fmax(worst, fabs(got[k][i] - mean) / fmax(fabs(mean), 1e-3));
            moved = fmax(moved, fabs(shard[0][i] - shard[1][i]));
        }
        printf("%d devices, shards of %d, %d and %d rows: running statistics vs the mean of the "
               "shards' own: max relative difference %.3g (shards differ by up to %.3g)\n",
               n, cases[c].rows[0], cases[c].rows[1], cases[c].rows[2], worst, moved);
        assert_true(moved > 1e-3); /* the shards' statistics differ: the mean is not trivial */
        assert_true(worst <= 1e-5);
        dp_tape_close(tape);
        dp_data_parallel_close(dp);
        dp_model_close(model);
        dp_devices_close(devs, n);
    }
}

/* With SyncBatchNorm, ResNet-18 trained on 2 devices matches 1 device:
 * the batch statistics are those of the whole batch. Without it they are
 * each shard's and the weights differ. */
static float *train_resnet(int n, bool sync_bn, int64_t *numel)
{
    enum { N = 8, RESNET_STEPS = 2 };
    static float images[N * 784];
    int32_t labels[N] = {0, 1, 2, 3, 4, 5, 6, 7};
    dp_rng rng;
    dp_rng_init(&rng, 4, 0);
    for (int i = 0; i < N * 784; i++)
        images[i] = dp_rng_uniform(&rng);
    dp_device_t *devs[2];
    tu_open_cpu_devices(devs, n);
    dp_model_t *model;
    assert_int_equal(dp_model_create(&model, "resnet18", devs[0], 12), 0);
    dp_data_parallel_t *dp;
    dp_data_parallel_options opt = {
        .allreduce = DP_ALLREDUCE_RING, .sgd = {.lr = 0.5f}, .sync_bn = sync_bn};
    assert_int_equal(dp_data_parallel_init(&dp, model, devs, n, &opt), 0);
    dp_tape_t *tape;
    assert_int_equal(dp_tape_init(&tape, true), 0);
    int64_t xs[4] = {N, 1, 28, 28}, ys = N;
    dp_tensor_t *x, *y, *out, *loss;
    assert_int_equal(dp_tensor_from_host(&x, devs[0], DP_F32, 4, xs, images), 0);
    assert_int_equal(dp_tensor_from_host(&y, devs[0], DP_I32, 1, &ys, labels), 0);
    for (int s = 0; s < RESNET_STEPS; s++) {
        dp_tape_begin(tape);
        assert_int_equal(dp_data_parallel_forward(dp, x, true, &out), 0);
        assert_int_equal(dp_cross_entropy(&loss, out, y, DP_REDUCE_SUM), 0);
        dp_data_parallel_zero_grad(dp);
        assert_int_equal(dp_backward(loss), 0);
        assert_int_equal(dp_data_parallel_step(dp, 1.0f / N), 0);
        dp_tape_end(tape);
        dp_tape_reset(tape);
    }
    *numel = dp_params_numel(dp_model_params(model));
    int64_t nb = dp_params_numel(dp_model_buffers(model));
    float *p = malloc((size_t)(*numel + nb) * sizeof *p);
    assert_int_equal(dp_params_get_all(dp_model_params(model), p), 0);
    assert_int_equal(dp_params_get_all(dp_model_buffers(model), p + *numel), 0);
    *numel += nb;
    dp_tensor_free(x);
    dp_tensor_free(y);
    dp_tape_close(tape);
    dp_data_parallel_close(dp);
    dp_model_close(model);
    dp_devices_close(devs, n);
    return p;
}

/* SyncBatchNorm over two halves of a batch on two devices computes what
 * BatchNorm computes over the whole batch on one: outputs, dx, and dgamma,
 * dbeta summed over the halves. */
static void sync_bn_equals_whole_batch(void **state)
{
    (void)state;
    enum { N = 4, C = 3, H = 5, W = 5, E = N * C * H * W };
    static float x[E], r[E], out[2][E], dx[2][E];
    float dg[2][2][C] = {{{0}}}, db[2][2][C] = {{{0}}};
    dp_rng rng;
    dp_rng_init(&rng, 1, 0);
    for (int i = 0; i < E; i++) {
        x[i] = dp_rng_normal(&rng) + 2.0f;
        r[i] = dp_rng_normal(&rng);
    }
    float gamma[C] = {1.5f, 0.7f, 1.1f}, beta[C] = {0.1f, -0.2f, 0.3f}, zero[C] = {0},
          one[C] = {1, 1, 1};
    dp_device_t *devs[2];
    tu_open_cpu_devices(devs, 2);
    dp_bn_sync_t *sync;
    assert_int_equal(dp_bn_sync_create(&sync, C, 2), 0);
    float running[2][2][2 * C];
    for (int mode = 0; mode < 2; mode++) {
        int parts = mode + 1, n = N / parts;
        dp_tensor_t *tx[2], *tg[2], *tb[2], *rm[2], *rv[2], *y[2], *loss[2], *proj[2];
        dp_tape_t *tape;
        assert_int_equal(dp_tape_init(&tape, true), 0);
        dp_tape_begin(tape);
        /* Every part's forward is issued before anything is read: a replica
         * waits in the exchange until all have joined. */
        for (int k = 0; k < parts; k++) {
            int64_t xs[4] = {n, C, H, W}, cs = C, flat[2] = {1, (int64_t)n * C * H * W},
                    rs[2] = {(int64_t)n * C * H * W, 1}, one_elem = 1;
            dp_tensor_t *yf, *rr, *l;
            assert_int_equal(dp_tensor_from_host(&tx[k], devs[k], DP_F32, 4, xs, x + k * n * C * H * W), 0);
            assert_int_equal(dp_tensor_from_host(&tg[k], devs[k], DP_F32, 1, &cs, gamma), 0);
            assert_int_equal(dp_tensor_from_host(&tb[k], devs[k], DP_F32, 1, &cs, beta), 0);
            assert_int_equal(dp_tensor_from_host(&rm[k], devs[k], DP_F32, 1, &cs, zero), 0);
            assert_int_equal(dp_tensor_from_host(&rv[k], devs[k], DP_F32, 1, &cs, one), 0);
            dp_tensor_t *ps[3] = {tx[k], tg[k], tb[k]};
            for (int j = 0; j < 3; j++)
                assert_int_equal(dp_tensor_set_requires_grad(ps[j], NULL), 0);
            dp_batch_norm_params p = {.training = true, .momentum = 0.1f, .eps = 1e-5f};
            if (parts == 2) {
                p.sync = sync;
                p.rank = k;
                p.ranks = 2;
            }
            assert_int_equal(dp_batch_norm2d(&y[k], tx[k], tg[k], tb[k], rm[k], rv[k], &p), 0);
            assert_int_equal(dp_reshape(&yf, y[k], 2, flat), 0);
            assert_int_equal(dp_tensor_from_host(&rr, devs[k], DP_F32, 2, rs, r + k * n * C * H * W), 0);
            assert_int_equal(dp_linear(&l, yf, rr, NULL, DP_WEIGHT_IN_OUT), 0);
            assert_int_equal(dp_reshape(&loss[k], l, 1, &one_elem), 0);
            dp_zero_grad(ps, 3);
            proj[k] = rr;
        }
        for (int k = 0; k < parts; k++)
            assert_int_equal(dp_backward(loss[k]), 0);
        for (int k = 0; k < parts; k++) {
            size_t bytes = (size_t)n * C * H * W * sizeof(float);
            assert_int_equal(dp_tensor_to_host(y[k], out[mode] + k * n * C * H * W, bytes), 0);
            assert_int_equal(dp_tensor_to_host(dp_tensor_grad(tx[k]), dx[mode] + k * n * C * H * W, bytes), 0);
            assert_int_equal(dp_tensor_to_host(dp_tensor_grad(tg[k]), dg[mode][k], sizeof dg[0][0]), 0);
            assert_int_equal(dp_tensor_to_host(dp_tensor_grad(tb[k]), db[mode][k], sizeof db[0][0]), 0);
            assert_int_equal(dp_tensor_to_host(rm[k], running[mode][k], C * sizeof(float)), 0);
            assert_int_equal(dp_tensor_to_host(rv[k], running[mode][k] + C, C * sizeof(float)), 0);
        }
        dp_tape_end(tape);
        dp_tape_close(tape);
        for (int k = 0; k < parts; k++) {
            dp_tensor_free(tx[k]);
            dp_tensor_free(tg[k]);
            dp_tensor_free(tb[k]);
            dp_tensor_free(rm[k]);
            dp_tensor_free(rv[k]);
            dp_tensor_free(proj[k]);
        }
    }
    for (int i = 0; i < E; i++) {
        tu_assert_close(out[1][i], out[0][i], 1e-5, 1e-5);
        tu_assert_close(dx[1][i], dx[0][i], 1e-4, 1e-5);
    }
    for (int c = 0; c < C; c++) {
        tu_assert_close(dg[1][0][c] + dg[1][1][c], dg[0][0][c], 1e-5, 1e-5);
        tu_assert_close(db[1][0][c] + db[1][1][c], db[0][0][c], 1e-5, 1e-5);
        /* both replicas hold the whole batch's running statistics */
        for (int k = 0; k < 2; k++) {
            tu_assert_close(running[1][k][c], running[0][0][c], 1e-5, 1e-6);
            tu_assert_close(running[1][k][C + c], running[0][0][C + c], 1e-5, 1e-6);
        }
    }
    dp_bn_sync_close(sync);
    dp_devices_close(devs, 2);
}

/* Trained ResNet-18 (whose seed init leaves batch norm badly conditioned:
 * conv biases dominate tiny activations, so float noise grows through 17
 * layers) ends much nearer 1 device with --sync-bn than without. */
static void resnet_sync_bn_closer_to_one_device(void **state)
{
    (void)state;
    int64_t numel;
    float *one = train_resnet(1, false, &numel);
    float *synced = train_resnet(2, true, &numel);
    float *plain = train_resnet(2, false, &numel);
    double d_sync = 0, d_plain = 0, scale = 0;
    for (int64_t i = 0; i < numel; i++) {
        assert_true(isfinite(synced[i]));
        d_sync = fmax(d_sync, fabs(synced[i] - one[i]));
        d_plain = fmax(d_plain, fabs(plain[i] - one[i]));
        scale = fmax(scale, fabs(one[i]));
    }
    printf("ResNet-18, 2 steps on 2 devices vs 1: with --sync-bn max |difference| / max |value| "
           "%.2e, without %.2e\n",
           d_sync / scale, d_plain / scale);
    assert_true(d_plain > 10 * d_sync);
    free(one);
    free(synced);
    free(plain);
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
        cmocka_unit_test(lenet_n_devices_equals_one),
        cmocka_unit_test(resnet_two_devices),
        cmocka_unit_test(running_stats_are_replica_mean),
        cmocka_unit_test(sync_bn_equals_whole_batch),
        cmocka_unit_test(resnet_sync_bn_closer_to_one_device),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
