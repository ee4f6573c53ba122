/* The backend list (src/device/backend_list.h) as everything asks it: each
 * built backend's table holds exactly the kernels the op list gives it;
 * device names are parsed against the list (an unknown prefix names the
 * list's, a backend this build leaves out says why); an open device knows
 * its backend; and `--devices N` and `auto` fall back to the backend whose
 * devices share the cores. */
#include "testutil.h"

#include "dp/dp.h"

#include "device/device.h"

#include <stdio.h>
#include <string.h>

/* Every slot of every line: set in backend b's table exactly where the
 * line's backends column gives b the op. */
static int slots_checked;
static void check_table(const dp__device_ops *ops, dp__backend_id b)
{
#define SLOT(slot, args, mask)                                                                     \
    do {                                                                                           \
        bool given = (((mask) >> b) & 1u) != 0;                                                    \
        if (given != (ops->slot != NULL))                                                          \
            fail_msg("%s: slot %s is %s but the op list %s", ops->kind, #slot,                     \
                     ops->slot ? "set" : "NULL", given ? "gives it" : "does not give it");         \
        slots_checked++;                                                                           \
    } while (0);
#define LINE(name, args, kernels, backends, cost)                                                  \
    DP__OP_SLOTS_##kernels(SLOT, name, args, DP__OP_BACKENDS_##backends)
    DP__OP_LIST(LINE)
#undef LINE
#undef SLOT
}

static void tables_follow_the_op_list(void **state)
{
    (void)state;
    int built = 0;
    for (int i = 0; i < DP__BACKEND_COUNT; i++) {
        const dp__backend *b = dp__backend_get((dp__backend_id)i);
        if (!b->ops)
            continue;
        assert_string_equal(b->ops->kind, b->name);
        check_table(b->ops, (dp__backend_id)i);
        built++;
    }
    printf("%d built backend(s) of %d: %d slots as the op list gives them\n", built,
           DP__BACKEND_COUNT, slots_checked);
    assert_true(built >= 1);
}

static void names_are_parsed_by_the_list(void **state)
{
    (void)state;
    dp_device_t *dev = NULL;
    assert_int_equal(dp_device_open(&dev, "gpu:0", 1), DP_EINVAL);
    assert_int_equal(dp_device_open(&dev, "cpux:0", 1), DP_EINVAL);
    assert_int_equal(dp_device_open(&dev, "cp:0", 1), DP_EINVAL);
    assert_null(dev);
    char names[128];
    dp__backend_names(names, sizeof names);
    printf("an unknown device name expects %s\n", names);
    for (int i = 0; i < dp_backend_count(); i++) {
        dp_backend_info info;
        assert_int_equal(dp_backend_info_get(i, &info), 0);
        char want[32];
        snprintf(want, sizeof want, "%s:N", info.name);
        assert_non_null(strstr(names, want));
        printf("%-5s built %d, %d %s(s) here%s%s\n", info.name, info.built, info.devices,
               info.hardware, info.devices ? "" : ": ", info.devices ? "" : info.why_none);
        if (!info.built) {
            /* Left out of this build: opening one says so. */
            snprintf(want, sizeof want, "%s:0", info.name);
            assert_int_equal(dp_device_open(&dev, want, 1), DP_ENOTSUP);
            assert_int_equal(info.devices, 0);
        }
    }
    dp_backend_info info;
    assert_int_equal(dp_backend_info_get(-1, &info), DP_EINVAL);
    assert_int_equal(dp_backend_info_get(dp_backend_count(), &info), DP_EINVAL);
}

static void devices_know_their_backend(void **state)
{
    (void)state;
    dp_device_t *dev;
    assert_int_equal(dp_device_open(&dev, "cpu:3", 1), 0);
    dp_backend_info info;
    assert_int_equal(dp_backend_info_get(dp_device_backend(dev), &info), 0);
    assert_string_equal(info.name, "cpu");
    assert_true(info.shares_cores);
    char what[64];
    assert_int_equal(dp_backend_describe(dp_device_backend(dev), 0, what, sizeof what), 0);
    printf("cpu:3's backend: %s, device 0 described as \"%s\"\n", info.name, what);
    dp_device_close(dev);
    assert_int_equal(dp__device_open_meta(&dev), 0);
    assert_int_equal(dp_device_backend(dev), -1);
    dp_device_close(dev);
}

/* Without hardware devices, N opens N devices of the backend whose
 * devices share the cores, more than the cores if asked. */
static void counts_fall_back_to_shared_cores(void **state)
{
    (void)state;
    for (int i = 0; i < dp_backend_count(); i++) {
        dp_backend_info info;
        assert_int_equal(dp_backend_info_get(i, &info), 0);
        if (!info.shares_cores && info.devices > 0)
            tu_skip("a backend with devices of its own comes first here");
    }
    dp_device_t *devs[DP_MAX_DEVICES];
    int n = 0;
    dp__devices_see_cpus(2);
    int rc = dp_devices_open(devs, &n, "5", 1);
    dp__devices_see_cpus(0);
    assert_int_equal(rc, 0);
    assert_int_equal(n, 5);
    assert_string_equal(dp_device_name(devs[4]), "cpu:4");
    dp_devices_close(devs, n);
    assert_int_equal(dp_devices_open(devs, &n, "0", 1), DP_EINVAL);
    assert_int_equal(dp_devices_open(devs, &n, "65", 1), DP_EINVAL);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tables_follow_the_op_list),
        cmocka_unit_test(names_are_parsed_by_the_list),
        cmocka_unit_test(devices_know_their_backend),
        cmocka_unit_test(counts_fall_back_to_shared_cores),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
