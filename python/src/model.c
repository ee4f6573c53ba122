/* model.c - a Python nn.Module as a dptrain model: the fifth kind of model
 * beside the built-ins, nn.Sequential files, ONNX graphs and C definitions,
 * through the one model interface (dp/nn.h's dp_model_def), with no entry
 * of its own in the library.
 *
 * The definition's parameter specs are the module's float32 parameters
 * (named_parameters(), state_dict order) with their current values as the
 * starting values (param_values), its buffers the module's float32 buffers.
 * The library builds a model of it on each device (replicas, the meta
 * device's summary) and calls `forward` on the thread that called dp_train,
 * with that model's trainer tape begun; forward takes the GIL, points the
 * module's Parameter objects at the model's own parameter views for the
 * call, and runs module(x): the ops it calls record on the trainer's tape,
 * so the library's backward, allreduce and optimizer train them as any
 * model's. After each epoch the values of the model the last forward ran
 * on (every replica holds the same after an update) are kept on the host,
 * and written into the module's parameters when the run returns. */
#include "module_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

PyObject *dpy_library_tape_keeper;

/* The module's tensors of one kind (parameters or buffers). */
typedef struct tensor_set {
    int n;
    PyObject **objs;      /* the Parameter (or buffer) objects, new references */
    char **names;         /* "0.weight", ... */
    dp_param_spec *specs; /* shapes; drawn as zeros where no values are given */
    float *values;        /* their values, spec order: the starting ones */
    int64_t numel;
    dp_tensor_t **saved; /* each object's own tensor while a forward runs */
} tensor_set;

struct dpy_module_model {
    dp_model_def def;
    char *name; /* "python:Net" */
    PyObject *module;
    tensor_set params, buffers;
    /* The model the last forward on a device with memory ran on, and
     * whether `trained` holds its values after an epoch. */
    dp_model_t *last;
    float *trained; /* params.numel + buffers.numel */
    bool have_trained;
    /* The module's mode before the run (-1: it has none), given back after. */
    int training_before;
    /* Its int32 num_batches_tracked buffers (batch norm's), their values
     * before the run, and the training forwards the trained model counted
     * (dp_model_batches_tracked): after the run each is before + that, as
     * one module trained on whole batches would count, whatever the
     * replicas' forwards did to the module's own. */
    int ncounters;
    PyObject **counters;
    int32_t *counter_start;
    int64_t tracked;
    /* The first exception the module's forward raised (PyErr_Fetch's). */
    PyObject *exc_type, *exc_value, *exc_tb;
};

static void set_clear(tensor_set *s)
{
    for (int i = 0; i < s->n; i++) {
        Py_XDECREF(s->objs ? s->objs[i] : NULL);
        free(s->names ? s->names[i] : NULL);
    }
    free(s->objs);
    free(s->names);
    free(s->specs);
    free(s->values);
    free(s->saved);
    memset(s, 0, sizeof *s);
}

/* module.<method>() (named_parameters, named_buffers) as a list of
 * (name, tensor) pairs: a new list, an empty one for a module without the
 * method, or NULL with an exception. */
static PyObject *named_list(PyObject *module, const char *method)
{
    if (!PyObject_HasAttrString(module, method))
        return PyList_New(0);
    PyObject *items = PyObject_CallMethod(module, method, NULL);
    PyObject *list = items ? PySequence_List(items) : NULL;
    Py_XDECREF(items);
    return list;
}

/* Item i of a named_list: its name (NULL unless a str) and its object
 * (NULL unless a (name, object) pair), both borrowed. */
static void named_item(PyObject *list, Py_ssize_t i, const char **name, PyObject **obj)
{
    PyObject *pair = PyList_GetItem(list, i);
    bool is_pair = PyTuple_Check(pair) && PyTuple_Size(pair) == 2;
    PyObject *key = is_pair ? PyTuple_GetItem(pair, 0) : NULL;
    *obj = is_pair ? PyTuple_GetItem(pair, 1) : NULL;
    *name = key && PyUnicode_Check(key) ? PyUnicode_AsUTF8AndSize(key, NULL) : NULL;
}

/* One (name, tensor) pair of named_parameters() or named_buffers() into
 * entry i of s (float32 only); -1 with an exception. */
static int set_take(tensor_set *s, int i, const char *text, PyObject *obj, const char *what)
{
    if (!text || !obj) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "train(): the module's %s must be (str, Tensor) pairs",
                         what);
        return -1;
    }
    dp_tensor_t *t = dpy_tensor_get(obj);
    if (!t)
        return -1;
    if (dp_tensor_dtype(t) != DP_F32) {
        PyErr_Format(PyExc_TypeError, "train(): the module's %s `%s` is %s; dptrain trains float32",
                     what, text, dpy_dtype_name(dp_tensor_dtype(t)));
        return -1;
    }
    int64_t shape[DP_MAX_DIMS];
    int ndim = dp_tensor_ndim(t);
    for (int d = 0; d < ndim; d++)
        shape[d] = dp_tensor_dim(t, d);
    s->names[i] = strdup(text);
    if (!s->names[i]) {
        PyErr_NoMemory();
        return -1;
    }
    s->specs[i] = dp_param_spec_make(s->names[i], ndim, shape, DP_INIT_ZEROS, 0);
    s->objs[i] = Py_NewRef(obj);
    s->numel += dp_tensor_numel(t);
    return 0;
}

/* module.<method>() (named_parameters or named_buffers) into s, with the
 * tensors' current values; -1 with an exception. */
static int set_fill(tensor_set *s, PyObject *module, const char *method, const char *what)
{
    PyObject *list = named_list(module, method);
    if (!list)
        return -1;
    Py_ssize_t n = PyList_Size(list);
    int rc = 0;
    s->objs = calloc((size_t)n + 1, sizeof *s->objs);
    s->names = calloc((size_t)n + 1, sizeof *s->names);
    s->specs = calloc((size_t)n + 1, sizeof *s->specs);
    s->saved = calloc((size_t)n + 1, sizeof *s->saved);
    if (!s->objs || !s->names || !s->specs || !s->saved) {
        PyErr_NoMemory();
        rc = -1;
    }
    /* float32 tensors only: a buffer of another dtype (num_batches_tracked)
     * stays the module's own. */
    for (Py_ssize_t i = 0; rc == 0 && i < n; i++) {
        const char *text;
        PyObject *obj;
        named_item(list, i, &text, &obj);
        dp_tensor_t *t = obj && dpy_is_tensor(obj) ? dpy_tensor_get(obj) : NULL;
        if (PyErr_Occurred())
            rc = -1;
        else if (t && dp_tensor_dtype(t) != DP_F32 && strcmp(what, "buffer") == 0)
            continue;
        else if ((rc = set_take(s, s->n, text, obj, what)) == 0)
            s->n++;
    }
    Py_DECREF(list);
    if (rc == 0 && s->n > 0) {
        s->values = malloc((size_t)(s->numel > 0 ? s->numel : 1) * sizeof *s->values);
        if (!s->values) {
            PyErr_NoMemory();
            rc = -1;
        }
    }
    int64_t at = 0;
    for (int i = 0; rc == 0 && i < s->n; i++) {
        dp_tensor_t *t = dpy_tensor_get(s->objs[i]);
        int64_t numel = dp_tensor_numel(t);
        rc = dpy_to_host(t, s->values + at, (size_t)numel * sizeof(float));
        at += numel;
    }
    return rc;
}

/* Points every object of s at tensor i of p (a replica's parameters), or
 * back at its own (p NULL). */
static void set_point(tensor_set *s, dp_params_t *p)
{
    /* (No deferred conv2d of the objects is computed meanwhile: none is made
     * under the library's tape, and dptrain.train computes them first.) */
    for (int i = 0; i < s->n; i++) {
        dpy_tensor *o = (dpy_tensor *)s->objs[i];
        if (p) {
            s->saved[i] = o->t;
            o->t = dp_params_get(p, i);
        } else {
            o->t = s->saved[i];
        }
    }
}

/* Sets module.training to `train` through module.train(mode), as the
 * library's evaluation asks for the module's inference behaviour. */
static int set_mode(PyObject *module, bool train)
{
    PyObject *now = PyObject_GetAttrString(module, "training");
    if (!now) {
        PyErr_Clear(); /* a module without modes */
        return 0;
    }
    int same = PyObject_IsTrue(now) == (int)train;
    Py_DECREF(now);
    if (same)
        return 0;
    PyObject *r = PyObject_CallMethod(module, "train", "O", train ? Py_True : Py_False);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

/* module(x) with the GIL held; the output's tensor into *logits. */
static int call_module(dpy_module_model *mm, dp_model_t *m, dp_tensor_t *x, bool train,
                       dp_tensor_t **logits)
{
    if (set_mode(mm->module, train) < 0)
        return -1;
    PyObject *xo = dpy_tensor_wrap(x, DPY_OWN_OTHER, Py_None);
    if (!xo)
        return -1;
    set_point(&mm->params, dp_model_params(m));
    if (mm->buffers.n > 0)
        set_point(&mm->buffers, dp_model_buffers(m));
    /* The library's tape records; the extension's grad mode and tapes stay
     * out of the way (the Parameter objects require a gradient). */
    PyObject *keeper = dpy_library_tape_keeper;
    bool grad = dpy_grad_enabled;
    dpy_library_tape_keeper = xo;
    dpy_grad_enabled = false;
    PyObject *y = PyObject_CallFunctionObjArgs(mm->module, xo, NULL);
    dpy_grad_enabled = grad;
    dpy_library_tape_keeper = keeper;
    set_point(&mm->params, NULL);
    if (mm->buffers.n > 0)
        set_point(&mm->buffers, NULL);
    int rc = 0;
    if (!y) {
        rc = -1;
    } else if (!dpy_is_tensor(y)) {
        PyObject *type_name = PyType_GetName(Py_TYPE(y));
        PyErr_Format(PyExc_TypeError, "train(): %s's forward returned %S, not a Tensor of logits",
                     mm->name, type_name ? type_name : Py_None);
        Py_XDECREF(type_name);
        rc = -1;
    } else {
        *logits = dpy_tensor_get(y);
        rc = *logits ? 0 : -1;
    }
    Py_XDECREF(y);
    Py_DECREF(xo);
    return rc;
}

static int module_forward(dp_model_t *m, dp_tensor_t *x, bool train, dp_tensor_t **logits)
{
    dpy_module_model *mm = (dpy_module_model *)dp_model_user(m);
    PyGILState_STATE gil = PyGILState_Ensure();
    int rc = mm->exc_type ? -1 : call_module(mm, m, x, train, logits);
    if (rc < 0 && !mm->exc_type)
        PyErr_Fetch(&mm->exc_type, &mm->exc_value, &mm->exc_tb);
    PyErr_Clear();
    PyGILState_Release(gil);
    /* The meta device (the library's summary) holds no values to keep. */
    if (rc == 0 && dp_device_backend(dp_model_device(m)) >= 0)
        mm->last = m;
    return rc < 0 ? DP_EINVAL : 0;
}

static int read_params(dp_params_t *p, float *dst)
{
    return p ? dp_params_get_all(p, dst) : 0;
}

bool dpy_module_model_on_epoch(const dp_epoch_stats *epoch, void *user)
{
    (void)epoch;
    dpy_module_model *mm = user;
    if (!mm->last)
        return false;
    int rc = read_params(dp_model_params(mm->last), mm->trained);
    if (rc == 0 && mm->buffers.n > 0)
        rc = read_params(dp_model_buffers(mm->last), mm->trained + mm->params.numel);
    mm->have_trained = rc == 0;
    mm->tracked = dp_model_batches_tracked(mm->last);
    return false;
}

/* The module's int32 buffers named *num_batches_tracked and their values;
 * -1 with an exception. */
static int counters_fill(dpy_module_model *mm)
{
    PyObject *list = named_list(mm->module, "named_buffers");
    if (!list)
        return -1;
    Py_ssize_t n = PyList_Size(list);
    int rc = 0;
    mm->counters = calloc((size_t)n + 1, sizeof *mm->counters);
    mm->counter_start = calloc((size_t)n + 1, sizeof *mm->counter_start);
    if (!mm->counters || !mm->counter_start)
        rc = (PyErr_NoMemory(), -1);
    const char suffix[] = "num_batches_tracked";
    for (Py_ssize_t i = 0; rc == 0 && i < n; i++) {
        const char *text;
        PyObject *obj;
        named_item(list, i, &text, &obj);
        dp_tensor_t *t = obj && dpy_is_tensor(obj) ? dpy_tensor_get(obj) : NULL;
        size_t len = text ? strlen(text) : 0;
        if (!t || dp_tensor_dtype(t) != DP_I32 || dp_tensor_numel(t) != 1 ||
            len < sizeof suffix - 1 || strcmp(text + len - (sizeof suffix - 1), suffix) != 0) {
            PyErr_Clear();
            continue;
        }
        rc = dpy_to_host(t, &mm->counter_start[mm->ncounters], sizeof(int32_t));
        if (rc == 0)
            mm->counters[mm->ncounters++] = Py_NewRef(obj);
    }
    Py_DECREF(list);
    return rc;
}

/* Whether the extension's ops leave their outputs to a library tape while
 * dpy_library_tape_keeper is set (dpy_op_end's rule, module_model.h): an
 * op run with a keeper outside any tape must give an output that it does
 * not free. Without that rule, each output of a module's forward would be
 * freed twice (by its object and by the trainer's tape): refused instead.
 * 0, or -1 with RuntimeError. */
static int check_keeper_rule(void)
{
    dp_tensor_t *t;
    int rc = dpy_scalar_tensor(&t, dpy_device("cpu:0"), DP_F32, 1.0);
    if (rc < 0)
        return dpy_raise_int(rc);
    PyObject *x = dpy_tensor_wrap(t, DPY_OWN_SELF, NULL);
    PyObject *ext = x ? PyImport_ImportModule("_dptrain") : NULL;
    PyObject *keeper = dpy_library_tape_keeper;
    bool grad = dpy_grad_enabled;
    dpy_library_tape_keeper = x;
    dpy_grad_enabled = false;
    PyObject *y = ext ? PyObject_CallMethod(ext, "relu", "O", x) : NULL;
    dpy_grad_enabled = grad;
    dpy_library_tape_keeper = keeper;
    int ok = y && dpy_is_tensor(y) && ((dpy_tensor *)y)->owner != DPY_OWN_SELF;
    if (y && dpy_is_tensor(y) && ok && y != x) {
        /* No tape was active: the output is this call's to free after all. */
        dpy_tensor *o = (dpy_tensor *)y;
        o->owner = DPY_OWN_SELF;
        Py_CLEAR(o->keeper);
    }
    Py_XDECREF(y);
    Py_XDECREF(ext);
    Py_XDECREF(x);
    if (PyErr_Occurred())
        return -1;
    if (!ok)
        PyErr_SetString(PyExc_RuntimeError,
                        "train(): this _dptrain cannot run a Python module inside the library's "
                        "forward (its ops ignore dpy_library_tape_keeper: python/src/autograd.c)");
    return ok ? 0 : -1;
}

dpy_module_model *dpy_module_model_new(PyObject *module)
{
    if (check_keeper_rule() < 0)
        return NULL;
    dpy_module_model *mm = calloc(1, sizeof *mm);
    if (!mm)
        return (dpy_module_model *)PyErr_NoMemory();
    mm->module = Py_NewRef(module);
    PyObject *type_name = PyType_GetName(Py_TYPE(module));
    const char *tn = type_name ? PyUnicode_AsUTF8AndSize(type_name, NULL) : NULL;
    size_t len = (tn ? strlen(tn) : 6) + 8;
    mm->name = tn ? malloc(len) : NULL;
    if (mm->name)
        snprintf(mm->name, len, "python:%s", tn);
    Py_XDECREF(type_name);
    int rc = mm->name ? 0 : -1;
    if (rc == 0)
        rc = set_fill(&mm->params, module, "named_parameters", "parameter");
    if (rc == 0 && mm->params.n == 0) {
        PyErr_Format(PyExc_ValueError, "train(): the module %s has no parameters to train",
                     mm->name);
        rc = -1;
    }
    if (rc == 0)
        rc = set_fill(&mm->buffers, module, "named_buffers", "buffer");
    if (rc == 0)
        rc = counters_fill(mm);
    PyObject *training = rc == 0 ? PyObject_GetAttrString(module, "training") : NULL;
    mm->training_before = training ? PyObject_IsTrue(training) : -1;
    Py_XDECREF(training);
    if (rc == 0 && !training)
        PyErr_Clear(); /* a module without modes */
    if (rc == 0) {
        mm->trained = malloc((size_t)(mm->params.numel + mm->buffers.numel) * sizeof(float));
        if (!mm->trained) {
            PyErr_NoMemory();
            rc = -1;
        }
    }
    if (rc < 0) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        dpy_module_model_free(mm);
        return NULL;
    }
    mm->def = (dp_model_def){.name = mm->name,
                             .params = mm->params.specs,
                             .nparams = mm->params.n,
                             .buffers = mm->buffers.n > 0 ? mm->buffers.specs : NULL,
                             .nbuffers = mm->buffers.n,
                             .forward = module_forward,
                             .user = mm,
                             .param_values = mm->params.values,
                             .buffer_values = mm->buffers.n > 0 ? mm->buffers.values : NULL};
    return mm;
}

const dp_model_def *dpy_module_model_def(const dpy_module_model *mm)
{
    return &mm->def;
}

/* host values[at..] into each object of s, waited for. */
static int set_write(tensor_set *s, const float *values)
{
    for (int i = 0; i < s->n; i++) {
        dp_tensor_t *t = dpy_tensor_get(s->objs[i]);
        if (!t)
            return -1;
        int64_t numel = dp_tensor_numel(t);
        int rc = dp_tensor_copy_from_host(t, values, (size_t)numel * sizeof(float));
        if (rc == 0)
            rc = dpy_wait_tensor(t) < 0 ? -1 : 0;
        else
            return dpy_raise_int(rc);
        if (rc < 0)
            return -1;
        values += numel;
    }
    return 0;
}

/* The counters as the run leaves them: before + the forwards it counted. */
static int counters_write(dpy_module_model *mm)
{
    for (int i = 0; i < mm->ncounters; i++) {
        dp_tensor_t *t = dpy_tensor_get(mm->counters[i]);
        int64_t count = (int64_t)mm->counter_start[i] + mm->tracked;
        int32_t value = count > INT32_MAX ? INT32_MAX : (int32_t)count;
        int rc = t ? dp_tensor_copy_from_host(t, &value, sizeof value) : -1;
        if (rc < 0)
            return t ? dpy_raise_int(rc) : -1;
        if (dpy_wait_tensor(t) < 0)
            return -1;
    }
    return 0;
}

int dpy_module_model_finish(dpy_module_model *mm, bool run_failed)
{
    if (mm->training_before >= 0) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        int rc = set_mode(mm->module, mm->training_before != 0);
        if (rc < 0 && !mm->exc_type)
            PyErr_Fetch(&mm->exc_type, &mm->exc_value, &mm->exc_tb);
        PyErr_Clear();
        PyErr_Restore(type, value, tb);
    }
    if (mm->exc_type) {
        PyErr_Restore(mm->exc_type, mm->exc_value, mm->exc_tb);
        mm->exc_type = mm->exc_value = mm->exc_tb = NULL;
        return -1;
    }
    if (!mm->have_trained)
        return 0;
    (void)run_failed; /* the last finished epoch's values are the module's either way */
    if (set_write(&mm->params, mm->trained) < 0 ||
        set_write(&mm->buffers, mm->trained + mm->params.numel) < 0)
        return -1;
    return counters_write(mm);
}

void dpy_module_model_free(dpy_module_model *mm)
{
    if (!mm)
        return;
    set_clear(&mm->params);
    set_clear(&mm->buffers);
    for (int i = 0; i < mm->ncounters; i++)
        Py_DECREF(mm->counters[i]);
    free(mm->counters);
    free(mm->counter_start);
    Py_XDECREF(mm->module);
    Py_XDECREF(mm->exc_type);
    Py_XDECREF(mm->exc_value);
    Py_XDECREF(mm->exc_tb);
    free(mm->trained);
    free(mm->name);
    free(mm);
}

int dpy_model_add(PyObject *m)
{
    (void)m;
    return 0;
}
