/* autograd.c - the current tape, grad mode, and backward
 * (docs/python-internals.md, "Autograd: one tape per step").
 *
 * An op whose input objects include one that requires a gradient, with grad
 * mode on, runs with the current tape begun: its output belongs to the tape
 * and its object holds the tape (dpy_tape.live counts such objects).
 * backward() runs dp_backward and makes a fresh tape current; the old one,
 * `backwarded`, is released when the next step's first op records on
 * another tape: its still-living objects get copies of their values and it
 * is closed, so at most one backwarded step's activations are alive (as
 * PyTorch frees a graph's saved tensors at backward). A current tape whose
 * last object died (a forward without a backward) is reset, so memory stays
 * flat either way. */
#include "dpy.h"

#include <stdlib.h>

bool dpy_grad_enabled = true;
PyTypeObject *dpy_tape_type;
static dpy_tape *current;
/* The tape a backward last ran on once it stopped being current (a new
 * reference), until the next step's forward releases it. */
static dpy_tape *backwarded;
static uint64_t backward_count;

static void tape_dealloc(PyObject *self)
{
    dpy_tape *tape = (dpy_tape *)self;
    PyTypeObject *tp = Py_TYPE(self);
    dp_tape_close(tape->tape);
    Py_CLEAR(tape->inputs);
    free(tape->outputs);
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
    tape->outputs = NULL;
    tape->noutputs = tape->cap_outputs = 0;
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
    tape->noutputs = 0;
}

/* Lists an output's object (borrowed) for the tape's release; an object not
 * listed (no memory for the list) keeps the tape as before. */
static void track_output(dpy_tape *tape, dpy_tensor *o)
{
    if (tape->noutputs == tape->cap_outputs) {
        Py_ssize_t cap = tape->cap_outputs ? 2 * tape->cap_outputs : 32;
        dpy_tensor **p = realloc(tape->outputs, (size_t)cap * sizeof *p);
        if (!p)
            return;
        tape->outputs = p;
        tape->cap_outputs = cap;
    }
    tape->outputs[tape->noutputs++] = o;
}

/* A tensor object of `tape` is being deallocated (tensor.c calls this
 * before it lets go of the tape), so its reference count is 0: every listed
 * object whose count is 0 leaves the list. More than one can be found (an
 * object whose __dict__ held another of the tape dies first); each is past
 * resurrection, so taking them out early is safe. */
void dpy_tape_release_output(dpy_tape *tape)
{
    for (Py_ssize_t i = tape->noutputs - 1; i >= 0; i--)
        if (Py_REFCNT((PyObject *)tape->outputs[i]) == 0)
            tape->outputs[i] = tape->outputs[--tape->noutputs];
    if (--tape->live > 0)
        return;
    if (tape == current) {
        reset_current(tape);
    } else if (tape == backwarded) {
        /* Its last object died (`del l`): close it now rather than at the
         * next step; the dying object still holds a reference. */
        backwarded = NULL;
        Py_DECREF(tape);
    }
}

/* The next step records: each living object of the backwarded tape gets an
 * object-owned copy of its values (enqueued, so the tape's tensors are
 * released after it has run), is marked graph_freed (a backward through it
 * raises), and the tape is closed. Where some object is not listed (an
 * output wrapped outside dpy_op_end) or a copy cannot be made, the tape
 * stays with its remaining objects, as before this release existed. */
static void release_backwarded(void)
{
    dpy_tape *tape = backwarded;
    backwarded = NULL;
    if (tape->noutputs == tape->live) {
        while (tape->noutputs > 0) {
            dpy_tensor *o = tape->outputs[tape->noutputs - 1];
            const dp_tensor_t *t = o->t;
            int64_t shape[DP_MAX_DIMS];
            for (int i = 0; i < dp_tensor_ndim(t); i++)
                shape[i] = dp_tensor_dim(t, i);
            dp_tensor_t *copy = NULL;
            if (dp_tensor_new(&copy, dp_tensor_device(t), dp_tensor_dtype(t), dp_tensor_ndim(t),
                              shape) < 0)
                break;
            if (dp_tensor_copy(copy, t) < 0) {
                dp_tensor_free(copy);
                break;
            }
            tape->noutputs--;
            o->t = copy;
            o->owner = DPY_OWN_SELF;
            o->keeper = NULL;
            o->graph_freed = 1;
            tape->live--;
            Py_DECREF(tape); /* o's reference; ours keeps the tape until the end */
        }
    }
    Py_DECREF(tape); /* the last reference where every object let go: dp_tape_close */
}

void dpy_tape_replace_output(dpy_tape *tape, dpy_tensor *from, dpy_tensor *to)
{
    for (Py_ssize_t i = 0; i < tape->noutputs; i++)
        if (tape->outputs[i] == from)
            tape->outputs[i] = to;
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
    if (!op->tape)
        return;
    /* The next step's first recorded op releases the backwarded tape before
     * it allocates (the release is queued on the devices ahead of its
     * commands, so its memory serves this step) unless one of its inputs is
     * an object of that tape: the op reads it, so dpy_op_end releases. */
    if (backwarded && op->tape != backwarded) {
        bool reads_backwarded = false;
        for (int i = 0; i < n; i++) {
            dpy_tensor *x = (dpy_tensor *)inputs[i];
            if (x && x->owner == DPY_OWN_TAPE && x->keeper == (PyObject *)backwarded)
                reads_backwarded = true;
        }
        if (!reads_backwarded)
            release_backwarded();
    }
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
    if (!o)
        return NULL;
    dpy_tensor *out = (dpy_tensor *)o;
    out->requires_grad = 1;
    out->is_leaf = 0;
    track_output(op->tape, out);
    /* A value from a released graph, or from the backwarded tape this op
     * releases now, leaves no way back for a backward from the output. */
    bool releases = backwarded && op->tape != backwarded;
    for (int i = 0; i < op->n; i++) {
        dpy_tensor *x = (dpy_tensor *)op->inputs[i];
        if (x && (x->graph_freed ||
                  (releases && x->owner == DPY_OWN_TAPE && x->keeper == (PyObject *)backwarded)))
            out->graph_freed = 1;
    }
    if (releases)
        release_backwarded();
    return o;
}

/* Whether a living object of the tape is not a loss a backward ran from
 * (another loss to backpropagate, as the seed's train_batch keeps one per
 * device; an output like y_hat, whose graph a later backward may use), or
 * an object is not listed. When every one is a backwarded loss, the tape is
 * released at once, its release queued on the devices right after the
 * backward's commands, so the next step's forward reuses its memory;
 * otherwise at the next step's first recorded op (dpy_op_begin). */
static bool losses_pending(dpy_tape *tape)
{
    if (tape->noutputs != tape->live)
        return true;
    for (Py_ssize_t i = 0; i < tape->noutputs; i++)
        if (!tape->outputs[i]->backward_done)
            return true;
    return false;
}

PyObject *dpy_backward(dpy_tensor *loss)
{
    /* the backward adds into gradients, which a deferred conv2d may read */
    if (dpy_lazy_compute_all() < 0)
        return NULL;
    if (loss->graph_freed)
        return PyErr_Format(PyExc_RuntimeError,
                            "backward(): Trying to backward through the graph a second time (or "
                            "directly access saved tensors after they have already been freed). "
                            "Saved intermediate values of the graph are freed when the next "
                            "step's forward begins after a backward()");
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
         * objects of its tensors (its other losses may still backward) until
         * that step's first recorded op releases it. */
        current = NULL;
        if (backwarded)
            release_backwarded();
        backwarded = tape; /* the reference `current` held */
    }
    if (tape == backwarded && !losses_pending(tape))
        release_backwarded();
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
