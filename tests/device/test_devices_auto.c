/* `--devices auto` on machines larger than the library's device table: the
 * library is made to see 200 CPUs (dp__devices_see_cpus), as on a big
 * server, and must open at most DP_MAX_DEVICES devices, writing nothing past
 * its arrays (AddressSanitizer watches in the asan build). */
#include "testutil.h"

#include "dp/dp.h"

#include "device/device.h"

#include <stdio.h>
#include <string.h>

/* Opens `auto` with the library seeing `cpus` CPUs; returns how many
 * devices opened (they are closed again) and checks their names. */
static int open_auto(int cpus, int threads, int *threads_each)
{
    dp_device_t *devs[DP_MAX_DEVICES + 1];
    int n = -1;
    dp__devices_see_cpus(cpus);
    int rc = dp_devices_open(devs, &n, "auto", threads);
    dp__devices_see_cpus(0);
    assert_int_equal(rc, 0);
    assert_true(n >= 1 && n <= DP_MAX_DEVICES);
    for (int k = 0; k < n; k++) {
        char want[32];
        snprintf(want, sizeof want, "cpu:%d", k);
        assert_string_equal(dp_device_name(devs[k]), want);
    }
    *threads_each = devs[0]->threads;
    dp_devices_close(devs, n);
    return n;
}

static void test_auto_caps_at_the_device_table(void **state)
{
    (void)state;
    if (dp_cuda_device_count() > 0)
        tu_skip("auto opens the GPUs on this machine, not CPU devices");
    int each;
    /* 200 CPUs: 64 devices, not 200 (names[64] and devs[64] would overflow). */
    assert_int_equal(open_auto(200, 1, &each), DP_MAX_DEVICES);
    assert_int_equal(each, 1);
    printf("200 CPUs seen: auto opened %d devices\n", DP_MAX_DEVICES);
    /* Exactly the table's size, and one more. */
    assert_int_equal(open_auto(DP_MAX_DEVICES, 1, &each), DP_MAX_DEVICES);
    assert_int_equal(open_auto(DP_MAX_DEVICES + 1, 1, &each), DP_MAX_DEVICES);
}

static void test_auto_shares_the_cores(void **state)
{
    (void)state;
    if (dp_cuda_device_count() > 0)
        tu_skip("auto opens the GPUs on this machine, not CPU devices");
    int each;
    /* Without --threads, the 200 cores are shared among the 64 devices. */
    assert_int_equal(open_auto(200, 0, &each), DP_MAX_DEVICES);
    assert_int_equal(each, 200 / DP_MAX_DEVICES);
    /* A small machine still gets one device per core. */
    assert_int_equal(open_auto(3, 0, &each), 3);
    assert_int_equal(each, 1);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto_caps_at_the_device_table),
        cmocka_unit_test(test_auto_shares_the_cores),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
