/* MXNet's asynchronous engine (seed 002) in dptrain. The front end only
 * enqueues work; a device's worker runs it; reading a value waits:
 *
 *   for _ in range(10000): y = x + 1; y.wait_to_read()     # synchronous
 *   for _ in range(10000): y = x + 1                       # asynchronous
 *   nd.waitall()
 *
 * Here y += x on a small tensor, 10000 times: once waiting after every op
 * (dp_tensor_wait, MXNet's wait_to_read), once issuing them all and waiting
 * at the end (dp_waitall). The second also shows how soon the front end is
 * free: the time to issue the ops, while the device is still working. */
#include "examples.h"

#include "dp/dp.h"

#include <stdio.h>

int example_async(int ops)
{
    dp_device_t *dev;
    dp_tensor_t *x = NULL, *y = NULL;
    int rc = dp_device_open(&dev, "cpu:0", 1);
    if (rc < 0)
        return rc;
    int64_t shape[2] = {1, 2};
    float ones[2] = {1, 1};
    rc = dp_tensor_from_host(&x, dev, DP_F32, 2, shape, ones);
    if (rc == 0)
        rc = dp_tensor_from_host(&y, dev, DP_F32, 2, shape, ones);

    /* a = ones((1, 2)); b = ones((1, 2)); c = a + b: printing c waits. */
    float c[2];
    if (rc == 0)
        rc = dp_accumulate(y, x);
    if (rc == 0)
        rc = dp_tensor_to_host(y, c, sizeof c);
    if (rc == 0)
        printf("c = a + b = [[%g, %g]] (the print waited for the device)\n", c[0], c[1]);

    double t0 = dp_time_seconds();
    for (int i = 0; rc == 0 && i < ops; i++) {
        rc = dp_accumulate(y, x);
        if (rc == 0)
            rc = dp_tensor_wait(y);
    }
    double sync = dp_time_seconds() - t0;

    t0 = dp_time_seconds();
    for (int i = 0; rc == 0 && i < ops; i++)
        rc = dp_accumulate(y, x);
    double issued = dp_time_seconds() - t0;
    if (rc == 0)
        rc = dp_waitall();
    double async = dp_time_seconds() - t0;
    if (rc == 0)
        rc = dp_tensor_to_host(y, c, sizeof c);
    if (rc == 0) {
        printf("synchronous (wait_to_read after each of %d ops): %.4f sec\n", ops, sync);
        printf("asynchronous (waitall once at the end):          %.4f sec "
               "(front end free after %.4f sec)\n",
               async, issued);
        printf("y = [[%g, %g]] after %d additions\n", c[0], c[1], 2 * ops + 1);
    }
    dp_tensor_free(x);
    dp_tensor_free(y);
    dp_device_close(dev);
    return rc;
}

#ifndef DP_EXAMPLE_NO_MAIN
int main(void)
{
    int rc = example_async(10000);
    if (rc < 0)
        fprintf(stderr, "async_engine: %s\n", dp_strerror(rc));
    return rc < 0;
}
#endif
