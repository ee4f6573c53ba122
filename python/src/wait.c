/* wait.c - waits that release the GIL and let Ctrl-C through.
 *
 * A wait runs in slices of 100 ms (dp_tensor_wait_for, dp_device_sync_for)
 * with the GIL released; between slices PyErr_CheckSignals runs the
 * interpreter's handlers, so Ctrl-C raises KeyboardInterrupt within about
 * 100 ms. Nothing is cancelled: the commands already enqueued run on, and
 * the next wait finds them done. */
#include "dpy.h"

#include <string.h>

#define DPY_WAIT_SLICE 0.1

static int slice_tensor(void *what)
{
    return dp_tensor_wait_for(what, DPY_WAIT_SLICE);
}

static int slice_device(void *what)
{
    return dp_device_sync_for(what, DPY_WAIT_SLICE);
}

/* A device's stream keeps its first failure (sticky) until
 * dp_device_take_error takes it. The front end takes it at the first wait
 * that sees it and raises it there, once: the commands after the failed
 * one have run, and later waits and reads on that device work again (a
 * later failure is raised in its turn). */
static int raise_taken(dp_device_t *dev, int rc)
{
    int taken = dp_device_take_error(dev);
    return dpy_raise_int(taken < 0 ? taken : rc);
}

static int wait_sliced(int (*slice)(void *), void *what, dp_device_t *dev)
{
    for (;;) {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = slice(what);
        Py_END_ALLOW_THREADS
        if (rc == 0)
            return 0;
        if (rc != DP_ETIMEDOUT)
            return raise_taken(dev, rc);
        if (PyErr_CheckSignals() < 0)
            return -1;
    }
}

int dpy_wait_tensor(dp_tensor_t *t)
{
    return wait_sliced(slice_tensor, t, dp_tensor_device(t));
}

int dpy_wait_device(dp_device_t *d)
{
    return wait_sliced(slice_device, d, d);
}

/* Every open device in turn; one that is slow keeps the slices going. */
int dpy_wait_all(void)
{
    dp_device_t *devs[2 * DP_MAX_DEVICES];
    int n = dpy_open_devices(devs, 2 * DP_MAX_DEVICES);
    for (int k = 0; k < n; k++)
        if (dpy_wait_device(devs[k]) < 0)
            return -1;
    return 0;
}

/* The values in logical order into dst, after a wait for the device. Host memory in that
 * order is read directly; a blocked CPU activation is first copied into a
 * logical tensor on its device. A GPU tensor goes through dp_tensor_to_host. */
int dpy_to_host(dp_tensor_t *t, void *dst, size_t bytes)
{
    /* The whole device, as dp_tensor_to_host waits: a parameter's view is
     * written by commands over its whole buffer (an optimizer step, an
     * allreduce), which its own last write does not count. */
    if (dpy_wait_device(dp_tensor_device(t)) < 0)
        return -1;
    const void *p = dp_tensor_host_data(t);
    if (p) {
        memcpy(dst, p, bytes);
        return 0;
    }
    dp_device_t *dev = dp_tensor_device(t);
    int rc;
    if (dp_device_has(dev, DP_DEVICE_HOST_MEMORY)) {
        int64_t shape[DP_MAX_DIMS];
        for (int i = 0; i < dp_tensor_ndim(t); i++)
            shape[i] = dp_tensor_dim(t, i);
        dp_tensor_t *logical = NULL;
        rc = dp_tensor_new(&logical, dev, dp_tensor_dtype(t), dp_tensor_ndim(t), shape);
        if (rc == 0)
            rc = dp_tensor_copy(logical, t);
        if (rc < 0) {
            dp_tensor_free(logical);
            return dpy_raise_int(rc);
        }
        rc = dpy_wait_tensor(logical);
        p = rc == 0 ? dp_tensor_host_data(logical) : NULL;
        if (p)
            memcpy(dst, p, bytes);
        dp_tensor_free(logical);
        if (rc < 0)
            return -1;
        if (p)
            return 0;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = dp_tensor_to_host(t, dst, bytes);
    Py_END_ALLOW_THREADS
    return rc < 0 ? raise_taken(dev, rc) : 0;
}
