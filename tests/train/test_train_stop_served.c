/* A stop request is served once: a run asked to stop (dp_train_request_stop,
 * what a Ctrl-C handler calls) stops after its first step, and the next
 * dp_train of the process trains all its epochs; a request made after that
 * return (or before any run) is the next run's. */
#include "testutil.h"

#include "dp/dp.h"

#include <signal.h>
#include <stdio.h>

static int run(const char *checkpoint, dp_train_result *r)
{
    dp_train_options o;
    dp_train_options_default(&o);
    o.data.limit_train = 256;
    o.data.limit_test = 128;
    o.data.batch_size = 64;
    o.run.epochs = 1;
    o.run.seed = 1;
    o.parallel.devices = "1";
    o.parallel.threads = 1;
    o.checkpoint.checkpoint_path = checkpoint;
    return dp_train(&o, r);
}

static void a_served_stop_is_not_the_next_runs(void **state)
{
    (void)state;
    if (!tu_have_fashion_mnist())
        tu_skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
    char ck[512];
    snprintf(ck, sizeof ck, "%s", tu_tmp_path("stop.safetensors"));
    dp_train_result r;
    dp_train_request_stop(SIGINT);
    assert_int_equal(run(ck, &r), DP_EINTR);
    assert_int_equal(r.stopped_epoch, 1);
    assert_int_equal(r.stopped_batch, 1);
    assert_int_equal(dp_train_stop_signal(), SIGINT); /* still readable after the return */

    int rc = run(ck, &r);
    if (rc != 0)
        fail_msg("the run after a served stop: %s (%s)", dp_strerror(rc), dp_last_error());
    assert_int_equal(r.epochs_done, 1);
    assert_int_equal(dp_train_stop_signal(), 0);

    /* A new request after that return is served by the next run. */
    dp_train_request_stop(SIGTERM);
    assert_int_equal(run(ck, &r), DP_EINTR);
    assert_int_equal(r.stopped_batch, 1);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(a_served_stop_is_not_the_next_runs)};
    return tu_run(argc, argv, tests, tu_setup_tmp, tu_teardown_tmp);
}
