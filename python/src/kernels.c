/* kernels.c - how the front end's convolutions pick their kernels
 * (dptrain.backends.conv_algo): the library's process-wide choice, and
 * its cache file of measured choices (dp/conv_cache.h). */
#include "dpy.h"

#include <stdlib.h>

/* set_conv_algo(name) -> previous: "direct", "auto" or "winograd". */
static PyObject *py_set_conv_algo(PyObject *m, PyObject *arg)
{
    const char *name = PyUnicode_Check(arg) ? PyUnicode_AsUTF8AndSize(arg, NULL) : NULL;
    int value;
    if (!name || dp_name_parse(&dp_conv_algo_names, name, &value) < 0) {
        char choices[128];
        PyErr_Clear();
        return PyErr_Format(PyExc_ValueError, "conv_algo(): %R is not one of %s", arg,
                            dp_name_choices(&dp_conv_algo_names, choices, sizeof choices));
    }
    dp_conv_algo before = dp_get_conv_algo();
    dp_set_conv_algo((dp_conv_algo)value);
    return PyUnicode_FromString(dp_conv_algo_name(before));
}

/* The cache file a setting names (a path; "" or None: the environment's,
 * else the default), or None where it is off. */
static PyObject *cache_path(PyObject *arg, char *buf, size_t size)
{
    const char *setting = arg == Py_None ? NULL : PyUnicode_AsUTF8AndSize(arg, NULL);
    if (arg != Py_None && !setting)
        return NULL;
    int rc = dp_conv_algo_cache_path(setting, buf, size);
    if (rc < 0)
        return dpy_raise(rc);
    return rc == 1 ? Py_None : Py_True; /* borrowed markers */
}

/* conv_algo_cache_read(setting) -> the passes' choices installed from the
 * file (0 where the cache is off or has none for this machine). */
static PyObject *py_cache_read(PyObject *m, PyObject *arg)
{
    char path[4096];
    PyObject *on = cache_path(arg, path, sizeof path);
    if (!on)
        return NULL;
    if (on == Py_None)
        return PyLong_FromLong(0);
    int rc = dp_conv_algo_cache_read(path);
    return rc < 0 ? dpy_raise(rc) : PyLong_FromLong(rc);
}

/* conv_algo_cache_save(setting) -> the path written, or None: adds the
 * choices this process measured to the file. */
static PyObject *py_cache_save(PyObject *m, PyObject *arg)
{
    char path[4096];
    PyObject *on = cache_path(arg, path, sizeof path);
    if (!on)
        return NULL;
    char *lines = dp_conv_choices_save_measured();
    if (!lines)
        return PyErr_NoMemory();
    bool write = on != Py_None && lines[0];
    int rc = write ? dp_conv_algo_cache_add(path, lines) : 0;
    free(lines);
    if (rc < 0)
        return dpy_raise(rc);
    return write ? PyUnicode_FromString(path) : Py_NewRef(Py_None);
}

static PyMethodDef kernel_functions[] = {
    {"set_conv_algo", py_set_conv_algo, METH_O,
     "set_conv_algo(name) -> previous: \"direct\", \"auto\", \"winograd\""},
    {"conv_algo_cache_read", py_cache_read, METH_O,
     "conv_algo_cache_read(setting) -> choices installed from the cache file"},
    {"conv_algo_cache_save", py_cache_save, METH_O,
     "conv_algo_cache_save(setting) -> the file the measured choices were added to, or None"},
    {NULL, NULL, 0, NULL},
};

int dpy_kernels_add(PyObject *m)
{
    return PyModule_AddFunctions(m, kernel_functions);
}
