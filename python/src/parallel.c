/* parallel.c - the seeds' primitives over dp/parallel.h: scatter (torch.chunk
 * sizes), gather, allreduce, chunk_sizes. scatter and gather are recorded
 * for backward like any op. */
#include "dpy.h"

#include <string.h>

/* devices: a sequence of device names (or objects whose str() is one). */
static int devices_arg(PyObject *o, const char *f, dp_device_t **devs)
{
    PyObject *seq = PySequence_Check(o) && !PyUnicode_Check(o) ? PySequence_Tuple(o) : NULL;
    if (!seq) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s(): devices must be a sequence of devices", f);
        return -1;
    }
    Py_ssize_t n = PyTuple_Size(seq);
    if (n < 1 || n > DP_MAX_DEVICES) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "%s(): %zd devices (1 to %d)", f, n, DP_MAX_DEVICES);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (!(devs[i] = dpy_device_arg(PyTuple_GetItem(seq, i)))) {
            Py_DECREF(seq);
            return -1;
        }
    Py_DECREF(seq);
    return (int)n;
}

/* scatter(x, devices) -> [chunk on devices[0], ...] (torch.chunk's rows). */
static PyObject *py_scatter(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    const char *f = "scatter";
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "scatter(x, devices): 2 arguments, %zd given", nargs);
    dp_tensor_t *x = dpy_tensor_arg(args[0], f, "input");
    dp_device_t *devs[DP_MAX_DEVICES];
    int n = x ? devices_arg(args[1], f, devs) : -1;
    if (n < 0)
        return NULL;
    if (dp_tensor_ndim(x) < 1)
        return PyErr_Format(PyExc_ValueError, "scatter(): a 0-d tensor has no rows");
    dp_tensor_t *chunks[DP_MAX_DEVICES];
    int nchunks = 0;
    dpy_op op;
    dpy_op_begin(&op, args, 1);
    int rc = dp_scatter(chunks, &nchunks, x, devs, n);
    if (op.tape)
        dp_tape_end(op.tape->tape);
    if (rc < 0)
        return dpy_raise(rc);
    if (op.tape && dpy_tape_keep(op.tape, args, 1) < 0)
        return NULL; /* the chunks are the tape's */
    PyObject *list = PyList_New(nchunks);
    for (int k = 0; k < nchunks; k++) {
        PyObject *c = NULL;
        if (list) {
            c = op.tape ? dpy_tensor_wrap(chunks[k], DPY_OWN_TAPE, (PyObject *)op.tape)
                        : dpy_wrap_new(chunks[k]);
            if (c && op.tape) {
                ((dpy_tensor *)c)->requires_grad = 1;
                ((dpy_tensor *)c)->is_leaf = 0;
            }
        } else if (!op.tape && !dpy_library_tape_keeper) {
            dp_tensor_free(chunks[k]);
        }
        if (list && !c) {
            Py_CLEAR(list);
            continue;
        }
        if (list)
            PyList_SetItem(list, k, c);
    }
    return list;
}

/* Tensors of a sequence into ts (at most max); their objects into objs. */
static int tensors_arg(PyObject *o, const char *f, dp_tensor_t **ts, PyObject **objs, int max,
                       PyObject **keep)
{
    PyObject *seq = PySequence_Check(o) ? PySequence_Tuple(o) : NULL;
    if (!seq) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s(): expected a sequence of Tensors", f);
        return -1;
    }
    Py_ssize_t n = PyTuple_Size(seq);
    if (n < 1 || n > max) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "%s(): %zd tensors (1 to %d)", f, n, max);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        objs[i] = PyTuple_GetItem(seq, i);
        if (!(ts[i] = dpy_tensor_arg(objs[i], f, "tensors"))) {
            Py_DECREF(seq);
            return -1;
        }
    }
    *keep = seq;
    return (int)n;
}

/* gather(xs, device) -> the rows of xs in order, on device. */
static PyObject *py_gather(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "gather(tensors, device): 2 arguments, %zd given",
                            nargs);
    dp_tensor_t *ts[DP_MAX_DEVICES];
    PyObject *objs[DP_MAX_DEVICES], *seq = NULL;
    int n = tensors_arg(args[0], "gather", ts, objs, DP_MAX_DEVICES, &seq);
    if (n < 0)
        return NULL;
    dp_device_t *dev = dpy_device_arg(args[1]);
    PyObject *r = NULL;
    if (dev) {
        dp_tensor_t *y = NULL;
        dpy_op op;
        dpy_op_begin(&op, objs, n);
        int rc = dp_gather(&y, ts, n, dev);
        r = dpy_op_end(&op, rc, y);
    }
    Py_DECREF(seq);
    return r;
}

/* allreduce(xs, algo="auto"): every xs[k] becomes the sum of all (in place,
 * enqueued, not recorded). */
static PyObject *py_allreduce(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2)
        return PyErr_Format(PyExc_TypeError, "allreduce(tensors, algo='auto')");
    int algo = DP_ALLREDUCE_AUTO;
    if (nargs == 2) {
        const char *name = PyUnicode_Check(args[1]) ? PyUnicode_AsUTF8AndSize(args[1], NULL) : NULL;
        if (!name || dp_name_parse(&dp_allreduce_algo_names, name, &algo) < 0) {
            PyErr_Clear();
            return PyErr_Format(PyExc_ValueError, "allreduce(): algo %R is not auto, ring, "
                                                  "naive, mpi or nccl", args[1]);
        }
    }
    dp_tensor_t *ts[DP_MAX_DEVICES];
    PyObject *objs[DP_MAX_DEVICES], *seq = NULL;
    int n = tensors_arg(args[0], "allreduce", ts, objs, DP_MAX_DEVICES, &seq);
    if (n < 0)
        return NULL;
    for (int k = 0; k < n; k++) {
        bool rebind;
        int dpy_inplace_check(PyObject *self, PyObject *other, const char *func, bool *rebind);
        if (dpy_inplace_check(objs[k], NULL, "allreduce()", &rebind) < 0 || rebind) {
            if (rebind)
                PyErr_SetString(PyExc_RuntimeError, "allreduce(): a tensor autograd tracks "
                                                    "cannot be summed in place");
            Py_DECREF(seq);
            return NULL;
        }
    }
    int rc = dp_allreduce_sum(ts, n, (dp_allreduce_algo)algo);
    Py_DECREF(seq);
    if (rc < 0)
        return dpy_raise(rc);
    Py_RETURN_NONE;
}

/* chunk_sizes(rows, n) -> [sizes] as torch.chunk makes them. */
static PyObject *py_chunk_sizes(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    long long rows, n;
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "chunk_sizes(rows, n)");
    if (dpy_int_arg(args[0], "chunk_sizes", "rows", &rows) < 0 ||
        dpy_int_arg(args[1], "chunk_sizes", "n", &n) < 0)
        return NULL;
    if (rows < 0 || n < 1 || n > DP_MAX_DEVICES)
        return PyErr_Format(PyExc_ValueError, "chunk_sizes(): rows >= 0 and 1 <= n <= %d",
                            DP_MAX_DEVICES);
    int64_t sizes[DP_MAX_DEVICES];
    int k = dp_chunk_sizes(rows, (int)n, sizes);
    PyObject *list = PyList_New(k);
    for (int i = 0; list && i < k; i++)
        PyList_SetItem(list, i, PyLong_FromLongLong(sizes[i]));
    return list;
}

static PyMethodDef parallel_functions[] = {
    {"scatter", DPY_FASTCALL(py_scatter), "scatter(x, devices) -> chunks (torch.chunk's rows)"},
    {"gather", DPY_FASTCALL(py_gather), "gather(tensors, device) -> their rows on device"},
    {"allreduce", DPY_FASTCALL(py_allreduce),
     "allreduce(tensors, algo='auto'): each becomes the sum of all, in place"},
    {"chunk_sizes", DPY_FASTCALL(py_chunk_sizes), "chunk_sizes(rows, n) -> torch.chunk's sizes"},
    {NULL, NULL, 0, NULL},
};

int dpy_parallel_add(PyObject *m)
{
    return PyModule_AddFunctions(m, parallel_functions);
}
