/* lazy.c - conv2d -> relu -> avg_pool2d, called one by one, run as one op
 * (docs/python-internals.md, "Deferred convolutions").
 *
 * The seed's LeNet calls F.conv2d, F.relu and F.avg_pool2d in turn, and
 * an nn.Sequential of Conv2d, ReLU and AvgPool2d does the same. Run apart,
 * the three write and read the convolution's whole output three times
 * over; the library's dp_conv2d_avg_pool2d computes the pool from the
 * convolution in one kernel (the built-in LeNet's first layer). So conv2d
 * returns an object whose value is deferred: a recipe (its inputs' objects
 * and the call's settings) and no tensor yet. relu of such an object
 * returns another deferred one (the convolution with its ReLU fused), and
 * avg_pool2d of either calls dp_conv2d_avg_pool2d, which fuses where the
 * layer fits and otherwise runs the convolution (ReLU fused) and the pool.
 *
 * A deferred object's value is computed the first time anything else reads
 * it (dpy_tensor_get), by the call it stands for, under the grad mode,
 * precision and kernel choice of its own call: the same bits as if it had
 * run then. Its shape, dtype and device answer without computing. Its
 * inputs must not change before: every extension call that reaches a
 * tensor sharing memory with a deferred object's input computes that
 * object first (before the call can write), as do the calls that write
 * parameters without asking for their objects (an optimizer's step, a
 * backward, a module's replicas); inputs whose memory is written outside
 * the library (dp_tensor_is_shared: NumPy's and DLPack's views) are never
 * deferred. An object that dies unread costs nothing: in a forward, the
 * convolution's and ReLU's objects die when the function that named them
 * returns. */
#include "dpy.h"

#include <stdlib.h>

struct dpy_lazy {
    /* The inputs' objects (b may be NULL), kept alive. Their tensors are
     * read when the recipe runs, not kept: an object's tensor may be
     * replaced by a copy of the same values (its tape released after a
     * backward, autograd.c), and the old one freed. */
    PyObject *x, *w, *b;
    dp_device_t *dev;
    dp_conv2d_params p;  /* p.relu: a relu of the deferred convolution */
    bool grad;           /* grad mode at the call */
    dp_precision precision;
    dp_conv_algo algo;
    int64_t shape[4];
    dp_dtype dtype;
    dpy_tensor *owner; /* borrowed: the object this recipe is for */
    struct dpy_lazy *prev, *next;
};

static bool enabled = true;

static dp_tensor_t *tensor_of(PyObject *o)
{
    return o ? ((dpy_tensor *)o)->t : NULL;
}

struct dpy_lazy *dpy_lazy_live; /* every recipe not yet computed or dropped */
#define live dpy_lazy_live
static unsigned long long stat_deferred, stat_fused, stat_computed;

static void unlink_recipe(struct dpy_lazy *r)
{
    if (!r->prev && live != r)
        return; /* not in the list (any more) */
    if (r->prev)
        r->prev->next = r->next;
    else
        live = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
}

static void free_recipe(struct dpy_lazy *r)
{
    unlink_recipe(r);
    Py_XDECREF(r->x);
    Py_XDECREF(r->w);
    Py_XDECREF(r->b);
    free(r);
}

void dpy_lazy_release(dpy_tensor *o)
{
    if (o->lazy) {
        free_recipe(o->lazy);
        o->lazy = NULL;
    }
}

/* The settings in force now match the recipe's call. */
static bool same_settings(const struct dpy_lazy *r)
{
    return r->grad == dpy_grad_enabled && r->precision == dp_get_precision() &&
           r->algo == dp_get_conv_algo() && !dpy_library_tape_keeper;
}

/* A new object for a recipe (taken over). */
static PyObject *new_deferred(struct dpy_lazy *r)
{
    PyObject *obj = dpy_tensor_wrap(NULL, DPY_OWN_SELF, NULL);
    if (!obj) {
        free_recipe(r);
        return NULL;
    }
    dpy_tensor *o = (dpy_tensor *)obj;
    /* requires_grad as dpy_op_begin would decide it */
    bool records = false;
    PyObject *in[3] = {r->x, r->w, r->b};
    for (int i = 0; i < 3; i++)
        if (in[i] && ((dpy_tensor *)in[i])->requires_grad)
            records = true;
    o->requires_grad = r->grad && records;
    o->is_leaf = !o->requires_grad;
    o->lazy = r;
    r->owner = o;
    r->next = live;
    if (live)
        live->prev = r;
    live = r;
    stat_deferred++;
    return obj;
}

PyObject *dpy_lazy_conv2d(PyObject *x, PyObject *w, PyObject *b, const dp_conv2d_params *p)
{
    dp_tensor_t *xt = ((dpy_tensor *)x)->t, *wt = ((dpy_tensor *)w)->t;
    dp_tensor_t *bt = b ? ((dpy_tensor *)b)->t : NULL;
    if (!enabled || dpy_library_tape_keeper ||
        !dp_device_has(dp_tensor_device(xt), DP_DEVICE_HOST_MEMORY) || dp_tensor_is_shared(xt) ||
        dp_tensor_is_shared(wt) || (bt && dp_tensor_is_shared(bt)))
        return Py_NotImplemented; /* borrowed sentinel: run it now */
    struct dpy_lazy *r = calloc(1, sizeof *r);
    if (!r)
        return PyErr_NoMemory();
    int rc = dp_conv2d_output(r->shape, &r->dtype, xt, wt, bt, p);
    if (rc < 0) {
        free(r);
        return dpy_raise(rc);
    }
    r->x = x;
    r->w = w;
    r->b = b;
    Py_INCREF(x);
    Py_INCREF(w);
    Py_XINCREF(b);
    r->dev = dp_tensor_device(xt);
    r->p = *p;
    r->grad = dpy_grad_enabled;
    r->precision = dp_get_precision();
    r->algo = dp_get_conv_algo();
    return new_deferred(r);
}

bool dpy_lazy_is_conv(PyObject *o)
{
    const struct dpy_lazy *r = dpy_is_tensor(o) ? ((dpy_tensor *)o)->lazy : NULL;
    return r && same_settings(r);
}

PyObject *dpy_lazy_relu(PyObject *h)
{
    const struct dpy_lazy *src = ((dpy_tensor *)h)->lazy;
    if (src->p.relu)
        return Py_NotImplemented; /* relu of a relu: run it */
    struct dpy_lazy *r = malloc(sizeof *r);
    if (!r)
        return PyErr_NoMemory();
    *r = *src;
    r->p.relu = true;
    r->prev = r->next = NULL;
    Py_INCREF(r->x);
    Py_INCREF(r->w);
    Py_XINCREF(r->b);
    return new_deferred(r);
}

PyObject *dpy_lazy_avg_pool2d(PyObject *h, const dp_pool2d_params *pool)
{
    const struct dpy_lazy *r = ((dpy_tensor *)h)->lazy;
    PyObject *in[3] = {r->x, r->w, r->b};
    dp_tensor_t *y = NULL;
    dpy_op op;
    dpy_op_begin(&op, in, 3);
    int rc = dp_conv2d_avg_pool2d(&y, tensor_of(r->x), tensor_of(r->w), tensor_of(r->b), &r->p,
                                  pool);
    if (rc == 0)
        stat_fused++;
    return dpy_op_end(&op, rc, y);
}

/* Computes o's value by the call its recipe stands for, in its settings,
 * and gives o the tensor (and the tape's ownership) that call's object
 * would have had. 0, or -1 with an exception (o is then left empty). */
int dpy_lazy_compute(dpy_tensor *o)
{
    struct dpy_lazy *r = o->lazy;
    o->lazy = NULL;
    unlink_recipe(r);
    bool grad = dpy_grad_enabled;
    dpy_grad_enabled = r->grad;
    dp_precision precision = dp_set_precision(r->precision);
    dp_conv_algo algo = dp_get_conv_algo();
    dp_set_conv_algo(r->algo);
    PyObject *in[3] = {r->x, r->w, r->b};
    dp_tensor_t *y = NULL;
    dpy_op op;
    dpy_op_begin(&op, in, 3);
    int rc = dp_conv2d(&y, tensor_of(r->x), tensor_of(r->w), tensor_of(r->b), &r->p);
    PyObject *made = dpy_op_end(&op, rc, y);
    dp_set_conv_algo(algo);
    dp_set_precision(precision);
    dpy_grad_enabled = grad;
    free_recipe(r);
    if (!made)
        return -1;
    dpy_tensor *n = (dpy_tensor *)made;
    o->t = n->t;
    o->owner = n->owner;
    o->keeper = n->keeper;
    o->requires_grad = n->requires_grad;
    o->is_leaf = n->is_leaf;
    o->graph_freed = n->graph_freed;
    if (o->owner == DPY_OWN_TAPE)
        dpy_tape_replace_output((dpy_tape *)o->keeper, n, o);
    n->t = NULL;
    n->owner = DPY_OWN_SELF;
    n->keeper = NULL;
    Py_DECREF(made);
    stat_computed++;
    return 0;
}

/* Computes every deferred object one of whose inputs shares memory with t. */
int dpy_lazy_before_access(const dp_tensor_t *t)
{
    struct dpy_lazy *r = live;
    while (r) {
        struct dpy_lazy *next = r->next;
        if (dp_tensor_may_share_memory(t, tensor_of(r->x)) ||
            dp_tensor_may_share_memory(t, tensor_of(r->w)) ||
            dp_tensor_may_share_memory(t, tensor_of(r->b))) {
            /* computing may free `next` (an object dying with a tape copy),
             * so start over from the head: the list only shrinks */
            if (dpy_lazy_compute(r->owner) < 0)
                return -1;
            next = live;
        }
        r = next;
    }
    return 0;
}

int dpy_lazy_compute_all(void)
{
    while (live)
        if (dpy_lazy_compute(live->owner) < 0)
            return -1;
    return 0;
}

bool dpy_lazy_meta(PyObject *o, int *ndim, const int64_t **shape, dp_dtype *dtype,
                   dp_device_t **dev)
{
    const struct dpy_lazy *r = ((dpy_tensor *)o)->lazy;
    if (!r)
        return false;
    *ndim = 4;
    *shape = r->shape;
    *dtype = r->dtype;
    *dev = r->dev;
    return true;
}

/* _set_fusion(enabled) -> the setting it replaces. */
static PyObject *py_set_fusion(PyObject *m, PyObject *arg)
{
    int on = PyObject_IsTrue(arg);
    if (on < 0)
        return NULL;
    bool before = enabled;
    enabled = on;
    if (!on && dpy_lazy_compute_all() < 0)
        return NULL;
    return PyBool_FromLong(before);
}

/* _fusion_stats() -> (deferred, fused, computed): convolutions deferred,
 * pools fused with a deferred convolution, deferred objects computed. */
static PyObject *py_fusion_stats(PyObject *m, PyObject *unused)
{
    return Py_BuildValue("(KKK)", stat_deferred, stat_fused, stat_computed);
}

static PyMethodDef lazy_methods[] = {
    {"_set_fusion", py_set_fusion, METH_O,
     "_set_fusion(enabled) -> previous: defer conv2d to fuse it with relu and avg_pool2d"},
    {"_fusion_stats", py_fusion_stats, METH_NOARGS,
     "_fusion_stats() -> (deferred, fused, computed)"},
    {NULL, NULL, 0, NULL},
};

int dpy_lazy_add(PyObject *m)
{
    const char *env = getenv("DPTRAIN_FUSION");
    if (env && env[0] == '0' && env[1] == '\0')
        enabled = false;
    return PyModule_AddFunctions(m, lazy_methods);
}
