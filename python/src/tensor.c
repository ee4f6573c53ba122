/* tensor.c - _dptrain.Tensor: the object over one dp_tensor_t, its
 * attributes, waits and the reads that wait (item, tolist, bytes).
 * The arithmetic is in tensor_math.c, DLPack in dlpack.c, creation in
 * creation.c. */
#include "dpy.h"

#include <stdlib.h>
#include <string.h>

PyTypeObject *dpy_tensor_type;
PyTypeObject *dpy_tensor_class;
static allocfunc class_alloc;

dp_tensor_t *dpy_tensor_get(PyObject *o)
{
    if (!dpy_is_tensor(o)) {
        PyErr_Format(PyExc_TypeError, "expected a Tensor, not %R", (PyObject *)Py_TYPE(o));
        return NULL;
    }
    dpy_tensor *d = (dpy_tensor *)o;
    if (d->lazy && dpy_lazy_compute(d) < 0)
        return NULL;
    dp_tensor_t *t = d->t;
    if (!t)
        PyErr_SetString(PyExc_RuntimeError, "this tensor has no storage (a parameter buffer "
                                            "failed to take it over)");
    else if (dpy_lazy_live && dpy_lazy_before_access(t) < 0)
        return NULL;
    return t;
}

dp_tensor_t *dpy_tensor_arg(PyObject *o, const char *func, const char *arg)
{
    if (!dpy_is_tensor(o)) {
        PyErr_Format(PyExc_TypeError, "%s(): %s must be a Tensor, not %R", func, arg,
                     (PyObject *)Py_TYPE(o));
        return NULL;
    }
    return dpy_tensor_get(o);
}

PyObject *dpy_tensor_wrap(dp_tensor_t *t, dpy_owner owner, PyObject *keeper)
{
    dpy_tensor *o = (dpy_tensor *)class_alloc(dpy_tensor_class, 0);
    if (!o) {
        if (owner == DPY_OWN_SELF)
            dp_tensor_free(t);
        return NULL;
    }
    o->t = t;
    o->owner = (uint8_t)owner;
    o->keeper = keeper;
    Py_XINCREF(keeper);
    if (owner == DPY_OWN_TAPE)
        ((dpy_tape *)keeper)->live++;
    o->requires_grad = 0;
    o->is_leaf = 1;
    o->backward_done = 0;
    o->grad_epoch = 0;
    o->retired = NULL;
    o->lazy = NULL;
    return (PyObject *)o;
}

static void tensor_dealloc(PyObject *self)
{
    dpy_tensor *o = (dpy_tensor *)self;
    PyTypeObject *tp = Py_TYPE(self);
    dpy_lazy_release(o);
    if (o->owner == DPY_OWN_SELF)
        dp_tensor_free(o->t);
    else if (o->owner == DPY_OWN_TAPE)
        dpy_tape_release_output((dpy_tape *)o->keeper);
    o->t = NULL;
    Py_CLEAR(o->keeper);
    Py_CLEAR(o->retired);
    freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    free_fn(self);
    Py_DECREF(tp);
}

/* ---- attributes ------------------------------------------------------------ */

#define GET_T(self, fail)                                                                          \
    dp_tensor_t *t = dpy_tensor_get(self);                                                         \
    if (!t)                                                                                        \
        return fail;

/* What a tensor is without its values: a deferred object (lazy.c) answers
 * from its recipe, so checking a dtype does not compute it. */
typedef struct meta {
    int ndim;
    int64_t shape[DP_MAX_DIMS];
    dp_dtype dtype;
    dp_device_t *dev;
} meta;

static int meta_of(PyObject *self, meta *m)
{
    const int64_t *shape;
    if (dpy_lazy_meta(self, &m->ndim, &shape, &m->dtype, &m->dev)) {
        for (int i = 0; i < m->ndim; i++)
            m->shape[i] = shape[i];
        return 0;
    }
    GET_T(self, -1);
    m->ndim = dp_tensor_ndim(t);
    for (int i = 0; i < m->ndim; i++)
        m->shape[i] = dp_tensor_dim(t, i);
    m->dtype = dp_tensor_dtype(t);
    m->dev = dp_tensor_device(t);
    return 0;
}

static PyObject *get_shape(PyObject *self, void *c)
{
    meta m;
    if (meta_of(self, &m) < 0)
        return NULL;
    PyObject *tuple = PyTuple_New(m.ndim);
    for (int i = 0; tuple && i < m.ndim; i++) {
        PyObject *v = PyLong_FromLongLong(m.shape[i]);
        if (!v)
            Py_CLEAR(tuple);
        else
            PyTuple_SetItem(tuple, i, v);
    }
    return tuple;
}

static PyObject *get_ndim(PyObject *self, void *c)
{
    meta m;
    return meta_of(self, &m) < 0 ? NULL : PyLong_FromLong(m.ndim);
}

static PyObject *get_dtype(PyObject *self, void *c)
{
    meta m;
    return meta_of(self, &m) < 0 ? NULL : PyUnicode_FromString(dpy_dtype_name(m.dtype));
}

static PyObject *get_device(PyObject *self, void *c)
{
    meta m;
    return meta_of(self, &m) < 0 ? NULL : PyUnicode_FromString(dp_device_name(m.dev));
}

static PyObject *get_requires_grad(PyObject *self, void *c)
{
    return PyBool_FromLong(((dpy_tensor *)self)->requires_grad);
}

static PyObject *tensor_requires_grad_(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

static int set_requires_grad(PyObject *self, PyObject *value, void *c)
{
    if (!value) {
        PyErr_SetString(PyExc_AttributeError, "requires_grad cannot be deleted");
        return -1;
    }
    PyObject *r = tensor_requires_grad_(self, &value, 1);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

static PyObject *get_is_leaf(PyObject *self, void *c)
{
    return PyBool_FromLong(((dpy_tensor *)self)->is_leaf);
}

/* A leaf's .grad: None until a backward ran after requires_grad_() (or
 * after .grad = None), then an object sharing the gradient's memory. */
static PyObject *get_grad(PyObject *self, void *c)
{
    dpy_tensor *o = (dpy_tensor *)self;
    GET_T(self, NULL);
    if (!o->is_leaf)
        return PyErr_Format(PyExc_RuntimeError,
                            ".grad of a non-leaf tensor (the output of an op) is not kept; "
                            "read the leaves' (parameters') gradients");
    dp_tensor_t *g = o->requires_grad ? dp_tensor_grad(t) : NULL;
    if (!g || o->grad_epoch >= dpy_backward_count())
        Py_RETURN_NONE;
    return dpy_tensor_wrap(g, DPY_OWN_OTHER, self);
}

int dpy_copy_into(dp_tensor_t *dst, dp_tensor_t *src, const char *func);

static int set_grad(PyObject *self, PyObject *value, void *c)
{
    dpy_tensor *o = (dpy_tensor *)self;
    GET_T(self, -1);
    if (!o->is_leaf) {
        PyErr_SetString(PyExc_RuntimeError, ".grad of a non-leaf tensor cannot be set");
        return -1;
    }
    if (!value || value == Py_None) {
        /* The next backward writes the gradient afresh. */
        if (o->requires_grad && dpy_lazy_live && dpy_lazy_before_access(dp_tensor_grad(t)) < 0)
            return -1;
        if (o->requires_grad)
            dp_zero_grad(&t, 1);
        o->grad_epoch = dpy_backward_count();
        return 0;
    }
    dp_tensor_t *src = dpy_tensor_arg(value, "grad", "value");
    if (!src)
        return -1;
    if (!o->requires_grad) {
        PyErr_SetString(PyExc_RuntimeError,
                        ".grad can be set only on a tensor that requires grad (requires_grad_())");
        return -1;
    }
    /* a deferred conv2d may read the gradient this writes */
    if (dpy_lazy_live && dpy_lazy_before_access(dp_tensor_grad(t)) < 0)
        return -1;
    if (dpy_copy_into(dp_tensor_grad(t), src, "grad") < 0)
        return -1;
    o->grad_epoch = 0;
    return 0;
}

static PyGetSetDef tensor_getset[] = {
    {"shape", get_shape, NULL, "the sizes, a tuple", NULL},
    {"ndim", get_ndim, NULL, "the number of dimensions", NULL},
    {"dtype", get_dtype, NULL, "\"float32\", \"int32\" or \"bfloat16\"", NULL},
    {"device", get_device, NULL, "the device's name, \"cpu:0\"", NULL},
    {"requires_grad", get_requires_grad, set_requires_grad, "whether autograd tracks it", NULL},
    {"is_leaf", get_is_leaf, NULL, "not the output of a recorded op", NULL},
    {"grad", get_grad, set_grad, "a leaf's gradient, or None", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* ---- methods ------------------------------------------------------------------ */

static PyObject *tensor_numel(PyObject *self, PyObject *unused)
{
    meta m;
    if (meta_of(self, &m) < 0)
        return NULL;
    int64_t n = 1;
    for (int i = 0; i < m.ndim; i++)
        n *= m.shape[i];
    return PyLong_FromLongLong(n);
}

static PyObject *tensor_dim(PyObject *self, PyObject *unused)
{
    meta m;
    return meta_of(self, &m) < 0 ? NULL : PyLong_FromLong(m.ndim);
}

static PyObject *tensor_backward(PyObject *self, PyObject *unused)
{
    if (!dpy_tensor_get(self))
        return NULL;
    return dpy_backward((dpy_tensor *)self);
}

/* MXNet's wait_to_read: the tensor's last write only, not the rest of its
 * device's queue (a parameter's view counts the writes over its whole
 * buffer: the library's views wait for their base). */
static PyObject *tensor_wait_to_read(PyObject *self, PyObject *unused)
{
    GET_T(self, NULL);
    if (dpy_wait_tensor(t) < 0)
        return NULL;
    Py_INCREF(self);
    return self;
}

static float bf16_to_float(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static PyObject *element(dp_dtype dtype, const char *p)
{
    if (dtype == DP_I32) {
        int32_t v;
        memcpy(&v, p, sizeof v);
        return PyLong_FromLong(v);
    }
    if (dtype == DP_BF16) {
        uint16_t v;
        memcpy(&v, p, sizeof v);
        return PyFloat_FromDouble(bf16_to_float(v));
    }
    float v;
    memcpy(&v, p, sizeof v);
    return PyFloat_FromDouble(v);
}

static PyObject *tensor_item(PyObject *self, PyObject *unused)
{
    GET_T(self, NULL);
    if (dp_tensor_numel(t) != 1)
        return PyErr_Format(PyExc_ValueError,
                            "item(): a Tensor with %lld elements cannot be converted to a Python "
                            "number (only one element can)",
                            (long long)dp_tensor_numel(t));
    char buf[8];
    if (dpy_to_host(t, buf, dp_dtype_size(dp_tensor_dtype(t))) < 0)
        return NULL;
    return element(dp_tensor_dtype(t), buf);
}

/* Nested lists of dimension d onward, from the host copy at *p. */
static PyObject *nested(const dp_tensor_t *t, int d, const char **p)
{
    dp_dtype dtype = dp_tensor_dtype(t);
    if (d == dp_tensor_ndim(t)) {
        PyObject *v = element(dtype, *p);
        *p += dp_dtype_size(dtype);
        return v;
    }
    int64_t n = dp_tensor_dim(t, d);
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (!list)
        return NULL;
    for (int64_t i = 0; i < n; i++) {
        PyObject *v = nested(t, d + 1, p);
        if (!v) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SetItem(list, (Py_ssize_t)i, v);
    }
    return list;
}

static PyObject *tensor_tolist(PyObject *self, PyObject *unused)
{
    GET_T(self, NULL);
    size_t bytes = (size_t)dp_tensor_numel(t) * dp_dtype_size(dp_tensor_dtype(t));
    char *buf = malloc(bytes ? bytes : 1);
    if (!buf)
        return PyErr_NoMemory();
    PyObject *list = NULL;
    if (dpy_to_host(t, buf, bytes) == 0) {
        const char *p = buf;
        list = nested(t, 0, &p);
    }
    free(buf);
    return list;
}

/* The values in logical row-major order as bytes (numpy's frombuffer reads
 * them; a copy, after a wait). */
static PyObject *tensor_to_bytes(PyObject *self, PyObject *unused)
{
    GET_T(self, NULL);
    size_t bytes = (size_t)dp_tensor_numel(t) * dp_dtype_size(dp_tensor_dtype(t));
    PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)bytes);
    if (!b)
        return NULL;
    if (dpy_to_host(t, PyBytes_AsString(b), bytes) < 0) {
        Py_DECREF(b);
        return NULL;
    }
    return b;
}

static PyObject *tensor_requires_grad_(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    dpy_tensor *o = (dpy_tensor *)self;
    GET_T(self, NULL);
    bool on = true;
    if (nargs > 1)
        return PyErr_Format(PyExc_TypeError, "requires_grad_() takes at most 1 argument");
    if (nargs == 1 && dpy_bool_arg(args[0], "requires_grad_", "requires_grad", &on) < 0)
        return NULL;
    if (!o->is_leaf) {
        if (!on)
            return PyErr_Format(PyExc_RuntimeError,
                                "requires_grad_(False) on a non-leaf tensor: use detach()");
        Py_INCREF(self);
        return self;
    }
    if (on && dp_tensor_dtype(t) != DP_F32)
        return PyErr_Format(PyExc_RuntimeError,
                            "requires_grad_(): only float32 tensors can require gradients, "
                            "this one is %s",
                            dpy_dtype_name(dp_tensor_dtype(t)));
    if (on && !o->requires_grad) {
        if (!dp_tensor_grad(t)) {
            int rc = dp_tensor_set_requires_grad(t, NULL);
            if (rc < 0)
                return dpy_raise(rc);
        }
        o->grad_epoch = dpy_backward_count();
    }
    o->requires_grad = on;
    Py_INCREF(self);
    return self;
}

static PyMethodDef tensor_methods[] = {
    {"numel", tensor_numel, METH_NOARGS, "numel() -> the number of elements"},
    {"dim", tensor_dim, METH_NOARGS, "dim() -> the number of dimensions"},
    {"backward", tensor_backward, METH_NOARGS,
     "backward(): gradients of this scalar into the leaves that require them"},
    {"wait_to_read", tensor_wait_to_read, METH_NOARGS,
     "wait_to_read() -> self, once the value is computed (MXNet's)"},
    {"item", tensor_item, METH_NOARGS, "item() -> the one element as a Python number (waits)"},
    {"tolist", tensor_tolist, METH_NOARGS, "tolist() -> nested lists (waits)"},
    {"to_bytes", tensor_to_bytes, METH_NOARGS,
     "to_bytes() -> the values in row-major order (waits; a copy)"},
    {"requires_grad_", (PyCFunction)(void (*)(void))tensor_requires_grad_, METH_FASTCALL,
     "requires_grad_(requires_grad=True) -> self"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot tensor_slots[] = {
    {Py_tp_dealloc, (void *)tensor_dealloc},
    {Py_tp_getset, (void *)tensor_getset},
    {Py_tp_methods, (void *)tensor_methods},
    {Py_tp_doc, (void *)"A tensor on a dptrain device (dptrain.Tensor subclasses it)."},
    {0, NULL},
};

static PyType_Spec tensor_spec = {
    .name = "_dptrain.Tensor",
    .basicsize = sizeof(dpy_tensor),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = tensor_slots,
};

/* Methods and slots the companions add (tensor_math.c, dlpack.c). */
int dpy_tensor_math_slots(PyType_Slot *slots, int max);
extern PyMethodDef dpy_tensor_math_methods[];
extern PyMethodDef dpy_tensor_dlpack_methods[];

static PyObject *py_set_tensor_class(PyObject *m, PyObject *cls)
{
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, dpy_tensor_type))
        return PyErr_Format(PyExc_TypeError, "_set_tensor_class(): %R is not a subclass of "
                                             "_dptrain.Tensor", cls);
    allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)cls, Py_tp_alloc);
    if (!alloc)
        return NULL;
    PyTypeObject *old = dpy_tensor_class;
    Py_INCREF(cls);
    dpy_tensor_class = (PyTypeObject *)cls;
    Py_XDECREF((PyObject *)old);
    class_alloc = alloc;
    Py_RETURN_NONE;
}

static PyObject *py_tensor_class(PyObject *m, PyObject *unused)
{
    Py_INCREF((PyObject *)dpy_tensor_class);
    return (PyObject *)dpy_tensor_class;
}

static PyMethodDef tensor_functions[] = {
    {"_set_tensor_class", py_set_tensor_class, METH_O,
     "_set_tensor_class(cls): the class (a subclass of Tensor) that ops return"},
    {"_tensor_class", py_tensor_class, METH_NOARGS, "_tensor_class() -> the class ops return"},
    {NULL, NULL, 0, NULL},
};

int dpy_tensor_add(PyObject *m)
{
    /* One slot table: the type's own, then the number protocol's. */
    enum { MAX_SLOTS = 64 };
    static PyType_Slot slots[MAX_SLOTS];
    int n = 0;
    for (; tensor_slots[n].slot; n++)
        slots[n] = tensor_slots[n];
    int more = dpy_tensor_math_slots(slots + n, MAX_SLOTS - 1 - n);
    if (more < 0)
        return -1;
    slots[n + more] = (PyType_Slot){0, NULL};
    tensor_spec.slots = slots;
    /* One method table: the type's own, then the math's and DLPack's. */
    enum { MAX_METHODS = 128 };
    static PyMethodDef methods[MAX_METHODS];
    PyMethodDef *tables[] = {tensor_methods, dpy_tensor_math_methods, dpy_tensor_dlpack_methods};
    int nm = 0;
    for (size_t k = 0; k < sizeof tables / sizeof tables[0]; k++)
        for (PyMethodDef *d = tables[k]; d->ml_name && nm < MAX_METHODS - 1; d++)
            methods[nm++] = *d;
    for (int i = 0; slots[i].slot; i++)
        if (slots[i].slot == Py_tp_methods)
            slots[i].pfunc = methods;
    if (dpy_add_type(m, &tensor_spec, NULL, &dpy_tensor_type) < 0)
        return -1;
    Py_INCREF((PyObject *)dpy_tensor_type);
    dpy_tensor_class = dpy_tensor_type;
    class_alloc = (allocfunc)PyType_GetSlot(dpy_tensor_type, Py_tp_alloc);
    return PyModule_AddFunctions(m, tensor_functions);
}
