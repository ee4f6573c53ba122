/* io.c - state dicts in safetensors files (dp/safetensors.h): the caller's
 * keys are the names (PyTorch's state_dict names), so that
 * safetensors.torch.load_file reads what dptrain.save writes. */
#include "dpy.h"

#include <stdlib.h>
#include <string.h>

static float bf16_value(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* save_safetensors(path, {name: tensor}, metadata=None): waits for the
 * values, writes the file atomically. bfloat16 tensors are written as F32. */
static PyObject *py_save(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    const char *f = "save_safetensors";
    if (nargs < 2 || nargs > 3)
        return PyErr_Format(PyExc_TypeError, "save_safetensors(path, tensors, metadata=None)");
    PyObject *path_obj = PyOS_FSPath(args[0]);
    if (!path_obj)
        return NULL;
    PyObject *path_bytes = NULL;
    if (!PyUnicode_FSConverter(path_obj, &path_bytes)) {
        Py_DECREF(path_obj);
        return NULL;
    }
    Py_DECREF(path_obj);
    if (!PyDict_Check(args[1])) {
        Py_DECREF(path_bytes);
        return PyErr_Format(PyExc_TypeError, "%s(): tensors must be a dict of name: Tensor", f);
    }
    PyObject *meta = nargs == 3 && args[2] != Py_None ? args[2] : NULL;
    if (meta && !PyDict_Check(meta)) {
        Py_DECREF(path_bytes);
        return PyErr_Format(PyExc_TypeError, "%s(): metadata must be a dict of str: str", f);
    }
    Py_ssize_t n = PyDict_Size(args[1]), nmeta = meta ? PyDict_Size(meta) : 0;
    dp_st_tensor *ts = calloc((size_t)(n ? n : 1), sizeof *ts);
    void **bufs = calloc((size_t)(n ? n : 1), sizeof *bufs);
    const char **kv = calloc((size_t)(2 * nmeta + 1), sizeof *kv);
    PyObject *result = NULL;
    if (!ts || !bufs || !kv) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *value;
    while (PyDict_Next(args[1], &pos, &key, &value)) {
        const char *name = PyUnicode_Check(key) ? PyUnicode_AsUTF8AndSize(key, NULL) : NULL;
        if (!name) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s(): key %R is not a str", f, key);
            goto done;
        }
        dp_tensor_t *t = dpy_tensor_arg(value, f, name);
        if (!t)
            goto done;
        dp_dtype dt = dp_tensor_dtype(t);
        size_t numel = (size_t)dp_tensor_numel(t);
        bufs[i] = malloc(numel * 4 + 4);
        if (!bufs[i]) {
            PyErr_NoMemory();
            goto done;
        }
        if (dpy_to_host(t, bufs[i], numel * dp_dtype_size(dt)) < 0)
            goto done;
        if (dt == DP_BF16) {
            /* Widened in place from the back: element j's 2 bytes sit below 4j. */
            uint16_t *half = bufs[i];
            float *full = bufs[i];
            for (size_t j = numel; j-- > 0;)
                full[j] = bf16_value(half[j]);
        }
        ts[i].name = name;
        ts[i].dtype = dt == DP_I32 ? DP_ST_I32 : DP_ST_F32;
        ts[i].ndim = dp_tensor_ndim(t);
        for (int d = 0; d < ts[i].ndim; d++)
            ts[i].shape[d] = dp_tensor_dim(t, d);
        ts[i].data = bufs[i];
        ts[i].bytes = numel * 4;
        i++;
    }
    pos = 0;
    Py_ssize_t k = 0;
    while (meta && PyDict_Next(meta, &pos, &key, &value)) {
        kv[k] = PyUnicode_Check(key) ? PyUnicode_AsUTF8AndSize(key, NULL) : NULL;
        kv[k + 1] = PyUnicode_Check(value) ? PyUnicode_AsUTF8AndSize(value, NULL) : NULL;
        if (!kv[k] || !kv[k + 1]) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s(): metadata must map str to str", f);
            goto done;
        }
        k += 2;
    }
    const char *path = PyBytes_AsString(path_bytes);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = dp_safetensors_write(path, ts, (int)n, kv, (int)nmeta);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        dpy_raise(rc);
    else
        result = Py_NewRef(Py_None);
done:
    for (Py_ssize_t j = 0; bufs && j < n; j++)
        free(bufs[j]);
    free(bufs);
    free(ts);
    free((void *)kv);
    Py_DECREF(path_bytes);
    return result;
}

/* load_safetensors(path, device=None) -> {name: tensor}, in the file's order:
 * F32 as float32, I32 as int32, I64 and U8 as int32 (PyTorch's
 * num_batches_tracked is I64; a value outside int32 is refused). */
static PyObject *py_load(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2)
        return PyErr_Format(PyExc_TypeError, "load_safetensors(path, device=None)");
    dp_device_t *dev = dpy_device_arg(nargs == 2 ? args[1] : NULL);
    if (!dev)
        return NULL;
    PyObject *path_bytes = NULL;
    if (!PyUnicode_FSConverter(args[0], &path_bytes))
        return NULL;
    dp_safetensors_t *file = NULL;
    int rc;
    const char *path = PyBytes_AsString(path_bytes);
    Py_BEGIN_ALLOW_THREADS
    rc = dp_safetensors_open(&file, path);
    Py_END_ALLOW_THREADS
    Py_DECREF(path_bytes);
    if (rc < 0)
        return dpy_raise(rc);
    PyObject *tensors = PyDict_New(), *result = NULL;
    if (!tensors)
        goto done;
    for (int i = 0; i < dp_safetensors_count(file); i++) {
        dp_st_tensor st;
        rc = dp_safetensors_get(file, i, &st);
        if (rc < 0) {
            dpy_raise(rc);
            goto done;
        }
        if (st.ndim > DP_MAX_DIMS) {
            PyErr_Format(PyExc_ValueError, "load_safetensors(): %s has %d dimensions (at most %d)",
                         st.name, st.ndim, DP_MAX_DIMS);
            goto done;
        }
        int64_t numel = 1;
        for (int d = 0; d < st.ndim; d++)
            numel *= st.shape[d];
        const void *data = st.data;
        int32_t *narrowed = NULL;
        if (st.dtype == DP_ST_I64 || st.dtype == DP_ST_U8) {
            narrowed = malloc((size_t)(numel ? numel : 1) * sizeof *narrowed);
            if (!narrowed) {
                PyErr_NoMemory();
                goto done;
            }
            for (int64_t j = 0; j < numel; j++) {
                int64_t v;
                if (st.dtype == DP_ST_U8) {
                    v = ((const uint8_t *)st.data)[j];
                } else {
                    memcpy(&v, (const char *)st.data + 8 * j, 8);
                }
                if (v < INT32_MIN || v > INT32_MAX) {
                    free(narrowed);
                    PyErr_Format(PyExc_ValueError, "load_safetensors(): %s holds %lld, outside "
                                 "int32", st.name, (long long)v);
                    goto done;
                }
                narrowed[j] = (int32_t)v;
            }
            data = narrowed;
        }
        dp_tensor_t *t = NULL;
        rc = dp_tensor_from_host(&t, dev, st.dtype == DP_ST_F32 ? DP_F32 : DP_I32, st.ndim,
                                 st.shape, data);
        free(narrowed);
        PyObject *obj = rc < 0 ? dpy_raise(rc) : dpy_tensor_wrap(t, DPY_OWN_SELF, NULL);
        if (!obj || PyDict_SetItemString(tensors, st.name, obj) < 0) {
            Py_XDECREF(obj);
            goto done;
        }
        Py_DECREF(obj);
    }
    result = Py_NewRef(tensors);
done:
    Py_XDECREF(tensors);
    dp_safetensors_close(file);
    return result;
}

static PyMethodDef io_functions[] = {
    {"save_safetensors", DPY_FASTCALL(py_save),
     "save_safetensors(path, {name: tensor}, metadata=None): one safetensors file"},
    {"load_safetensors", DPY_FASTCALL(py_load),
     "load_safetensors(path, device=None) -> {name: tensor}"},
    {NULL, NULL, 0, NULL},
};

int dpy_io_add(PyObject *m)
{
    return PyModule_AddFunctions(m, io_functions);
}
