/* creation.c - tensors from host data, filled, or drawn: from_bytes, full,
 * randn and rand (the library's counter-based RNG: the numbers for a seed
 * are the same on every device and every run). */
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

/* randn/rand(shape, seed, device): float32 draws N(0, 1) or U[0, 1), the
 * element i being the counter-based generator's draw i of stream 0. */
static PyObject *draw(const char *func, bool normal, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3)
        return PyErr_Format(PyExc_TypeError, "%s(shape, seed, device): 3 arguments, %zd given",
                            func, nargs);
    int64_t shape[DP_MAX_DIMS];
    int ndim = dpy_shape_parse(args[0], func, "shape", shape);
    if (ndim < 0)
        return NULL;
    if (!PyLong_Check(args[1]))
        return PyErr_Format(PyExc_TypeError, "%s(): seed must be an int, not %R", func, args[1]);
    unsigned long long seed = PyLong_AsUnsignedLongLongMask(args[1]);
    if (PyErr_Occurred())
        return NULL;
    dp_device_t *dev = dpy_device_arg(args[2]);
    if (!dev)
        return NULL;
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++)
        numel *= shape[i];
    if (numel > ((int64_t)1 << 31))
        return PyErr_Format(PyExc_ValueError, "%s(): %lld elements is too many", func,
                            (long long)numel);
    float *host = malloc((size_t)(numel ? numel : 1) * sizeof *host);
    if (!host)
        return PyErr_NoMemory();
    dp_rng rng;
    dp_rng_init(&rng, seed, 0);
    for (int64_t i = 0; i < numel; i++)
        host[i] = normal ? dp_rng_normal(&rng) : dp_rng_uniform(&rng);
    dp_tensor_t *t;
    int rc = dp_tensor_from_host(&t, dev, DP_F32, ndim, shape, host);
    free(host);
    if (rc < 0)
        return dpy_raise(rc);
    return dpy_tensor_wrap(t, DPY_OWN_SELF, NULL);
}

static PyObject *py_randn(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    return draw("randn", true, args, nargs);
}

static PyObject *py_rand(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    return draw("rand", false, args, nargs);
}


static PyMethodDef creation_functions[] = {
    {"from_bytes", DPY_FASTCALL(py_from_bytes),
     "from_bytes(data, shape, dtype, device) -> a tensor holding a copy of data (row-major)"},
    {"full", DPY_FASTCALL(py_full), "full(shape, value, dtype, device) -> a filled tensor"},
    {"randn", DPY_FASTCALL(py_randn), "randn(shape, seed, device) -> N(0, 1) draws (float32)"},
    {"rand", DPY_FASTCALL(py_rand), "rand(shape, seed, device) -> U[0, 1) draws (float32)"},
    {NULL, NULL, 0, NULL},
};

int dpy_creation_add(PyObject *m)
{
    return PyModule_AddFunctions(m, creation_functions);
}
