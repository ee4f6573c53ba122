/* data.c - the library's datasets and batch loader for Python
 * (dptrain.vision.datasets, dptrain.utils.data.DataLoader over them).
 *
 *   _dptrain.Dataset(name, root, train)   one split read by the C readers
 *   _dptrain.Loader(dataset, batch_size, shuffle, seed, crop_pad, flip,
 *                   mean, std, workers)    dp_loader over it
 *
 * A loader's batches are decoded, shuffled, augmented and normalised on
 * the library's own threads; `next()` hands one batch to Python as two
 * tensors on the host device ("cpu"), X float32 (N, C, H, W) and y int32
 * (N), so that no sample ever passes through Python. The wait for a batch
 * releases the GIL. */
#include "dpy.h"

#include <stdlib.h>
#include <string.h>

/* ---- _dptrain.Dataset -------------------------------------------------------- */

typedef struct dpy_dataset {
    PyObject_HEAD
    dp_dataset ds;
    bool loaded;
} dpy_dataset;

static PyTypeObject *dataset_type;

static PyObject *dataset_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"name", "root", "train", NULL};
    const char *name = NULL, *root = NULL;
    int train = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "z|zp:Dataset", kwlist, &name, &root, &train))
        return NULL;
    dpy_dataset *o = (dpy_dataset *)PyType_GenericAlloc(type, 0);
    if (!o)
        return NULL;
    memset(&o->ds, 0, sizeof o->ds);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = dp_dataset_load(name, root, train != 0, &o->ds);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        Py_DECREF(o);
        return dpy_raise(rc);
    }
    o->loaded = true;
    return (PyObject *)o;
}

static void dataset_dealloc(PyObject *self)
{
    dpy_dataset *o = (dpy_dataset *)self;
    PyTypeObject *tp = Py_TYPE(self);
    if (o->loaded)
        dp_dataset_close(&o->ds);
    o->loaded = false;
    freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    free_fn(self);
    Py_DECREF(tp);
}

static Py_ssize_t dataset_len(PyObject *self)
{
    return (Py_ssize_t)((dpy_dataset *)self)->ds.n;
}

static PyObject *dataset_get_shape(PyObject *self, void *c)
{
    const dp_dataset *ds = &((dpy_dataset *)self)->ds;
    return Py_BuildValue("(iii)", dp_dataset_channels(ds), ds->rows, ds->cols);
}

static PyObject *dataset_get_classes(PyObject *self, void *c)
{
    return PyLong_FromLong(((dpy_dataset *)self)->ds.classes);
}

/* The class names the data gives (an image folder's directories), else None. */
static PyObject *dataset_get_class_names(PyObject *self, void *c)
{
    const dp_dataset *ds = &((dpy_dataset *)self)->ds;
    if (!ds->class_names)
        Py_RETURN_NONE;
    PyObject *list = PyList_New(ds->classes);
    for (int i = 0; list && i < ds->classes; i++) {
        const char *name = ds->class_names[i];
        PyObject *s = PyUnicode_DecodeUTF8(name, (Py_ssize_t)strlen(name), "surrogateescape");
        if (!s || PyList_SetItem(list, i, s) < 0) {
            Py_DECREF(list);
            return NULL;
        }
    }
    return list;
}

/* get(index) -> (image (C, H, W) float32 on the host device, label), index
 * counted from the end when negative, as a list's. */
static PyObject *dataset_getitem(PyObject *self, PyObject *arg)
{
    const dp_dataset *ds = &((dpy_dataset *)self)->ds;
    long long index;
    if (dpy_int_arg(arg, "Dataset.get", "index", &index) < 0)
        return NULL;
    if (index < 0)
        index += ds->n;
    if (index < 0 || index >= ds->n)
        return PyErr_Format(PyExc_IndexError, "index %lld is out of range for a dataset of %lld",
                            index, (long long)ds->n);
    int64_t shape[3] = {dp_dataset_channels(ds), ds->rows, ds->cols};
    size_t count = (size_t)(shape[0] * shape[1] * shape[2]);
    float *pixels = PyMem_Malloc(count * sizeof *pixels);
    if (!pixels)
        return PyErr_NoMemory();
    dp_dataset_get(ds, index, 1, pixels);
    dp_device_t *host = dpy_device("cpu");
    dp_tensor_t *t = NULL;
    int rc = host ? dp_tensor_from_host(&t, host, DP_F32, 3, shape, pixels) : 0;
    PyMem_Free(pixels);
    if (!host)
        return NULL;
    if (rc < 0)
        return dpy_raise(rc);
    PyObject *image = dpy_tensor_wrap(t, DPY_OWN_SELF, NULL);
    if (!image)
        return NULL;
    PyObject *out = Py_BuildValue("(Ni)", image, (int)ds->labels[index]);
    return out;
}

static PyMethodDef dataset_methods[] = {
    {"get", dataset_getitem, METH_O, "get(index) -> (image (C, H, W) float32, label)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef dataset_getset[] = {
    {"sample_shape", dataset_get_shape, NULL, "(C, H, W) of every sample", NULL},
    {"classes", dataset_get_classes, NULL, "labels are below this (0: not known)", NULL},
    {"class_names", dataset_get_class_names, NULL, "the folder's class names, or None", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot dataset_slots[] = {
    {Py_tp_doc, "Dataset(name, root, train): one split of a built-in dataset (fashion-mnist, "
                "mnist, cifar10, folder, npy) read by the library's readers"},
    {Py_tp_new, dataset_new},
    {Py_tp_dealloc, dataset_dealloc},
    {Py_tp_methods, dataset_methods},
    {Py_tp_getset, dataset_getset},
    {Py_sq_length, dataset_len},
    {0, NULL},
};

static PyType_Spec dataset_spec = {"_dptrain.Dataset", sizeof(dpy_dataset), 0, Py_TPFLAGS_DEFAULT,
                                   dataset_slots};

/* ---- _dptrain.Loader ----------------------------------------------------------- */

typedef struct dpy_loader {
    PyObject_HEAD
    PyObject *dataset; /* the dpy_dataset whose samples the loader reads */
    dp_loader_t *loader;
    int64_t chw[3];
    bool in_epoch; /* start_epoch ran and next() has not yet reached the end */
} dpy_loader;

/* Normalize's means or stds from a sequence of numbers into out[0..n). */
static int floats_arg(PyObject *o, const char *arg, float *out, int *n)
{
    *n = 0;
    if (o == Py_None)
        return 0;
    PyObject *seq = PySequence_Check(o) ? PySequence_Tuple(o) : NULL;
    if (!seq) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "Loader(): %s must be a sequence of numbers", arg);
        return -1;
    }
    Py_ssize_t len = PyTuple_Size(seq);
    if (len > DP_AUGMENT_MAX_CHANNELS) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "Loader(): %s has %zd values, at most %d", arg, len,
                     DP_AUGMENT_MAX_CHANNELS);
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        double v;
        if (dpy_float_arg(PyTuple_GetItem(seq, i), "Loader", arg, &v) < 0) {
            Py_DECREF(seq);
            return -1;
        }
        out[i] = (float)v;
    }
    Py_DECREF(seq);
    *n = (int)len;
    return 0;
}

static PyObject *loader_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"dataset", "batch_size", "shuffle", "seed", "crop_pad",
                             "flip", "mean", "std", "workers", NULL};
    PyObject *dataset, *mean = Py_None, *std = Py_None;
    long long batch_size;
    unsigned long long seed = 0;
    int shuffle = 0, crop_pad = 0, flip = 0, workers = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OL|pKipOOi:Loader", kwlist, &dataset,
                                     &batch_size, &shuffle, &seed, &crop_pad, &flip, &mean, &std,
                                     &workers))
        return NULL;
    if (workers < 0 || workers > 256)
        return PyErr_Format(PyExc_ValueError,
                            "num_workers option should be from 0 (one per core) to 256, got %d",
                            workers);
    if (!PyObject_TypeCheck(dataset, dataset_type))
        return PyErr_Format(PyExc_TypeError, "Loader(): dataset must be a _dptrain.Dataset, not %R",
                            (PyObject *)Py_TYPE(dataset));
    if (batch_size <= 0)
        return PyErr_Format(PyExc_ValueError,
                            "batch_size should be a positive integer value, but got "
                            "batch_size=%lld",
                            batch_size);
    dp_loader_options opt;
    memset(&opt, 0, sizeof opt);
    opt.batch_size = batch_size;
    opt.shuffle = shuffle != 0;
    opt.seed = seed;
    opt.augment.crop_pad = crop_pad;
    opt.augment.flip = flip != 0;
    opt.workers = workers; /* DataLoader's num_workers: its decoder threads */
    int nmean, nstd;
    if (floats_arg(mean, "mean", opt.augment.mean, &nmean) < 0 ||
        floats_arg(std, "std", opt.augment.std, &nstd) < 0)
        return NULL;
    if (nmean != nstd)
        return PyErr_Format(PyExc_ValueError, "Loader(): %d means but %d stds", nmean, nstd);
    opt.augment.norm_channels = nmean;
    const dp_dataset *ds = &((dpy_dataset *)dataset)->ds;
    int rc = dp_augment_check(&opt.augment, dp_dataset_channels(ds));
    if (rc < 0)
        return dpy_raise(rc);
    dpy_loader *o = (dpy_loader *)PyType_GenericAlloc(type, 0);
    if (!o)
        return NULL;
    o->dataset = dataset;
    Py_INCREF(dataset);
    o->chw[0] = dp_dataset_channels(ds);
    o->chw[1] = ds->rows;
    o->chw[2] = ds->cols;
    rc = dp_loader_init(&o->loader, ds, &opt);
    if (rc < 0) {
        Py_DECREF(o);
        return dpy_raise(rc);
    }
    return (PyObject *)o;
}

static void loader_dealloc(PyObject *self)
{
    dpy_loader *o = (dpy_loader *)self;
    PyTypeObject *tp = Py_TYPE(self);
    if (o->loader) {
        Py_BEGIN_ALLOW_THREADS
        dp_loader_close(o->loader); /* joins its thread */
        Py_END_ALLOW_THREADS
    }
    o->loader = NULL;
    Py_CLEAR(o->dataset);
    freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    free_fn(self);
    Py_DECREF(tp);
}

/* start_epoch(epoch[, order]): the epoch's order, a pure function of seed
 * and epoch, or `order`: n int64 (bytes-like, a permutation of 0 .. n-1)
 * that the Python DataLoader drew as PyTorch's sampler would. */
static PyObject *loader_start_epoch(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    dpy_loader *o = (dpy_loader *)self;
    if (nargs < 1 || nargs > 2)
        return PyErr_Format(PyExc_TypeError, "Loader.start_epoch(epoch[, order]): 1 or 2 "
                                             "arguments, %zd given", nargs);
    long long epoch;
    if (dpy_int_arg(args[0], "Loader.start_epoch", "epoch", &epoch) < 0)
        return NULL;
    if (epoch < 0)
        return PyErr_Format(PyExc_ValueError, "Loader.start_epoch(): epoch must be >= 0, not %lld",
                            epoch);
    Py_buffer view = {0};
    if (nargs == 2) {
        if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0)
            return NULL;
        int64_t n = dp_loader_num_samples(o->loader);
        if ((size_t)view.len != (size_t)n * sizeof(int64_t)) {
            PyBuffer_Release(&view);
            return PyErr_Format(PyExc_ValueError, "Loader.start_epoch(): order has %zd bytes, "
                                "%lld int64 (one per sample) need %lld", view.len, (long long)n,
                                (long long)n * 8);
        }
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = view.buf ? dp_loader_start_epoch_in_order(o->loader, epoch, view.buf)
                  : dp_loader_start_epoch(o->loader, epoch, 0);
    Py_END_ALLOW_THREADS
    if (view.buf)
        PyBuffer_Release(&view);
    if (rc < 0)
        return dpy_raise(rc);
    o->in_epoch = true;
    Py_RETURN_NONE;
}

/* next() -> (X (N, C, H, W) float32, y (N) int32) on the host, or None at the
 * end of the epoch. */
static PyObject *loader_next(PyObject *self, PyObject *unused)
{
    dpy_loader *o = (dpy_loader *)self;
    if (!o->in_epoch)
        return PyErr_Format(PyExc_RuntimeError, "Loader.next(): call start_epoch() first");
    dp_device_t *host = dpy_device("cpu");
    if (!host)
        return NULL;
    dp_batch b;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = dp_loader_next(o->loader, &b);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        return dpy_raise(rc);
    if (rc == 0) {
        o->in_epoch = false;
        Py_RETURN_NONE;
    }
    /* The batch's memory lives until the next dp_loader_next: copied now
     * (dp_tensor_from_host writes a fresh block at once). */
    int64_t xshape[4] = {b.n, o->chw[0], o->chw[1], o->chw[2]};
    dp_tensor_t *x = NULL, *y = NULL;
    rc = dp_tensor_from_host(&x, host, DP_F32, 4, xshape, b.x);
    if (rc >= 0)
        rc = dp_tensor_from_host(&y, host, DP_I32, 1, &b.n, b.y);
    if (rc < 0) {
        dp_tensor_free(x);
        return dpy_raise(rc);
    }
    PyObject *xo = dpy_tensor_wrap(x, DPY_OWN_SELF, NULL);
    if (!xo) {
        dp_tensor_free(y);
        return NULL;
    }
    PyObject *yo = dpy_tensor_wrap(y, DPY_OWN_SELF, NULL);
    if (!yo) {
        Py_DECREF(xo);
        return NULL;
    }
    return Py_BuildValue("(NN)", xo, yo);
}

static PyObject *loader_num_batches(PyObject *self, PyObject *unused)
{
    return PyLong_FromLongLong(dp_loader_num_batches(((dpy_loader *)self)->loader));
}

static PyObject *loader_num_samples(PyObject *self, PyObject *unused)
{
    return PyLong_FromLongLong(dp_loader_num_samples(((dpy_loader *)self)->loader));
}

static PyMethodDef loader_methods[] = {
    {"start_epoch", DPY_FASTCALL(loader_start_epoch),
     "start_epoch(epoch[, order]): begins an epoch's batches"},
    {"next", loader_next, METH_NOARGS,
     "next() -> (X float32 (N, C, H, W), y int32 (N)) on the host, or None after the last batch"},
    {"num_batches", loader_num_batches, METH_NOARGS, "num_batches() -> batches in an epoch"},
    {"num_samples", loader_num_samples, METH_NOARGS, "num_samples() -> samples in an epoch"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot loader_slots[] = {
    {Py_tp_doc, "Loader(dataset, batch_size, shuffle=False, seed=0, crop_pad=0, flip=False, "
                "mean=None, std=None): the library's prefetching batch loader"},
    {Py_tp_new, loader_new},
    {Py_tp_dealloc, loader_dealloc},
    {Py_tp_methods, loader_methods},
    {0, NULL},
};

static PyType_Spec loader_spec = {"_dptrain.Loader", sizeof(dpy_loader), 0, Py_TPFLAGS_DEFAULT,
                                  loader_slots};

int dpy_data_add(PyObject *m)
{
    if (dpy_add_type(m, &dataset_spec, NULL, &dataset_type) < 0)
        return -1;
    return dpy_add_type(m, &loader_spec, NULL, NULL);
}
