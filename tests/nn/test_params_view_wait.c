/* A parameter's view (dp_params_get) and its gradient's are written by
 * commands over the whole dp_params buffer (an optimizer step, zeroing the
 * gradients) that do not know the views: waiting on a view, and a copy
 * from a view to another device, must wait for those too. A slow command
 * (a host call sleeping 300 ms) holds the device; a fill of the whole
 * buffer is queued behind it; a wait on a view that only looks (0 s) must
 * then time out, and a copy of the view onto cpu:1 (dp_tensor_copy, and
 * the library's own dp__copy_written) must read the filled values. */
#include "testutil.h"

#include "comm/comm.h"
#include "dp/dp.h"

#include <unistd.h>

#define OK(expr) assert_int_equal((expr), 0)

static void sleep_300ms(void *arg)
{
    (void)arg;
    usleep(300000);
}

static void views_wait_for_writes_of_their_buffer(void **state)
{
    (void)state;
    dp_device_t *dev, *other;
    OK(dp_device_open(&dev, "cpu:0", 1));
    OK(dp_device_open(&other, "cpu:1", 1));
    dp_param_spec specs[2] = {{.name = "w", .ndim = 2, .shape = {2, 3}},
                              {.name = "b", .ndim = 1, .shape = {3}}};
    dp_params_t *p;
    OK(dp_params_init(&p, dev, specs, 2, true));
    OK(dp_device_sync(dev));
    dp_tensor_t *b = dp_params_get(p, 1), *gb = dp_tensor_grad(b);

    /* The values buffer, then the gradients buffer, written whole. */
    for (int which = 0; which < 2; which++) {
        dp_tensor_t *view = which ? gb : b;
        dp_tensor_t *whole = which ? dp_params_grads(p) : dp_params_values(p);
        float value = which ? -4.0f : 7.0f;
        dp__enqueue_host_call(dev, sleep_300ms, NULL, "sleep_300ms");
        OK(dp_tensor_fill(whole, value));
        assert_int_equal(dp_tensor_wait_for(view, 0.0), DP_ETIMEDOUT);
        /* cpu:1 copies the view once the fill has run. */
        int64_t three = 3;
        dp_tensor_t *copy;
        OK(dp_tensor_new(&copy, other, DP_F32, 1, &three));
        OK(dp_tensor_copy(copy, view));
        float got[3] = {0, 0, 0};
        OK(dp_tensor_to_host(copy, got, sizeof got));
        for (int i = 0; i < 3; i++)
            if (got[i] != value)
                fail_msg("%s: the copy on cpu:1 read %g, not the fill's %g",
                         which ? "gradient view" : "value view", (double)got[i], (double)value);
        /* The library's own cross-device copy orders itself by the view's
         * write event (dp__copy_written, what a pipeline's transfer uses). */
        dp_tensor_t *copy2;
        OK(dp_tensor_new(&copy2, other, DP_F32, 1, &three));
        dp__enqueue_host_call(dev, sleep_300ms, NULL, "sleep_300ms");
        OK(dp_tensor_fill(whole, value + 1));
        OK(dp__copy_written(copy2, view, true));
        OK(dp_tensor_to_host(copy2, got, sizeof got));
        for (int i = 0; i < 3; i++)
            if (got[i] != value + 1)
                fail_msg("%s: dp__copy_written on cpu:1 read %g, not the fill's %g",
                         which ? "gradient view" : "value view", (double)got[i],
                         (double)(value + 1));
        dp_tensor_free(copy2);
        value += 1;
        OK(dp_tensor_wait(view));
        OK(dp_tensor_to_host(view, got, sizeof got));
        for (int i = 0; i < 3; i++)
            assert_true(got[i] == value);
        dp_tensor_free(copy);
    }
    OK(dp_device_sync(dev));
    dp_params_close(p);
    dp_device_close(other);
    dp_device_close(dev);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(views_wait_for_writes_of_their_buffer),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
