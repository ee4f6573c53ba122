/* ops_eltwise.c - activations, softmax, batch norm, dropout, the
 * cross-entropy loss and cat, positional as ops.c's. */
#include "dpy.h"

#include <string.h>

int dpy_nargs(const char *sig, Py_ssize_t nargs, Py_ssize_t want);
int dpy_check_rank(const dp_tensor_t *t, const char *func, const char *arg, int lo, int hi);

#define TENSOR_ARG(var, i, func, name)                                                             \
    dp_tensor_t *var = dpy_tensor_arg(args[i], func, name);                                        \
    if (!var)                                                                                      \
        return NULL;

typedef int (*unary_fn)(dp_tensor_t **y, dp_tensor_t *x);

static PyObject *unary(PyObject *const *args, Py_ssize_t nargs, const char *f, unary_fn fn)
{
    if (nargs != 1)
        return PyErr_Format(PyExc_TypeError, "%s(x) takes 1 argument, %zd given", f, nargs);
    TENSOR_ARG(x, 0, f, "input");
    dp_tensor_t *y = NULL;
    dpy_op op;
    dpy_op_begin(&op, args, 1);
    int rc = fn(&y, x);
    return dpy_op_end(&op, rc, y);
}

static PyObject *py_relu(PyObject *m, PyObject *const *args, Py_ssize_t n)
{
    if (n == 1 && dpy_lazy_is_conv(args[0])) {
        PyObject *deferred = dpy_lazy_relu(args[0]);
        if (deferred != Py_NotImplemented)
            return deferred;
    }
    return unary(args, n, "relu", dp_relu);
}
static PyObject *py_sigmoid(PyObject *m, PyObject *const *args, Py_ssize_t n)
{
    return unary(args, n, "sigmoid", dp_sigmoid);
}
static PyObject *py_tanh(PyObject *m, PyObject *const *args, Py_ssize_t n)
{
    return unary(args, n, "tanh", dp_tanh);
}

/* softmax and log_softmax over axis 1 of (N, C), (N, C, L), (N, C, H, W). */
static PyObject *softmax_like(PyObject *const *args, Py_ssize_t nargs, const char *f, unary_fn fn)
{
    if (nargs == 1) {
        dp_tensor_t *x = dpy_tensor_arg(args[0], f, "input");
        if (!x || dpy_check_rank(x, f, "input", 2, 4) < 0)
            return NULL;
    }
    return unary(args, nargs, f, fn);
}
static PyObject *py_softmax(PyObject *m, PyObject *const *args, Py_ssize_t n)
{
    return softmax_like(args, n, "softmax", dp_softmax);
}
static PyObject *py_log_softmax(PyObject *m, PyObject *const *args, Py_ssize_t n)
{
    return softmax_like(args, n, "log_softmax", dp_log_softmax);
}

/* leaky_relu(x, negative_slope) */
static PyObject *py_leaky_relu(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    const char *f = "leaky_relu";
    if (dpy_nargs("leaky_relu(x, negative_slope)", nargs, 2) < 0)
        return NULL;
    TENSOR_ARG(x, 0, f, "input");
    double slope;
    if (dpy_float_arg(args[1], f, "negative_slope", &slope) < 0)
        return NULL;
    dp_tensor_t *y = NULL;
    dpy_op op;
    dpy_op_begin(&op, args, 1);
    int rc = dp_leaky_relu(&y, x, (float)slope);
    return dpy_op_end(&op, rc, y);
}

static const struct {
    const char *name;
    dp_activation_kind kind;
} activation_names[] = {
    {"hardtanh", DP_ACT_HARDTANH},   {"hardswish", DP_ACT_HARDSWISH}, {"hardsigmoid", DP_ACT_HARDSIGMOID},
    {"elu", DP_ACT_ELU},             {"selu", DP_ACT_SELU},           {"gelu", DP_ACT_GELU},
    {"gelu_tanh", DP_ACT_GELU_TANH}, {"silu", DP_ACT_SILU},           {"linear", DP_ACT_LINEAR},
};

/* activation(x, kind, alpha, beta): kind by name ("gelu", "hardtanh", ...). */
static PyObject *py_activation(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    const char *f = "activation";
    if (dpy_nargs("activation(x, kind, alpha, beta)", nargs, 4) < 0)
        return NULL;
    TENSOR_ARG(x, 0, f, "input");
    const char *name = PyUnicode_Check(args[1]) ? PyUnicode_AsUTF8AndSize(args[1], NULL) : NULL;
    int kind = -1;
    for (size_t i = 0; name && i < sizeof activation_names / sizeof activation_names[0]; i++)
        if (strcmp(name, activation_names[i].name) == 0)
            kind = (int)activation_names[i].kind;
    if (kind < 0) {
        PyErr_Clear();
        return PyErr_Format(PyExc_ValueError, "activation(): unknown kind %R (hardtanh, hardswish, "
                            "hardsigmoid, elu, selu, gelu, gelu_tanh, silu, linear)", args[1]);
    }
    double alpha, beta;
    if (dpy_float_arg(args[2], f, "alpha", &alpha) < 0 ||
        dpy_float_arg(args[3], f, "beta", &beta) < 0)
        return NULL;
    dp_tensor_t *y = NULL;
    dpy_op op;
    dpy_op_begin(&op, args, 1);
    int rc = dp_activation(&y, x, (dp_activation_kind)kind, (float)alpha, (float)beta);
    return dpy_op_end(&op, rc, y);
}

/* prelu(x, weight) */
static PyObject *py_prelu(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    const char *f = "prelu";
    if (dpy_nargs("prelu(x, weight)", nargs, 2) < 0)
        return NULL;
    TENSOR_ARG(x, 0, f, "input");
    TENSOR_ARG(w, 1, f, "weight");
    dp_tensor_t *y = NULL;
    dpy_op op;
    dpy_op_begin(&op, args, 2);
    int rc = dp_prelu(&y, x, w);
    return dpy_op_end(&op, rc, y);
}

/* ---- batch norm ----------------------------------------------------------------
 * weight None is ones and bias None zeros (affine=False); running statistics
 * None in training (track_running_stats=False) are scratch the op updates.
 * Those stand-ins live for the process, one set per device and channel
 * count, since a recorded backward reads gamma after the call returns. */
enum { STANDINS = 64 };
static struct standin {
    dp_device_t *dev;
    int64_t channels;
    dp_tensor_t *ones, *zeros, *mean, *var;
} standins[STANDINS];

static struct standin *standin_for(dp_device_t *dev, int64_t c)
{
    for (int i = 0; i < STANDINS; i++) {
        struct standin *s = &standins[i];
        if (s->dev == dev && s->channels == c)
            return s;
        if (s->dev)
            continue;
        dp_tensor_t *t[4] = {NULL, NULL, NULL, NULL};
        int rc = 0;
        for (int k = 0; k < 4 && rc == 0; k++) {
            rc = dp_tensor_new(&t[k], dev, DP_F32, 1, &c);
            if (rc == 0)
                rc = dp_tensor_fill(t[k], k == 0 || k == 3 ? 1.0f : 0.0f);
        }
        if (rc < 0) {
            for (int k = 0; k < 4; k++)
                dp_tensor_free(t[k]);
            dpy_raise(rc);
            return NULL;
        }
        *s = (struct standin){dev, c, t[0], t[1], t[2], t[3]};
        return s;
    }
    PyErr_SetString(PyExc_RuntimeError, "batch_norm(): too many channel counts without weights");
    return NULL;
}

/* batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps) */
static PyObject *py_batch_norm(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    const char *f = "batch_norm";
    static const char *names[] = {"input", "running_mean", "running_var", "weight", "bias"};
    if (dpy_nargs("batch_norm(x, running_mean, running_var, weight, bias, training, momentum, "
                  "eps)",
                  nargs, 8) < 0)
        return NULL;
    dp_tensor_t *t[5] = {NULL, NULL, NULL, NULL, NULL};
    for (int i = 0; i < 5; i++)
        if ((i == 0 || args[i] != Py_None) && !(t[i] = dpy_tensor_arg(args[i], f, names[i])))
            return NULL;
    bool training;
    double momentum, eps;
    if (dpy_check_rank(t[0], f, "input", 2, 4) < 0 ||
        dpy_bool_arg(args[5], f, "training", &training) < 0 ||
        dpy_float_arg(args[6], f, "momentum", &momentum) < 0 ||
        dpy_float_arg(args[7], f, "eps", &eps) < 0)
        return NULL;
    if (eps <= 0 || momentum < 0 || momentum > 1)
        return PyErr_Format(PyExc_ValueError, "batch_norm(): eps must be > 0 and momentum in "
                                              "[0, 1]");
    int64_t c = dp_tensor_dim(t[0], 1);
    for (int i = 1; i < 5; i++) {
        if (t[i] && (dp_tensor_ndim(t[i]) != 1 || dp_tensor_dim(t[i], 0) != c))
            return PyErr_Format(PyExc_ValueError, "batch_norm(): %s must have %lld elements "
                                "(the input's channels)", names[i], (long long)c);
        if (t[i] && dp_tensor_device(t[i]) != dp_tensor_device(t[0]))
            return PyErr_Format(PyExc_ValueError, "batch_norm(): %s is on %s, the input on %s",
                                names[i], dp_device_name(dp_tensor_device(t[i])),
                                dp_device_name(dp_tensor_device(t[0])));
    }
    if (!training && (!t[1] || !t[2]))
        return PyErr_Format(PyExc_ValueError, "batch_norm(): running_mean and running_var are "
                                              "needed when not training");
    if (!t[1] || !t[2] || !t[3] || !t[4]) {
        struct standin *s = standin_for(dp_tensor_device(t[0]), c);
        if (!s)
            return NULL;
        t[1] = t[1] ? t[1] : s->mean;
        t[2] = t[2] ? t[2] : s->var;
        t[3] = t[3] ? t[3] : s->ones;
        t[4] = t[4] ? t[4] : s->zeros;
    }
    /* The library's momentum 0 means its default; PyTorch's 0 keeps the
     * running statistics: the smallest positive float keeps them too. */
    dp_batch_norm_params p = {.training = training,
                              .momentum = momentum == 0 ? 1e-45f : (float)momentum,
                              .eps = (float)eps};
    dp_tensor_t *y = NULL;
    /* Every tensor the op reads goes in: a recorded backward reads them. */
    PyObject *in[5];
    for (int i = 0; i < 5; i++)
        in[i] = args[i] != Py_None ? args[i] : NULL;
    dpy_op op;
    dpy_op_begin(&op, in, 5);
    int rc = dp_tensor_ndim(t[0]) == 4 ? dp_batch_norm2d(&y, t[0], t[3], t[4], t[1], t[2], &p)
                                       : dp_batch_norm1d(&y, t[0], t[3], t[4], t[1], t[2], &p);
    return dpy_op_end(&op, rc, y);
}

/* ---- dropout: masks keyed by (seed, step), a step per call ------------------ */
static uint64_t dropout_seed = 0x64707472ULL, dropout_step;

static PyObject *py_dropout_seed(PyObject *m, PyObject *arg)
{
    if (!PyLong_Check(arg))
        return PyErr_Format(PyExc_TypeError, "dropout_seed(): seed must be an int");
    dropout_seed = PyLong_AsUnsignedLongLongMask(arg);
    dropout_step = 0;
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

/* dropout(x, p, training) */
static PyObject *py_dropout(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    const char *f = "dropout";
    if (dpy_nargs("dropout(x, p, training)", nargs, 3) < 0)
        return NULL;
    TENSOR_ARG(x, 0, f, "input");
    double prob;
    bool training;
    if (dpy_float_arg(args[1], f, "p", &prob) < 0 ||
        dpy_bool_arg(args[2], f, "training", &training) < 0)
        return NULL;
    if (!(prob >= 0 && prob <= 1))
        return PyErr_Format(PyExc_ValueError,
                            "dropout probability has to be between 0 and 1, but got %R", args[1]);
    dp_dropout_params p = {.prob = (float)prob,
                           .training = training,
                           .seed = dropout_seed,
                           .step = dropout_step++ & 0x7fffffff};
    dp_tensor_t *y = NULL;
    dpy_op op;
    dpy_op_begin(&op, args, 1);
    int rc = dp_dropout(&y, x, &p);
    return dpy_op_end(&op, rc, y);
}

/* cross_entropy(logits, labels, reduction, label_smoothing) */
static PyObject *py_cross_entropy(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    const char *f = "cross_entropy";
    if (dpy_nargs("cross_entropy(logits, labels, reduction, label_smoothing)", nargs, 4) < 0)
        return NULL;
    TENSOR_ARG(x, 0, f, "input");
    TENSOR_ARG(labels, 1, f, "target");
    double smoothing;
    const char *red = PyUnicode_Check(args[2]) ? PyUnicode_AsUTF8AndSize(args[2], NULL) : NULL;
    if (dpy_check_rank(x, f, "input", 2, 2) < 0 || dpy_check_rank(labels, f, "target", 1, 1) < 0 ||
        dpy_float_arg(args[3], f, "label_smoothing", &smoothing) < 0)
        return NULL;
    if (dp_tensor_dtype(labels) != DP_I32)
        return PyErr_Format(PyExc_TypeError, "cross_entropy(): target must be int32 class "
                                             "indices, not %s",
                            dpy_dtype_name(dp_tensor_dtype(labels)));
    if (dp_tensor_dim(labels, 0) != dp_tensor_dim(x, 0))
        return PyErr_Format(PyExc_ValueError,
                            "cross_entropy(): input has %lld rows, target %lld labels",
                            (long long)dp_tensor_dim(x, 0), (long long)dp_tensor_dim(labels, 0));
    if (dp_tensor_device(labels) != dp_tensor_device(x))
        return PyErr_Format(PyExc_ValueError, "cross_entropy(): target is on %s, the input on %s",
                            dp_device_name(dp_tensor_device(labels)),
                            dp_device_name(dp_tensor_device(x)));
    int reduction;
    if (red && strcmp(red, "mean") == 0)
        reduction = DP_REDUCE_MEAN;
    else if (red && strcmp(red, "sum") == 0)
        reduction = DP_REDUCE_SUM;
    else if (red && strcmp(red, "none") == 0)
        reduction = DP_REDUCE_NONE;
    else {
        PyErr_Clear();
        return PyErr_Format(PyExc_ValueError, "cross_entropy(): reduction %R is not one of "
                                              "'mean', 'sum', 'none'", args[2]);
    }
    if (!(smoothing >= 0 && smoothing <= 1))
        return PyErr_Format(PyExc_ValueError,
                            "cross_entropy(): label_smoothing must be in [0, 1], got %g", smoothing);
    dp_tensor_t *y = NULL;
    dpy_op op;
    dpy_op_begin(&op, args, 2); /* the labels too: the backward reads them */
    int rc = smoothing > 0 ? dp_cross_entropy_smoothed(&y, x, labels, (dp_reduction)reduction,
                                                       (float)smoothing)
                           : dp_cross_entropy(&y, x, labels, (dp_reduction)reduction);
    return dpy_op_end(&op, rc, y);
}

/* cat(xs, dim): dim 0 (rows, on the first tensor's device) or 1 (channels). */
static PyObject *py_cat(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    const char *f = "cat";
    if (dpy_nargs("cat(tensors, dim)", nargs, 2) < 0)
        return NULL;
    long long dim;
    if (dpy_int_arg(args[1], f, "dim", &dim) < 0)
        return NULL;
    PyObject *seq = PySequence_Check(args[0]) ? PySequence_Tuple(args[0]) : NULL;
    if (!seq) {
        PyErr_Clear();
        return PyErr_Format(PyExc_TypeError, "cat(): tensors must be a sequence of Tensors");
    }
    Py_ssize_t n = PyTuple_Size(seq);
    PyObject *r = NULL;
    dp_tensor_t *ts[DP_MAX_DEVICES * 4];
    PyObject *objs[DP_MAX_DEVICES * 4];
    if (n < 1 || n > (Py_ssize_t)(sizeof ts / sizeof ts[0])) {
        PyErr_Format(PyExc_ValueError, "cat(): %zd tensors (1 to %zu)", n, sizeof ts / sizeof ts[0]);
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        objs[i] = PyTuple_GetItem(seq, i);
        if (!(ts[i] = dpy_tensor_arg(objs[i], f, "tensors")))
            goto done;
    }
    int nd = dp_tensor_ndim(ts[0]);
    if (dim < 0)
        dim += nd;
    if (dim != 0 && dim != 1) {
        PyErr_Format(PyExc_ValueError, "cat(): dim %lld; dptrain concatenates along dim 0 or 1",
                     dim);
        goto done;
    }
    dp_tensor_t *y = NULL;
    dpy_op op;
    dpy_op_begin(&op, objs, (int)n);
    int rc = dim == 0 ? dp_gather(&y, ts, (int)n, dp_tensor_device(ts[0]))
                      : dp_concat(&y, ts, (int)n);
    r = dpy_op_end(&op, rc, y);
done:
    Py_DECREF(seq);
    return r;
}

static PyMethodDef eltwise_functions[] = {
    {"relu", DPY_FASTCALL(py_relu), "relu(x)"},
    {"sigmoid", DPY_FASTCALL(py_sigmoid), "sigmoid(x)"},
    {"tanh", DPY_FASTCALL(py_tanh), "tanh(x)"},
    {"softmax", DPY_FASTCALL(py_softmax), "softmax(x): over dim 1"},
    {"log_softmax", DPY_FASTCALL(py_log_softmax), "log_softmax(x): over dim 1"},
    {"leaky_relu", DPY_FASTCALL(py_leaky_relu), "leaky_relu(x, negative_slope)"},
    {"activation", DPY_FASTCALL(py_activation),
     "activation(x, kind, alpha, beta): hardtanh, hardswish, hardsigmoid, elu, selu, gelu, "
     "gelu_tanh, silu, linear"},
    {"prelu", DPY_FASTCALL(py_prelu), "prelu(x, weight)"},
    {"batch_norm", DPY_FASTCALL(py_batch_norm),
     "batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps)"},
    {"dropout", DPY_FASTCALL(py_dropout), "dropout(x, p, training): a new mask each call"},
    {"dropout_seed", py_dropout_seed, METH_O,
     "dropout_seed(seed): dropout's masks restart from seed (manual_seed calls it)"},
    {"cross_entropy", DPY_FASTCALL(py_cross_entropy),
     "cross_entropy(logits, labels, reduction, label_smoothing)"},
    {"cat", DPY_FASTCALL(py_cat), "cat(tensors, dim): dim 0 (rows) or 1 (channels)"},
    {NULL, NULL, 0, NULL},
};

int dpy_ops_eltwise_add(PyObject *m)
{
    return PyModule_AddFunctions(m, eltwise_functions);
}
