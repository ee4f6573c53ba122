/* Tensors over the caller's memory and copies between tensors, what the
 * Python front end's DLPack and in-place assignment stand on:
 * dp_tensor_wrap_host makes no copy and calls its release once, after the
 * last command using the memory (one on another device included);
 * dp_tensor_host_data gives the memory of a logical tensor and NULL for
 * one stored N, H, W, C; dp_tensor_copy copies between devices and
 * layouts in logical order; each refuses what it cannot do. */
#include "testutil.h"

#include "dp/dp.h"
#include "device/device.h"
#include "engine/stream.h"
#include "../engine/slow_command.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* The release callback's context: how often it ran, and the memory, which
 * it poisons so that a reader after it would see -1. */
typedef struct owner {
    atomic_int calls;
    float *data;
    int64_t n;
} owner;

static void release(void *ctx)
{
    owner *o = ctx;
    for (int64_t i = 0; i < o->n; i++)
        o->data[i] = -1.0f;
    atomic_fetch_add(&o->calls, 1);
}

static void wrap_host_shares_and_releases_once(void **state)
{
    (void)state;
    dp_device_t *dev;
    assert_int_equal(dp_device_open(&dev, "cpu:0", 1), 0);
    float data[6] = {1, 2, 3, 4, 5, 6};
    owner o = {0, data, 6};
    const int64_t shape[2] = {2, 3};
    dp_tensor_t *t;
    assert_int_equal(dp_tensor_wrap_host(&t, dev, DP_F32, 2, shape, data, release, &o), 0);
    assert_ptr_equal(dp_tensor_host_data(t), data);
    /* no copy: the library's values are the caller's */
    float got[6];
    assert_int_equal(dp_tensor_to_host(t, got, sizeof got), 0);
    assert_memory_equal(got, data, sizeof got);
    data[4] = 50.0f;
    assert_int_equal(dp_tensor_to_host(t, got, sizeof got), 0);
    assert_true(got[4] == 50.0f);
    /* released once, after the commands before the free: a slow one, then
     * a fill that writes the memory */
    slow_args slow = {.seconds = 0.3};
    push_slow(dev, &slow);
    assert_int_equal(dp_tensor_fill(t, 7.0f), 0);
    dp_tensor_free(t);
    assert_int_equal(atomic_load(&o.calls), 0);
    assert_true(data[0] == 1.0f); /* the fill has not run yet */
    assert_int_equal(dp_device_sync(dev), 0);
    assert_int_equal(atomic_load(&o.calls), 1);
    assert_true(data[0] == -1.0f && data[5] == -1.0f); /* filled, then released */
    assert_int_equal(dp_device_sync(dev), 0);
    assert_int_equal(atomic_load(&o.calls), 1);
    /* NULL release: nothing called */
    assert_int_equal(dp_tensor_wrap_host(&t, dev, DP_F32, 2, shape, data, NULL, NULL), 0);
    dp_tensor_free(t);
    assert_int_equal(dp_device_sync(dev), 0);
    dp_device_close(dev);
}

/* A copy on another device reads the wrapped memory: the release waits for
 * that device's copy too (behind a slow command there). */
static void release_waits_for_another_device(void **state)
{
    (void)state;
    dp_device_t *d0, *d1;
    assert_int_equal(dp_device_open(&d0, "cpu:0", 1), 0);
    assert_int_equal(dp_device_open(&d1, "cpu:1", 1), 0);
    float data[4] = {1, 2, 3, 4};
    owner o = {0, data, 4};
    int64_t n = 4;
    dp_tensor_t *t, *dst;
    assert_int_equal(dp_tensor_wrap_host(&t, d0, DP_F32, 1, &n, data, release, &o), 0);
    assert_int_equal(dp_tensor_new(&dst, d1, DP_F32, 1, &n), 0);
    slow_args slow = {.seconds = 0.3};
    push_slow(d1, &slow);
    assert_int_equal(dp_tensor_copy(dst, t), 0);
    dp_tensor_free(t);
    assert_int_equal(dp_device_sync(d0), 0);
    assert_int_equal(atomic_load(&o.calls), 1);
    float got[4];
    assert_int_equal(dp_tensor_to_host(dst, got, sizeof got), 0);
    const float want[4] = {1, 2, 3, 4}; /* read before the release poisoned it */
    assert_memory_equal(got, want, sizeof got);
    dp_tensor_free(dst);
    dp_device_close(d1);
    dp_device_close(d0);
}

static void wrap_host_refuses(void **state)
{
    (void)state;
    tu_quiet_log();
    dp_device_t *dev, *meta;
    assert_int_equal(dp_device_open(&dev, "cpu:0", 1), 0);
    assert_int_equal(dp__device_open_meta(&meta), 0);
    float data[8] = {0};
    owner o = {0, data, 8};
    int64_t n = 4;
    dp_tensor_t *t;
    assert_int_equal(dp_tensor_wrap_host(&t, meta, DP_F32, 1, &n, data, release, &o), DP_ENOTSUP);
    tu_assert_error_mentions("host memory");
    assert_int_equal(dp_tensor_wrap_host(&t, dev, DP_F32, 1, &n, (char *)data + 2, release, &o),
                     DP_EINVAL);
    tu_assert_error_mentions("4-byte elements");
    assert_int_equal(dp_tensor_wrap_host(&t, dev, DP_F32, 1, &n, NULL, release, &o), DP_EINVAL);
    assert_int_equal(dp_tensor_wrap_host(&t, dev, DP_F32, 5, &n, data, release, &o), DP_EINVAL);
    tu_assert_error_mentions("rank 5");
    assert_int_equal(dp_tensor_wrap_host(&t, dev, (dp_dtype)9, 1, &n, data, release, &o),
                     DP_EINVAL);
    assert_int_equal(dp_device_sync(dev), 0);
    assert_int_equal(atomic_load(&o.calls), 0); /* refused: the memory stays the caller's */
    dp_device_close(meta);
    dp_device_close(dev);
}

/* x (2, 3, 2, 2) through tensors of the other layout and another device:
 * the values in logical order at every step. */
static void copy_between_devices_and_layouts(void **state)
{
    (void)state;
    dp_device_t *d0, *d1;
    assert_int_equal(dp_device_open(&d0, "cpu:0", 1), 0);
    assert_int_equal(dp_device_open(&d1, "cpu:1", 1), 0);
    const int64_t s[4] = {2, 3, 2, 2}, flat[2] = {6, 4};
    float x[24];
    for (int i = 0; i < 24; i++)
        x[i] = (float)i;
    dp_tensor_t *a, *nhwc0, *nhwc1, *b, *c;
    assert_int_equal(dp_tensor_from_host(&a, d0, DP_F32, 4, s, x), 0);
    assert_int_equal(dp__tensor_alloc(&nhwc0, d0, DP_F32, 4, s, 1), 0);
    assert_int_equal(dp__tensor_alloc(&nhwc1, d1, DP_F32, 4, s, 1), 0);
    assert_int_equal(dp_tensor_new(&b, d1, DP_F32, 2, flat), 0);
    assert_int_equal(dp_tensor_new(&c, d0, DP_F32, 4, s), 0);
    assert_null(dp_tensor_host_data(nhwc0));
    assert_int_equal(dp_tensor_copy(nhwc0, a), 0);     /* layouts, one device */
    assert_int_equal(dp_tensor_copy(nhwc1, nhwc0), 0); /* one layout, two devices */
    assert_int_equal(dp_tensor_copy(b, nhwc1), 0);     /* layouts and shapes */
    assert_int_equal(dp_tensor_copy(c, b), 0);         /* back to d0 */
    assert_int_equal(dp_device_sync(d1), 0);
    /* nhwc1's memory is N, H, W, C: element (n, c, h, w) at ((n H + h) W + w) C + c */
    const float *raw = nhwc1->data;
    assert_true(raw[1] == x[4] && raw[3] == x[1]);
    float got[24];
    assert_int_equal(dp_tensor_to_host(b, got, sizeof got), 0);
    assert_memory_equal(got, x, sizeof got);
    assert_int_equal(dp_tensor_to_host(c, got, sizeof got), 0);
    assert_memory_equal(got, x, sizeof got);
    tu_quiet_log();
    int64_t five = 5;
    dp_tensor_t *short_t, *ints;
    assert_int_equal(dp_tensor_new(&short_t, d0, DP_F32, 1, &five), 0);
    assert_int_equal(dp_tensor_copy(short_t, a), DP_ESHAPE);
    tu_assert_error_mentions("element counts");
    assert_int_equal(dp_tensor_new(&ints, d0, DP_I32, 4, s), 0);
    assert_int_equal(dp_tensor_copy(ints, a), DP_EINVAL);
    tu_assert_error_mentions("float32 into int32");
    dp_tensor_free(ints), dp_tensor_free(short_t);
    dp_tensor_free(a), dp_tensor_free(nhwc0), dp_tensor_free(nhwc1);
    dp_tensor_free(b), dp_tensor_free(c);
    dp_device_close(d1);
    dp_device_close(d0);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(wrap_host_shares_and_releases_once),
        cmocka_unit_test(release_waits_for_another_device),
        cmocka_unit_test(wrap_host_refuses),
        cmocka_unit_test(copy_between_devices_and_layouts),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
