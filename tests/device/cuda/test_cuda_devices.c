/* The CUDA device among others: copies between CPU and GPU devices, the
 * allreduce algorithms over GPUs, LeNet trained 20 steps on cuda:0 and on
 * cpu:0, and two logical devices on one GPU against one device.
 *
 * Without a GPU (a CPU-only build, or no GPU visible to the CUDA runtime)
 * every test says so on stdout and is skipped. */
#include "cudautil.h"

#include "dp/dp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- copies and collectives ---------------------------------------------------- */

/* cpu -> cuda -> cuda (another logical device) -> cpu through dp_broadcast,
 * which goes through dp__copy_between. */
static void copies_between_cpu_and_gpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    dp_device_t *cpu, *g0, *g1;
    assert_int_equal(dp_device_open(&cpu, "cpu:0", 1), 0);
    assert_int_equal(dp_device_open(&g0, "cuda:0", 0), 0);
    assert_int_equal(dp_device_open(&g1, dp_cuda_device_count() > 1 ? "cuda:1" : "cuda:0", 0), 0);
    enum { N = 300001 };
    float *v = malloc(N * sizeof *v), *back = malloc(N * sizeof *back);
    fill_random(v, N, 5);
    int64_t n = N;
    dp_tensor_t *a, *b, *c, *d;
    assert_int_equal(dp_tensor_from_host(&a, cpu, DP_F32, 1, &n, v), 0);
    assert_int_equal(dp_tensor_new(&b, g0, DP_F32, 1, &n), 0);
    assert_int_equal(dp_tensor_new(&c, g1, DP_F32, 1, &n), 0);
    assert_int_equal(dp_tensor_new(&d, cpu, DP_F32, 1, &n), 0);
    assert_int_equal(dp_broadcast(&b, 1, a), 0);
    assert_int_equal(dp_broadcast(&c, 1, b), 0);
    assert_int_equal(dp_broadcast(&d, 1, c), 0);
    assert_int_equal(dp_tensor_to_host(d, back, N * sizeof *back), 0);
    assert_memory_equal(v, back, N * sizeof *v);
    dp_tensor_free(a);
    dp_tensor_free(b);
    dp_tensor_free(c);
    dp_tensor_free(d);
    free(v);
    free(back);
    dp_device_close(g1);
    dp_device_close(g0);
    dp_device_close(cpu);
}

/* Every algorithm over 2 logical devices on cuda:0 (nccl falls back to the
 * ring there) and, with two GPUs, over cuda:0 and cuda:1, auto included
 * (nccl across GPUs, ring on one). Across two GPUs without peer access,
 * naive and ring must refuse (DP_ENOTSUP) rather than fault. */
static void allreduce_on_gpus(void **state)
{
    (void)state;
    REQUIRE_GPU();
    const char *pairs[2][2] = {{"cuda:0", "cuda:0"}, {"cuda:0", "cuda:1"}};
    int npairs = dp_cuda_device_count() > 1 ? 2 : 1;
    enum { LEN = 100003 };
    float *v0 = malloc(LEN * sizeof *v0), *v1 = malloc(LEN * sizeof *v1);
    float *out = malloc(LEN * sizeof *out);
    fill_random(v0, LEN, 11);
    fill_random(v1, LEN, 12);
    int64_t len = LEN;
    dp_allreduce_algo algos[4] = {DP_ALLREDUCE_NAIVE, DP_ALLREDUCE_RING, DP_ALLREDUCE_NCCL,
                                  DP_ALLREDUCE_AUTO};
    for (int p = 0; p < npairs; p++) {
        for (int a = 0; a < 4; a++) {
            dp_device_t *d0, *d1;
            assert_int_equal(dp_device_open(&d0, pairs[p][0], 0), 0);
            assert_int_equal(dp_device_open(&d1, pairs[p][1], 0), 0);
            dp_tensor_t *bufs[2];
            assert_int_equal(dp_tensor_from_host(&bufs[0], d0, DP_F32, 1, &len, v0), 0);
            assert_int_equal(dp_tensor_from_host(&bufs[1], d1, DP_F32, 1, &len, v1), 0);
            int rc = dp_allreduce_sum(bufs, 2, algos[a]);
            bool kernels_across =
                p == 1 && (algos[a] == DP_ALLREDUCE_NAIVE || algos[a] == DP_ALLREDUCE_RING);
            if (rc == DP_ENOTSUP && kernels_across)
                printf("%s over cuda:0 and cuda:1 refused: no peer access between them\n",
                       dp_allreduce_algo_name(algos[a]));
            else
                assert_int_equal(rc, 0);
            for (int k = 0; k < 2; k++) {
                assert_int_equal(dp_tensor_to_host(bufs[k], out, LEN * sizeof *out), 0);
                for (int i = 0; rc == 0 && i < LEN; i++)
                    if (out[i] != v0[i] + v1[i])
                        fail_msg("%s over %s, %s: element %d of buffer %d is %g, not %g",
                                 dp_allreduce_algo_name(algos[a]), pairs[p][0], pairs[p][1], i, k,
                                 out[i], v0[i] + v1[i]);
                dp_tensor_free(bufs[k]);
            }
            dp_device_close(d1);
            dp_device_close(d0);
        }
    }
    free(v0);
    free(v1);
    free(out);
}

/* ---- LeNet ---------------------------------------------------------------------- */

enum { STEPS = 20, BATCH = 64 };

/* STEPS steps of LeNet with DataParallel over `names` on random images;
 * returns replica 0's parameters. */
static float *train_lenet(const char *const *names, int n, dp_allreduce_algo algo, int64_t *numel)
{
    dp_device_t *devs[2];
    for (int k = 0; k < n; k++)
        assert_int_equal(dp_device_open(&devs[k], names[k], 1), 0);
    dp_model_t *model;
    assert_int_equal(dp_model_init_builtin(&model, "lenet", devs[0], 7), 0);
    dp_data_parallel_t *dp;
    dp_data_parallel_options opt = {.allreduce = algo, .optimizer = {.lr = 0.1f, .momentum = 0.5f}};
    assert_int_equal(dp_data_parallel_init(&dp, model, devs, n, &opt), 0);
    dp_tape_t *tape;
    assert_int_equal(dp_tape_init(&tape, true), 0);
    float *images = malloc(BATCH * 784 * sizeof *images);
    int32_t labels[BATCH];
    for (int s = 0; s < STEPS; s++) {
        fill_random(images, BATCH * 784, 1000 + (uint64_t)s);
        for (int i = 0; i < BATCH; i++)
            labels[i] = (int32_t)((i * 3 + s) % CLASSES);
        tu_data_parallel_step(dp, tape, devs[0], images, labels, BATCH);
    }
    *numel = dp_params_numel(dp_model_params(model));
    float *p0 = malloc((size_t)*numel * sizeof *p0);
    assert_int_equal(dp_params_get_all(dp_model_params(model), p0), 0);
    free(images);
    dp_tape_close(tape);
    dp_data_parallel_close(dp);
    dp_model_close(model);
    for (int k = n - 1; k >= 0; k--)
        dp_device_close(devs[k]);
    return p0;
}

static void lenet_cuda_matches_cpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    dp_set_tf32(false);
    const char *cpu[1] = {"cpu:0"}, *gpu[1] = {"cuda:0"};
    int64_t n1, n2;
    float *a = train_lenet(cpu, 1, DP_ALLREDUCE_RING, &n1);
    float *b = train_lenet(gpu, 1, DP_ALLREDUCE_RING, &n2);
    assert_int_equal(n1, n2);
    double e = rel_error(b, a, n1);
    if (e > TOL_TRAINING)
        fail_msg("LeNet after %d steps: cuda:0 differs from cpu:0 by %.3g", STEPS, e);
    free(a);
    free(b);
    dp_set_tf32(true);
}

static void two_logical_devices_on_one_gpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    dp_set_tf32(false);
    const char *one[1] = {"cuda:0"}, *two[2] = {"cuda:0", "cuda:0"};
    int64_t n1, n2;
    float *a = train_lenet(one, 1, DP_ALLREDUCE_RING, &n1);
    dp_allreduce_algo algos[3] = {DP_ALLREDUCE_RING, DP_ALLREDUCE_NAIVE, DP_ALLREDUCE_NCCL};
    for (int i = 0; i < 3; i++) {
        float *b = train_lenet(two, 2, algos[i], &n2);
        assert_int_equal(n1, n2);
        double e = rel_error(b, a, n1);
        if (e > TOL_TRAINING)
            fail_msg("LeNet on 2 logical devices of cuda:0 (%s) differs from 1 device by %.3g",
                     dp_allreduce_algo_name(algos[i]), e);
        free(b);
    }
    free(a);
    dp_set_tf32(true);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(copies_between_cpu_and_gpu),
        cmocka_unit_test(allreduce_on_gpus),
        cmocka_unit_test(lenet_cuda_matches_cpu),
        cmocka_unit_test(two_logical_devices_on_one_gpu),
    };
    const char *why = no_gpu_reason();
    if (why)
        printf("test_cuda_devices: no CUDA GPU here (%s): %d GPU tests skipped\n", why,
               (int)(sizeof tests / sizeof tests[0]));
    fflush(stdout);
    return tu_run(argc, argv, tests, NULL, NULL);
}
