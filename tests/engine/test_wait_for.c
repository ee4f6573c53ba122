/* The timed waits (dp_tensor_wait_for, dp_device_sync_for): behind a slow
 * command they give up with DP_ETIMEDOUT after about the time asked, log
 * nothing, cancel nothing (a later wait finds the work done), return an
 * error a command hit, and refuse a negative or NaN time. */
#include "testutil.h"

#include "dp/dp.h"
#include "device/device.h"
#include "engine/stream.h"
#include "slow_command.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static void times_out_then_completes(void **state)
{
    (void)state;
    dp_device_t *dev;
    assert_int_equal(dp_device_open(&dev, "cpu:0", 1), 0);
    int64_t n = 4;
    dp_tensor_t *t;
    assert_int_equal(dp_tensor_new(&t, dev, DP_F32, 1, &n), 0);
    atomic_int done = 0;
    slow_args slow = {.seconds = 0.6, .done = &done};
    push_slow(dev, &slow);
    assert_int_equal(dp_tensor_fill(t, 5.0f), 0);
    /* a known last error: a timeout must leave it as it is (not logged) */
    tu_quiet_log();
    assert_int_equal(dp_tensor_wait_for(t, -1.0), DP_EINVAL);
    char before[256];
    snprintf(before, sizeof before, "%s", dp_last_error());
    assert_non_null(strstr(before, "dp_tensor_wait_for"));
    double t0 = slow_now();
    assert_int_equal(dp_tensor_wait_for(t, 0.1), DP_ETIMEDOUT);
    double took = slow_now() - t0;
    assert_string_equal(dp_last_error(), before);
    assert_int_equal(dp_device_sync_for(dev, 0.0), DP_ETIMEDOUT);
    assert_int_equal(atomic_load(&done), 0);
    print_message("wait_for(0.1) gave up after %.3f s behind a 0.6 s command\n", took);
    assert_true(took >= 0.1 && took < 0.4);
    /* waiting again in slices finds the work done: nothing was cancelled */
    int slices = 0, rc;
    while ((rc = dp_tensor_wait_for(t, 0.1)) == DP_ETIMEDOUT)
        slices++;
    assert_int_equal(rc, 0);
    assert_int_equal(atomic_load(&done), 1);
    assert_true(slices >= 2 && slices <= 8);
    float v[4];
    assert_int_equal(dp_tensor_to_host(t, v, sizeof v), 0);
    assert_true(v[0] == 5.0f && v[3] == 5.0f);
    assert_int_equal(dp_device_sync_for(dev, 0.0), 0);
    assert_int_equal(dp_device_sync_for(dev, INFINITY), 0);
    assert_int_equal(dp_device_sync_for(dev, NAN), DP_EINVAL);
    tu_assert_error_mentions("dp_device_sync_for");
    print_message("then %d more slices of 0.1 s until it was done\n", slices);
    dp_tensor_free(t);
    dp_device_close(dev);
}

/* An error a command hit is what the timed waits return once it ran. */
static void returns_a_command_error(void **state)
{
    (void)state;
    dp_device_t *dev;
    assert_int_equal(dp_device_open(&dev, "cpu:0", 1), 0);
    atomic_int done = 0;
    slow_args failing = {.seconds = 0.2, .done = &done, .status = DP_EIO};
    push_slow(dev, &failing);
    assert_int_equal(dp_device_sync_for(dev, 0.01), DP_ETIMEDOUT);
    assert_int_equal(dp_device_sync_for(dev, 5.0), DP_EIO);
    dp_device_close(dev);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(times_out_then_completes),
        cmocka_unit_test(returns_a_command_error),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
