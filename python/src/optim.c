/* optim.c - _dptrain.Optimizer: parameters packed into one buffer per device
 * (dp_params, as the library's models keep them) and stepped by the C
 * optimizers.
 *
 * Optimizer(params, kind, lr, momentum, nesterov, weight_decay, beta1, beta2,
 * eps): the parameters' values and gradients are copied into the buffer of
 * their device; each Python tensor object is then re-pointed at its view
 * (owner: this optimizer), so the model, the optimizer and an allreduce all
 * see the one buffer. A parameter's .grad keeps its values. */
#include "dpy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dpy_copy_into(dp_tensor_t *dst, dp_tensor_t *src, const char *func);

/* The parameters of one device. */
typedef struct group {
    dp_device_t *dev;
    dp_params_t *params;
    dp_optimizer_t *opt;
    char (*names)[16]; /* the specs' names ("0", "1", ...), which dp_params keeps pointing at */
    int n;
    int *index; /* the position in the Python list of the group's parameter k */
} group;

typedef struct dpy_optimizer {
    PyObject_HEAD
    group groups[DP_MAX_DEVICES];
    int ngroups;
    int nparams;
} dpy_optimizer;

static void optimizer_dealloc(PyObject *self)
{
    dpy_optimizer *o = (dpy_optimizer *)self;
    PyTypeObject *tp = Py_TYPE(self);
    for (int g = 0; g < o->ngroups; g++) {
        dp_optimizer_close(o->groups[g].opt);
        dp_params_close(o->groups[g].params);
        free(o->groups[g].names);
        free(o->groups[g].index);
    }
    freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    free_fn(self);
    Py_DECREF(tp);
}

static int pack_group(dpy_optimizer *o, group *g, PyObject *seq, const dp_optimizer_options *opt)
{
    if (dpy_lazy_compute_all() < 0)
        return -1;
    dp_param_spec *specs = calloc((size_t)g->n, sizeof *specs);
    g->names = calloc((size_t)g->n, sizeof *g->names);
    if (!specs || !g->names) {
        free(specs);
        PyErr_NoMemory();
        return -1;
    }
    for (int k = 0; k < g->n; k++) {
        dp_tensor_t *t = ((dpy_tensor *)PyTuple_GetItem(seq, g->index[k]))->t;
        int64_t shape[DP_MAX_DIMS];
        for (int i = 0; i < dp_tensor_ndim(t); i++)
            shape[i] = dp_tensor_dim(t, i);
        snprintf(g->names[k], sizeof g->names[k], "%d", g->index[k]);
        specs[k] = dp_param_spec_make(g->names[k], dp_tensor_ndim(t), shape, DP_INIT_ZEROS, 0.0f);
    }
    int rc = dp_params_init(&g->params, g->dev, specs, g->n, true);
    free(specs);
    if (rc < 0)
        return dpy_raise_int(rc);
    for (int k = 0; k < g->n; k++) {
        dpy_tensor *p = (dpy_tensor *)PyTuple_GetItem(seq, g->index[k]);
        dp_tensor_t *view = dp_params_get(g->params, k), *old = p->t;
        if (dpy_copy_into(view, old, "Optimizer") < 0)
            return -1;
        dp_tensor_t *old_grad = p->requires_grad ? dp_tensor_grad(old) : NULL;
        if (old_grad && dpy_copy_into(dp_tensor_grad(view), old_grad, "Optimizer") < 0)
            return -1;
        /* The object now holds the view. Its old memory may still be seen
         * through views of it (.grad, detach(), a DLPack capsule, a recorded
         * op), so it is retired, not freed: it goes with the object. */
        PyObject *old_owner = p->owner == DPY_OWN_SELF ? dpy_tensor_wrap(old, DPY_OWN_SELF, NULL)
                                                       : p->keeper;
        if (!old_owner || (!p->retired && !(p->retired = PyList_New(0))) ||
            PyList_Append(p->retired, old_owner) < 0) {
            if (p->owner == DPY_OWN_SELF)
                Py_XDECREF(old_owner);
            return -1;
        }
        if (p->owner == DPY_OWN_SELF)
            Py_DECREF(old_owner);
        PyObject *keeper = p->keeper;
        p->t = view;
        p->owner = DPY_OWN_OTHER;
        p->keeper = (PyObject *)o;
        Py_INCREF((PyObject *)o);
        Py_XDECREF(keeper);
        if (!p->requires_grad)
            p->grad_epoch = dpy_backward_count();
        p->requires_grad = 1;
    }
    rc = dp_optimizer_init(&g->opt, g->params, opt);
    return rc < 0 ? dpy_raise_int(rc) : 0;
}

static PyObject *optimizer_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    const char *f = "Optimizer";
    PyObject *params, *kind_obj;
    double lr, momentum, weight_decay, beta1, beta2, eps;
    int nesterov;
    if (kwargs && PyDict_Size(kwargs) > 0)
        return PyErr_Format(PyExc_TypeError, "Optimizer() takes positional arguments only");
    if (!PyArg_ParseTuple(args, "OOddpdddd:Optimizer", &params, &kind_obj, &lr, &momentum,
                          &nesterov, &weight_decay, &beta1, &beta2, &eps))
        return NULL;
    const char *kind_name = PyUnicode_Check(kind_obj) ? PyUnicode_AsUTF8AndSize(kind_obj, NULL)
                                                      : NULL;
    int kind;
    if (!kind_name || dp_name_parse(&dp_optimizer_kind_names, kind_name, &kind) < 0) {
        PyErr_Clear();
        return PyErr_Format(PyExc_ValueError, "Optimizer(): kind %R is not sgd, adam or adamw",
                            kind_obj);
    }
    dp_optimizer_options opt;
    dp_optimizer_options_default(&opt, (dp_optimizer_kind)kind, (float)lr);
    opt.momentum = (float)momentum;
    opt.nesterov = nesterov;
    opt.weight_decay = (float)weight_decay;
    opt.beta1 = (float)beta1;
    opt.beta2 = (float)beta2;
    opt.eps = (float)eps;
    PyObject *seq = PySequence_Check(params) ? PySequence_Tuple(params) : NULL;
    if (!seq) {
        PyErr_Clear();
        return PyErr_Format(PyExc_TypeError, "Optimizer(): params must be a sequence of Tensors");
    }
    Py_ssize_t n = PyTuple_Size(seq);
    dpy_optimizer *o = NULL;
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "optimizer got an empty parameter list");
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PyTuple_GetItem(seq, i);
        dp_tensor_t *t = dpy_tensor_arg(p, f, "params");
        if (!t)
            goto fail;
        if (dp_tensor_dtype(t) != DP_F32 || !((dpy_tensor *)p)->is_leaf) {
            PyErr_Format(PyExc_ValueError, "Optimizer(): parameter %zd must be a float32 leaf "
                         "tensor", i);
            goto fail;
        }
        for (Py_ssize_t j = 0; j < i; j++)
            if (PyTuple_GetItem(seq, j) == p) {
                PyErr_Format(PyExc_ValueError, "Optimizer(): parameter %zd appears twice", i);
                goto fail;
            }
    }
    allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
    o = (dpy_optimizer *)alloc(type, 0);
    if (!o)
        goto fail;
    o->nparams = (int)n;
    /* Groups by device, in the order the devices first appear. */
    for (Py_ssize_t i = 0; i < n; i++) {
        dp_device_t *dev = dp_tensor_device(((dpy_tensor *)PyTuple_GetItem(seq, i))->t);
        int g = 0;
        while (g < o->ngroups && o->groups[g].dev != dev)
            g++;
        if (g == o->ngroups) {
            o->groups[g].dev = dev;
            o->groups[g].index = calloc((size_t)n, sizeof(int));
            o->ngroups++;
            if (!o->groups[g].index) {
                PyErr_NoMemory();
                goto fail;
            }
        }
        o->groups[g].index[o->groups[g].n++] = (int)i;
    }
    for (int g = 0; g < o->ngroups; g++)
        if (pack_group(o, &o->groups[g], seq, &opt) < 0)
            goto fail;
    Py_DECREF(seq);
    return (PyObject *)o;
fail:
    Py_XDECREF((PyObject *)o);
    Py_DECREF(seq);
    return NULL;
}

/* step(grad_scale=1.0): gradients no backward wrote are zeroed, then every
 * device's buffer is updated (enqueued). */
static PyObject *m_step(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    dpy_optimizer *o = (dpy_optimizer *)self;
    double scale = 1.0;
    if (nargs > 1 || (nargs == 1 && dpy_float_arg(args[0], "step", "grad_scale", &scale) < 0))
        return nargs > 1 ? PyErr_Format(PyExc_TypeError, "step(grad_scale=1.0)") : NULL;
    /* the step writes parameters, which a deferred conv2d may read */
    if (dpy_lazy_compute_all() < 0)
        return NULL;
    for (int g = 0; g < o->ngroups; g++) {
        int rc = dp_params_finish_grad(o->groups[g].params);
        if (rc == 0)
            rc = dp_optimizer_step(o->groups[g].opt, (float)scale);
        if (rc < 0)
            return dpy_raise(rc);
    }
    Py_RETURN_NONE;
}

static PyObject *m_zero_grad(PyObject *self, PyObject *unused)
{
    dpy_optimizer *o = (dpy_optimizer *)self;
    for (int g = 0; g < o->ngroups; g++)
        dp_params_zero_grad(o->groups[g].params);
    Py_RETURN_NONE;
}

static PyObject *m_set_lr(PyObject *self, PyObject *arg)
{
    dpy_optimizer *o = (dpy_optimizer *)self;
    double lr;
    if (dpy_float_arg(arg, "set_lr", "lr", &lr) < 0)
        return NULL;
    for (int g = 0; g < o->ngroups; g++)
        dp_optimizer_set_lr(o->groups[g].opt, (float)lr);
    Py_RETURN_NONE;
}

static PyObject *m_set_momentum(PyObject *self, PyObject *arg)
{
    dpy_optimizer *o = (dpy_optimizer *)self;
    double m;
    if (dpy_float_arg(arg, "set_momentum", "momentum", &m) < 0)
        return NULL;
    for (int g = 0; g < o->ngroups; g++)
        dp_optimizer_set_momentum(o->groups[g].opt, (float)m);
    Py_RETURN_NONE;
}

static PyObject *m_steps(PyObject *self, PyObject *unused)
{
    dpy_optimizer *o = (dpy_optimizer *)self;
    return PyLong_FromLongLong(o->ngroups ? dp_optimizer_steps(o->groups[0].opt) : 0);
}

static PyObject *m_set_steps(PyObject *self, PyObject *arg)
{
    dpy_optimizer *o = (dpy_optimizer *)self;
    long long s;
    if (dpy_int_arg(arg, "set_steps", "steps", &s) < 0)
        return NULL;
    for (int g = 0; g < o->ngroups; g++)
        dp_optimizer_set_steps(o->groups[g].opt, s);
    Py_RETURN_NONE;
}

/* The state `st` of group gr on the host (a wait), or NULL with an exception. */
static float *state_to_host(group *gr, dp_tensor_t *st)
{
    size_t bytes = (size_t)dp_params_numel(gr->params) * sizeof(float);
    float *host = malloc(bytes ? bytes : 1);
    if (!host) {
        PyErr_NoMemory();
        return NULL;
    }
    if (dpy_to_host(st, host, bytes) < 0) {
        free(host);
        return NULL;
    }
    return host;
}

/* state() -> [{name: tensor}] per parameter, in the params' order: each state
 * tensor of the parameter by PyTorch's name ("momentum_buffer", "exp_avg",
 * "exp_avg_sq"), a copy of its part of the buffer's state (waits). */
static PyObject *m_state(PyObject *self, PyObject *unused)
{
    dpy_optimizer *o = (dpy_optimizer *)self;
    PyObject *list = PyList_New(o->nparams);
    if (!list)
        return NULL;
    for (int i = 0; i < o->nparams; i++) {
        PyObject *d = PyDict_New();
        if (!d) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SetItem(list, i, d);
    }
    for (int g = 0; g < o->ngroups; g++) {
        group *gr = &o->groups[g];
        const char *name;
        dp_tensor_t *st;
        for (int s = 0; (st = dp_optimizer_state(gr->opt, s, &name)) != NULL; s++) {
            float *host = state_to_host(gr, st);
            if (!host) {
                Py_DECREF(list);
                return NULL;
            }
            int64_t offset = 0;
            for (int k = 0; k < gr->n; k++) {
                dp_tensor_t *view = dp_params_get(gr->params, k), *part = NULL;
                int64_t shape[DP_MAX_DIMS];
                for (int i = 0; i < dp_tensor_ndim(view); i++)
                    shape[i] = dp_tensor_dim(view, i);
                int rc = dp_tensor_from_host(&part, gr->dev, DP_F32, dp_tensor_ndim(view), shape,
                                             host + offset);
                PyObject *t = rc < 0 ? dpy_raise(rc) : dpy_tensor_wrap(part, DPY_OWN_SELF, NULL);
                if (!t || PyDict_SetItemString(PyList_GetItem(list, gr->index[k]), name, t) < 0) {
                    Py_XDECREF(t);
                    free(host);
                    Py_DECREF(list);
                    return NULL;
                }
                Py_DECREF(t);
                offset += dp_tensor_numel(view);
            }
            free(host);
        }
    }
    return list;
}

/* load_state(index, name, tensor): the state `name` of parameter `index`
 * from tensor's values (a loaded state dict; waits). */
static PyObject *m_load_state(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    dpy_optimizer *o = (dpy_optimizer *)self;
    long long i;
    if (nargs != 3)
        return PyErr_Format(PyExc_TypeError, "load_state(index, name, tensor)");
    const char *want = PyUnicode_Check(args[1]) ? PyUnicode_AsUTF8AndSize(args[1], NULL) : NULL;
    dp_tensor_t *src = dpy_tensor_arg(args[2], "load_state", "tensor");
    if (dpy_int_arg(args[0], "load_state", "index", &i) < 0 || !want || !src)
        return NULL;
    for (int g = 0; g < o->ngroups; g++) {
        group *gr = &o->groups[g];
        int64_t offset = 0;
        for (int k = 0; k < gr->n; k++) {
            int64_t numel = dp_tensor_numel(dp_params_get(gr->params, k));
            if (gr->index[k] != i) {
                offset += numel;
                continue;
            }
            if (dp_tensor_numel(src) != numel || dp_tensor_dtype(src) != DP_F32)
                return PyErr_Format(PyExc_ValueError, "load_state(): state %s of parameter %lld "
                                    "needs %lld float32 values", want, i, (long long)numel);
            const char *name;
            dp_tensor_t *st;
            for (int s = 0; (st = dp_optimizer_state(gr->opt, s, &name)) != NULL; s++) {
                if (strcmp(name, want) != 0)
                    continue;
                float *host = state_to_host(gr, st);
                if (!host)
                    return NULL;
                int rc = dpy_to_host(src, host + offset, (size_t)numel * sizeof(float));
                if (rc == 0) {
                    rc = dp_tensor_copy_from_host(
                        st, host, (size_t)dp_params_numel(gr->params) * sizeof(float));
                    rc = rc < 0 ? dpy_raise_int(rc) : dpy_wait_tensor(st);
                }
                free(host);
                if (rc < 0)
                    return NULL;
                Py_RETURN_NONE;
            }
            return PyErr_Format(PyExc_KeyError, "load_state(): the optimizer keeps no state %s",
                                want);
        }
    }
    return PyErr_Format(PyExc_IndexError, "load_state(): no parameter %lld", i);
}

static PyMethodDef optimizer_methods[] = {
    {"step", DPY_FASTCALL(m_step), "step(grad_scale=1.0): one update of every parameter"},
    {"zero_grad", m_zero_grad, METH_NOARGS, "zero_grad(): the next backward writes afresh"},
    {"set_lr", m_set_lr, METH_O, "set_lr(lr)"},
    {"set_momentum", m_set_momentum, METH_O, "set_momentum(m): SGD's momentum or Adam's beta1"},
    {"steps", m_steps, METH_NOARGS, "steps() -> the updates so far"},
    {"set_steps", m_set_steps, METH_O, "set_steps(n): Adam's bias correction resumes at n"},
    {"state", m_state, METH_NOARGS,
     "state() -> [{name: tensor}] per parameter, PyTorch's names (copies)"},
    {"load_state", DPY_FASTCALL(m_load_state), "load_state(index, name, tensor)"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot optimizer_slots[] = {
    {Py_tp_new, (void *)optimizer_new},
    {Py_tp_dealloc, (void *)optimizer_dealloc},
    {Py_tp_methods, (void *)optimizer_methods},
    {Py_tp_doc, (void *)"Optimizer(params, kind, lr, momentum, nesterov, weight_decay, beta1, "
                        "beta2, eps): the parameters packed into one buffer per device, "
                        "updated by the library's optimizer"},
    {0, NULL},
};

static PyType_Spec optimizer_spec = {
    .name = "_dptrain.Optimizer",
    .basicsize = sizeof(dpy_optimizer),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = optimizer_slots,
};

int dpy_optim_add(PyObject *m)
{
    return dpy_add_type(m, &optimizer_spec, NULL, NULL);
}
