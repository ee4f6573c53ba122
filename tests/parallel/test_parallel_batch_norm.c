/* Data parallelism and batch norm: DataParallel's running statistics are
 * the mean of the replicas', and SyncBatchNorm over a batch split across 2
 * devices computes what one device does on the whole batch, which brings
 * trained ResNet-18 closer to one device's. */
#include "testutil.h"

#include "dp/dp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ResNet-18's running statistics after one forward in training mode on
 * images[first .. first+rows) on one device, from the init of seed 11
 * (rows 0: the init's own, 0 and 1). Into out[numel]; returns numel. */
static int64_t resnet_running_stats(const float *images, int first, int rows, float *out)
{
    dp_device_t *dev;
    assert_int_equal(dp_device_open(&dev, "cpu:0", 1), 0);
    dp_model_t *model;
    assert_int_equal(dp_model_init_builtin(&model, "resnet18", dev, 11), 0);
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
    const struct {
        int devices, first[3], rows[3];
    } cases[] = {
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
        assert_int_equal(dp_model_init_builtin(&model, "resnet18", devs[0], 11), 0);
        dp_data_parallel_t *dp;
        dp_data_parallel_options opt = {.allreduce = DP_ALLREDUCE_RING, .optimizer = {.lr = 0.1f}};
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
                worst = tu_worst_rel(worst, got[k][i], mean, fmax(fabs(mean), 1e-3),
                                     "running statistics", i);
            moved = tu_worst_diff(moved, shard[0][i], shard[1][i], "shards", i);
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
    assert_int_equal(dp_model_init_builtin(&model, "resnet18", devs[0], 12), 0);
    dp_data_parallel_t *dp;
    dp_data_parallel_options opt = {
        .allreduce = DP_ALLREDUCE_RING, .optimizer = {.lr = 0.5f}, .sync_bn = sync_bn};
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
 * BatchNorm computes over the whole batch on one: outputs and dx bit for
 * bit, and dgamma, dbeta summed over the halves. */
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
    assert_int_equal(dp_bn_sync_init(&sync, C, 2), 0);
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
            assert_int_equal(
                dp_tensor_from_host(&tx[k], devs[k], DP_F32, 4, xs, x + k * n * C * H * W), 0);
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
            assert_int_equal(
                dp_tensor_from_host(&rr, devs[k], DP_F32, 2, rs, r + k * n * C * H * W), 0);
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
            assert_int_equal(
                dp_tensor_to_host(dp_tensor_grad(tx[k]), dx[mode] + k * n * C * H * W, bytes), 0);
            assert_int_equal(dp_tensor_to_host(dp_tensor_grad(tg[k]), dg[mode][k], sizeof dg[0][0]),
                             0);
            assert_int_equal(dp_tensor_to_host(dp_tensor_grad(tb[k]), db[mode][k], sizeof db[0][0]),
                             0);
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
    /* Both take the statistics and the backward sums in double, the halves'
     * added: the same floats, so the same outputs and dx, bit for bit. */
    int differ = 0;
    for (int i = 0; i < E; i++)
        differ += memcmp(&out[1][i], &out[0][i], sizeof(float)) != 0 ||
                  memcmp(&dx[1][i], &dx[0][i], sizeof(float)) != 0;
    printf("SyncBatchNorm over 2 halves vs BatchNorm over the batch: %d of %d outputs and dx "
           "differ in any bit\n",
           differ, 2 * E);
    assert_int_equal(differ, 0);
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
    double d_sync = tu_max_diff("--sync-bn vs 1 device", synced, one, numel);
    double d_plain = tu_max_diff("no sync vs 1 device", plain, one, numel);
    double scale = tu_max_abs("1 device's weights", one, numel);
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
        cmocka_unit_test(running_stats_are_replica_mean),
        cmocka_unit_test(sync_bn_equals_whole_batch),
        cmocka_unit_test(resnet_sync_bn_closer_to_one_device),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
