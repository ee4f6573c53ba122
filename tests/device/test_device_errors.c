/* A device's sticky error (dp_device_take_error) and what it must not reach:
 * a command that fails on its worker (a cross entropy whose label is out of
 * range: the kernel refuses it) makes every later wait on that device
 * return its error until dp_device_take_error takes it; the commands after
 * it still ran; and dp_train, which opens devices of its own, trains
 * whatever state a device of the caller's is in. */
#include "testutil.h"

#include "dp/dp.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define OK(expr) assert_int_equal((expr), 0)

/* Enqueues, on dev, a cross entropy of logits (2, 3) against labels {0, 7}:
 * label 7 is outside 0..2, which the kernel finds when it runs. */
static void enqueue_failing_kernel(dp_device_t *dev, dp_tensor_t **keep)
{
    const float logits[6] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
    const int32_t labels[2] = {0, 7};
    int64_t ls[2] = {2, 3}, ys[1] = {2};
    dp_tensor_t *x, *y, *loss;
    OK(dp_tensor_from_host(&x, dev, DP_F32, 2, ls, logits));
    OK(dp_tensor_from_host(&y, dev, DP_I32, 1, ys, labels));
    OK(dp_cross_entropy(&loss, x, y, DP_REDUCE_MEAN));
    keep[0] = x;
    keep[1] = y;
    keep[2] = loss;
}

/* The kernels after a failed forward still run: the cross entropy's
 * backward and the accuracy count of the same bad label must refuse it,
 * not write or read outside its row (ASan sees the overflow). */
static int refusals;
static void count_refusals(dp_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level == DP_LOG_ERROR && strstr(msg, "label 7 of row 1 is outside 0..2"))
        refusals++;
}

static void kernels_after_a_bad_label_refuse_it(void **state)
{
    (void)state;
    refusals = 0;
    dp_log_set(count_refusals, NULL);
    dp_device_t *dev;
    OK(dp_device_open(&dev, "cpu:0", 1));
    const float logits[6] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
    const int32_t labels[2] = {0, 7};
    int64_t ls[2] = {2, 3}, ys[1] = {2}, one = 1;
    dp_tensor_t *x, *y, *loss, *correct;
    OK(dp_tensor_from_host(&x, dev, DP_F32, 2, ls, logits));
    OK(dp_tensor_from_host(&y, dev, DP_I32, 1, ys, labels));
    OK(dp_tensor_set_requires_grad(x, NULL));
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, true));
    dp_tape_begin(tape);
    OK(dp_cross_entropy(&loss, x, y, DP_REDUCE_SUM));
    OK(dp_backward(loss));
    dp_tape_end(tape);
    OK(dp_tensor_new(&correct, dev, DP_F32, 1, &one));
    OK(dp_tensor_fill(correct, 0.0f));
    OK(dp_accuracy_accumulate(correct, x, y));
    int err = dp_device_sync(dev);
    dp_log_set(NULL, NULL);
    assert_int_equal(err, DP_EINVAL);
    assert_int_equal(refusals, 3); /* forward, backward, accuracy: each its own */
    assert_int_equal(dp_device_take_error(dev), DP_EINVAL);
    OK(dp_device_sync(dev));
    printf("a label of 7 among 3 classes: forward, backward and accuracy refuse it (%s)\n",
           dp_strerror(err));
    dp_tape_close(tape);
    dp_tensor_free(correct);
    dp_tensor_free(y);
    dp_tensor_free(x);
    dp_device_close(dev);
}

static void take_error_clears_it_and_later_commands_ran(void **state)
{
    (void)state;
    dp_device_t *dev;
    OK(dp_device_open(&dev, "cpu:0", 1));
    dp_tensor_t *keep[3];
    enqueue_failing_kernel(dev, keep);
    /* A command after the failing one: it runs (filling with 5). */
    int64_t four = 4;
    dp_tensor_t *after;
    OK(dp_tensor_new(&after, dev, DP_F32, 1, &four));
    OK(dp_tensor_fill(after, 5.0f));
    int err = dp_device_sync(dev);
    assert_true(err < 0);
    /* Sticky: every later wait, and a read, return it. */
    assert_int_equal(dp_device_sync(dev), err);
    assert_int_equal(dp_tensor_wait(after), err);
    float host[4] = {0, 0, 0, 0};
    assert_int_equal(dp_tensor_to_host(after, host, sizeof host), err);

    /* Taken once: the device works again, and the fill after the failure
     * had run. */
    assert_int_equal(dp_device_take_error(dev), err);
    assert_int_equal(dp_device_take_error(dev), 0);
    OK(dp_device_sync(dev));
    OK(dp_tensor_to_host(after, host, sizeof host));
    for (int i = 0; i < 4; i++)
        assert_true(host[i] == 5.0f);
    /* New commands run and read back. */
    OK(dp_tensor_fill(after, -2.0f));
    OK(dp_tensor_wait(after));
    OK(dp_tensor_to_host(after, host, sizeof host));
    for (int i = 0; i < 4; i++)
        assert_true(host[i] == -2.0f);

    /* A second failure is reported anew. */
    dp_tensor_t *again[3];
    enqueue_failing_kernel(dev, again);
    assert_int_equal(dp_device_sync(dev), err);
    assert_int_equal(dp_device_take_error(dev), err);
    OK(dp_device_sync(dev));
    for (int i = 0; i < 3; i++) {
        dp_tensor_free(keep[i]);
        dp_tensor_free(again[i]);
    }
    dp_tensor_free(after);
    dp_device_close(dev);
}

/* The front end's failure: a kernel error on its cpu:0, left untaken, then
 * dp_train on devices "2" (devices of its own) must train. */
static void train_after_a_kernel_error_elsewhere(void **state)
{
    (void)state;
    if (!tu_have_fashion_mnist())
        tu_skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
    dp_device_t *dev;
    OK(dp_device_open(&dev, "cpu:0", 1));
    dp_tensor_t *keep[3];
    enqueue_failing_kernel(dev, keep);
    assert_true(dp_device_sync(dev) < 0);

    dp_train_options o;
    dp_train_options_default(&o);
    o.data.limit_train = 256;
    o.data.limit_test = 128;
    o.data.batch_size = 64;
    o.run.epochs = 1;
    o.run.seed = 1;
    o.parallel.devices = "2";
    o.parallel.threads = 1;
    dp_train_result r;
    int rc = dp_train(&o, &r);
    if (rc != 0)
        fail_msg("dp_train after another device's error: %s (%s)", dp_strerror(rc),
                 dp_last_error());
    assert_int_equal(r.epochs_done, 1);
    assert_true(r.train_loss > 0 && r.train_loss < 10);
    /* The caller's device keeps its own error for the caller to take. */
    assert_true(dp_device_take_error(dev) < 0);
    for (int i = 0; i < 3; i++)
        dp_tensor_free(keep[i]);
    dp_device_close(dev);
}

/* dp_tensor_fill of an int32 tensor stores the integer (torch.full with
 * dtype=torch.int32), truncated toward zero; a value int32 cannot hold is
 * refused. */
static void fill_int32_writes_integers(void **state)
{
    (void)state;
    dp_device_t *dev;
    OK(dp_device_open(&dev, "cpu:0", 1));
    int64_t three = 3;
    dp_tensor_t *t;
    OK(dp_tensor_new(&t, dev, DP_I32, 1, &three));
    const float values[] = {7.0f, -3.0f, 2.75f, -2.75f, 0.0f, 16777216.0f};
    const int32_t want[] = {7, -3, 2, -2, 0, 16777216};
    for (size_t k = 0; k < sizeof values / sizeof *values; k++) {
        int32_t host[3] = {-99, -99, -99};
        OK(dp_tensor_fill(t, values[k]));
        OK(dp_tensor_to_host(t, host, sizeof host));
        for (int i = 0; i < 3; i++)
            if (host[i] != want[k])
                fail_msg("fill(%g): element %d is %d, want %d", (double)values[k], i, host[i],
                         want[k]);
    }
    assert_int_equal(dp_tensor_fill(t, 3e9f), DP_EINVAL);
    assert_int_equal(dp_tensor_fill(t, NAN), DP_EINVAL);
    OK(dp_device_sync(dev));
    dp_tensor_free(t);
    dp_device_close(dev);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(take_error_clears_it_and_later_commands_ran),
        cmocka_unit_test(train_after_a_kernel_error_elsewhere),
        cmocka_unit_test(fill_int32_writes_integers),
        cmocka_unit_test(kernels_after_a_bad_label_refuse_it),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
