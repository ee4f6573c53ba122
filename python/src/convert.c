/* convert.c - Python arguments into the library's dtypes, shapes and numbers,
 * each failure a TypeError or ValueError naming the function and argument. */
#include "dpy.h"

#include <string.h>

static const struct {
    const char *name;
    dp_dtype dtype;
} dtype_names[] = {
    {"float32", DP_F32}, {"float", DP_F32},     {"int32", DP_I32},
    {"int", DP_I32},     {"bfloat16", DP_BF16}, {"bf16", DP_BF16},
};

const char *dpy_dtype_name(dp_dtype d)
{
    switch (d) {
    case DP_F32:
        return "float32";
    case DP_I32:
        return "int32";
    case DP_BF16:
        return "bfloat16";
    }
    return "?";
}

int dpy_dtype_parse(PyObject *o, const char *func, const char *arg, dp_dtype *out)
{
    const char *s = PyUnicode_Check(o) ? PyUnicode_AsUTF8AndSize(o, NULL) : NULL;
    if (s) {
        for (size_t i = 0; i < sizeof dtype_names / sizeof dtype_names[0]; i++)
            if (strcmp(s, dtype_names[i].name) == 0) {
                *out = dtype_names[i].dtype;
                return 0;
            }
        PyErr_Format(PyExc_TypeError, "%s(): %s %R is not a dtype dptrain has "
                     "(float32, int32, bfloat16)", func, arg, o);
        return -1;
    }
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError,
                 "%s(): %s must be a dtype name (float32, int32, bfloat16), not %R", func, arg, o);
    return -1;
}

static int shape_entry(PyObject *item, const char *func, const char *arg, int64_t *out)
{
    if (!PyLong_Check(item)) {
        PyErr_Format(PyExc_TypeError, "%s(): %s must hold ints, not %R", func, arg, item);
        return -1;
    }
    long long v = PyLong_AsLongLong(item);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < 0) {
        PyErr_Format(PyExc_ValueError, "%s(): %s has a negative size %lld", func, arg, v);
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

int dpy_shape_parse(PyObject *o, const char *func, const char *arg, int64_t shape[DP_MAX_DIMS])
{
    if (PyLong_Check(o))
        return shape_entry(o, func, arg, &shape[0]) < 0 ? -1 : 1;
    PyObject *seq = PySequence_Check(o) && !PyUnicode_Check(o) ? PySequence_Tuple(o) : NULL;
    if (!seq) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s(): %s must be an int or a sequence of ints, not %R", func,
                     arg, o);
        return -1;
    }
    Py_ssize_t n = PyTuple_Size(seq);
    if (n > DP_MAX_DIMS) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "%s(): %s has %zd dimensions, dptrain's tensors have at most %d",
                     func, arg, n, DP_MAX_DIMS);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (shape_entry(PyTuple_GetItem(seq, i), func, arg, &shape[i]) < 0) {
            Py_DECREF(seq);
            return -1;
        }
    Py_DECREF(seq);
    return (int)n;
}

PyObject *dpy_shape_tuple(const dp_tensor_t *t)
{
    int n = dp_tensor_ndim(t);
    PyObject *tuple = PyTuple_New(n);
    if (!tuple)
        return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *v = PyLong_FromLongLong(dp_tensor_dim(t, i));
        if (!v) {
            Py_DECREF(tuple);
            return NULL;
        }
        PyTuple_SetItem(tuple, i, v);
    }
    return tuple;
}

int dpy_int_arg(PyObject *o, const char *func, const char *arg, long long *out)
{
    if (!PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s(): %s must be an int, not %R", func, arg, o);
        return -1;
    }
    *out = PyLong_AsLongLong(o);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

int dpy_pair_parse(PyObject *o, const char *func, const char *arg, int out[2])
{
    long long v[2];
    if (PyLong_Check(o)) {
        if (dpy_int_arg(o, func, arg, &v[0]) < 0)
            return -1;
        v[1] = v[0];
    } else {
        PyObject *seq = PySequence_Check(o) && !PyUnicode_Check(o) ? PySequence_Tuple(o) : NULL;
        if (!seq || PyTuple_Size(seq) != 2) {
            Py_XDECREF(seq);
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s(): %s must be an int or a pair of ints, not %R", func,
                         arg, o);
            return -1;
        }
        int rc = dpy_int_arg(PyTuple_GetItem(seq, 0), func, arg, &v[0]) < 0 ||
                         dpy_int_arg(PyTuple_GetItem(seq, 1), func, arg, &v[1]) < 0
                     ? -1
                     : 0;
        Py_DECREF(seq);
        if (rc < 0)
            return -1;
    }
    for (int i = 0; i < 2; i++) {
        if (v[i] < 0 || v[i] > (1 << 20)) {
            PyErr_Format(PyExc_ValueError, "%s(): %s %lld is out of range", func, arg, v[i]);
            return -1;
        }
        out[i] = (int)v[i];
    }
    return 0;
}

int dpy_float_arg(PyObject *o, const char *func, const char *arg, double *out)
{
    if (!PyFloat_Check(o) && !PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s(): %s must be a number, not %R", func, arg, o);
        return -1;
    }
    *out = PyFloat_AsDouble(o);
    return *out == -1.0 && PyErr_Occurred() ? -1 : 0;
}

int dpy_bool_arg(PyObject *o, const char *func, const char *arg, bool *out)
{
    int v = PyObject_IsTrue(o);
    if (v < 0)
        return -1;
    *out = v != 0;
    return 0;
}

int dpy_scalar_tensor(dp_tensor_t **out, dp_device_t *dev, dp_dtype dtype, double value)
{
    float f = (float)value;
    int32_t i = (int32_t)value;
    if (dtype == DP_BF16)
        dtype = DP_F32;
    return dp_tensor_from_host(out, dev, dtype, 1, (int64_t[]){1},
                               dtype == DP_I32 ? (const void *)&i : (const void *)&f);
}
