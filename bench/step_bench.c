/* Times training steps of a model through the library: forward, loss,
 * backward, allreduce and SGD on a real Fashion-MNIST batch, waiting for
 * every device after each step; prints each step and the median after the
 * warm-up, like bench/resnet_pytorch.py does for PyTorch.
 *
 *   build/bench_step MODEL BATCH DEVICES [WARMUP=2] [STEPS=10] [PRECISION=fp32] [ALGO=auto]
 *                    [STEP=executor]
 *   build/bench_step resnet18 256 auto 2 10 bf16
 *
 * PRECISION is fp32, bf16 or bf16-reference (dptrain train --precision),
 * ALGO auto, direct or winograd (--conv-algo); under auto the kernels are
 * measured in the first warm-up step, so give at least one. STEP is
 * `executor`, the step dptrain train runs (dp/executor.h: each replica
 * uploads its own rows and computes its own loss), or `gather`, the seed's
 * DataParallel (the batch uploaded to device 0, scattered, the outputs
 * gathered there for one loss), to compare the two in one run. */
#include "dp/dp.h"
#include "dp/executor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* DP_PROFILE=1: each device's table of commands, logged at close. */
static void log_info(dp_log_level level, const char *msg, void *user)
{
    (void)user;
    fprintf(stderr, "%s%s\n", level >= DP_LOG_WARN ? "bench_step: " : "", msg);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The seed's DataParallel step: the batch on device 0, scattered over the
 * replicas, the outputs gathered on device 0 for one loss. */
static int gather_step(dp_data_parallel_t *dp, dp_tape_t *tape, dp_device_t *dev,
                       const dp_dataset *train, int64_t batch)
{
    int64_t xs[4] = {batch, 1, 28, 28};
    dp_tensor_t *x, *y, *out, *loss;
    if (dp_tensor_from_host(&x, dev, DP_F32, 4, xs, train->images) < 0 ||
        dp_tensor_from_host(&y, dev, DP_I32, 1, &batch, train->labels) < 0)
        return DP_ENOMEM;
    dp_tape_begin(tape);
    int rc = dp_data_parallel_forward(dp, x, true, &out);
    if (rc == 0)
        rc = dp_cross_entropy(&loss, out, y, DP_REDUCE_SUM);
    if (rc == 0) {
        dp_data_parallel_zero_grad(dp);
        rc = dp_backward(loss);
    }
    if (rc == 0)
        rc = dp_data_parallel_step(dp, 1.0f / (float)batch);
    dp_tape_end(tape);
    dp_tape_reset(tape);
    dp_tensor_free(x);
    dp_tensor_free(y);
    return rc;
}

/* The step dptrain train runs: each replica on its own rows. */
static int executor_step(dp_executor_t *ex, const dp_dataset *train, int64_t batch, int step,
                         dp_tensor_t *loss, dp_tensor_t *correct)
{
    dp_host_batch b = {.x = train->images,
                       .labels = train->labels,
                       .n = batch,
                       .chw = {1, 28, 28},
                       .step = (uint64_t)step};
    int rc = dp_executor_forward_backward(ex, &b, loss, correct);
    return rc == 0 ? dp_executor_step(ex, 1.0f / (float)batch) : rc;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: bench_step MODEL BATCH DEVICES [WARMUP=2] [STEPS=10] "
                        "[PRECISION=fp32] [ALGO=auto] [STEP=executor|gather]\n");
        return 2;
    }
    dp_log_set(log_info, NULL);
    int precision = DP_PRECISION_FP32, algo = DP_CONV_ALGO_AUTO;
    if ((argc > 6 && dp_name_parse(&dp_precision_names, argv[6], &precision) < 0) ||
        (argc > 7 && dp_name_parse(&dp_conv_algo_names, argv[7], &algo) < 0)) {
        fprintf(stderr, "bench_step: precision fp32, bf16 or bf16-reference; algo auto, direct "
                        "or winograd\n");
        return 2;
    }
    bool gather = argc > 8 && strcmp(argv[8], "gather") == 0;
    if (argc > 8 && !gather && strcmp(argv[8], "executor") != 0) {
        fprintf(stderr, "bench_step: STEP is executor or gather\n");
        return 2;
    }
    dp_set_precision(precision);
    dp_set_conv_algo(algo);
    const char *model_name = argv[1];
    int64_t batch = atoll(argv[2]);
    int warmup = argc > 4 ? atoi(argv[4]) : 2, steps = argc > 5 ? atoi(argv[5]) : 10;
    if (batch < 1 || warmup < 0 || steps < 1 || steps > 1000) {
        fprintf(stderr, "bench_step: bad batch, warm-up or step count\n");
        return 2;
    }
    dp_dataset train;
    dp_device_t *devs[DP_MAX_DEVICES];
    dp_model_t *model;
    dp_data_parallel_t *dp;
    dp_tape_t *tape;
    int n;
    if (dp_fashion_mnist_load(NULL, true, &train) < 0 || batch > train.n ||
        dp_devices_open(devs, &n, argv[3], 0) < 0 ||
        dp_model_init_builtin(&model, model_name, devs[0], 0) < 0)
        return 1;
    dp_data_parallel_options opt = {.allreduce = DP_ALLREDUCE_RING, .optimizer = {.lr = 0.1f}};
    dp_executor_t *ex;
    dp_tensor_t *step_loss, *correct;
    int64_t one = 1;
    if (dp_data_parallel_init(&dp, model, devs, n, &opt) < 0 || dp_tape_init(&tape, true) < 0 ||
        dp_executor_init_data_parallel(&ex, dp) < 0 ||
        dp_tensor_new(&step_loss, devs[0], DP_F32, 1, &one) < 0 ||
        dp_tensor_new(&correct, devs[0], DP_F32, 1, &one) < 0 || dp_tensor_fill(correct, 0) < 0)
        return 1;
    char names[256];
    printf("# %s, batch %lld, on %s, %s, convolutions %s, %s step\n", model_name, (long long)batch,
           dp_devices_str(devs, n, names, sizeof names), dp_precision_name(precision),
           dp_conv_algo_name(algo), gather ? "gather" : "executor");
    double *t = calloc((size_t)steps, sizeof *t);
    for (int s = 0; s < warmup + steps; s++) {
        double t0 = dp_time_seconds();
        int rc = gather ? gather_step(dp, tape, devs[0], &train, batch)
                        : executor_step(ex, &train, batch, s, step_loss, correct);
        if (rc == 0)
            rc = dp_waitall();
        if (rc < 0)
            return 1;
        double dt = dp_time_seconds() - t0;
        printf("step %d%s: %.3f sec\n", s + 1, s < warmup ? " (warm-up)" : "", dt);
        fflush(stdout);
        if (s >= warmup)
            t[s - warmup] = dt;
    }
    qsort(t, (size_t)steps, sizeof *t, cmp);
    double median = steps % 2 ? t[steps / 2] : 0.5 * (t[steps / 2 - 1] + t[steps / 2]);
    printf("SEC_PER_STEP %.4f\n", median);
    free(t);
    dp_tape_close(tape);
    dp_executor_close(ex); /* and dp */
    dp_tensor_free(step_loss);
    dp_tensor_free(correct);
    dp_model_close(model);
    dp_devices_close(devs, n);
    dp_dataset_close(&train);
    return 0;
}
