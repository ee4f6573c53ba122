/* Limits the library states once: DP_MAX_EPOCHS, which dp_train checks
 * before anything else (the CLI's --epochs takes the same 1 to 1000), and
 * the warning when a device gets more kernel threads than the CPUs the
 * process may use (its OpenMP team then waits on itself at every barrier). */
#include "testutil.h"

#include "dp/dp.h"

#include "device/device.h"

#include <stdio.h>
#include <string.h>

static char warning[512];
static int warnings, errors;

static void capture(dp_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level == DP_LOG_WARN) {
        warnings++;
        snprintf(warning, sizeof warning, "%s", msg);
    }
    errors += level == DP_LOG_ERROR;
}

static void test_epochs_over_the_limit_fail_first(void **state)
{
    (void)state;
    dp_train_options o;
    dp_train_options_default(&o);
    o.data.data_dir = "/nonexistent";
    o.data.dataset = "mnist";
    o.run.epochs = DP_MAX_EPOCHS + 1;
    dp_train_result r;
    /* Refused at once, before the data (which is missing) or a device:
     * the one error logged is the epoch count's. */
    errors = 0;
    dp_log_set(capture, NULL);
    assert_int_equal(dp_train(&o, &r), DP_EINVAL);
    dp_log_set(NULL, NULL);
    tu_assert_error_mentions("`epochs` 1001: expected an integer from 1 to 1000");
    assert_int_equal(errors, 1);
    tu_quiet_log();
    o.run.epochs = DP_MAX_EPOCHS;
    assert_int_equal(dp_train(&o, &r), DP_ENOENT);
    tu_assert_error_mentions("/nonexistent");
    assert_int_equal(DP_MAX_EPOCHS, DP_CHECKPOINT_MAX_HISTORY);
}

/* Opens "1" with `threads` kernel threads on a machine of `cpus` CPUs;
 * returns the warnings logged. */
static int warnings_opening(int cpus, int threads)
{
    dp__devices_see_cpus(cpus);
    warnings = 0;
    dp_log_set(capture, NULL);
    dp_device_t *devs[1];
    int n;
    int rc = dp_devices_open(devs, &n, "1", threads);
    dp_log_set(NULL, NULL);
    dp__devices_see_cpus(0);
    assert_int_equal(rc, 0);
    dp_devices_close(devs, n);
    return warnings;
}

static void test_threads_over_the_cpus_warn(void **state)
{
    (void)state;
    assert_int_equal(warnings_opening(2, 1024), 1);
    assert_string_equal(warning, "1024 kernel threads per device, more than the 2 CPUs this "
                                 "process may use: kernels run far slower when threads "
                                 "outnumber CPUs");
    assert_int_equal(warnings_opening(2, 3), 1);
    assert_int_equal(warnings_opening(2, 2), 0);
    assert_int_equal(warnings_opening(2, 0), 0); /* 0: the CPUs shared out */
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_epochs_over_the_limit_fail_first),
        cmocka_unit_test(test_threads_over_the_cpus_warn),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
