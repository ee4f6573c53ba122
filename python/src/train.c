/* train.c - dptrain.train: dp_train with every option the command line has
 * (dp/train.h, dp/train_option_list.h), and the ranks of mpirun for
 * dptrain.distributed (dp/dist.h).
 *
 * An option's keyword is its flag without the dashes, `-` as `_`
 * (--batch-size: batch_size, --metrics: metrics, --no-shuffle: no_shuffle),
 * or its name where it has no flag; its name in the list (metrics_path,
 * shuffle) is taken too. Values arrive as the text the command line would
 * give (_train.py converts Python values); a switch's keyword takes "on"
 * (the switch given) or "off" (not given). */
#include "module_model.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The keyword of option `opt` into buf: its flag's words joined by `_`. */
static const char *keyword_of(const dp_option *opt, char *buf, size_t size)
{
    const char *src = opt->flag ? opt->flag + 2 : opt->name;
    size_t i = 0;
    for (; src[i] && i + 1 < size; i++)
        buf[i] = src[i] == '-' ? '_' : src[i];
    buf[i] = '\0';
    return buf;
}

/* The option a keyword names (by keyword first, then by name), or NULL. */
static const dp_option *option_of_keyword(const char *kw)
{
    int n;
    const dp_option *list = dp_train_option_list(&n);
    char buf[64];
    for (int i = 0; i < n; i++)
        if (strcmp(keyword_of(&list[i], buf, sizeof buf), kw) == 0)
            return &list[i];
    for (int i = 0; i < n; i++)
        if (strcmp(list[i].name, kw) == 0)
            return &list[i];
    return NULL;
}

/* _dptrain.train_options() -> [(keyword, name, flag, metavar, default,
 * help, group_title)], in the list's order: what train's docstring and its
 * keyword check are made of. */
static PyObject *py_train_options(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    int n;
    const dp_option *list = dp_train_option_list(&n);
    dp_train_options defaults;
    dp_train_options_default(&defaults);
    PyObject *out = PyList_New(n);
    for (int i = 0; out && i < n; i++) {
        char kw[64], value[256];
        const dp_option *opt = &list[i];
        const char *def =
            opt->metavar ? dp_option_format(opt, &defaults, value, sizeof value) : "off";
        PyObject *row = Py_BuildValue("(sszzsss)", keyword_of(opt, kw, sizeof kw), opt->name,
                                      opt->flag, opt->metavar, def, opt->help, opt->group_title);
        if (!row) {
            Py_CLEAR(out);
            break;
        }
        PyList_SetItem(out, i, row);
    }
    return out;
}

/* ---- a run --------------------------------------------------------------- */

/* The options' texts, kept for the run: text options point into them. */
typedef struct option_texts {
    char **texts;
    int n;
} option_texts;

static void texts_free(option_texts *t)
{
    for (int i = 0; i < t->n; i++)
        free(t->texts[i]);
    free(t->texts);
}

/* Sets one keyword's text in *o: 0, or -1 with TypeError (no such option)
 * or ValueError ("`batch_size` 0: expected an integer from 1 to 1048576"). */
static int set_option(dp_train_options *o, const char *kw, const char *text)
{
    const dp_option *opt = option_of_keyword(kw);
    if (!opt) {
        PyErr_Format(PyExc_TypeError, "train() got an unexpected keyword argument `%s`", kw);
        return -1;
    }
    char why[256];
    if (!opt->metavar && strcmp(kw, opt->name) != 0) {
        /* A switch under its flag's keyword: on gives it, off leaves the default. */
        bool on;
        if (strcmp(text, "on") == 0)
            on = true;
        else if (strcmp(text, "off") == 0)
            on = false;
        else {
            PyErr_Format(PyExc_ValueError, "`%s` %s: expected True or False (a switch)", kw, text);
            return -1;
        }
        if (on)
            dp_option_switch_on(opt, o);
        return 0;
    }
    if (dp_option_parse(opt, o, text, why, sizeof why) < 0) {
        PyErr_Format(PyExc_ValueError, "`%s` %s: %s", kw, text, why);
        return -1;
    }
    return 0;
}

static int set_options(dp_train_options *o, PyObject *dict, option_texts *kept)
{
    Py_ssize_t pos = 0, n = PyDict_Size(dict);
    PyObject *key, *value;
    kept->texts = calloc((size_t)n + 1, sizeof *kept->texts);
    if (!kept->texts) {
        PyErr_NoMemory();
        return -1;
    }
    while (PyDict_Next(dict, &pos, &key, &value)) {
        const char *kw = PyUnicode_Check(key) ? PyUnicode_AsUTF8AndSize(key, NULL) : NULL;
        const char *text = PyUnicode_Check(value) ? PyUnicode_AsUTF8AndSize(value, NULL) : NULL;
        if (!kw || !text) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "train(): options must be {str: str}");
            return -1;
        }
        char *copy = strdup(text);
        if (!copy) {
            PyErr_NoMemory();
            return -1;
        }
        kept->texts[kept->n++] = copy;
        if (set_option(o, kw, copy) < 0)
            return -1;
    }
    return 0;
}

static void on_sigint(int signo)
{
    dp_train_request_stop(signo);
}

static PyObject *result_dict(const dp_train_result *r)
{
    PyObject *d = Py_BuildValue(
        "{s:d,s:d,s:d,s:d,s:s,s:i,s:d,s:i,s:O}", "test_acc", r->test_acc, "sec_per_epoch",
        r->sec_per_epoch, "train_loss", r->train_loss, "train_acc", r->train_acc, "devices",
        r->devices, "epochs_done", r->epochs_done, "best_test_acc", r->best_test_acc, "best_epoch",
        r->best_epoch, "early_stopped", r->early_stopped ? Py_True : Py_False);
    if (d && r->pipeline_stages > 0) {
        PyObject *stages = Py_BuildValue("i", r->pipeline_stages);
        if (!stages || PyDict_SetItemString(d, "pipeline_stages", stages) < 0)
            Py_CLEAR(d);
        Py_XDECREF(stages);
    }
    return d;
}

/* The run's failure as a Python exception: the module's forward's own, a
 * stop (KeyboardInterrupt naming the checkpoint that resumes it), or the
 * library's line. */
static PyObject *run_failed(int rc, const dp_train_result *r)
{
    if (rc == DP_EINTR) {
        /* The request's signal (another rank's stop reads as SIGTERM). */
        int signo = dp_train_stop_signal();
        char name[24];
        if (signo == SIGINT || signo == SIGTERM)
            snprintf(name, sizeof name, "%s", signo == SIGINT ? "SIGINT" : "SIGTERM");
        else
            snprintf(name, sizeof name, "signal %d", signo);
        PyErr_Format(PyExc_KeyboardInterrupt,
                     "train(): stopped by %s before epoch %d batch %lld; resume=\"%s\" goes on "
                     "from there",
                     name, r->stopped_epoch, (long long)r->stopped_batch, r->checkpoint);
        return NULL;
    }
    return dpy_raise(rc);
}

/* _dptrain.train(options: {keyword: text}, module=None, handle_sigint=False)
 * -> dict. With handle_sigint (the main thread), SIGINT stops the run after
 * its current step (dp_train_request_stop) for the time it runs. */
static PyObject *py_train(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *kwlist[] = {"options", "module", "handle_sigint", NULL};
    PyObject *dict, *module = Py_None;
    int handle_sigint = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!|Op:train", kwlist, &PyDict_Type, &dict,
                                     &module, &handle_sigint))
        return NULL;
    dp_train_options o;
    dp_train_options_default(&o);
    option_texts kept = {0};
    dpy_module_model *mm = NULL;
    PyObject *out = NULL;
    if (set_options(&o, dict, &kept) < 0)
        goto done;
    if (module != Py_None) {
        mm = dpy_module_model_new(module);
        if (!mm)
            goto done;
        o.model_def = dpy_module_model_def(mm);
        o.on_epoch = dpy_module_model_on_epoch;
        o.callback_user = mm;
    }
    int rc = dp_train_options_check(&o);
    /* the run writes the model's parameters, which a deferred conv2d may read */
    if (rc == 0 && dpy_lazy_compute_all() < 0)
        goto done;
    if (rc < 0) {
        dpy_raise(rc);
        goto done;
    }
    dp_train_result r;
    memset(&r, 0, sizeof r);
    struct sigaction stop = {.sa_handler = on_sigint}, before;
    sigemptyset(&stop.sa_mask);
    if (handle_sigint)
        sigaction(SIGINT, &stop, &before);
    PyThreadState *ts = PyEval_SaveThread();
    rc = dp_train(&o, &r);
    PyEval_RestoreThread(ts);
    if (handle_sigint)
        sigaction(SIGINT, &before, NULL);
    if (mm && dpy_module_model_finish(mm, rc < 0) < 0)
        goto done;
    out = rc < 0 ? run_failed(rc, &r) : result_dict(&r);
done:
    dpy_module_model_free(mm);
    texts_free(&kept);
    return out;
}

/* ---- the ranks of mpirun (dptrain.distributed) ---------------------------- */

static PyObject *py_dist_init(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    PyThreadState *ts = PyEval_SaveThread();
    int rc = dp_dist_init(NULL, NULL);
    PyEval_RestoreThread(ts);
    if (rc < 0)
        return dpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *py_dist_finalize(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    PyThreadState *ts = PyEval_SaveThread();
    dp_dist_finalize();
    PyEval_RestoreThread(ts);
    Py_RETURN_NONE;
}

static PyObject *py_dist_rank(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    return PyLong_FromLong(dp_dist_rank());
}

static PyObject *py_dist_size(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    return PyLong_FromLong(dp_dist_size());
}

static PyObject *py_dist_built(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    return PyBool_FromLong(dp_dist_built());
}

static PyObject *py_dist_launched(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    return PyBool_FromLong(dp_dist_launched());
}

/* Every rank waits for all: a sum of one value over the ranks. */
static PyObject *py_dist_barrier(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    double one = 1;
    PyThreadState *ts = PyEval_SaveThread();
    int rc = dp_dist_sum_f64(&one, 1);
    PyEval_RestoreThread(ts);
    if (rc < 0)
        return dpy_raise(rc);
    Py_RETURN_NONE;
}

/* The float32 tensors of `seq` as one host buffer (in order), *n floats. */
static float *gather_host(PyObject *seq, dp_tensor_t ***ts, Py_ssize_t *count, int64_t *n)
{
    PyObject *list = PySequence_List(seq);
    if (!list)
        return NULL;
    *count = PyList_Size(list);
    *ts = calloc((size_t)*count + 1, sizeof **ts);
    *n = 0;
    float *buf = NULL;
    int rc = *ts ? 0 : (PyErr_NoMemory(), -1);
    for (Py_ssize_t i = 0; rc == 0 && i < *count; i++) {
        dp_tensor_t *t = dpy_tensor_arg(PyList_GetItem(list, i), "allreduce", "tensors");
        if (!t)
            rc = -1;
        else if (dp_tensor_dtype(t) != DP_F32)
            rc = (PyErr_SetString(PyExc_TypeError, "allreduce: the tensors must be float32"), -1);
        else
            (*ts)[i] = t, *n += dp_tensor_numel(t);
    }
    if (rc == 0 && !(buf = malloc((size_t)(*n > 0 ? *n : 1) * sizeof *buf)))
        rc = (PyErr_NoMemory(), -1);
    for (Py_ssize_t i = 0, at = 0; rc == 0 && i < *count; i++) {
        int64_t k = dp_tensor_numel((*ts)[i]);
        rc = dpy_to_host((*ts)[i], buf + at, (size_t)k * sizeof *buf);
        at += k;
    }
    Py_DECREF(list);
    if (rc < 0) {
        free(buf);
        free(*ts);
        *ts = NULL;
        return NULL;
    }
    return buf;
}

static int scatter_host(dp_tensor_t **ts, Py_ssize_t count, const float *buf)
{
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t k = dp_tensor_numel(ts[i]);
        int rc = dp_tensor_copy_from_host(ts[i], buf, (size_t)k * sizeof *buf);
        if (rc < 0)
            return dpy_raise_int(rc);
        if (dpy_wait_tensor(ts[i]) < 0)
            return -1;
        buf += k;
    }
    return 0;
}

/* dist_collective(tensors, op): op "broadcast" (rank 0's values into every
 * rank's) or "mean" (each element summed over the ranks, divided by their
 * number): one MPI call for all the tensors, as one gradient bucket. */
static PyObject *py_dist_collective(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *seq;
    const char *op;
    if (!PyArg_ParseTuple(args, "Os:dist_collective", &seq, &op))
        return NULL;
    bool mean = strcmp(op, "mean") == 0;
    if (!mean && strcmp(op, "broadcast") != 0)
        return PyErr_Format(PyExc_ValueError, "dist_collective: op %s: expected mean or broadcast",
                            op);
    dp_tensor_t **ts;
    Py_ssize_t count;
    int64_t n;
    float *buf = gather_host(seq, &ts, &count, &n);
    if (!buf)
        return NULL;
    PyObject *out = NULL;
    if (n > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "dist_collective: %lld floats, more than one MPI call takes",
                     (long long)n);
        goto done;
    }
    PyThreadState *ts_save = PyEval_SaveThread();
    int rc = mean ? dp_dist_sum_f32(buf, (int)n) : dp_dist_broadcast(buf, (size_t)n * sizeof *buf);
    if (rc == 0 && mean) {
        float ranks = (float)dp_dist_size();
        for (int64_t i = 0; i < n; i++)
            buf[i] /= ranks;
    }
    PyEval_RestoreThread(ts_save);
    if (rc < 0)
        dpy_raise(rc);
    else if (scatter_host(ts, count, buf) == 0)
        out = Py_NewRef(Py_None);
done:
    free(buf);
    free(ts);
    return out;
}

static PyMethodDef methods[] = {
    {"train_options", py_train_options, METH_NOARGS,
     "train_options() -> [(keyword, name, flag, metavar, default, help, group)]"},
    {"train", (PyCFunction)(void (*)(void))py_train, METH_VARARGS | METH_KEYWORDS,
     "train(options, module=None, handle_sigint=False) -> dict: one dp_train run"},
    {"dist_init", py_dist_init, METH_NOARGS, "dist_init(): MPI started when under mpirun"},
    {"dist_finalize", py_dist_finalize, METH_NOARGS, "dist_finalize(): MPI_Finalize"},
    {"dist_rank", py_dist_rank, METH_NOARGS, "dist_rank() -> this process's rank"},
    {"dist_size", py_dist_size, METH_NOARGS, "dist_size() -> the number of ranks"},
    {"dist_built", py_dist_built, METH_NOARGS, "dist_built() -> whether MPI is built in"},
    {"dist_launched", py_dist_launched, METH_NOARGS,
     "dist_launched() -> whether mpirun started this process"},
    {"dist_barrier", py_dist_barrier, METH_NOARGS, "dist_barrier(): every rank waits for all"},
    {"dist_collective", py_dist_collective, METH_VARARGS,
     "dist_collective(tensors, op): op 'mean' or 'broadcast' over the ranks, one call"},
    {NULL, NULL, 0, NULL},
};

int dpy_train_add(PyObject *m)
{
    return PyModule_AddFunctions(m, methods);
}
