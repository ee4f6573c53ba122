/* Model parallelism as PyTorch's "Single-Machine Model Parallel Best
 * Practices" tutorial and GPipe draw it: a model split into K stages on K
 * devices, each batch in M micro-batches, and the timeline of one step as
 * the devices ran it: which device runs which micro-batch's forward (a
 * digit) or backward (a letter) when, and the idle "bubble" (dots) that
 * (K - 1) / (M + K - 1) predicts for stages of equal cost.
 *
 * The data are random images: the timeline depends on the shapes only. */
#include "examples.h"

#include "dp/dp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WIDTH = 64 }; /* characters of the timeline */

/* The character for stage k's task i: '0'.. for forwards, 'a'.. for
 * backwards, by micro-batch (mod 10 and 26). */
static char task_char(const dp_pipeline_task *t)
{
    return t->backward ? (char)('a' + t->micro_batch % 26) : (char)('0' + t->micro_batch % 10);
}

static void print_timeline(const dp_pipeline_stats *s, int K, dp_pipeline_schedule schedule,
                           dp_device_t *const *devs)
{
    int M = s->micro_batches, n = 2 * M;
    double span = 0;
    for (int i = 0; i < K * n; i++)
        if (s->end[i] > span)
            span = s->end[i];
    printf("%-8s 0 ms%*s%.1f ms\n", "", WIDTH - 7, "", 1e3 * span);
    dp_pipeline_task *order = malloc((size_t)n * sizeof *order);
    for (int k = 0; order && k < K; k++) {
        dp_pipeline_order(schedule, K, k, M, order);
        char row[WIDTH + 1];
        memset(row, '.', WIDTH);
        row[WIDTH] = '\0';
        /* A cell shows the task that ran for most of it. */
        double best[WIDTH] = {0};
        for (int i = 0; i < n; i++) {
            double a = s->start[k * n + i], b = s->end[k * n + i];
            for (int c = 0; c < WIDTH; c++) {
                double lo = span * c / WIDTH, hi = span * (c + 1) / WIDTH;
                double overlap = (b < hi ? b : hi) - (a > lo ? a : lo);
                if (overlap > best[c] && overlap > 0.5 * (hi - lo)) {
                    best[c] = overlap;
                    row[c] = task_char(&order[i]);
                }
            }
        }
        printf("%-8s |%s|\n", dp_device_name(devs[k]), row);
    }
    free(order);
    printf("digits: a micro-batch's forward, letters: its backward (a = micro-batch 0), "
           "dots: idle\n");
}

int example_pipeline(const char *model, const char *devices, int stages, int micro_batches,
                     int schedule, int64_t batch, int steps, const char *plot)
{
    static const int64_t chw[3] = {1, 28, 28};
    dp_device_t *devs[DP_MAX_DEVICES];
    int ndev;
    DP_TRY_EXAMPLE(dp_devices_open(devs, &ndev, devices ? devices : "2", 1));
    const dp_model_def *def;
    dp_model_t *m = NULL;
    dp_pipeline_t *p = NULL;
    dp_tensor_t *loss = NULL, *correct = NULL;
    int64_t one = 1, pixels = chw[0] * chw[1] * chw[2];
    float *x = malloc((size_t)(batch * pixels) * sizeof *x);
    int32_t *y = malloc((size_t)batch * sizeof *y);
    int rc = x && y ? dp_model_def_load(&def, model, chw) : DP_ENOMEM;
    if (rc == 0)
        rc = dp_model_init(&m, def, devs[0], 0);
    dp_pipeline_options po = {.stages = stages,
                              .micro_batches = micro_batches,
                              .schedule = (dp_pipeline_schedule)schedule,
                              .update = {.optimizer = {.lr = 0.01f}}};
    if (rc == 0)
        rc = dp_pipeline_init(&p, m, devs, ndev, chw, &po);
    if (rc == 0)
        rc = dp_tensor_new(&loss, devs[0], DP_F32, 1, &one);
    if (rc == 0)
        rc = dp_tensor_new(&correct, devs[0], DP_F32, 1, &one);
    for (int64_t i = 0; rc == 0 && i < batch * pixels; i++)
        x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f;
    for (int64_t i = 0; rc == 0 && i < batch; i++)
        y[i] = (int32_t)(i % 10);
    if (rc == 0) {
        printf("%s in %d stages on %d device(s), layers", def->name, stages, ndev);
        for (int k = 0; k < stages; k++)
            printf(" %d-%d", dp_pipeline_stage_first(p, k), dp_pipeline_stage_first(p, k + 1) - 1);
        printf("; batch %lld in %d micro-batches, %s\n", (long long)batch, micro_batches,
               dp_pipeline_schedule_name((dp_pipeline_schedule)schedule));
    }
    dp_pipeline_stats s;
    dp_data_parallel_t *dp = p ? dp_pipeline_data_parallel(p) : NULL;
    /* The first steps warm the kernels up; the last one is shown. */
    for (int step = 0; rc == 0 && step < steps; step++) {
        dp_data_parallel_zero_grad(dp);
        rc = dp_pipeline_forward_backward(p, x, y, batch, 0, (uint64_t)step, 0, loss, correct);
        if (rc == 0)
            rc = dp_data_parallel_step(dp, 1.0f / (float)batch);
        if (rc == 0)
            rc = dp_waitall();
        if (rc == 0)
            dp_pipeline_take_stats(p, &s);
    }
    if (rc == 0) {
        printf("step %d of %d, as the devices ran it:\n", steps, steps);
        print_timeline(&s, stages, (dp_pipeline_schedule)schedule, devs);
        int M = s.micro_batches;
        printf("the devices idled %.3f of the step (stages of equal cost: (K-1)/(M+K-1) = "
               "%.3f)\n",
               s.bubble_fraction, (double)(stages - 1) / (M + stages - 1));
        for (int k = 0; k < stages; k++)
            printf("stage %d: %lld parameters, activations at most %.2f MB\n", k,
                   (long long)s.stage_params[k], (double)s.peak_activation_bytes[k] / 1e6);
        if (plot) {
            rc = dp_plot_pipeline(plot, stages, M, schedule, s.start, s.end);
            if (rc == 0)
                printf("wrote %s\n", plot);
        }
    }
    free(x);
    free(y);
    dp_tensor_free(loss);
    dp_tensor_free(correct);
    dp_pipeline_close(p);
    dp_model_close(m);
    dp_devices_close(devs, ndev);
    return rc;
}

#ifndef DP_EXAMPLE_NO_MAIN
int main(void)
{
    int rc = example_pipeline("resnet18", "2", 2, 4, DP_PIPELINE_1F1B, 32, 2, NULL);
    if (rc < 0)
        fprintf(stderr, "pipeline_timeline: %s\n",
                dp_last_error()[0] ? dp_last_error() : dp_strerror(rc));
    return rc < 0;
}
#endif
