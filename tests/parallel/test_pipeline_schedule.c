/* The pipeline's schedules: the idle share measured on the devices against
 * (K - 1) / (M + K - 1) and against the schedule played out with the
 * step's own task times; 1F1B's activations against GPipe's; checkpoints
 * that resume across --pipeline bit for bit. */
#include "testutil.h"

#include "dp/dp.h"

#include <math.h>
#include <stdio.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>

/* Stages of equal cost: eight Linear + ReLU, four a stage, split by FLOPs
 * at the fifth. Stage 0's first Linear computes no input gradient, so it
 * takes 1536 inputs: its forward and its weight gradient are 1.5 units
 * each, and both stages cost 12 units (4 of them in the last stage's
 * forward, 8 in its backward; 4.5 and 7.5 in the first's). */
static dp_model_def *equal_stages_model(const int64_t *chw)
{
    char text[1024] = "Flatten()\nLinear(1536, 1024)\nReLU()\n";
    for (int i = 1; i < 8; i++)
        strcat(text, i < 7 ? "Linear(1024, 1024)\nReLU()\n" : "Linear(1024, 1024)\n");
    dp_model_def *def;
    assert_int_equal(dp_model_def_parse(&def, text, "equal_stages.txt", chw), 0);
    return def;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A pipeline of `stages` on devs[0..stages) stepped on one fixed batch of
 * random samples, for the tests that time steps or count activations. */
typedef struct stepper {
    dp_model_t *m;
    dp_pipeline_t *p;
    float *x;
    int32_t *y;
    int64_t batch;
    dp_tensor_t *loss, *correct;
} stepper;

static void stepper_open(stepper *st, const dp_model_def *def, dp_device_t **devs, int stages,
                         const int64_t *chw, int micro_batches, dp_pipeline_schedule schedule,
                         int64_t batch)
{
    int64_t one = 1, pixels = chw[0] * chw[1] * chw[2];
    st->batch = batch;
    assert_int_equal(dp_model_init(&st->m, def, devs[0], 1), 0);
    dp_pipeline_options po = {.stages = stages,
                              .micro_batches = micro_batches,
                              .schedule = schedule,
                              .update = {.optimizer = {.lr = 0.01f}}};
    assert_int_equal(dp_pipeline_init(&st->p, st->m, devs, stages, chw, &po), 0);
    st->x = malloc((size_t)(batch * pixels) * sizeof *st->x);
    st->y = malloc((size_t)batch * sizeof *st->y);
    tu_make_batch(1, batch, pixels, st->x, st->y);
    assert_int_equal(dp_tensor_new(&st->loss, devs[0], DP_F32, 1, &one), 0);
    assert_int_equal(dp_tensor_new(&st->correct, devs[0], DP_F32, 1, &one), 0);
}

/* One training step, run to its end; *s gets its figures. */
static void stepper_step(stepper *st, uint64_t step, dp_pipeline_stats *s)
{
    dp_data_parallel_t *dp = dp_pipeline_data_parallel(st->p);
    dp_data_parallel_zero_grad(dp);
    assert_int_equal(dp_pipeline_forward_backward(st->p, st->x, st->y, st->batch, 1, step, 0,
                                                  st->loss, st->correct),
                     0);
    assert_int_equal(dp_data_parallel_step(dp, 1.0f / (float)st->batch), 0);
    assert_int_equal(dp_waitall(), 0);
    dp_pipeline_take_stats(st->p, s);
    assert_int_equal(s->steps, 1);
}

static void stepper_close(stepper *st)
{
    free(st->x);
    free(st->y);
    dp_tensor_free(st->loss);
    dp_tensor_free(st->correct);
    dp_pipeline_close(st->p);
    dp_model_close(st->m);
}

/* The 1F1B schedule played out with the step's own task times: each
 * stage's mean forward and mean backward as the devices timed them. */
static double simulated_bubble(const dp_pipeline_stats *s)
{
    int M = s->micro_batches, n = 2 * M;
    double fwd[2] = {0, 0}, bwd[2] = {0, 0};
    dp_pipeline_task order[2 * 8];
    for (int k = 0; k < 2; k++) {
        assert_int_equal(dp_pipeline_order(DP_PIPELINE_1F1B, 2, k, M, order), 0);
        for (int i = 0; i < n; i++) {
            double t = s->end[k * n + i] - s->start[k * n + i];
            if (order[i].backward)
                bwd[k] += t / M;
            else
                fwd[k] += t / M;
        }
    }
    dp_pipeline_timeline tl;
    assert_int_equal(dp_pipeline_simulate(DP_PIPELINE_1F1B, 2, M, fwd, bwd, &tl, NULL, NULL), 0);
    return tl.bubble_fraction;
}

/* The devices' idle share, timed on them, for K = 2 and M = 1, 2, 4, 8
 * (micro-batches of 256 rows, tasks of about 40 ms), the median of 5 steps:
 * - at most 0.05 above the schedule played out with the step's own task
 *   times, for every M: the executor runs the schedule without idling more;
 * - at most 0.05 above (K - 1) / (M + K - 1) for M <= 4. The stages are equal
 *   in FLOPs but not quite in time (the last one adds the loss), and the
 *   difference idles the faster stage once per micro-batch, so the excess
 *   over the formula grows with M: at M = 8 it measured 0.03 to 0.06.
 * The claims are upper bounds (the executor idles no more than that); a
 * busy machine measured less idle than the schedule (0.24 against 0.34 at
 * M = 2, at a load of 7 on 2 cores), so below them only half the formula's
 * share is required, which still fails an idle time that reads zero.
 * Another process stretches some tasks and not others (the test runs alone
 * in CTest, RUN_SERIAL, but not alone on a busy machine): each M gets up
 * to three tries of 6 steps, and one within the bounds passes it; an
 * executor that idles more than its schedule fails all three. */
static bool bubble_within_bounds(const dp_model_def *def, dp_device_t **devs, const int64_t *chw,
                                 int M)
{
    stepper st;
    stepper_open(&st, def, devs, 2, chw, M, DP_PIPELINE_1F1B, 256 * M);
    double bubble[6], played[6];
    dp_pipeline_stats s;
    for (int step = 0; step < 6; step++) {
        stepper_step(&st, (uint64_t)step, &s);
        bubble[step] = s.bubble_fraction;
        played[step] = simulated_bubble(&s);
    }
    stepper_close(&st);
    /* The first step warms the kernels up: the median of the others. */
    qsort(bubble + 1, 5, sizeof *bubble, compare_doubles);
    qsort(played + 1, 5, sizeof *played, compare_doubles);
    double expect = 1.0 / (M + 1);
    print_message("K=2 M=%d: idle share %.3f (steps %.3f .. %.3f), the schedule with these "
                  "task times %.3f, (K-1)/(M+K-1) = %.3f\n",
                  M, bubble[3], bubble[1], bubble[5], played[3], expect);
    /* Written so that a NaN fails. */
    return bubble[3] <= played[3] + 0.05 && (M > 4 || bubble[3] <= expect + 0.05) &&
           bubble[3] >= 0.5 * expect;
}

static void bubble_measured(void **state)
{
    (void)state;
#ifndef NDEBUG
    /* make test's sanitizer builds are Debug builds: the library's own
     * loops (activations, copies, the loss) run unoptimised there while
     * oneDNN's do not, so the two stages are no longer equal. */
    tu_skip("the idle share is timed, and this is a Debug build; the Release build measures it");
#endif
    static const int64_t chw[3] = {1, 32, 48};
    dp_model_def *def = equal_stages_model(chw);
    dp_device_t *devs[2];
    tu_open_cpu_devices(devs, 2);
    static const int ms[4] = {1, 2, 4, 8};
    for (int i = 0; i < 4; i++) {
        bool ok = false;
        for (int attempt = 0; attempt < 3 && !ok; attempt++)
            ok = bubble_within_bounds(def, devs, chw, ms[i]);
        assert_true(ok);
    }
    dp_devices_close(devs, 2);
    dp_model_def_free(def);
}

/* M = 8: under 1F1B each stage holds at most K - k micro-batches'
 * activations, under GPipe all 8. Counted from the tapes as the schedule
 * issues the tasks. */
static void one_f_one_b_keeps_fewer_activations(void **state)
{
    (void)state;
    static const int64_t chw[3] = {1, 28, 28};
    const dp_model_def *def;
    assert_int_equal(dp_model_builtin(&def, "lenet", chw), 0);
    int64_t peak[2][3];
    for (int s = 0; s < 2; s++) {
        dp_device_t *devs[3];
        tu_open_cpu_devices(devs, 3);
        stepper stp;
        stepper_open(&stp, def, devs, 3, chw, 8, s ? DP_PIPELINE_GPIPE : DP_PIPELINE_1F1B, 64);
        dp_pipeline_stats st;
        stepper_step(&stp, 0, &st);
        for (int k = 0; k < 3; k++)
            peak[s][k] = st.peak_activation_bytes[k];
        stepper_close(&stp);
        dp_devices_close(devs, 3);
    }
    for (int k = 0; k < 3; k++) {
        print_message("stage %d: peak activations 1f1b %lld bytes, gpipe %lld bytes\n", k,
                      (long long)peak[0][k], (long long)peak[1][k]);
        assert_true(peak[0][k] > 0);
        assert_true(peak[0][k] <= peak[1][k]);
    }
    /* Stage 0 keeps 3 micro-batches of 8 (and one's gradients), not 8. */
    assert_true(peak[0][0] * 2 < peak[1][0]);
}

/* Runs `dptrain train` with small settings and `extra`; its exit code. The
 * kernels are fixed: runs in separate processes are compared bit for bit. */
static int dptrain_train(const char *extra)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "%s train --limit-train 1024 --limit-test 256 --batch-size 64 --lr 0.1 "
             "--momentum 0.9 --threads 1 --seed 5 --progress never --conv-algo direct %s "
             ">/dev/null",
             tu_dptrain, extra);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

/* A pipelined run's checkpoint has a 1-device run's names and values and
 * resumes with or without --pipeline: bit for bit with one micro-batch
 * (the same arithmetic), to float rounding with four. Retrained from the
 * seed, epochs 1 and 2 would give the same bits: the resumed runs' metrics
 * must hold epoch 2 alone. */
static void checkpoints_resume_across_pipeline(void **state)
{
    (void)state;
    if (tu_find_dptrain() < 0)
        fail_msg("no dptrain");
    if (!tu_have_fashion_mnist())
        tu_skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
    char *dir = tu_tempdir("pipeline");
    char a[256], b[256], c[256], d[256], m[256], args[1024];
    snprintf(a, sizeof a, "%s/one_device.safetensors", dir);
    snprintf(b, sizeof b, "%s/pipeline_then_one.safetensors", dir);
    snprintf(c, sizeof c, "%s/one_then_pipeline.safetensors", dir);
    snprintf(d, sizeof d, "%s/micro_batches.safetensors", dir);
    snprintf(m, sizeof m, "%s/resumed.jsonl", dir);
    snprintf(args, sizeof args, "--devices 1 --epochs 2 --checkpoint %s", a);
    assert_int_equal(dptrain_train(args), 0);

    snprintf(args, sizeof args, "--devices 2 --pipeline 2 --epochs 1 --checkpoint %s", b);
    assert_int_equal(dptrain_train(args), 0);
    snprintf(args, sizeof args, "--devices 1 --epochs 2 --resume %s --checkpoint %s --metrics %s",
             b, b, m);
    assert_int_equal(dptrain_train(args), 0);
    tu_assert_metrics_epochs(m, 2, 2);
    tu_assert_same_tensors(a, b);

    snprintf(args, sizeof args, "--devices 1 --epochs 1 --checkpoint %s", c);
    assert_int_equal(dptrain_train(args), 0);
    remove(m);
    snprintf(args, sizeof args,
             "--devices 2 --pipeline 2 --schedule gpipe --epochs 2 --resume %s --checkpoint %s "
             "--metrics %s",
             c, c, m);
    assert_int_equal(dptrain_train(args), 0);
    tu_assert_metrics_epochs(m, 2, 2);
    tu_assert_same_tensors(a, c);

    snprintf(args, sizeof args,
             "--devices 3 --pipeline 3 --micro-batches 4 --epochs 2 --checkpoint %s", d);
    assert_int_equal(dptrain_train(args), 0);
    double diff = tu_max_rel_diff(d, a);
    printf("3 stages, 4 micro-batches, 2 epochs: largest difference %.3g of a tensor's "
           "largest value\n",
           diff);
    assert_true(diff < 1e-4);
    free(dir);
}

int main(int argc, char **argv)
{
    tu_quiet_log();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bubble_measured),
        cmocka_unit_test(one_f_one_b_keeps_fewer_activations),
        cmocka_unit_test(checkpoints_resume_across_pipeline),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
