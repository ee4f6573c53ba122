/* The engine: ops return before they run, waits block until they have, and
 * events order work across two devices. */
#include "testutil.h"

#include "dp/dp.h"

#include <stdlib.h>
#include <string.h>

static void async_then_wait(void **state)
{
    (void)state;
    dp_device_t *dev;
    assert_int_equal(dp_device_open(&dev, "cpu:0", 1), 0);
    int64_t n = 1 << 20;
    dp_tensor_t *a, *b;
    assert_int_equal(dp_tensor_new(&a, dev, DP_F32, 1, &n), 0);
    assert_int_equal(dp_tensor_new(&b, dev, DP_F32, 1, &n), 0);
    assert_int_equal(dp_tensor_fill(a, 1.0f), 0);
    assert_int_equal(dp_tensor_fill(b, 0.0f), 0);
    /* 200 accumulations are enqueued; only the read waits for them. */
    for (int i = 0; i < 200; i++)
        assert_int_equal(dp_accumulate(b, a), 0);
    assert_int_equal(dp_tensor_wait(b), 0);
    float *host = malloc((size_t)n * sizeof *host);
    assert_int_equal(dp_tensor_to_host(b, host, (size_t)n * sizeof *host), 0);
    assert_true(host[0] == 200.0f && host[n - 1] == 200.0f);
    assert_int_equal(dp_waitall(), 0);
    free(host);
    dp_tensor_free(a);
    dp_tensor_free(b);
    dp_device_close(dev);
}

static void events_order_two_devices(void **state)
{
    (void)state;
    dp_device_t *d0, *d1;
    assert_int_equal(dp_device_open(&d0, "cpu:0", 1), 0);
    assert_int_equal(dp_device_open(&d1, "cpu:1", 1), 0);
    assert_string_equal(dp_device_name(d1), "cpu:1");
    int64_t n = 1 << 18;
    dp_tensor_t *x, *one, *y;
    assert_int_equal(dp_tensor_new(&x, d0, DP_F32, 1, &n), 0);
    assert_int_equal(dp_tensor_new(&one, d0, DP_F32, 1, &n), 0);
    assert_int_equal(dp_tensor_new(&y, d1, DP_F32, 1, &n), 0);
    assert_int_equal(dp_tensor_fill(x, 0.0f), 0);
    assert_int_equal(dp_tensor_fill(one, 1.0f), 0);
    for (int i = 0; i < 50; i++)
        assert_int_equal(dp_accumulate(x, one), 0);
    /* d1 waits for d0's work through an event, then fills y; reading y
     * after d1 finishes must see d0 finished too. */
    dp_event ev = dp_event_record(d0);
    assert_int_equal(dp_stream_wait_event(d1, ev), 0);
    assert_int_equal(dp_tensor_fill(y, 7.0f), 0);
    assert_int_equal(dp_device_sync(d1), 0);
    assert_int_equal(dp_event_wait(ev), 0); /* already passed: returns at once */
    float v;
    float *host = malloc((size_t)n * sizeof *host);
    assert_int_equal(dp_tensor_to_host(x, host, (size_t)n * sizeof *host), 0);
    v = host[n / 2];
    assert_true(v == 50.0f);
    free(host);
    dp_tensor_free(x);
    dp_tensor_free(one);
    dp_tensor_free(y);
    dp_device_close(d1);
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

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(async_then_wait),   cmocka_unit_test(events_order_two_devices),
        cmocka_unit_test(bad_device_names),  cmocka_unit_test(status_strings),
        cmocka_unit_test(rng_is_counter_based),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
