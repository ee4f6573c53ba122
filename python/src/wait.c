/* wait.c - waits that release the GIL and let Ctrl-C through.
 *
 * A wait runs in slices of 100 ms (dp_tensor_wait_for, dp_device_sync_for)
 * with the GIL released; between slices PyErr_CheckSignals runs the
 * interpreter's handlers, so Ctrl-C raises KeyboardInterrupt within about
 * 100 ms. Nothing is cancelled: the commands already enqueued run on, and
 * the next wait finds them done. */
#include "dpy.h"

#include <stdlib.h>

#define DPY_WAIT_SLICE 0.1

static int slice_tensor(void *what)
{
    return dp_tensor_wait_for(what, DPY_WAIT_SLICE);
}

static int slice_device(void *what)
{
    return dp_device_sync_for(what, DPY_WAIT_SLICE);
}

static int wait_sliced(int (*slice)(void *), void *what)
{
    for (;;) {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = slice(what);
        Py_END_ALLOW_THREADS
        if (rc == 0)
            return 0;
        if (rc != DP_ETIMEDOUT)
            return dpy_raise_int(rc);
        if (PyErr_CheckSignals() < 0)
            return -1;
    }
}

int dpy_wait_tensor(dp_tensor_t *t)
{
    return wait_sliced(slice_tensor, t);
}

int dpy_wait_device(dp_device_t *d)
{
    return wait_sliced(slice_device, d);
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

int dpy_to_host(dp_tensor_t *t, void *dst, size_t bytes)
{
    if (dpy_wait_tensor(t) < 0)
        return -1;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = dp_tensor_to_host(t, dst, bytes);
    Py_END_ALLOW_THREADS
    return rc < 0 ? dpy_raise_int(rc) : 0;
}
