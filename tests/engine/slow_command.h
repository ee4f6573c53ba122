/* A slow command for a device's stream (the engine's own push, below the
 * public API), for the tests that need work still running when they look
 * (test_engine, test_wait_for, tests/device/test_tensor_host): it sleeps,
 * then optionally fills `dst` with `value`, then says it is done (when
 * `done` is given) and returns `status`. `done` is read by the front end
 * without any engine wait, so it is atomic. Header-only: each test is one
 * program. */
#ifndef DP_TESTS_SLOW_COMMAND_H
#define DP_TESTS_SLOW_COMMAND_H

#include "device/device.h"
#include "engine/stream.h"

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

typedef struct slow_args {
    double seconds;
    float *dst;
    int64_t n;
    float value;
    atomic_int *done;
    int status;
} slow_args;

static inline int slow_command(void *args, void *ctx)
{
    (void)ctx;
    const slow_args *a = args;
    struct timespec ts = {(time_t)a->seconds, (long)((a->seconds - (time_t)a->seconds) * 1e9)};
    nanosleep(&ts, NULL);
    for (int64_t i = 0; i < a->n; i++)
        a->dst[i] = a->value;
    if (a->done)
        atomic_store(a->done, 1);
    return a->status;
}

/* Pushes *a onto dev's stream. */
static inline void push_slow(dp_device_t *dev, const slow_args *a)
{
    dp__stream_push(dev->stream, slow_command, a, sizeof *a);
}

/* Monotonic seconds. */
static inline double slow_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
