/* The engine: ops return before they run, waits block until they have, and
 * events order work across two devices. Both are shown with a slow command
 * pushed straight onto a device's stream, so that a synchronous engine or a
 * missing event wait fails them. */
#include "testutil.h"

#include "dp/dp.h"
#include "comm/exchange.h"
#include "device/device.h"
#include "engine/stream.h"
#include "slow_command.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Reads src[at] into *seen on the worker of the stream it is pushed to. */
typedef struct peek_args {
    const float *src;
    int64_t at;
    float *seen;
} peek_args;

static int peek_command(void *args, void *ctx)
{
    (void)ctx;
    const peek_args *a = args;
    *a->seen = a->src[a->at];
    return 0;
}

/* Ops return before they run, and dp_tensor_wait blocks until they have: a
 * 0.3 s command heads the stream, then 200 accumulations are enqueued. The
 * enqueues must return while the slow command still runs (a synchronous
 * engine would take >= 0.3 s and find it done); after dp_tensor_wait the
 * values must be there without any further wait (read straight from the
 * CPU device's memory, not through dp_tensor_to_host, which waits itself). */
static void async_then_wait(void **state)
{
    (void)state;
    dp_device_t *dev;
    assert_int_equal(dp_device_open(&dev, "cpu:0", 1), 0);
    int64_t n = 1 << 16;
    dp_tensor_t *a, *b;
    assert_int_equal(dp_tensor_new(&a, dev, DP_F32, 1, &n), 0);
    assert_int_equal(dp_tensor_new(&b, dev, DP_F32, 1, &n), 0);
    assert_int_equal(dp_tensor_fill(a, 1.0f), 0);
    assert_int_equal(dp_tensor_fill(b, 0.0f), 0);
    assert_int_equal(dp_device_sync(dev), 0);

    atomic_int done = 0;
    slow_args slow = {.seconds = 0.3, .dst = NULL, .n = 0, .done = &done};
    double t0 = slow_now();
    dp__stream_push(dev->stream, slow_command, &slow, sizeof slow);
    for (int i = 0; i < 200; i++)
        assert_int_equal(dp_accumulate(b, a), 0);
    double issued = slow_now() - t0;
    int done_when_issued = atomic_load(&done);
    print_message("200 ops issued in %.4f s behind a 0.3 s command (done then: %d)\n", issued,
                  done_when_issued);
    assert_int_equal(done_when_issued, 0);
    assert_true(issued < 0.15);

    assert_int_equal(dp_tensor_wait(b), 0);
    double waited = slow_now() - t0;
    assert_int_equal(atomic_load(&done), 1);
    assert_true(waited >= 0.3);
    const float *raw = b->data; /* CPU device memory, logical order for 1-D */
    assert_true(raw[0] == 200.0f && raw[n - 1] == 200.0f);
    assert_int_equal(dp_waitall(), 0);
    dp_tensor_free(a);
    dp_tensor_free(b);
    dp_device_close(dev);
}

/* dp_tensor_read_async enqueues the copy and returns: behind a 0.2 s command
 * the host buffer still holds what it held, and after dp_device_sync it
 * holds the tensor's values. A buffer of the wrong size is refused. */
static void read_async_then_sync(void **state)
{
    (void)state;
    dp_device_t *dev;
    assert_int_equal(dp_device_open(&dev, "cpu:0", 1), 0);
    int64_t n = 3;
    dp_tensor_t *a;
    assert_int_equal(dp_tensor_new(&a, dev, DP_F32, 1, &n), 0);
    atomic_int done = 0;
    slow_args slow = {.seconds = 0.2, .dst = NULL, .n = 0, .done = &done};
    dp__stream_push(dev->stream, slow_command, &slow, sizeof slow);
    assert_int_equal(dp_tensor_fill(a, 3.0f), 0);
    float host[3] = {-1.0f, -1.0f, -1.0f};
    assert_int_equal(dp_tensor_read_async(a, host, sizeof host), 0);
    assert_int_equal(atomic_load(&done), 0);
    assert_true(host[0] == -1.0f && host[2] == -1.0f);
    assert_int_equal(dp_device_sync(dev), 0);
    assert_true(host[0] == 3.0f && host[1] == 3.0f && host[2] == 3.0f);
    assert_int_equal(dp_tensor_read_async(a, host, sizeof host - 4), DP_EINVAL);
    dp_tensor_free(a);
    dp_device_close(dev);
}

/* An event orders a consumer on device 1 after a producer on device 0: the
 * producer sleeps 0.2 s, then writes x = 50; device 1 waits for the event,
 * then reads x. Only device 1 is synchronised and x is never read through
 * an API that waits on device 0, so without the event wait the consumer
 * would see x = 0. The front end must not block in dp_stream_wait_event. */
static void events_order_two_devices(void **state)
{
    (void)state;
    dp_device_t *d0, *d1;
    assert_int_equal(dp_device_open(&d0, "cpu:0", 1), 0);
    assert_int_equal(dp_device_open(&d1, "cpu:1", 1), 0);
    assert_string_equal(dp_device_name(d1), "cpu:1");
    int64_t n = 1 << 12;
    dp_tensor_t *x;
    assert_int_equal(dp_tensor_new(&x, d0, DP_F32, 1, &n), 0);
    assert_int_equal(dp_tensor_fill(x, 0.0f), 0);
    assert_int_equal(dp_device_sync(d0), 0);

    atomic_int done = 0;
    slow_args produce = {.seconds = 0.2, .dst = x->data, .n = n, .value = 50.0f, .done = &done};
    double t0 = slow_now();
    dp__stream_push(d0->stream, slow_command, &produce, sizeof produce);
    dp_event ev = dp_event_record(d0);
    assert_int_equal(dp_stream_wait_event(d1, ev), 0);
    float seen = -1.0f;
    peek_args peek = {.src = x->data, .at = n / 2, .seen = &seen};
    dp__stream_push(d1->stream, peek_command, &peek, sizeof peek);
    double issued = slow_now() - t0;
    assert_int_equal(atomic_load(&done), 0);
    assert_true(issued < 0.1);

    assert_int_equal(dp_device_sync(d1), 0);
    print_message("device 1 saw x = %g after device 0's 0.2 s write (issued in %.4f s)\n",
                  (double)seen, issued);
    assert_true(seen == 50.0f);
    assert_int_equal(dp_event_wait(ev), 0); /* already passed: returns at once */
    assert_int_equal(atomic_load(&done), 1);
    dp_tensor_free(x);
    dp_device_close(d1);
    dp_device_close(d0);
}

/* Two devices run their first oneDNN primitive at the same moment, with no
 * event between them; 0 when both convolutions give the right numbers. On
 * its first execution oneDNN initialises the global mutex of its ITT
 * tracing hooks behind a plain flag, then loads the collector library that
 * INTEL_LIBITTNOTIFY64 names while holding it. Here that takes 0.3 s
 * (itt_slow_collector.c), so a second worker that reaches the hooks finds
 * the mutex held and ThreadSanitizer reports the race, unless the CPU
 * backend has run one primitive on the opening thread before any worker
 * exists (cpu_device.c, run_first_primitive). */
static int first_kernels_of_process(void)
{
    setenv("INTEL_LIBITTNOTIFY64", DP_ITT_SLOW_COLLECTOR, 1);
    dp_device_t *d[2];
    dp_tensor_t *x[2], *w[2], *y[2];
    int64_t xs[4] = {2, 3, 8, 8}, ws[4] = {4, 3, 3, 3};
    static float out[2][2 * 4 * 6 * 6];
    for (int i = 0; i < 2; i++)
        if (dp_device_open(&d[i], i ? "cpu:1" : "cpu:0", 1) ||
            dp_tensor_new(&x[i], d[i], DP_F32, 4, xs) || dp_tensor_new(&w[i], d[i], DP_F32, 4, ws))
            return 1;
    for (int i = 0; i < 2; i++)
        if (dp_tensor_fill(x[i], 1.0f) || dp_tensor_fill(w[i], 0.5f) ||
            dp_conv2d(&y[i], x[i], w[i], NULL, &(dp_conv2d_params){0}))
            return 2;
    for (int i = 0; i < 2; i++)
        if (dp_tensor_to_host(y[i], out[i], sizeof out[i]))
            return 3;
    /* Every output is 3 channels x 3 x 3 taps x 1 x 0.5 = 13.5. */
    for (size_t j = 0; j < sizeof out[0] / sizeof out[0][0]; j++)
        if (out[0][j] != 13.5f || out[1][j] != 13.5f)
            return 4;
    for (int i = 1; i >= 0; i--) {
        dp_tensor_free(y[i]);
        dp_tensor_free(w[i]);
        dp_tensor_free(x[i]);
        dp_device_close(d[i]);
    }
    return 0;
}

/* Without run_first_primitive the race above shows in about half of the
 * processes (it depends on where the second worker is when the first takes
 * the mutex), so it is run in 8 fresh ones: a race ends one with
 * ThreadSanitizer's exit status 66. It is a
 * CTest test of its own, so that its process has done no oneDNN work
 * before it forks. */
static void first_kernels_at_once(void **state)
{
    (void)state;
    for (int round = 0; round < 8; round++) {
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
            _exit(first_kernels_of_process());
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        print_message("round %d: the process exited %d\n", round, WEXITSTATUS(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
}

/* A device closed while another device's queue still holds a wait on it:
 * device 0 sleeps 0.2 s, then waits on device 1's last command; device 1
 * is closed at once. Closing must wait for device 0 to be past that wait,
 * or device 0's worker reads device 1's freed stream (ThreadSanitizer:
 * "use of an invalid mutex", AddressSanitizer: heap-use-after-free). */
static void close_waits_for_waiters(void **state)
{
    (void)state;
    dp_device_t *d0, *d1;
    assert_int_equal(dp_device_open(&d0, "cpu:0", 1), 0);
    assert_int_equal(dp_device_open(&d1, "cpu:1", 1), 0);
    int64_t n = 16;
    dp_tensor_t *x;
    assert_int_equal(dp_tensor_new(&x, d1, DP_F32, 1, &n), 0);
    assert_int_equal(dp_tensor_fill(x, 1.0f), 0);
    atomic_int done = 0;
    slow_args slow = {.seconds = 0.2, .done = &done};
    dp__stream_push(d0->stream, slow_command, &slow, sizeof slow);
    assert_int_equal(dp_stream_wait_event(d0, dp_event_record(d1)), 0);
    assert_int_equal(dp_tensor_wait(x), 0);
    dp_tensor_free(x);
    double t0 = slow_now();
    dp_device_close(d1);
    double took = slow_now() - t0;
    print_message("closing device 1 took %.3f s: device 0 was still to wait on it\n", took);
    assert_int_equal(atomic_load(&done), 1);
    assert_int_equal(dp_device_sync(d0), 0);
    dp_device_close(d0);
}

static void bad_device_names(void **state)
{
    (void)state;
    tu_quiet_log();
    dp_device_t *d;
    assert_int_equal(dp_device_open(&d, "tpu:0", 1), DP_EINVAL);
    assert_non_null(strstr(dp_last_error(), "tpu:0"));
    assert_int_equal(dp_device_open(&d, "cpu:x", 1), DP_EINVAL);
    assert_int_equal(dp_device_open(&d, "cpu:0", -1), DP_EINVAL);
    /* A bad list is named by what it is: the library knows no CLI flags
     * (dptrain's log callback says --devices). */
    dp_device_t *devs[DP_MAX_DEVICES];
    int n;
    assert_int_equal(dp_devices_open(devs, &n, "cpu:0,", 1), DP_EINVAL);
    assert_string_equal(dp_last_error(), "`devices` cpu:0,: trailing comma");
    assert_int_equal(dp_devices_open(devs, &n, "cpu:0,cpu:0", 1), DP_EINVAL);
    assert_string_equal(dp_last_error(), "`devices` cpu:0,cpu:0: cpu:0 is named twice");
    assert_int_equal(dp_devices_open(devs, &n, "", 1), DP_EINVAL);
    assert_string_equal(dp_last_error(), "`devices` is empty");
    dp_log_set(NULL, NULL);
}

static void status_strings(void **state)
{
    (void)state;
    assert_string_equal(dp_strerror(DP_OK), "success");
    assert_string_equal(dp_strerror(DP_ETRUNC), "truncated file");
    assert_string_equal(dp_strerror(-999), "unknown error");
}

static void rng_is_counter_based(void **state)
{
    (void)state;
    dp_rng a, b;
    dp_rng_init(&a, 42, 3);
    dp_rng_init(&b, 42, 3);
    for (int i = 0; i < 5; i++)
        dp_rng_u64(&a);
    b.counter = 5; /* jump straight to the sixth number */
    assert_true(dp_rng_u64(&a) == dp_rng_u64(&b));
    /* Normal draws: mean ~0, variance ~1 over 20000 samples. */
    double s = 0, s2 = 0;
    dp_rng_init(&a, 7, 0);
    for (int i = 0; i < 20000; i++) {
        double x = dp_rng_normal(&a);
        s += x;
        s2 += x * x;
    }
    tu_assert_close(s / 20000, 0.0, 0, 0.03);
    tu_assert_close(s2 / 20000, 1.0, 0, 0.04);
}

/* The exchange behind SyncBatchNorm: MEMBERS threads, ROUNDS rounds back to
 * back, each member contributing values whose sum depends on the order of
 * addition; every member must get the sum in member order, bit for bit. */
enum { MEMBERS = 3, ROUNDS = 200, XLEN = 5 };

typedef struct member_args {
    dp__exchange *x;
    int member;
    int bad; /* rounds whose total differed from the member-order sum */
} member_args;

static double contribution(int member, int round, int i)
{
    return (member == 1 ? 1e-17 : 1.0) * (double)(round + 1) * (double)(i + member + 1) / 3.0;
}

static void *member_main(void *p)
{
    member_args *a = p;
    for (int r = 0; r < ROUNDS; r++) {
        double mine[XLEN], total[XLEN];
        for (int i = 0; i < XLEN; i++)
            mine[i] = contribution(a->member, r, i);
        dp__exchange_sum(a->x, a->member, MEMBERS, mine, XLEN, total);
        for (int i = 0; i < XLEN; i++) {
            double want = 0;
            for (int m = 0; m < MEMBERS; m++)
                want += contribution(m, r, i);
            if (total[i] != want) {
                a->bad++;
                break;
            }
        }
    }
    return NULL;
}

static void exchange_sums_in_member_order(void **state)
{
    (void)state;
    dp__exchange *x;
    assert_int_equal(dp__exchange_create(&x, MEMBERS, XLEN), 0);
    pthread_t threads[MEMBERS];
    member_args args[MEMBERS];
    for (int m = 0; m < MEMBERS; m++) {
        args[m] = (member_args){x, m, 0};
        assert_int_equal(pthread_create(&threads[m], NULL, member_main, &args[m]), 0);
    }
    for (int m = 0; m < MEMBERS; m++) {
        pthread_join(threads[m], NULL);
        assert_int_equal(args[m].bad, 0);
    }
    dp__exchange_close(x);
    assert_int_equal(dp__exchange_create(&x, 0, XLEN), DP_EINVAL);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(async_then_wait),
        cmocka_unit_test(read_async_then_sync),
        cmocka_unit_test(events_order_two_devices),
        cmocka_unit_test(bad_device_names),
        cmocka_unit_test(status_strings),
        cmocka_unit_test(rng_is_counter_based),
        cmocka_unit_test(exchange_sums_in_member_order),
        cmocka_unit_test(close_waits_for_waiters),
        cmocka_unit_test(first_kernels_at_once),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
