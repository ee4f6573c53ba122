/* autograd.c - the current tape, grad mode, and backward
 * (docs/python-internals.md, "Autograd: one tape per step").
 *
 * An op whose input objects include one that requires a gradient, with grad
 * mode on, runs with the current tape begun: its output belongs to the tape
 * and its object holds the tape (dpy_tape.live counts such objects).
 * backward() runs dp_backward and makes a fresh tape current; the old one is
 * closed when its last object dies. A current tape whose last object died
 * (a forward without a backward) is reset, so memory stays flat either way. */
#include "dpy.h"

bool dpy_grad_enabled = true;
PyTypeObject *dpy_tape_type;
static dpy_tape *current;
static uint64_t backward_count;

static void tape_dealloc(PyObject *self)
{
    dpy_tape *tape = (dpy_tape *)self;
    PyTypeObject *tp = Py_TYPE(self);
    dp_tape_close(tape->tape);
    Py_CLEAR(tape->inputs);
    freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    free_fn(self);
    Py_DECREF(tp);
}

static PyType_Slot tape_slots[] = {
    {Py_tp_dealloc, (void *)tape_dealloc},
    {Py_tp_doc, (void *)"The tape of one step (the ops recorded for backward)."},
    {0, NULL},
};

static PyType_Spec tape_spec = {
    .name = "_dptrain.Tape",
    .basicsize = sizeof(dpy_tape),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = tape_slots,
};

static dpy_tape *tape_new(void)
{
    allocfunc alloc = (allocfunc)PyType_GetSlot(dpy_tape_type, Py_tp_alloc);
    dpy_tape *tape = (dpy_tape *)alloc(dpy_tape_type, 0);
    if (!tape)
        return NULL;
    tape->live = 0;
    tape->inputs = NULL;
    int rc = dp_tape_init(&tape->tape, true);
    if (rc < 0) {
        tape->tape = NULL;
        Py_DECREF(tape);
        return (dpy_tape *)dpy_raise(rc);
    }
    return tape;
}

dpy_tape *dpy_current_tape(void)
{
    if (!current)
        current = tape_new();
    return current;
}

int dpy_tape_keep(dpy_tape *tape, PyObject *const *inputs, int n)
{
    for (int i = 0; i < n; i++) {
        dpy_tensor *x = (dpy_tensor *)inputs[i];
        if (!x || (x->owner == DPY_OWN_TAPE && x->keeper == (PyObject *)tape))
            continue;
        if (!tape->inputs && !(tape->inputs = PyList_New(0)))
            return -1;
        if (PyList_Append(tape->inputs, inputs[i]) < 0)
            return -1;
    }
    return 0;
}

/* The current tape's last object died: nothing can reach its tensors. */
static void reset_current(dpy_tape *tape)
{
    dp_tape_reset(tape->tape);
    Py_CLEAR(tape->inputs);
}

void dpy_tape_release_output(dpy_tape *tape)
{
    if (--tape->live == 0 && tape == current)
        reset_current(tape);
}

uint64_t dpy_backward_count(void)
{
    return backward_count;
}

/* The tape an op records on: the one tape its recorded inputs belong to,
 * when they all belong to one (an output of an earlier step's tape, used
 * after a backward made a fresh tape current: its gradient must live on
 * its own tape, and the backward from the new output must reach its
 * graph), else the current tape. */
void dpy_op_begin(dpy_op *op, PyObject *const *inputs, int n)
{
    op->tape = NULL;
    op->inputs = inputs;
    op->n = n;
    if (!dpy_grad_enabled || dpy_library_tape_keeper)
        return;
    bool records = false;
    dpy_tape *own = NULL;
    int tapes = 0;
    for (int i = 0; i < n; i++) {
        dpy_tensor *x = (dpy_tensor *)inputs[i];
        if (!x || !x->requires_grad)
            continue;
        records = true;
        if (x->owner == DPY_OWN_TAPE && (dpy_tape *)x->keeper != own) {
            own = (dpy_tape *)x->keeper;
            tapes++;
        }
    }
    if (!records)
        return;
    op->tape = tapes == 1 ? own : dpy_current_tape();
    if (op->tape)
        dp_tape_begin(op->tape->tape);
}

PyObject *dpy_wrap_new(dp_tensor_t *y)
{
    if (dpy_library_tape_keeper)
        return dpy_tensor_wrap(y, DPY_OWN_OTHER, dpy_library_tape_keeper);
    return dpy_tensor_wrap(y, DPY_OWN_SELF, NULL);
}

PyObject *dpy_op_end(dpy_op *op, int rc, dp_tensor_t *y)
{
    if (op->tape)
        dp_tape_end(op->tape->tape);
    if (rc < 0)
        return dpy_raise(rc);
    for (int i = 0; i < op->n; i++)
        if (op->inputs[i] && ((dpy_tensor *)op->inputs[i])->t == y) {
            Py_INCREF(op->inputs[i]);
            return op->inputs[i];
        }
    if (!op->tape)
        return dpy_wrap_new(y);
    if (dpy_tape_keep(op->tape, op->inputs, op->n) < 0)
        return NULL;
    PyObject *o = dpy_tensor_wrap(y, DPY_OWN_TAPE, (PyObject *)op->tape);
    if (o) {
        ((dpy_tensor *)o)->requires_grad = 1;
        ((dpy_tensor *)o)->is_leaf = 0;
    }
    return o;
}

PyObject *dpy_backward(dpy_tensor *loss)
{
    if (!loss->requires_grad || loss->owner != DPY_OWN_TAPE)
        return PyErr_Format(PyExc_RuntimeError,
                            "backward(): element 0 of tensors does not require grad and does not "
                            "have a grad_fn");
    if (dp_tensor_numel(loss->t) != 1)
        return PyErr_Format(PyExc_RuntimeError,
                            "backward(): grad can be implicitly created only for scalar outputs "
                            "(this tensor has %lld elements)",
                            (long long)dp_tensor_numel(loss->t));
    if (loss->backward_done)
        return PyErr_Format(PyExc_RuntimeError,
                            "backward(): trying to backward through the graph a second time "
                            "(backward() already ran from this loss)");
    dpy_tape *tape = (dpy_tape *)loss->keeper;
    int rc = dp_backward(loss->t);
    if (rc < 0)
        return dpy_raise(rc);
    loss->backward_done = 1;
    backward_count++;
    if (tape == current) {
        /* The next step records on a fresh tape; this one lives on in the
         * objects of its tensors. */
        current = NULL;
        if (tape->live == 0)
            reset_current(tape);
        Py_DECREF(tape);
    }
    Py_RETURN_NONE;
}

/* ---- grad mode ------------------------------------------------------------- */

static PyObject *py_set_grad_enabled(PyObject *m, PyObject *arg)
{
    int v = PyObject_IsTrue(arg);
    if (v < 0)
        return NULL;
    bool previous = dpy_grad_enabled;
    dpy_grad_enabled = v != 0;
    return PyBool_FromLong(previous);
}

static PyObject *py_is_grad_enabled(PyObject *m, PyObject *unused)
{
    return PyBool_FromLong(dpy_grad_enabled);
}

static PyMethodDef autograd_functions[] = {
    {"set_grad_enabled", py_set_grad_enabled, METH_O,
     "set_grad_enabled(b) -> previous: records ops for backward or not (no_grad)"},
    {"is_grad_enabled", py_is_grad_enabled, METH_NOARGS, "is_grad_enabled() -> bool"},
    {NULL, NULL, 0, NULL},
};

int dpy_autograd_add(PyObject *m)
{
    if (dpy_add_type(m, &tape_spec, NULL, &dpy_tape_type) < 0)
        return -1;
    return PyModule_AddFunctions(m, autograd_functions);
}
