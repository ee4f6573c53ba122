/* dlpack.c - zero-copy interchange by DLPack (https://dmlc.github.io/dlpack/):
 * Tensor.__dlpack__ / __dlpack_device__ and from_dlpack(obj).
 *
 * The structs below are DLPack's ABI (dlpack.h v1.0), written out so that the
 * extension needs no header beyond CPython's and the library's. A CPU tensor
 * whose memory is in logical order (dp_tensor_host_data) is shared; another
 * (a GPU tensor, a 4-D activation in a blocked layout) is copied to the host
 * in logical order where the consumer allows a copy. Imported CPU memory is
 * wrapped by dp_tensor_wrap_host; the producer's deleter runs once the
 * tensor is freed and every command using it has run, on the main thread
 * (Py_AddPendingCall), since the release comes from a device's worker. */
#include "dpy.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef enum { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3 } DLDeviceType;
typedef enum { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4 } DLDataTypeCode;
typedef struct {
    int32_t device_type;
    int32_t device_id;
} DLDevice;
typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} DLDataType;
typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;
typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1)

/* ---- export ------------------------------------------------------------------ */

/* What one exported capsule owns: the managed tensor (either form), its
 * shape, and the tensor object (shared memory) or a host copy. */
typedef struct export_ctx {
    union {
        DLManagedTensor legacy;
        DLManagedTensorVersioned versioned;
    } m;
    int64_t shape[DP_MAX_DIMS];
    PyObject *owner; /* the Tensor whose memory is shared, or NULL */
    void *copy;      /* the host copy, or NULL */
} export_ctx;

static void export_free(export_ctx *ctx)
{
    if (ctx->owner) {
        /* The consumer may drop the memory on any thread. */
        PyGILState_STATE g = PyGILState_Ensure();
        /* A consumer that failed (NumPy refusing bfloat16) drops the
         * capsule with its exception set: the tensor's release must not
         * clear it. */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        Py_DECREF(ctx->owner);
        PyErr_Restore(type, value, tb);
        PyGILState_Release(g);
    }
    free(ctx->copy);
    free(ctx);
}

static void legacy_deleter(DLManagedTensor *m)
{
    export_free(m->manager_ctx);
}

static void versioned_deleter(DLManagedTensorVersioned *m)
{
    export_free(m->manager_ctx);
}

static void capsule_destructor(PyObject *capsule)
{
    /* A capsule never consumed (its name still "dltensor...") frees itself.
     * It may be dropped with the consumer's exception set (NumPy's
     * TypeError for a dtype it lacks): kept across, so that it is raised
     * rather than a SystemError for a NULL without an exception. */
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (PyCapsule_IsValid(capsule, "dltensor")) {
        DLManagedTensor *m = PyCapsule_GetPointer(capsule, "dltensor");
        m->deleter(m);
    } else if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
        DLManagedTensorVersioned *m = PyCapsule_GetPointer(capsule, "dltensor_versioned");
        m->deleter(m);
    }
    PyErr_Restore(type, value, tb);
}

static DLDataType dl_dtype(dp_dtype d)
{
    switch (d) {
    case DP_I32:
        return (DLDataType){kDLInt, 32, 1};
    case DP_BF16:
        return (DLDataType){kDLBfloat, 16, 1};
    default:
        return (DLDataType){kDLFloat, 32, 1};
    }
}

static DLDevice dl_device(dp_tensor_t *t)
{
    dp_device_t *dev = dp_tensor_device(t);
    if (dp_device_has(dev, DP_DEVICE_HOST_MEMORY))
        return (DLDevice){kDLCPU, 0};
    const char *name = dp_device_name(dev);
    const char *colon = strchr(name, ':');
    return (DLDevice){kDLCUDA, colon ? atoi(colon + 1) : 0};
}

static PyObject *m_dlpack_device(PyObject *self, PyObject *unused)
{
    dp_tensor_t *t = dpy_tensor_get(self);
    if (!t)
        return NULL;
    DLDevice d = dl_device(t);
    return Py_BuildValue("(ii)", d.device_type, d.device_id);
}

/* __dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None) */
static PyObject *m_dlpack(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream = Py_None, *max_version = Py_None, *want_device = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOO", kwlist, &stream, &max_version,
                                     &want_device, &copy))
        return NULL;
    dp_tensor_t *t = dpy_tensor_get(self);
    if (!t)
        return NULL;
    /* PyTorch's rule: a tensor of a step's graph may be released with its
     * tape (autograd.c), which a consumer's view would outlive. */
    if (((dpy_tensor *)self)->requires_grad)
        return PyErr_Format(PyExc_RuntimeError, "__dlpack__(): can't export a tensor that "
                                                "requires grad; use tensor.detach()");
    bool versioned = false;
    if (max_version != Py_None) {
        long major;
        if (!PyTuple_Check(max_version) || PyTuple_Size(max_version) != 2 ||
            ((major = PyLong_AsLong(PyTuple_GetItem(max_version, 0))) == -1 && PyErr_Occurred()))
            return PyErr_Format(PyExc_TypeError, "__dlpack__(): max_version must be a pair of "
                                                 "ints, not %R", max_version);
        versioned = major >= 1;
    }
    int copy_mode = copy == Py_None ? -1 : PyObject_IsTrue(copy); /* -1: if needed */
    if (copy_mode == -1 && copy != Py_None)
        return NULL;
    DLDevice dev = dl_device(t);
    bool to_host = false;
    if (want_device != Py_None) {
        int type, id;
        if (!PyArg_ParseTuple(want_device, "ii;__dlpack__(): dl_device must be (type, id)", &type,
                              &id))
            return NULL;
        if (type != dev.device_type || id != dev.device_id) {
            if (type != kDLCPU || copy_mode == 0)
                return PyErr_Format(PyExc_BufferError,
                                    "__dlpack__(): the tensor is on %s; dl_device (%d, %d) needs "
                                    "a copy there",
                                    dp_device_name(dp_tensor_device(t)), type, id);
            to_host = true;
        }
    }
    /* Readers first, then the consumer's writes: every command using the
     * memory has run once the device is idle. */
    if (dpy_wait_device(dp_tensor_device(t)) < 0)
        return NULL;
    void *data = NULL;
    if (!to_host && copy_mode != 1)
        data = dp_tensor_host_data(t);
    bool copied = data == NULL;
    if (copied && copy_mode == 0)
        return PyErr_Format(PyExc_BufferError,
                            "__dlpack__(copy=False): this tensor's memory is not in row-major "
                            "order on the host (a GPU tensor or a blocked activation)");
    export_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return PyErr_NoMemory();
    size_t bytes = (size_t)dp_tensor_numel(t) * dp_dtype_size(dp_tensor_dtype(t));
    if (copied) {
        ctx->copy = malloc(bytes ? bytes : 1);
        if (!ctx->copy || dpy_to_host(t, ctx->copy, bytes) < 0) {
            if (!ctx->copy)
                PyErr_NoMemory();
            free(ctx->copy);
            free(ctx);
            return NULL;
        }
        data = ctx->copy;
        dev = (DLDevice){kDLCPU, 0};
    } else {
        ctx->owner = self;
        Py_INCREF(self);
        /* the consumer may write it: no deferred conv2d keeps it (lazy.c) */
        dp_tensor_set_shared(t);
    }
    for (int i = 0; i < dp_tensor_ndim(t); i++)
        ctx->shape[i] = dp_tensor_dim(t, i);
    DLTensor dl = {.data = data,
                   .device = dev,
                   .ndim = dp_tensor_ndim(t),
                   .dtype = dl_dtype(dp_tensor_dtype(t)),
                   .shape = ctx->shape,
                   .strides = NULL,
                   .byte_offset = 0};
    PyObject *capsule;
    if (versioned) {
        ctx->m.versioned = (DLManagedTensorVersioned){.version = {1, 0},
                                                      .manager_ctx = ctx,
                                                      .deleter = versioned_deleter,
                                                      .flags = copied ? DLPACK_FLAG_BITMASK_IS_COPIED
                                                                      : 0,
                                                      .dl_tensor = dl};
        capsule = PyCapsule_New(&ctx->m.versioned, "dltensor_versioned", capsule_destructor);
    } else {
        ctx->m.legacy =
            (DLManagedTensor){.dl_tensor = dl, .manager_ctx = ctx, .deleter = legacy_deleter};
        capsule = PyCapsule_New(&ctx->m.legacy, "dltensor", capsule_destructor);
    }
    if (!capsule) {
        Py_XDECREF(ctx->owner);
        free(ctx->copy);
        free(ctx);
    }
    return capsule;
}

PyMethodDef dpy_tensor_dlpack_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))m_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None) -> a DLPack capsule"},
    {"__dlpack_device__", m_dlpack_device, METH_NOARGS,
     "__dlpack_device__() -> (device type, id): (1, 0) for CPU memory"},
    {NULL, NULL, 0, NULL},
};

/* ---- import ------------------------------------------------------------------ */

/* Deleters waiting for the main thread (the release runs on a worker). */
typedef struct pending_deleter {
    struct pending_deleter *next;
    void *managed;
    bool versioned;
} pending_deleter;
static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;
static pending_deleter *pending;

static int run_pending(void *unused)
{
    pthread_mutex_lock(&pending_lock);
    pending_deleter *list = pending;
    pending = NULL;
    pthread_mutex_unlock(&pending_lock);
    while (list) {
        pending_deleter *next = list->next;
        if (list->versioned) {
            DLManagedTensorVersioned *m = list->managed;
            if (m->deleter)
                m->deleter(m);
        } else {
            DLManagedTensor *m = list->managed;
            if (m->deleter)
                m->deleter(m);
        }
        free(list);
        list = next;
    }
    return 0;
}

static void release_later(void *ctx)
{
    pending_deleter *p = ctx;
    /* A release after the interpreter has gone (a tensor freed at exit)
     * leaves the producer's memory to the process's end. */
    if (!Py_IsInitialized())
        return;
    pthread_mutex_lock(&pending_lock);
    p->next = pending;
    pending = p;
    pthread_mutex_unlock(&pending_lock);
    /* If the interpreter's queue is full the next one drains this too. */
    Py_AddPendingCall(run_pending, NULL);
}

static int dp_dtype_of(DLDataType d, dp_dtype *out)
{
    if (d.lanes != 1)
        return -1;
    if (d.code == kDLFloat && d.bits == 32)
        *out = DP_F32;
    else if (d.code == kDLInt && d.bits == 32)
        *out = DP_I32;
    else if (d.code == kDLBfloat && d.bits == 16)
        *out = DP_BF16;
    else
        return -1;
    return 0;
}

static PyObject *import_capsule(PyObject *capsule)
{
    bool versioned = PyCapsule_IsValid(capsule, "dltensor_versioned");
    if (!versioned && !PyCapsule_IsValid(capsule, "dltensor"))
        return PyErr_Format(PyExc_TypeError,
                            "from_dlpack(): __dlpack__ gave %R, not an unused DLPack capsule",
                            capsule);
    void *managed = PyCapsule_GetPointer(capsule, versioned ? "dltensor_versioned" : "dltensor");
    if (!managed)
        return NULL;
    DLTensor *dl = versioned ? &((DLManagedTensorVersioned *)managed)->dl_tensor
                             : &((DLManagedTensor *)managed)->dl_tensor;
    if (versioned && ((DLManagedTensorVersioned *)managed)->version.major > 1)
        return PyErr_Format(PyExc_BufferError, "from_dlpack(): DLPack version %u is newer than 1",
                            ((DLManagedTensorVersioned *)managed)->version.major);
    if (dl->device.device_type != kDLCPU && dl->device.device_type != kDLCUDAHost)
        return PyErr_Format(PyExc_BufferError,
                            "from_dlpack(): only CPU memory is shared (device type %d)",
                            dl->device.device_type);
    dp_dtype dtype;
    if (dp_dtype_of(dl->dtype, &dtype) < 0)
        return PyErr_Format(PyExc_TypeError,
                            "from_dlpack(): DLPack dtype (code %u, %u bits) has no dptrain dtype "
                            "(float32, int32, bfloat16); convert it first",
                            dl->dtype.code, dl->dtype.bits);
    if (dl->ndim < 0 || dl->ndim > DP_MAX_DIMS)
        return PyErr_Format(PyExc_ValueError, "from_dlpack(): %d dimensions; dptrain's tensors "
                                              "have at most %d",
                            dl->ndim, DP_MAX_DIMS);
    int64_t expect = 1;
    for (int i = dl->ndim - 1; i >= 0; i--) {
        if (dl->strides && dl->shape[i] > 1 && dl->strides[i] != expect)
            return PyErr_Format(PyExc_BufferError,
                                "from_dlpack(): the memory is not C-contiguous (stride %lld in "
                                "dimension %d); make a contiguous copy first",
                                (long long)dl->strides[i], i);
        expect *= dl->shape[i];
    }
    char *data = (char *)dl->data + dl->byte_offset;
    if ((uintptr_t)data % dp_dtype_size(dtype) != 0)
        return PyErr_Format(PyExc_BufferError, "from_dlpack(): the data is not aligned");
    dp_device_t *dev = dpy_device("cpu");
    if (!dev)
        return NULL;
    pending_deleter *p = calloc(1, sizeof *p);
    if (!p)
        return PyErr_NoMemory();
    p->managed = managed;
    p->versioned = versioned;
    dp_tensor_t *t = NULL;
    int rc = dp_tensor_wrap_host(&t, dev, dtype, dl->ndim, dl->shape, data, release_later, p);
    if (rc < 0) {
        free(p);
        return dpy_raise(rc);
    }
    /* The capsule is consumed: its deleter is now ours to call. */
    if (PyCapsule_SetName(capsule, versioned ? "used_dltensor_versioned" : "used_dltensor") < 0) {
        dp_tensor_free(t);
        return NULL;
    }
    return dpy_tensor_wrap(t, DPY_OWN_SELF, NULL);
}

/* from_dlpack(obj): a tensor sharing obj's CPU memory (obj has __dlpack__,
 * or is a DLPack capsule). A dptrain tensor is returned as it is. */
static PyObject *py_from_dlpack(PyObject *m, PyObject *obj)
{
    run_pending(NULL);
    if (dpy_is_tensor(obj)) {
        Py_INCREF(obj);
        return obj;
    }
    if (PyCapsule_CheckExact(obj))
        return import_capsule(obj);
    PyObject *method = PyObject_GetAttrString(obj, "__dlpack__");
    if (!method) {
        PyErr_Clear();
        return PyErr_Format(PyExc_TypeError, "from_dlpack(): %R has no __dlpack__",
                            (PyObject *)Py_TYPE(obj));
    }
    /* A producer that knows DLPack 1.0 is asked for it; an older one (NumPy
     * 1.x, PyTorch < 2.4) takes no max_version. */
    PyObject *capsule = NULL, *empty = PyTuple_New(0), *kw = Py_BuildValue("{s(ii)}", "max_version",
                                                                            1, 0);
    if (empty && kw) {
        capsule = PyObject_Call(method, empty, kw);
        if (!capsule && PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            capsule = PyObject_CallNoArgs(method);
        }
    }
    Py_XDECREF(empty);
    Py_XDECREF(kw);
    Py_DECREF(method);
    if (!capsule)
        return NULL;
    PyObject *r = import_capsule(capsule);
    Py_DECREF(capsule);
    return r;
}

static PyMethodDef dlpack_functions[] = {
    {"from_dlpack", py_from_dlpack, METH_O,
     "from_dlpack(obj) -> a tensor sharing obj's CPU memory (DLPack)"},
    {NULL, NULL, 0, NULL},
};

int dpy_dlpack_add(PyObject *m)
{
    return PyModule_AddFunctions(m, dlpack_functions);
}
