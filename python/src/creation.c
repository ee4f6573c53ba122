/* creation.c - tensors from host data or filled: from_bytes, full (random
 * tensors are drawn on the host by torch_rng.c and passed to from_bytes). */
#include "dpy.h"

#include <stdlib.h>
#include <string.h>

/* from_bytes(data, shape, dtype, device): a copy of a buffer holding the
 * values in row-major order. */
static PyObject *py_from_bytes(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4)
        return PyErr_Format(PyExc_TypeError, "from_bytes(data, shape, dtype, device): 4 arguments, "
                                             "%zd given", nargs);
    int64_t shape[DP_MAX_DIMS];
    int ndim = dpy_shape_parse(args[1], "from_bytes", "shape", shape);
    dp_dtype dtype;
    if (ndim < 0 || dpy_dtype_parse(args[2], "from_bytes", "dtype", &dtype) < 0)
        return NULL;
    dp_device_t *dev = dpy_device_arg(args[3]);
    if (!dev)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++)
        numel *= shape[i];
    size_t want = (size_t)numel * dp_dtype_size(dtype);
    if ((size_t)view.len != want) {
        PyBuffer_Release(&view);
        return PyErr_Format(PyExc_ValueError,
                            "from_bytes(): data has %zd bytes, the shape and dtype need %zu",
                            view.len, want);
    }
    dp_tensor_t *t;
    int rc = dp_tensor_from_host(&t, dev, dtype, ndim, shape, view.buf);
    PyBuffer_Release(&view);
    if (rc < 0)
        return dpy_raise(rc);
    return dpy_tensor_wrap(t, DPY_OWN_SELF, NULL);
}

/* full(shape, value, dtype, device) */
static PyObject *py_full(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4)
        return PyErr_Format(PyExc_TypeError, "full(shape, value, dtype, device): 4 arguments, "
                                             "%zd given", nargs);
    int64_t shape[DP_MAX_DIMS];
    int ndim = dpy_shape_parse(args[0], "full", "shape", shape);
    double value;
    dp_dtype dtype;
    if (ndim < 0 || dpy_float_arg(args[1], "full", "fill_value", &value) < 0 ||
        dpy_dtype_parse(args[2], "full", "dtype", &dtype) < 0)
        return NULL;
    dp_device_t *dev = dpy_device_arg(args[3]);
    if (!dev)
        return NULL;
    dp_tensor_t *t;
    int rc = dp_tensor_new(&t, dev, dtype, ndim, shape);
    if (rc < 0)
        return dpy_raise(rc);
    if (dpy_fill(t, value) < 0) {
        dp_tensor_free(t);
        return NULL;
    }
    return dpy_tensor_wrap(t, DPY_OWN_SELF, NULL);
}

static PyMethodDef creation_functions[] = {
    {"from_bytes", DPY_FASTCALL(py_from_bytes),
     "from_bytes(data, shape, dtype, device) -> a tensor holding a copy of data (row-major)"},
    {"full", DPY_FASTCALL(py_full), "full(shape, value, dtype, device) -> a filled tensor"},
    {NULL, NULL, 0, NULL},
};

int dpy_creation_add(PyObject *m)
{
    return PyModule_AddFunctions(m, creation_functions);
}
