/* tensor_methods.c - the Tensor methods that are ops: reductions (sum,
 * mean, argmax), eq, cast, reshape, t, to, clone, detach, rows, and the
 * in-place zero_, fill_, copy_. Arguments are positional (the package gives
 * them PyTorch's keywords). */
#include "dpy.h"

#include <string.h>

int dpy_copy_into(dp_tensor_t *dst, dp_tensor_t *src, const char *func);
int dpy_inplace_check(PyObject *self, PyObject *other, const char *func, bool *rebind);

#define SELF_T(fail)                                                                               \
    dp_tensor_t *t = dpy_tensor_get(self);                                                         \
    if (!t)                                                                                        \
        return fail;

/* A Python dim (negative counts from the end, None: every element) as the
 * library's (-1: every element); -2 with IndexError when out of range. */
static int dim_arg(PyObject *o, const dp_tensor_t *t, const char *func, int *out)
{
    if (!o || o == Py_None) {
        *out = -1;
        return 0;
    }
    long long d;
    if (dpy_int_arg(o, func, "dim", &d) < 0)
        return -1;
    int nd = dp_tensor_ndim(t);
    if (d < -nd || d >= nd || nd == 0) {
        PyErr_Format(PyExc_IndexError,
                     "%s(): dim %lld is out of range for a tensor of %d dimensions", func, d, nd);
        return -1;
    }
    *out = (int)(d < 0 ? d + nd : d);
    return 0;
}

typedef int (*reduce_fn)(dp_tensor_t **y, dp_tensor_t *x, int dim, bool keepdim);

/* sum(dim=None, keepdim=False), mean(...), argmax(...). */
static PyObject *reduce(PyObject *self, PyObject *const *args, Py_ssize_t nargs, const char *func,
                        reduce_fn fn, bool differentiable)
{
    SELF_T(NULL);
    if (nargs > 2)
        return PyErr_Format(PyExc_TypeError, "%s(dim=None, keepdim=False): too many arguments",
                            func);
    int dim;
    bool keepdim = false;
    if (dim_arg(nargs > 0 ? args[0] : NULL, t, func, &dim) < 0 ||
        (nargs > 1 && dpy_bool_arg(args[1], func, "keepdim", &keepdim) < 0))
        return NULL;
    dp_tensor_t *y = NULL;
    dpy_op op;
    dpy_op_begin(&op, &self, differentiable ? 1 : 0);
    int rc = fn(&y, t, dim, keepdim);
    return dpy_op_end(&op, rc, y);
}


static PyObject *m_sum(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return reduce(self, args, nargs, "sum", dp_sum, true);
}
static PyObject *m_mean(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    SELF_T(NULL);
    if (dp_tensor_dtype(t) == DP_I32)
        return PyErr_Format(PyExc_TypeError, "mean(): an int32 tensor has no mean (the dtype "
                                             "must be floating point): cast it to float32 first");
    return reduce(self, args, nargs, "mean", dp_mean, true);
}
static PyObject *m_argmax(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return reduce(self, args, nargs, "argmax", dp_argmax, false);
}

/* eq(other): int32 1 where equal, else 0; other a tensor or a number. */
static PyObject *m_eq(PyObject *self, PyObject *other)
{
    SELF_T(NULL);
    dp_tensor_t *b = NULL, *scalar = NULL, *y = NULL;
    if (dpy_is_tensor(other)) {
        b = dpy_tensor_get(other);
        if (!b)
            return NULL;
    } else {
        double v;
        if (dpy_float_arg(other, "eq", "other", &v) < 0)
            return NULL;
        int rc = dpy_scalar_tensor(&scalar, dp_tensor_device(t), dp_tensor_dtype(t), v);
        if (rc < 0)
            return dpy_raise(rc);
        b = scalar;
    }
    int rc = dp_eq(&y, t, b);
    dp_tensor_free(scalar);
    if (rc < 0)
        return dpy_raise(rc);
    return dpy_wrap_new(y);
}

/* cast(dtype): differentiable between float32 and bfloat16; through int32
 * not recorded. */
static PyObject *m_cast(PyObject *self, PyObject *arg)
{
    SELF_T(NULL);
    dp_dtype dtype;
    if (dpy_dtype_parse(arg, "cast", "dtype", &dtype) < 0)
        return NULL;
    if (dtype == dp_tensor_dtype(t)) {
        Py_INCREF(self);
        return self;
    }
    bool through_int = dtype == DP_I32 || dp_tensor_dtype(t) == DP_I32;
    dp_tensor_t *y = NULL;
    dpy_op op;
    dpy_op_begin(&op, &self, through_int ? 0 : 1);
    int rc = dp_cast(&y, t, dtype);
    return dpy_op_end(&op, rc, y);
}

/* A 0-d tensor t into `shape` (one element): dp_reshape takes 1 to 4
 * dimensions. Unrecorded: a copy (dp_tensor_copy goes by element count);
 * recorded (float32): ones(shape) * t, the same bits, dt = dy. */
static PyObject *reshape_scalar(PyObject *self, dp_tensor_t *t, int n, const int64_t *shape)
{
    dp_tensor_t *y = NULL;
    if (!dpy_grad_enabled || !((dpy_tensor *)self)->requires_grad) {
        int rc = dp_tensor_new(&y, dp_tensor_device(t), dp_tensor_dtype(t), n, shape);
        if (rc < 0)
            return dpy_raise(rc);
        PyObject *r = dpy_tensor_wrap(y, DPY_OWN_SELF, NULL); /* on no tape */
        if (r && dpy_copy_into(y, t, "reshape") < 0)
            Py_CLEAR(r);
        return r;
    }
    if (dpy_library_tape_keeper)
        return PyErr_Format(PyExc_NotImplementedError,
                            "reshape(): a 0-d tensor that requires grad into more dimensions "
                            "inside dptrain.train's forward");
    dp_tensor_t *ones = NULL;
    int rc = dp_tensor_new(&ones, dp_tensor_device(t), DP_F32, n, shape);
    if (rc < 0)
        return dpy_raise(rc);
    /* The object keeps ones alive on the tape: the backward reads it. */
    PyObject *ones_obj = dpy_tensor_wrap(ones, DPY_OWN_SELF, NULL);
    if (!ones_obj)
        return NULL;
    rc = dp_tensor_fill(ones, 1.0f);
    if (rc < 0) {
        Py_DECREF(ones_obj);
        return dpy_raise(rc);
    }
    PyObject *in[2] = {ones_obj, self};
    dpy_op op;
    dpy_op_begin(&op, in, 2);
    rc = dp_binary(&y, DP_BINARY_MUL, ones, t);
    PyObject *r = dpy_op_end(&op, rc, y);
    Py_DECREF(ones_obj);
    return r;
}

/* reshape(shape): one size may be -1 (inferred); () is a scalar. */
static PyObject *m_reshape(PyObject *self, PyObject *arg)
{
    SELF_T(NULL);
    PyObject *seq = PyLong_Check(arg) ? PyTuple_Pack(1, arg) : PySequence_Tuple(arg);
    if (!seq)
        return NULL;
    Py_ssize_t n = PyTuple_Size(seq);
    int64_t shape[DP_MAX_DIMS], known = 1;
    int infer = -1;
    if (n > DP_MAX_DIMS) { /* 0 is a scalar, PyTorch's shape () */
        Py_DECREF(seq);
        return PyErr_Format(PyExc_ValueError,
                            "reshape(): %zd dimensions; dptrain's tensors have 0 to %d", n,
                            DP_MAX_DIMS);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long long v;
        if (dpy_int_arg(PyTuple_GetItem(seq, i), "reshape", "shape", &v) < 0) {
            Py_DECREF(seq);
            return NULL;
        }
        if (v == -1 && infer < 0) {
            infer = (int)i;
            shape[i] = 1;
        } else if (v < 0) {
            Py_DECREF(seq);
            return PyErr_Format(PyExc_ValueError, "reshape(): invalid size %lld", v);
        } else {
            shape[i] = v;
            known *= v;
        }
    }
    Py_DECREF(seq);
    int64_t numel = dp_tensor_numel(t);
    if (infer >= 0) {
        if (known == 0 || numel % known != 0) {
            char s[64];
            return PyErr_Format(PyExc_ValueError, "reshape(): cannot infer a size: %s has %lld "
                                "elements",
                                dp_tensor_shape_str(t, s, sizeof s), (long long)numel);
        }
        shape[infer] = numel / known;
    }
    dp_tensor_t *y = NULL;
    dpy_op op;
    if (n == 0 && numel == 1 && dp_tensor_ndim(t) > 0) {
        /* Into a scalar (shape ()): dp_reshape gives 1 to 4 dimensions;
         * the sum of the one element is it (the same bits, dx = dy). */
        if (dp_tensor_dtype(t) == DP_BF16)
            return PyErr_Format(PyExc_NotImplementedError,
                                "reshape(): a bfloat16 tensor into shape (): cast it to float32 "
                                "first (.float())");
        dpy_op_begin(&op, &self, dp_tensor_dtype(t) == DP_F32 ? 1 : 0);
        int rc = dp_sum(&y, t, -1, false);
        return dpy_op_end(&op, rc, y);
    }
    if (dp_tensor_ndim(t) == 0 && n > 0 && numel == 1) {
        for (Py_ssize_t i = 0; i < n; i++)
            if (shape[i] != 1)
                return PyErr_Format(PyExc_ValueError,
                                    "reshape(): a 0-d tensor has 1 element, not %lld",
                                    (long long)shape[i]);
        return reshape_scalar(self, t, (int)n, shape);
    }
    if (n == 0 && dp_tensor_ndim(t) == 0) {
        Py_INCREF(self);
        return self;
    }
    if (n == 0 && numel != 1) {
        char s[64];
        return PyErr_Format(PyExc_ValueError, "reshape(): %s has %lld elements, shape () has 1",
                            dp_tensor_shape_str(t, s, sizeof s), (long long)numel);
    }
    dpy_op_begin(&op, &self, 1);
    int rc = dp_reshape(&y, t, (int)n, shape);
    return dpy_op_end(&op, rc, y);
}

static PyObject *m_t(PyObject *self, PyObject *unused)
{
    SELF_T(NULL);
    dp_tensor_t *y = NULL;
    dpy_op op;
    dpy_op_begin(&op, &self, 1);
    int rc = dp_transpose(&y, t);
    return dpy_op_end(&op, rc, y);
}

/* A differentiable copy of t on dev. */
static PyObject *copy_to(PyObject *self, dp_tensor_t *t, dp_device_t *dev)
{
    dp_tensor_t *y = NULL;
    dpy_op op;
    dpy_op_begin(&op, &self, 1);
    int rc = dp_to_device(&y, t, dev);
    return dpy_op_end(&op, rc, y);
}

/* to(device): a copy there; self where the tensor is already there
 * (torch's identity). "cpu" is the host device, apart from "cuda:0" also
 * on a machine without GPUs (device.c), so the seed's get_params copies
 * parameters made on "cpu" to "cuda:0" as on a GPU. */
static PyObject *m_to(PyObject *self, PyObject *arg)
{
    SELF_T(NULL);
    dp_device_t *dev = dpy_device_arg(arg);
    if (!dev)
        return NULL;
    if (dev == dp_tensor_device(t)) {
        Py_INCREF(self);
        return self;
    }
    return copy_to(self, t, dev);
}

static PyObject *m_clone(PyObject *self, PyObject *unused)
{
    SELF_T(NULL);
    return copy_to(self, t, dp_tensor_device(t));
}

/* detach(): the same memory where autograd does not track the tensor; a
 * tracked one's values are copied (unrecorded) into a new tensor, since the
 * library keeps a tensor's autograd state with its memory. */
static PyObject *m_detach(PyObject *self, PyObject *unused)
{
    SELF_T(NULL);
    dpy_tensor *o = (dpy_tensor *)self;
    if (!o->requires_grad)
        return dpy_tensor_wrap(t, DPY_OWN_OTHER, self);
    int64_t shape[DP_MAX_DIMS];
    for (int i = 0; i < dp_tensor_ndim(t); i++)
        shape[i] = dp_tensor_dim(t, i);
    dp_tensor_t *y = NULL;
    int rc = dp_tensor_new(&y, dp_tensor_device(t), dp_tensor_dtype(t), dp_tensor_ndim(t), shape);
    if (rc < 0)
        return dpy_raise(rc);
    PyObject *r = dpy_tensor_wrap(y, DPY_OWN_SELF, NULL);
    if (r && dpy_copy_into(y, t, "detach") < 0)
        Py_CLEAR(r);
    return r;
}

/* rows(start, stop): rows [start, stop) of dimension 0, differentiable. */
static PyObject *m_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    SELF_T(NULL);
    long long start, stop;
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "rows(start, stop): 2 arguments, %zd given", nargs);
    if (dpy_int_arg(args[0], "rows", "start", &start) < 0 ||
        dpy_int_arg(args[1], "rows", "stop", &stop) < 0)
        return NULL;
    int64_t n = dp_tensor_ndim(t) > 0 ? dp_tensor_dim(t, 0) : 0;
    if (dp_tensor_ndim(t) == 0 || start < 0 || stop < start || stop > n)
        return PyErr_Format(PyExc_IndexError, "rows(): rows %lld:%lld of a tensor of %lld rows",
                            start, stop, (long long)n);
    dp_tensor_t *y = NULL;
    dpy_op op;
    dpy_op_begin(&op, &self, 1);
    int rc = dp_narrow(&y, t, start, stop - start);
    return dpy_op_end(&op, rc, y);
}

/* t = value. dp_tensor_fill takes a float and writes float bits into an
 * int32 tensor too, so an int32 tensor is filled from the host. */
int dpy_fill(dp_tensor_t *t, double value)
{
    if (dp_tensor_dtype(t) != DP_I32) {
        int rc = dp_tensor_fill(t, (float)value);
        return rc < 0 ? dpy_raise_int(rc) : 0;
    }
    size_t n = (size_t)dp_tensor_numel(t);
    int32_t *host = PyMem_Malloc((n ? n : 1) * sizeof *host);
    if (!host) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        host[i] = (int32_t)value;
    int rc = dp_tensor_copy_from_host(t, host, n * sizeof *host);
    rc = rc < 0 ? dpy_raise_int(rc) : dpy_wait_tensor(t);
    PyMem_Free(host);
    return rc;
}

static PyObject *m_fill_(PyObject *self, PyObject *arg)
{
    SELF_T(NULL);
    double v;
    bool rebind;
    if (dpy_float_arg(arg, "fill_", "value", &v) < 0 ||
        dpy_inplace_check(self, NULL, "fill_()", &rebind) < 0)
        return NULL;
    if (dpy_fill(t, v) < 0)
        return NULL;
    Py_INCREF(self);
    return self;
}

static PyObject *m_zero_(PyObject *self, PyObject *unused)
{
    PyObject *zero = PyFloat_FromDouble(0.0);
    PyObject *r = zero ? m_fill_(self, zero) : NULL;
    Py_XDECREF(zero);
    return r;
}

/* copy_(src): src's values into this tensor's memory (a[:] = b). */
static PyObject *m_copy_(PyObject *self, PyObject *arg)
{
    SELF_T(NULL);
    bool rebind;
    dp_tensor_t *src = dpy_tensor_arg(arg, "copy_", "src");
    if (!src || dpy_inplace_check(self, NULL, "copy_()", &rebind) < 0)
        return NULL;
    if (dpy_copy_into(t, src, "copy_") < 0)
        return NULL;
    Py_INCREF(self);
    return self;
}

PyMethodDef dpy_tensor_math_methods[] = {
    {"sum", DPY_FASTCALL(m_sum), "sum(dim=None, keepdim=False)"},
    {"mean", DPY_FASTCALL(m_mean), "mean(dim=None, keepdim=False)"},
    {"argmax", DPY_FASTCALL(m_argmax), "argmax(dim=None, keepdim=False) -> int32 indices"},
    {"eq", m_eq, METH_O, "eq(other) -> int32 1 where equal, else 0"},
    {"cast", m_cast, METH_O, "cast(dtype) -> this tensor in dtype"},
    {"reshape", m_reshape, METH_O, "reshape(shape) -> a copy in another shape (-1: inferred)"},
    {"t", m_t, METH_NOARGS, "t() -> the transpose of a matrix"},
    {"to", m_to, METH_O, "to(device) -> self on that device, else a copy there"},
    {"clone", m_clone, METH_NOARGS, "clone() -> a copy (differentiable)"},
    {"detach", m_detach, METH_NOARGS, "detach() -> the values, not tracked by autograd"},
    {"rows", DPY_FASTCALL(m_rows), "rows(start, stop) -> rows [start, stop) of dimension 0"},
    {"fill_", m_fill_, METH_O, "fill_(value) -> self, every element value"},
    {"zero_", m_zero_, METH_NOARGS, "zero_() -> self, zeros"},
    {"copy_", m_copy_, METH_O, "copy_(src) -> self holding src's values"},
    {NULL, NULL, 0, NULL},
};
