/* Gradient buckets (src/comm/buckets.c): the same bits as one allreduce
 * after the backward pass, DDP's layout, the bf16 compression's rounding
 * and bound, the communication times, and bad options. */
#include "testutil.h"

#include "dp/dp.h"
#include "comm/mpi.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STEPS = 6, BATCH = 48 };

/* STEPS batches of 28x28 images in [0, 1) and labels 0..9, the same on
 * every call. */
static void make_data(float **images, int32_t **labels)
{
    int64_t n = (int64_t)STEPS * BATCH;
    *images = malloc((size_t)n * 784 * sizeof **images);
    *labels = malloc((size_t)n * sizeof **labels);
    dp_rng rng;
    dp_rng_init(&rng, 11, 1);
    for (int64_t i = 0; i < n * 784; i++)
        (*images)[i] = dp_rng_uniform(&rng);
    for (int64_t i = 0; i < n; i++)
        (*labels)[i] = (int32_t)((i * 7) % 10);
}

/* LeNet trained STEPS steps over n devices with `bucket_mb`; returns replica
 * 0's parameters (every replica must hold the same) and the bucket count. */
static float *train(int n, dp_allreduce_algo algo, double bucket_mb, int *buckets,
                    dp_comm_stats *stats, int64_t *numel)
{
    float *images;
    int32_t *labels;
    make_data(&images, &labels);
    dp_device_t *devs[3];
    tu_open_cpu_devices(devs, n);
    dp_model_t *model;
    assert_int_equal(dp_model_init_builtin(&model, "lenet", devs[0], 5), 0);
    dp_data_parallel_t *dp;
    dp_data_parallel_options opt = {
        .allreduce = algo, .optimizer = {.lr = 0.1f, .momentum = 0.9f}, .bucket_mb = bucket_mb};
    assert_int_equal(dp_data_parallel_init(&dp, model, devs, n, &opt), 0);
    *buckets = dp_data_parallel_bucket_count(dp);
    dp_tape_t *tape;
    assert_int_equal(dp_tape_init(&tape, true), 0);
    for (int s = 0; s < STEPS; s++)
        tu_data_parallel_step(dp, tape, devs[0], images + (int64_t)s * BATCH * 784,
                              labels + s * BATCH, BATCH);
    assert_int_equal(dp_waitall(), 0);
    dp_data_parallel_comm_stats(dp, stats);
    float *p0 = tu_replica_params(dp, model, n, numel);
    dp_tape_close(tape);
    dp_data_parallel_close(dp);
    dp_model_close(model);
    dp_devices_close(devs, n);
    free(images);
    free(labels);
    return p0;
}

/* Bucketed and unbucketed training give the same bits on 2 and 3 devices,
 * ring and naive: the ring cuts the whole buffer into its chunks whatever
 * the buckets, so every element is summed in the same order. (On 2 devices
 * any order gives the same bits: a + b == b + a; 3 devices are the check.)
 * The README's "with 1, 3 and 4 buckets" are LeNet's counts for these
 * sizes: a size that fell back to one bucket would compare nothing. */
static void bucketed_equals_unbucketed(void **state)
{
    (void)state;
    static const double sizes[] = {0.05, 0.001, 25};
    static const int counts[] = {3, 4, 1};
    float *start = NULL;
    for (int algo = 0; algo < 2; algo++) {
        for (int n = 2; n <= 3; n++) {
            int nb;
            int64_t numel;
            dp_comm_stats st;
            float *whole = train(n, (dp_allreduce_algo)algo, 0, &nb, &st, &numel);
            assert_int_equal(nb, 1);
            if (!start)
                start = tu_lenet_initial_params(5, numel);
            double moved = tu_max_diff("weights vs their start", whole, start, numel);
            assert_true(moved > 1e-3);
            for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
                float *bucketed = train(n, (dp_allreduce_algo)algo, sizes[s], &nb, &st, &numel);
                int64_t same = 0;
                for (int64_t i = 0; i < numel; i++)
                    same += memcmp(&bucketed[i], &whole[i], sizeof(float)) == 0;
                printf("%d devices, %s, --bucket-mb %g (%d buckets): %lld of %lld weights "
                       "identical to --bucket-mb 0 (max change from init %.3g)\n",
                       n, dp_allreduce_algo_name((dp_allreduce_algo)algo), sizes[s], nb,
                       (long long)same, (long long)numel, moved);
                assert_int_equal(nb, counts[s]);
                assert_int_equal(same, numel);
                free(bucketed);
            }
            free(whole);
        }
    }
    free(start);
}

/* DDP's layout: parameters from the last, a bucket closed once it reaches
 * its cap. LeNet's parameters (floats): W1 20x1x3x3 = 180, b1 20, W2
 * 50x20x5x5 = 25000, b2 50, W3 800x128 = 102400, b3 128, W4 128x10 = 1280,
 * b4 10. With 0.05 MiB (52428.8 bytes): b4 + W4 + b3 + W3 = 415272 bytes
 * closes bucket 0, b2 + W2 = 100200 bucket 1, b1 + W1 = 800 is the rest. */
static void bucket_layout(void **state)
{
    (void)state;
    dp_device_t *devs[2];
    tu_open_cpu_devices(devs, 2);
    dp_model_t *model;
    assert_int_equal(dp_model_init_builtin(&model, "lenet", devs[0], 1), 0);
    dp_data_parallel_t *dp;
    dp_data_parallel_options opt = {.optimizer = {.lr = 0.1f}, .bucket_mb = 0.05};
    assert_int_equal(dp_data_parallel_init(&dp, model, devs, 2, &opt), 0);
    const struct {
        int first, count;
        int64_t bytes;
    } want[] = {{4, 4, 415272}, {2, 2, 100200}, {0, 2, 800}};
    assert_int_equal(dp_data_parallel_bucket_count(dp), 3);
    for (int b = 0; b < 3; b++) {
        int first, count;
        int64_t bytes;
        dp_data_parallel_bucket(dp, b, &first, &count, &bytes);
        printf("lenet, 0.05 MiB: bucket %d: parameters %d..%d, %lld bytes\n", b, first,
               first + count - 1, (long long)bytes);
        assert_int_equal(first, want[b].first);
        assert_int_equal(count, want[b].count);
        assert_int_equal(bytes, want[b].bytes);
    }
    dp_data_parallel_close(dp);
    dp_model_close(model);

    /* ResNet-18 with DDP's default: the first bucket closes past 1 MiB, the
     * others past 25 MiB, each as soon as it gets there; together they
     * cover the buffer from its end, without gaps. */
    assert_int_equal(dp_model_init_builtin(&model, "resnet18", devs[0], 1), 0);
    opt.bucket_mb = 25;
    assert_int_equal(dp_data_parallel_init(&dp, model, devs, 2, &opt), 0);
    dp_params_t *p = dp_model_params(model);
    int nb = dp_data_parallel_bucket_count(dp), next = dp_params_count(p);
    int64_t total = 0;
    for (int b = 0; b < nb; b++) {
        int first, count;
        int64_t bytes, counted = 0;
        dp_data_parallel_bucket(dp, b, &first, &count, &bytes);
        printf("resnet18, 25 MiB: bucket %d: %d parameters (%s .. %s), %lld bytes\n", b, count,
               dp_params_name(p, first + count - 1), dp_params_name(p, first), (long long)bytes);
        assert_int_equal(first + count, next);
        for (int i = first; i < next; i++)
            counted += 4 * dp_tensor_numel(dp_params_get(p, i));
        assert_int_equal(counted, bytes);
        int64_t cap = b == 0 ? 1 << 20 : 25 << 20;
        int64_t before_last = bytes - 4 * dp_tensor_numel(dp_params_get(p, first));
        assert_true(before_last < cap);
        if (b < nb - 1)
            assert_true(bytes >= cap);
        next = first;
        total += bytes;
    }
    assert_int_equal(next, 0);
    assert_int_equal(total, 4 * dp_params_numel(p));
    assert_true(nb >= 2);
    dp_data_parallel_close(dp);
    dp_model_close(model);
    dp_devices_close(devs, 2);
}

/* The communication times: one entry per step with 2 devices, none with 1.
 * Both are spans of this run in seconds: above 0 (the update always waits
 * for the last bucket, if only for its event) and within the run's wall
 * time (one path runs the buckets one after another). */
static void comm_stats_counted(void **state)
{
    (void)state;
    int nb;
    int64_t numel;
    dp_comm_stats st;
    double t0 = dp_time_seconds();
    free(train(2, DP_ALLREDUCE_RING, 0.05, &nb, &st, &numel));
    double wall = dp_time_seconds() - t0;
    printf("2 devices: %lld steps in %.3f s, comm %.3f ms/step, exposed %.3f ms/step\n",
           (long long)st.steps, wall, 1e3 * st.comm_seconds / STEPS,
           1e3 * st.exposed_seconds / STEPS);
    assert_int_equal(st.steps, STEPS);
    assert_true(st.comm_seconds > 0 && st.comm_seconds <= wall);
    assert_true(st.exposed_seconds > 0 && st.exposed_seconds <= wall);
    free(train(1, DP_ALLREDUCE_RING, 0.05, &nb, &st, &numel));
    assert_int_equal(nb, 0);
    assert_int_equal(st.steps, 0);
    assert_true(st.comm_seconds == 0);
}

/* bfloat16 rounding: to nearest, ties to even, NaN and infinities kept. */
static void bf16_rounding(void **state)
{
    (void)state;
    const struct {
        uint32_t in;
        uint16_t out;
    } cases[] = {
        {0x3f800000u, 0x3f80}, /* 1 */
        {0x3f808000u, 0x3f80}, /* halfway between 0x3f80 and 0x3f81: to even */
        {0x3f818000u, 0x3f82}, /* halfway between 0x3f81 and 0x3f82: to even */
        {0x3f808001u, 0x3f81}, /* past halfway: up */
        {0xbf80ffffu, 0xbf81}, /* negative, up in magnitude */
        {0x7f800000u, 0x7f80}, /* inf */
        {0x7f7fffffu, 0x7f80}, /* the largest float rounds to inf, as it must */
        {0x00000001u, 0x0000}, /* the smallest subnormal rounds to 0 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        union {
            uint32_t u;
            float f;
        } v = {cases[i].in};
        uint16_t got = dp__bf16_from_f32(v.f);
        printf("bf16(0x%08x) = 0x%04x (want 0x%04x)\n", cases[i].in, got, cases[i].out);
        assert_int_equal(got, cases[i].out);
    }
    assert_true(isnan(dp__bf16_to_f32(dp__bf16_from_f32(NAN))));
    assert_true(dp__bf16_to_f32(0x3f80) == 1.0f);
}

/* The compressed sum over 4 ranks against the exact one: each value is
 * rounded to 8 significant bits (relative error <= 2^-8), then 3 float
 * additions: |bf16 sum - exact| <= sum |x_r| (2^-8 + 4 * 2^-24). */
static void bf16_sum_bounded(void **state)
{
    (void)state;
    enum { RANKS = 4, COUNT = 100000 };
    float *x = malloc(RANKS * COUNT * sizeof *x), *out = malloc(COUNT * sizeof *out);
    uint16_t *wire = malloc(RANKS * COUNT * sizeof *wire);
    dp_rng rng;
    dp_rng_init(&rng, 3, 1);
    for (int i = 0; i < RANKS * COUNT; i++) {
        x[i] = dp_rng_normal(&rng) * powf(10.0f, (float)(i % 9) - 6.0f);
        wire[i] = dp__bf16_from_f32(x[i]);
    }
    dp__bf16_sum_ranks(wire, RANKS, COUNT, out);
    double worst = 0, worst_rel_to_bound = 0;
    for (int i = 0; i < COUNT; i++) {
        double exact = 0, mag = 0;
        for (int r = 0; r < RANKS; r++) {
            exact += x[r * COUNT + i];
            mag += fabs(x[r * COUNT + i]);
        }
        double bound = mag * (ldexp(1, -8) + 4 * ldexp(1, -24));
        worst = tu_worst_rel(worst, out[i], exact, mag, "bf16 sum", i);
        worst_rel_to_bound = tu_worst_rel(worst_rel_to_bound, out[i], exact, bound, "bf16 sum", i);
    }
    printf("bf16 sum over %d ranks: max |error| / sum |x_r| = %.3g (bound %.3g), %.2f of the "
           "bound used\n",
           RANKS, worst, ldexp(1, -8) + 4 * ldexp(1, -24), worst_rel_to_bound);
    assert_true(worst_rel_to_bound <= 1.0);
    /* The rounding did happen: bf16 is not float32. */
    assert_true(worst > 1e-4);
    free(x);
    free(out);
    free(wire);
}

static void bad_options_refused(void **state)
{
    (void)state;
    tu_quiet_log();
    dp_device_t *devs[2];
    tu_open_cpu_devices(devs, 2);
    dp_model_t *model;
    assert_int_equal(dp_model_init_builtin(&model, "lenet", devs[0], 1), 0);
    dp_data_parallel_t *dp;
    const double bad_sizes[] = {-1, NAN, 2e6};
    for (size_t i = 0; i < 3; i++) {
        dp_data_parallel_options opt = {.optimizer = {.lr = 0.1f}, .bucket_mb = bad_sizes[i]};
        assert_int_equal(dp_data_parallel_init(&dp, model, devs, 2, &opt), DP_EINVAL);
        printf("bucket_mb %g: %s\n", bad_sizes[i], dp_last_error());
        assert_non_null(strstr(dp_last_error(), "bucket size"));
    }
    dp_data_parallel_options opt = {.optimizer = {.lr = 0.1f}, .grad_compress = 7};
    assert_int_equal(dp_data_parallel_init(&dp, model, devs, 2, &opt), DP_EINVAL);
    printf("grad_compress 7: %s\n", dp_last_error());
    int c;
    assert_int_equal(dp_name_parse(&dp_grad_compress_names, "bf16", &c), 0);
    assert_int_equal(c, DP_GRAD_COMPRESS_BF16);
    assert_int_equal(dp_name_parse(&dp_grad_compress_names, "none", &c), 0);
    assert_int_equal(c, DP_GRAD_COMPRESS_NONE);
    assert_int_equal(dp_name_parse(&dp_grad_compress_names, "fp8", &c), DP_EINVAL);
    dp_model_close(model);
    dp_devices_close(devs, 2);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bucketed_equals_unbucketed), cmocka_unit_test(bucket_layout),
        cmocka_unit_test(comm_stats_counted),         cmocka_unit_test(bf16_rounding),
        cmocka_unit_test(bf16_sum_bounded),           cmocka_unit_test(bad_options_refused),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
