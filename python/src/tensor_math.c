/* tensor_math.c - the number protocol of Tensor, in-place forms and the
 * tensor methods that are ops (sum, mean, argmax, eq, cast, reshape, t, to,
 * clone, detach, zero_, fill_, copy_, rows). */
#include "dpy.h"

#include <stdlib.h>
#include <string.h>

/* dst = src's values (same element count and dtype), enqueued, not recorded. */
int dpy_copy_into(dp_tensor_t *dst, dp_tensor_t *src, const char *func)
{
    if (dp_tensor_numel(dst) != dp_tensor_numel(src)) {
        char a[64], b[64];
        PyErr_Format(PyExc_ValueError, "%s(): cannot copy %s into %s (their sizes do not match)", func,
                     dp_tensor_shape_str(src, a, sizeof a), dp_tensor_shape_str(dst, b, sizeof b));
        return -1;
    }
    dp_tensor_t *cast = NULL;
    if (dp_tensor_dtype(dst) != dp_tensor_dtype(src) && dp_tensor_dtype(dst) != DP_I32 &&
        dp_tensor_dtype(src) != DP_I32) {
        /* float32 <-> bfloat16: converted first, not recorded. */
        int rc = dp_cast(&cast, src, dp_tensor_dtype(dst));
        if (rc < 0)
            return dpy_raise_int(rc);
        src = cast;
    }
    if (dp_tensor_dtype(dst) != dp_tensor_dtype(src)) {
        PyErr_Format(PyExc_TypeError, "%s(): cannot copy %s into %s (convert with .type())", func,
                     dpy_dtype_name(dp_tensor_dtype(src)), dpy_dtype_name(dp_tensor_dtype(dst)));
        return -1;
    }
    if (dst == src)
        return 0;
    int rc = dp_tensor_copy(dst, src);
    if (!dpy_library_tape_keeper) /* else the library's tape owns the cast */
        dp_tensor_free(cast);
    return rc < 0 ? dpy_raise_int(rc) : 0;
}


static bool is_scalar(PyObject *o)
{
    return PyFloat_Check(o) || PyLong_Check(o);
}

/* y = alpha x + beta (DP_ACT_LINEAR), recorded like any op. */
static PyObject *linear_op(PyObject *x, double alpha, double beta)
{
    dp_tensor_t *t = dpy_tensor_get(x), *y = NULL;
    if (!t)
        return NULL;
    if (dp_tensor_dtype(t) == DP_I32)
        return PyErr_Format(PyExc_TypeError, "arithmetic on an int32 tensor: convert it with "
                                             ".float() first");
    dpy_op op;
    dpy_op_begin(&op, &x, 1);
    int rc = dp_activation(&y, t, DP_ACT_LINEAR, (float)alpha, (float)beta);
    return dpy_op_end(&op, rc, y);
}

/* a op b with a tensor on at least one side (Python numbers on the other). */
static PyObject *binary(PyObject *a, PyObject *b, dp_binary_op kind)
{
    bool ta = dpy_is_tensor(a), tb = dpy_is_tensor(b);
    if (ta && tb) {
        dp_tensor_t *x = dpy_tensor_get(a), *z = dpy_tensor_get(b), *y = NULL;
        if (!x || !z)
            return NULL;
        PyObject *in[2] = {a, b};
        dpy_op op;
        dpy_op_begin(&op, in, 2);
        int rc;
        if (kind == DP_BINARY_ADD && dp_tensor_ndim(x) == dp_tensor_ndim(z) &&
            dp_tensor_dtype(x) == dp_tensor_dtype(z) && dp_tensor_numel(x) == dp_tensor_numel(z)) {
            bool same = true;
            for (int i = 0; i < dp_tensor_ndim(x); i++)
                same = same && dp_tensor_dim(x, i) == dp_tensor_dim(z, i);
            rc = same ? dp_add(&y, x, z) : dp_binary(&y, kind, x, z);
        } else {
            rc = dp_binary(&y, kind, x, z);
        }
        return dpy_op_end(&op, rc, y);
    }
    if (ta && is_scalar(b)) {
        double s = PyFloat_AsDouble(b);
        if (s == -1.0 && PyErr_Occurred())
            return NULL;
        switch (kind) {
        case DP_BINARY_ADD:
            return linear_op(a, 1.0, s);
        case DP_BINARY_SUB:
            return linear_op(a, 1.0, -s);
        case DP_BINARY_MUL:
            return linear_op(a, s, 0.0);
        case DP_BINARY_DIV:
            return linear_op(a, 1.0 / s, 0.0);
        }
    }
    if (tb && is_scalar(a)) {
        double s = PyFloat_AsDouble(a);
        if (s == -1.0 && PyErr_Occurred())
            return NULL;
        switch (kind) {
        case DP_BINARY_ADD:
            return linear_op(b, 1.0, s);
        case DP_BINARY_SUB:
            return linear_op(b, -1.0, s);
        case DP_BINARY_MUL:
            return linear_op(b, s, 0.0);
        case DP_BINARY_DIV: {
            /* s / x: dp_binary with a one-element tensor. */
            /* s / x: dp_binary with a one-element tensor, an object of
             * its own so that a recorded backward keeps it. */
            dp_tensor_t *x = dpy_tensor_get(b), *one = NULL, *y = NULL;
            if (!x)
                return NULL;
            int rc = dpy_scalar_tensor(&one, dp_tensor_device(x), DP_F32, s);
            PyObject *one_obj = rc < 0 ? dpy_raise(rc) : dpy_tensor_wrap(one, DPY_OWN_SELF, NULL);
            if (!one_obj)
                return NULL;
            PyObject *in[2] = {one_obj, b};
            dpy_op op;
            dpy_op_begin(&op, in, 2);
            rc = dp_binary(&y, DP_BINARY_DIV, one, x);
            PyObject *r = dpy_op_end(&op, rc, y);
            Py_DECREF(one_obj);
            return r;
        }
        }
    }
    Py_RETURN_NOTIMPLEMENTED;
}

static PyObject *nb_add(PyObject *a, PyObject *b)
{
    return binary(a, b, DP_BINARY_ADD);
}
static PyObject *nb_sub(PyObject *a, PyObject *b)
{
    return binary(a, b, DP_BINARY_SUB);
}
static PyObject *nb_mul(PyObject *a, PyObject *b)
{
    return binary(a, b, DP_BINARY_MUL);
}
static PyObject *nb_div(PyObject *a, PyObject *b)
{
    return binary(a, b, DP_BINARY_DIV);
}

static PyObject *nb_matmul(PyObject *a, PyObject *b)
{
    if (!dpy_is_tensor(a) || !dpy_is_tensor(b))
        Py_RETURN_NOTIMPLEMENTED;
    dp_tensor_t *x = dpy_tensor_get(a), *w = dpy_tensor_get(b), *y = NULL;
    if (!x || !w)
        return NULL;
    /* The library's checks would name dp_linear: the operator's own first. */
    char xs[64], ws[64];
    if (dp_tensor_ndim(x) != 2 || dp_tensor_ndim(w) != 2 ||
        dp_tensor_dim(x, 1) != dp_tensor_dim(w, 0))
        return PyErr_Format(PyExc_ValueError,
                            "matmul(): input %s and other %s do not multiply as matrices "
                            "((N, K) @ (K, M))",
                            dp_tensor_shape_str(x, xs, sizeof xs),
                            dp_tensor_shape_str(w, ws, sizeof ws));
    if (dp_tensor_dtype(x) == DP_I32 || dp_tensor_dtype(w) == DP_I32)
        return PyErr_Format(PyExc_TypeError,
                            "matmul(): %s is int32; it must be a float tensor (.float())",
                            dp_tensor_dtype(x) == DP_I32 ? "input" : "other");
    if (dp_tensor_device(x) != dp_tensor_device(w))
        return PyErr_Format(PyExc_ValueError, "matmul(): other is on %s, the input on %s",
                            dp_device_name(dp_tensor_device(w)),
                            dp_device_name(dp_tensor_device(x)));
    PyObject *in[2] = {a, b};
    dpy_op op;
    dpy_op_begin(&op, in, 2);
    int rc = dp_matmul(&y, x, w);
    return dpy_op_end(&op, rc, y);
}

static PyObject *nb_neg(PyObject *a)
{
    return linear_op(a, -1.0, 0.0);
}

static PyObject *nb_pos(PyObject *a)
{
    Py_INCREF(a);
    return a;
}

/* The in-place rule (python-internals.md): on a tensor autograd tracks, with
 * grad mode on, a leaf refuses (PyTorch's error) and a non-leaf rebinds the
 * name to the recorded result; otherwise the result, computed unrecorded,
 * is copied into the target's memory. */
int dpy_inplace_check(PyObject *self, PyObject *other, const char *func, bool *rebind)
{
    dpy_tensor *o = (dpy_tensor *)self;
    bool other_grad = other && dpy_is_tensor(other) && ((dpy_tensor *)other)->requires_grad;
    *rebind = false;
    if (!dpy_grad_enabled || (!o->requires_grad && !other_grad))
        return 0;
    if (o->requires_grad && o->is_leaf) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s: a leaf Variable that requires grad is being used in an in-place "
                     "operation (wrap it in no_grad())",
                     func);
        return -1;
    }
    *rebind = true;
    return 0;
}

static PyObject *inplace(PyObject *a, PyObject *b, dp_binary_op kind, const char *func)
{
    if (!dpy_is_tensor(a))
        Py_RETURN_NOTIMPLEMENTED;
    bool rebind;
    if (dpy_inplace_check(a, b, func, &rebind) < 0)
        return NULL;
    if (rebind)
        return binary(a, b, kind);
    bool saved = dpy_grad_enabled;
    dpy_grad_enabled = false;
    PyObject *r = binary(a, b, kind);
    dpy_grad_enabled = saved;
    if (!r || r == Py_NotImplemented)
        return r;
    int rc = dpy_copy_into(((dpy_tensor *)a)->t, ((dpy_tensor *)r)->t, func);
    Py_DECREF(r);
    if (rc < 0)
        return NULL;
    Py_INCREF(a);
    return a;
}

static PyObject *nb_iadd(PyObject *a, PyObject *b)
{
    return inplace(a, b, DP_BINARY_ADD, "+=");
}
static PyObject *nb_isub(PyObject *a, PyObject *b)
{
    return inplace(a, b, DP_BINARY_SUB, "-=");
}
static PyObject *nb_imul(PyObject *a, PyObject *b)
{
    return inplace(a, b, DP_BINARY_MUL, "*=");
}
static PyObject *nb_idiv(PyObject *a, PyObject *b)
{
    return inplace(a, b, DP_BINARY_DIV, "/=");
}

static PyObject *one_value(PyObject *self, const char *func)
{
    dp_tensor_t *t = dpy_tensor_get(self);
    if (!t)
        return NULL;
    if (dp_tensor_numel(t) != 1)
        return PyErr_Format(PyExc_ValueError,
                            "%s(): only a one-element tensor converts to a Python number (this "
                            "one has %lld)",
                            func, (long long)dp_tensor_numel(t));
    return PyObject_CallMethod(self, "item", NULL);
}

static PyObject *nb_float(PyObject *self)
{
    PyObject *v = one_value(self, "float");
    if (!v)
        return NULL;
    PyObject *f = PyNumber_Float(v);
    Py_DECREF(v);
    return f;
}

static PyObject *nb_int(PyObject *self)
{
    PyObject *v = one_value(self, "int");
    if (!v)
        return NULL;
    PyObject *i = PyNumber_Long(v);
    Py_DECREF(v);
    return i;
}

static int nb_bool(PyObject *self)
{
    PyObject *v = one_value(self, "bool");
    if (!v)
        return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

int dpy_tensor_math_slots(PyType_Slot *slots, int max)
{
    PyType_Slot mine[] = {
        {Py_nb_add, (void *)nb_add},
        {Py_nb_subtract, (void *)nb_sub},
        {Py_nb_multiply, (void *)nb_mul},
        {Py_nb_true_divide, (void *)nb_div},
        {Py_nb_matrix_multiply, (void *)nb_matmul},
        {Py_nb_negative, (void *)nb_neg},
        {Py_nb_positive, (void *)nb_pos},
        {Py_nb_inplace_add, (void *)nb_iadd},
        {Py_nb_inplace_subtract, (void *)nb_isub},
        {Py_nb_inplace_multiply, (void *)nb_imul},
        {Py_nb_inplace_true_divide, (void *)nb_idiv},
        {Py_nb_float, (void *)nb_float},
        {Py_nb_int, (void *)nb_int},
        {Py_nb_bool, (void *)nb_bool},
    };
    int n = (int)(sizeof mine / sizeof mine[0]);
    if (n > max) {
        PyErr_SetString(PyExc_SystemError, "_dptrain: too many Tensor slots");
        return -1;
    }
    for (int i = 0; i < n; i++)
        slots[i] = mine[i];
    return n;
}
