/* device.c - the one device convention (docs/python-internals.md).
 *
 * "GPU i" is dptrain's device i in the order `--devices N` takes them: the
 * GPUs, else CPU devices over the cores. N is the number of GPUs, else the
 * cores this process may run on; DPTRAIN_DEVICES=N sets it. The N devices
 * are opened together on first use by dp_devices_open("N") (so a CPU
 * device gets the cores divided among the N, the CLI's rule); any other
 * name opens alone with the same share, and every device stays open for
 * the process. "cpu" is the host device, apart from the N as on a GPU
 * machine: cpu:N where the N are CPU devices cpu:0 .. cpu:N-1, else cpu:0.
 * It opens alone with one of the N's share of threads (opening N+1
 * together would shrink the N's share); it mostly copies (the loader's
 * batches, to()), and its OpenMP team runs only while it has work. */
#include "dpy.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static dp_device_t *conv_devs[DP_MAX_DEVICES]; /* the N of the convention */
static int conv_n = -1;
static dp_device_t *other_devs[DP_MAX_DEVICES]; /* opened by another name */
static int other_n;

static int cores_available(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    return 1;
}

/* N, without opening anything. */
static int convention_count(void)
{
    const char *env = getenv("DPTRAIN_DEVICES");
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end == '\0' && v >= 1 && v <= DP_MAX_DEVICES)
            return (int)v;
    }
    int gpus = dp_cuda_device_count();
    if (gpus > 0)
        return gpus < DP_MAX_DEVICES ? gpus : DP_MAX_DEVICES;
    int cores = cores_available();
    return cores < DP_MAX_DEVICES ? cores : DP_MAX_DEVICES;
}

static int open_convention(void)
{
    if (conv_n >= 0)
        return 0;
    char spec[16];
    snprintf(spec, sizeof spec, "%d", convention_count());
    int n = 0, rc;
    Py_BEGIN_ALLOW_THREADS
    rc = dp_devices_open(conv_devs, &n, spec, 0);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        return dpy_raise_int(rc);
    conv_n = n;
    return 0;
}

const char *dpy_device_name(dp_device_t *d)
{
    return dp_device_name(d);
}

/* "cuda:i" → index i; -1 for another name. */
static int cuda_index(const char *name)
{
    if (strcmp(name, "cuda") == 0)
        return 0;
    if (strncmp(name, "cuda:", 5) != 0 || name[5] < '0' || name[5] > '9')
        return -1;
    char *end;
    long v = strtol(name + 5, &end, 10);
    return *end == '\0' && v < DP_MAX_DEVICES ? (int)v : -2;
}

dp_device_t *dpy_device(const char *name)
{
    if (open_convention() < 0)
        return NULL;
    int i = cuda_index(name);
    if (i == -2 || i >= conv_n) {
        PyErr_Format(PyExc_ValueError,
                     "device %s: there are %d devices here (cuda:0 .. cuda:%d, the GPUs or "
                     "else the CPU devices; DPTRAIN_DEVICES sets how many)",
                     name, conv_n, conv_n - 1);
        return NULL;
    }
    if (i >= 0)
        return conv_devs[i];
    /* "cpu" is the host device: cpu:N beside CPU devices cpu:0 .. cpu:N-1
     * that stand for GPUs (as "cpu" is apart from the GPUs on a GPU
     * machine), else cpu:0. */
    char host[16];
    snprintf(host, sizeof host, "cpu:%d",
             conv_n > 0 && dp_device_has(conv_devs[0], DP_DEVICE_HOST_MEMORY) ? conv_n : 0);
    const char *canon = strcmp(name, "cpu") == 0 ? host : name;
    for (int k = 0; k < conv_n; k++)
        if (strcmp(dp_device_name(conv_devs[k]), canon) == 0)
            return conv_devs[k];
    for (int k = 0; k < other_n; k++)
        if (strcmp(dp_device_name(other_devs[k]), canon) == 0)
            return other_devs[k];
    if (other_n == DP_MAX_DEVICES) {
        PyErr_Format(PyExc_ValueError, "device %s: too many devices open", name);
        return NULL;
    }
    int threads = cores_available() / (conv_n > 0 ? conv_n : 1);
    dp_device_t *d = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = dp_device_open(&d, canon, threads > 0 ? threads : 1);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        dpy_raise(rc);
        return NULL;
    }
    /* "cpu:0" may have been reached by another spelling. */
    for (int k = 0; k < conv_n; k++)
        if (strcmp(dp_device_name(conv_devs[k]), dp_device_name(d)) == 0) {
            dp_device_close(d);
            return conv_devs[k];
        }
    other_devs[other_n++] = d;
    return d;
}

dp_device_t *dpy_device_arg(PyObject *o)
{
    if (!o || o == Py_None)
        return dpy_device("cpu");
    PyObject *s;
    if (PyUnicode_Check(o)) {
        s = o;
        Py_INCREF(s);
    } else {
        s = PyObject_Str(o);
        if (!s)
            return NULL;
    }
    const char *name = PyUnicode_AsUTF8AndSize(s, NULL);
    dp_device_t *d = name ? dpy_device(name) : NULL;
    Py_DECREF(s);
    return d;
}

int dpy_open_devices(dp_device_t **devs, int max)
{
    int n = 0;
    for (int k = 0; k < conv_n && n < max; k++)
        devs[n++] = conv_devs[k];
    for (int k = 0; k < other_n && n < max; k++)
        devs[n++] = other_devs[k];
    return n;
}

/* ---- module functions ------------------------------------------------------ */

static PyObject *py_device_count(PyObject *m, PyObject *unused)
{
    if (conv_n >= 0)
        return PyLong_FromLong(conv_n);
    return PyLong_FromLong(convention_count());
}

static PyObject *py_device_name(PyObject *m, PyObject *arg)
{
    long i = PyLong_AsLong(arg);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    if (open_convention() < 0)
        return NULL;
    if (i < 0 || i >= conv_n)
        return PyErr_Format(PyExc_ValueError, "device_name(): device %ld of %d", i, conv_n);
    return PyUnicode_FromString(dp_device_name(conv_devs[i]));
}

static PyObject *py_canonical_device(PyObject *m, PyObject *arg)
{
    dp_device_t *d = dpy_device_arg(arg);
    return d ? PyUnicode_FromString(dp_device_name(d)) : NULL;
}

static PyObject *py_gpu_count(PyObject *m, PyObject *unused)
{
    return PyLong_FromLong(dp_cuda_device_count());
}

static PyObject *py_waitall(PyObject *m, PyObject *unused)
{
    if (dpy_wait_all() < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_synchronize(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs > 1)
        return PyErr_Format(PyExc_TypeError, "synchronize() takes at most 1 argument");
    if (nargs == 0 || args[0] == Py_None) {
        if (dpy_wait_all() < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    dp_device_t *d = dpy_device_arg(args[0]);
    if (!d || dpy_wait_device(d) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_set_precision(PyObject *m, PyObject *arg)
{
    const char *name = PyUnicode_Check(arg) ? PyUnicode_AsUTF8AndSize(arg, NULL) : NULL;
    int value;
    if (!name || dp_name_parse(&dp_precision_names, name, &value) < 0) {
        char choices[128];
        PyErr_Clear();
        return PyErr_Format(PyExc_ValueError, "set_precision(): precision must be %s",
                            dp_name_choices(&dp_precision_names, choices, sizeof choices));
    }
    return PyUnicode_FromString(dp_precision_name(dp_set_precision((dp_precision)value)));
}

static PyObject *py_get_precision(PyObject *m, PyObject *unused)
{
    return PyUnicode_FromString(dp_precision_name(dp_get_precision()));
}

static PyMethodDef device_functions[] = {
    {"device_count", py_device_count, METH_NOARGS,
     "device_count() -> the number of devices of the convention (GPUs, else CPU devices)"},
    {"device_name", py_device_name, METH_O, "device_name(i) -> dptrain's name of device i"},
    {"canonical_device", py_canonical_device, METH_O,
     "canonical_device(name) -> the opened device's name (\"cuda:1\" -> \"cpu:1\" without GPUs)"},
    {"gpu_count", py_gpu_count, METH_NOARGS, "gpu_count() -> the GPUs the CUDA runtime finds"},
    {"waitall", py_waitall, METH_NOARGS, "waitall(): waits for every device (MXNet's)"},
    {"synchronize", (PyCFunction)(void (*)(void))py_synchronize, METH_FASTCALL,
     "synchronize(device=None): waits for one device, or all"},
    {"set_precision", py_set_precision, METH_O,
     "set_precision(name) -> previous: \"fp32\", \"bf16\", \"bf16-reference\""},
    {"get_precision", py_get_precision, METH_NOARGS, "get_precision() -> the current precision"},
    {NULL, NULL, 0, NULL},
};

int dpy_device_add(PyObject *m)
{
    return PyModule_AddFunctions(m, device_functions);
}
