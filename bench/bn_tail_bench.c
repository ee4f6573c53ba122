/* Times the CPU kernels of ResNet-18's residual block tail (bn2 -> + shortcut
 * -> ReLU) in bf16 NHWC at batch 256, on each stage's shape, through the
 * device table: batch norm's training forward (statistics, then oneDNN's
 * normalise) with oneDNN's add + ReLU after it (unfused), batch_norm_add
 * (fused), batch norm's training backward, and the copy of the gradient
 * that add's backward makes for the shortcut (which the fused op spares).
 * Medians of 15 calls after one warm-up; bench/PROFILE.md quotes it.
 *
 *   build/bench_bn_tail [THREADS=1]
 *
 * With CPUTIME set it reads the process's CPU time instead of the wall
 * clock (steadier on a loaded machine; run it with OMP_WAIT_POLICY=passive
 * so that waiting threads do not count). The data are fixed values, not a
 * model's: the kernels' time does not depend on them. */
#define _POSIX_C_SOURCE 200809L
#include "device/device.h"
#include "dp/tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { CALLS = 15, KINDS = 5 };
static const char *const kind_names[KINDS] = {"bn forward", "add + relu", "batch_norm_add",
                                              "bn backward", "copy"};

static double now(void)
{
    struct timespec t;
    clock_gettime(getenv("CPUTIME") ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The time of one kernel call, run to completion. */
typedef int (*call_fn)(dp_device_t *dev, void *args);
static double timed(dp_device_t *dev, call_fn fn, void *args)
{
    double t0 = now();
    if (fn(dev, args) != 0 || dp_device_sync(dev) != 0) {
        fprintf(stderr, "bench_bn_tail: a kernel failed\n");
        exit(1);
    }
    return now() - t0;
}

static int bn_forward(dp_device_t *dev, void *a)
{
    return dev->ops->batch_norm_forward(dev, a);
}
static int bn_add(dp_device_t *dev, void *a)
{
    return dev->ops->batch_norm_add(dev, a);
}
static int bn_backward(dp_device_t *dev, void *a)
{
    return dev->ops->batch_norm_backward(dev, a);
}
static int eltwise(dp_device_t *dev, void *a)
{
    return dev->ops->eltwise(dev, a);
}

int main(int argc, char **argv)
{
    dp_device_t *dev;
    if (dp_device_open(&dev, "cpu:0", argc > 1 ? atoi(argv[1]) : 1) != 0)
        return 1;
    static const int64_t shapes[4][4] = {
        {256, 64, 28, 28}, {256, 128, 14, 14}, {256, 256, 7, 7}, {256, 512, 4, 4}};
    printf("%-10s", "shape");
    for (int k = 0; k < KINDS; k++)
        printf(" %15s", kind_names[k]);
    printf("   (ms, medians of %d)\n", CALLS);
    for (int s = 0; s < 4; s++) {
        const int64_t *sh = shapes[s], C = sh[1], n = sh[0] * sh[1] * sh[2] * sh[3];
        /* x, dy, y, dx, residual (bf16, N H W C); 8 C floats of statistics */
        uint16_t *buf = malloc((size_t)(5 * n) * sizeof *buf);
        float *v = malloc((size_t)(8 * C) * sizeof *v);
        if (!buf || !v)
            return 1;
        for (int64_t i = 0; i < 5 * n; i++)
            buf[i] = (uint16_t)(0x3f80 + (i * 2654435761u) % 0x7f); /* 1 .. 2 */
        for (int64_t i = 0; i < 8 * C; i++)
            v[i] = 1.0f;
        uint16_t *x = buf, *dy = buf + n, *y = buf + 2 * n, *dx = buf + 3 * n, *r = buf + 4 * n;
        dp__tdesc d = {x, DP_BF16, 4, 1, {sh[0], sh[1], sh[2], sh[3]}};
        dp__batch_norm_args a;
        memset(&a, 0, sizeof a);
        a.x = a.y = a.dy = a.dx = a.residual = d;
        a.y.data = y;
        a.dy.data = dy;
        a.dx.data = dx;
        a.residual.data = r;
        a.gamma = v;
        a.beta = v + C;
        a.dgamma = v + 2 * C;
        a.dbeta = v + 3 * C;
        a.running_mean = v + 4 * C;
        a.running_var = v + 5 * C;
        a.save_mean = v + 6 * C;
        a.save_var = v + 7 * C;
        a.momentum = 0.1f;
        a.eps = 1e-5f;
        a.training = true;
        dp__batch_norm_args fused = a;
        fused.relu = true;
        dp__eltwise_args add_relu = {
            .op = DP__ELT_ADD_RELU, .a = y, .b = r, .out = dx, .n = n, .dtype = DP_BF16};
        dp__eltwise_args copy = {.op = DP__ELT_COPY, .a = dy, .out = dx, .n = n, .dtype = DP_BF16};
        double t[KINDS][CALLS];
        for (int i = 0; i <= CALLS; i++) {
            double c[KINDS] = {timed(dev, bn_forward, &a), timed(dev, eltwise, &add_relu),
                               timed(dev, bn_add, &fused), timed(dev, bn_backward, &a),
                               timed(dev, eltwise, &copy)};
            for (int k = 0; i > 0 && k < KINDS; k++)
                t[k][i - 1] = c[k];
        }
        char name[32];
        snprintf(name, sizeof name, "%lldx%lldx%lld", (long long)C, (long long)sh[2],
                 (long long)sh[3]);
        printf("%-10s", name);
        for (int k = 0; k < KINDS; k++) {
            qsort(t[k], CALLS, sizeof t[k][0], by_value);
            printf(" %15.2f", t[k][CALLS / 2] * 1e3);
        }
        printf("\n");
        free(buf);
        free(v);
    }
    dp_device_close(dev);
    return 0;
}
