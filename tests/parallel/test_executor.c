/* The executor (dp/executor.h) over data parallelism: each replica takes
 * its own rows of the host batch and computes its own loss on its own
 * device, as DistributedDataParallel does; the weights after 20 steps are
 * those of the seed's DataParallel (outputs gathered on device 0, one loss
 * there) bit for bit, and a step from the same weights gives those of 1
 * device within float rounding (test_parallel_models says why a step).
 * Where each loss was computed is read off DP_PROFILE's count of the
 * cross-entropy kernel on every device. */
#include "testutil.h"

#include "dp/dp.h"
#include "dp/executor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STEPS = 20, BATCH = 64 };

/* The steps train() takes: STEPS, or 1 for the comparison with 1 device
 * (test_parallel_models says why after one step). */
static int steps = STEPS;

/* DP_PROFILE's lines, logged when a device closes: "profile of cpu:1: ..."
 * then a line per command name with its calls. */
static char profile[1 << 16];
static size_t profile_len;

static void keep_line(dp_log_level level, const char *msg, void *user)
{
    (void)level;
    (void)user;
    int n = snprintf(profile + profile_len, sizeof profile - profile_len, "%s\n", msg);
    if (n > 0 && profile_len + (size_t)n < sizeof profile)
        profile_len += (size_t)n;
}

/* Calls of the cross-entropy forward kernel on `device` in the profile. */
static long xent_calls(const char *device)
{
    char head[64];
    snprintf(head, sizeof head, "profile of %s:", device);
    const char *p = strstr(profile, head);
    if (!p)
        return -1;
    const char *next = strstr(p + 1, "profile of ");
    for (const char *line = strchr(p, '\n'); line && (!next || line < next);
         line = strchr(line + 1, '\n')) {
        const char *end = strchr(line + 1, '\n');
        const char *hit = strstr(line, "run_xent_forward");
        if (hit && (!end || hit < end)) {
            double seconds, share;
            unsigned long long calls;
            if (sscanf(line + 1, " %lf s %lf%% %llu calls", &seconds, &share, &calls) == 3)
                return (long)calls;
        }
    }
    return 0;
}

/* LeNet from seed 7 trained `steps` steps of BATCH images on n devices, by
 * the executor (`executor`) or by the seed's DataParallel; returns replica
 * 0's parameters (every replica's are checked to be the same). With the
 * executor, checks each replica's first loss against one device's loss of
 * the same rows, and that the step's loss is their sum. */
static float *train(const dp_dataset *ds, int n, bool executor, int64_t *numel)
{
    dp_device_t *devs[3];
    tu_open_cpu_devices(devs, n);
    dp_model_t *model;
    assert_int_equal(dp_model_init_builtin(&model, "lenet", devs[0], 7), 0);
    dp_data_parallel_t *dp;
    dp_data_parallel_options opt = {.allreduce = DP_ALLREDUCE_RING,
                                    .optimizer = {.lr = 0.2f, .momentum = 0.5f}};
    assert_int_equal(dp_data_parallel_init(&dp, model, devs, n, &opt), 0);
    dp_executor_t *ex = NULL;
    dp_tape_t *tape = NULL;
    int64_t one = 1;
    dp_tensor_t *loss, *correct;
    assert_int_equal(dp_tensor_new(&loss, devs[0], DP_F32, 1, &one), 0);
    assert_int_equal(dp_tensor_new(&correct, devs[0], DP_F32, 1, &one), 0);
    assert_int_equal(dp_tensor_fill(correct, 0.0f), 0);
    if (executor)
        assert_int_equal(dp_executor_init_data_parallel(&ex, dp), 0);
    else
        assert_int_equal(dp_tape_init(&tape, true), 0);
    for (int s = 0; s < steps; s++) {
        const float *x = ds->images + s * BATCH * 784;
        const int32_t *y = ds->labels + s * BATCH;
        if (!executor) {
            tu_data_parallel_step(dp, tape, devs[0], x, y, BATCH);
            continue;
        }
        dp_host_batch b = {
            .x = x, .labels = y, .n = BATCH, .chw = {1, 28, 28}, .step = (uint64_t)s};
        assert_int_equal(dp_executor_forward_backward(ex, &b, loss, correct), 0);
        if (s == 0) {
            float total, sum = 0;
            int64_t sizes[3];
            dp_chunk_sizes(BATCH, n, sizes);
            for (int k = 0, row = 0; k < n; row += (int)sizes[k], k++) {
                dp_tensor_t *lk = dp_data_parallel_replica_loss(dp, k);
                assert_ptr_equal(dp_tensor_device(lk), devs[k]);
                float mine;
                assert_int_equal(dp_tensor_to_host(lk, &mine, sizeof mine), 0);
                sum += mine;
                /* The same rows through replica 0 alone, before any update. */
                int64_t xs[4] = {sizes[k], 1, 28, 28};
                dp_tensor_t *xk, *yk, *logits, *ref;
                dp_tape_t *t;
                assert_int_equal(dp_tape_init(&t, false), 0);
                dp_tape_begin(t);
                assert_int_equal(dp_tensor_from_host(&xk, devs[0], DP_F32, 4, xs, x + row * 784),
                                 0);
                assert_int_equal(dp_tensor_from_host(&yk, devs[0], DP_I32, 1, &sizes[k], y + row),
                                 0);
                assert_int_equal(dp_model_forward(model, xk, true, &logits), 0);
                assert_int_equal(dp_cross_entropy(&ref, logits, yk, DP_REDUCE_SUM), 0);
                float expect;
                assert_int_equal(dp_tensor_to_host(ref, &expect, sizeof expect), 0);
                dp_tape_end(t);
                dp_tape_reset(t);
                dp_tape_close(t);
                dp_tensor_free(xk);
                dp_tensor_free(yk);
                printf("%d devices: replica %d's loss of rows %d..%lld on %s: %.6f (one device: "
                       "%.6f)\n",
                       n, k, row, (long long)(row + sizes[k] - 1), dp_device_name(devs[k]),
                       (double)mine, (double)expect);
                tu_assert_close(mine, expect, 1e-5, 0);
            }
            assert_int_equal(dp_tensor_to_host(loss, &total, sizeof total), 0);
            tu_assert_close(total, sum, 1e-6, 0);
        }
        assert_int_equal(dp_executor_step(ex, 1.0f / BATCH), 0);
    }
    float *p0 = tu_replica_params(dp, model, n, numel);
    float right;
    assert_int_equal(dp_tensor_to_host(correct, &right, sizeof right), 0);
    if (executor) {
        assert_true(right > 0 && right <= steps * BATCH);
        dp_executor_close(ex); /* closes dp */
    } else {
        dp_tape_close(tape);
        dp_data_parallel_close(dp);
    }
    dp_tensor_free(loss);
    dp_tensor_free(correct);
    dp_model_close(model);
    dp_devices_close(devs, n);
    return p0;
}

static void each_replica_computes_its_loss(void **state)
{
    (void)state;
    if (!tu_have_fashion_mnist())
        tu_skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
    dp_dataset ds;
    assert_int_equal(dp_fashion_mnist_load(NULL, true, &ds), 0);
    int64_t numel;
    float *one = train(&ds, 1, true, &numel);
    float *start = tu_lenet_initial_params(7, numel);
    /* trained, so equality below says something */
    assert_true(tu_max_diff("weights vs their start", one, start, numel) > 1e-2);
    for (int n = 2; n <= 3; n++) {
        setenv("DP_PROFILE", "1", 1);
        profile_len = 0;
        profile[0] = '\0';
        dp_log_set(keep_line, NULL);
        float *mine = train(&ds, n, true, &numel);
        dp_log_set(NULL, NULL);
        unsetenv("DP_PROFILE");
        for (int k = 0; k < n; k++) {
            char name[16];
            snprintf(name, sizeof name, "cpu:%d", k);
            /* cpu:0 also ran the n reference losses of the first step. */
            long calls = xent_calls(name), want = STEPS + (k == 0 ? n : 0);
            printf("%d devices: %s ran the cross-entropy forward %ld times in %d steps (want "
                   "%ld)\n",
                   n, name, calls, STEPS, want);
            assert_int_equal(calls, want);
        }
        float *seed_dp = train(&ds, n, false, &numel);
        printf("%d devices: %lld weights after %d steps; vs the seed's DataParallel: %s\n", n,
               (long long)numel, STEPS,
               memcmp(mine, seed_dp, (size_t)numel * sizeof *mine) == 0 ? "identical" : "differ");
        assert_memory_equal(mine, seed_dp, (size_t)numel * sizeof *mine);
        /* against 1 device: a step from the same weights, to float rounding */
        steps = 1;
        float *first = train(&ds, 1, true, &numel), *first_n = train(&ds, n, true, &numel);
        steps = STEPS;
        double update = tu_max_diff("a step's update", first, start, numel);
        double worst = tu_max_diff("n devices vs 1", first_n, first, numel) / update;
        printf("%d devices: a step's max |difference| / its max |update| vs 1 device %.2e\n", n,
               worst);
        assert_true(update > 1e-4 && worst <= 1e-5);
        free(first);
        free(first_n);
        free(seed_dp);
        free(mine);
    }
    free(start);
    free(one);
    dp_dataset_close(&ds);
}

/* A rank's share of a batch may hold no rows: the step's gradients are
 * zero, its loss is 0, and a batch of bad shape is refused. */
static void empty_and_bad_batches(void **state)
{
    (void)state;
    dp_device_t *devs[2];
    tu_open_cpu_devices(devs, 2);
    dp_model_t *model;
    assert_int_equal(dp_model_init_builtin(&model, "lenet", devs[0], 7), 0);
    dp_data_parallel_t *dp;
    dp_data_parallel_options opt = {.allreduce = DP_ALLREDUCE_RING, .optimizer = {.lr = 0.2f}};
    assert_int_equal(dp_data_parallel_init(&dp, model, devs, 2, &opt), 0);
    dp_executor_t *ex;
    assert_int_equal(dp_executor_init_data_parallel(&ex, dp), 0);
    assert_string_equal(dp_executor_name(ex), "data parallel");
    int64_t one = 1;
    dp_tensor_t *loss, *correct;
    assert_int_equal(dp_tensor_new(&loss, devs[0], DP_F32, 1, &one), 0);
    assert_int_equal(dp_tensor_new(&correct, devs[0], DP_F32, 1, &one), 0);
    assert_int_equal(dp_tensor_fill(loss, 5.0f), 0);
    dp_host_batch empty = {.n = 0, .chw = {1, 28, 28}};
    assert_int_equal(dp_executor_forward_backward(ex, &empty, loss, correct), 0);
    float value = -1;
    assert_int_equal(dp_tensor_to_host(loss, &value, sizeof value), 0);
    assert_true(value == 0.0f);
    float x[784] = {0};
    int32_t y = 0;
    dp_host_batch bad = {.x = x, .labels = &y, .n = 1, .chw = {1, 0, 28}};
    assert_int_equal(dp_executor_forward_backward(ex, &bad, loss, correct), DP_EINVAL);
    tu_assert_error_mentions("a batch needs n >= 0 samples of a positive shape");
    dp_executor_close(ex);
    dp_tensor_free(loss);
    dp_tensor_free(correct);
    dp_model_close(model);
    dp_devices_close(devs, 2);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(each_replica_computes_its_loss),
        cmocka_unit_test(empty_and_bad_batches),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
