/* dpy.h - what every C file of the _dptrain extension shares.
 *
 * The extension is written against CPython's stable ABI (Py_LIMITED_API
 * 3.11: heap types from PyType_FromSpec, no non-limited call) and the
 * library's public headers only (docs/python-internals.md, DESIGN.md's
 * python/ row). Everything here runs with the GIL held unless it says it
 * releases it. */
#ifndef DPY_H
#define DPY_H

#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030B0000
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "dp/dp.h"

#include <stdbool.h>
#include <stdint.h>

/* ---- tensors --------------------------------------------------------------
 * Who releases a tensor object's dp_tensor_t (python-internals.md's table). */
typedef enum dpy_owner {
    DPY_OWN_SELF = 0,  /* dp_tensor_free when the object dies */
    DPY_OWN_TAPE = 1,  /* the tape in `keeper` (a dpy_tape), when its last object dies */
    DPY_OWN_OTHER = 2, /* `keeper` (a leaf, a parameter buffer, a DLPack producer) */
} dpy_owner;

/* The current tape (autograd.c): dp_tape_t, and how many tensor objects
 * hold outputs recorded on it; the tape is reset when that count falls to 0
 * while it is current, and closed when the object dies. */
typedef struct dpy_tape {
    PyObject_HEAD
    dp_tape_t *tape;
    Py_ssize_t live;
    /* The objects of the recorded ops' inputs that the tape does not own
     * (parameters, batches, constants): a backward reads them, so they live
     * as long as the tape (a list, made on first use). */
    PyObject *inputs;
    /* The tensor objects holding its outputs that dpy_op_end made (borrowed:
     * an object leaves when it dies), so that once the next step records,
     * this backwarded tape can hand them copies and close (autograd.c).
     * `live` above counts every object; more than these (an output wrapped
     * elsewhere) keeps the tape until its objects die, as before. */
    struct dpy_tensor **outputs;
    Py_ssize_t noutputs, cap_outputs;
} dpy_tape;

typedef struct dpy_tensor {
    PyObject_HEAD
    dp_tensor_t *t;       /* NULL once a parameter buffer took it over and failed */
    PyObject *keeper;     /* see dpy_owner; NULL for DPY_OWN_SELF */
    uint8_t owner;        /* dpy_owner */
    uint8_t requires_grad;/* a leaf given requires_grad_(), or an output recorded on a tape */
    uint8_t is_leaf;      /* not the output of a recorded op */
    uint8_t backward_done;/* backward() ran from this loss */
    uint8_t graph_freed;  /* its tape, or one its value came from, was released (autograd.c) */
    /* A leaf's .grad is None until a backward ran after requires_grad_()
     * (or after .grad = None): the backward count then (autograd.c). */
    uint64_t grad_epoch;
    /* What held this object's earlier memory, once an Optimizer re-pointed
     * it at a parameter buffer (a list: an object owning the old tensor, or
     * the old keeper): views of that memory (.grad, detach(), a DLPack
     * capsule, a recorded op) stay valid while this object lives. */
    PyObject *retired;
    /* A deferred convolution's recipe (lazy.c): t is NULL until it is read. */
    struct dpy_lazy *lazy;
} dpy_tensor;

/* The module's state, process-wide (one interpreter). */
extern PyTypeObject *dpy_tensor_type;     /* _dptrain.Tensor */
extern PyTypeObject *dpy_tensor_class;    /* what ops return: _set_tensor_class's, else Tensor */
extern PyTypeObject *dpy_tape_type;

/* The tensor inside a Tensor object; NULL with TypeError naming the type
 * otherwise (or RuntimeError for a tensor a parameter buffer left empty). */
dp_tensor_t *dpy_tensor_get(PyObject *o);
/* The same, naming the argument in the message: "conv2d(): weight must be a
 * Tensor, not list". */
dp_tensor_t *dpy_tensor_arg(PyObject *o, const char *func, const char *arg);
static inline bool dpy_is_tensor(PyObject *o)
{
    return PyObject_TypeCheck(o, dpy_tensor_type);
}
/* A new object of dpy_tensor_class over t. owner/keeper: dpy_owner's rules;
 * a new reference to keeper is taken. On failure t is released as `owner`
 * says (freed for DPY_OWN_SELF) and NULL returned with MemoryError. */
PyObject *dpy_tensor_wrap(dp_tensor_t *t, dpy_owner owner, PyObject *keeper);

/* ---- ops: running a library call with autograd's rules --------------------
 *
 *   dpy_op op;
 *   dpy_op_begin(&op, inputs, n);          // begins the current tape if one records
 *   rc = dp_relu(&y, x);
 *   return dpy_op_end(&op, rc, y);         // ends it; wraps y (or raises)
 *
 * The tape records when grad mode is on and an input object requires a
 * gradient; the output then belongs to the tape. An output that is one of
 * the inputs (dp_cast to the same dtype) returns that input's object. */
typedef struct dpy_op {
    dpy_tape *tape; /* begun, or NULL */
    PyObject *const *inputs;
    int n;
} dpy_op;
void dpy_op_begin(dpy_op *op, PyObject *const *inputs, int n);
PyObject *dpy_op_end(dpy_op *op, int rc, dp_tensor_t *y);
/* The object of a new op output that no tape of the extension owns: the
 * caller's (DPY_OWN_SELF), or, while the library runs a Python module's
 * forward under its own tape (dpy_library_tape_keeper set), that tape's. */
PyObject *dpy_wrap_new(dp_tensor_t *y);
/* Set by model.c while the library's tape records a Python module's
 * forward (module_model.h): ops begin no tape of the extension's and leave
 * their outputs to the library's tape, kept by this object. */
extern PyObject *dpy_library_tape_keeper;

/* ---- deferred convolutions (lazy.c) --------------------------------------
 * conv2d returns a deferred object where its inputs allow, relu of one
 * another, and avg_pool2d of either runs dp_conv2d_avg_pool2d. */
/* The deferred object of conv2d(x, w, b, p) (objects checked by the
 * caller), NULL with an exception (dp_conv2d's checks), or
 * Py_NotImplemented, borrowed, where it must run now. */
PyObject *dpy_lazy_conv2d(PyObject *x, PyObject *w, PyObject *b, const dp_conv2d_params *p);
/* Whether o is a deferred object made under the settings in force now. */
bool dpy_lazy_is_conv(PyObject *o);
/* relu of a deferred object (dpy_lazy_is_conv): another deferred object,
 * or Py_NotImplemented (borrowed) where the relu must run. */
PyObject *dpy_lazy_relu(PyObject *h);
/* avg_pool2d of a deferred object (dpy_lazy_is_conv), as one op. */
PyObject *dpy_lazy_avg_pool2d(PyObject *h, const dp_pool2d_params *pool);
/* Computes a deferred object's value: 0, or -1 with an exception. */
int dpy_lazy_compute(dpy_tensor *o);
/* The recipes not yet computed or dropped (NULL: none). */
extern struct dpy_lazy *dpy_lazy_live;
/* Computes the deferred objects with an input sharing memory with t, before
 * a call reads or writes t: 0, or -1 with an exception. */
int dpy_lazy_before_access(const dp_tensor_t *t);
/* Computes every deferred object, before a call that writes tensors it
 * does not ask for by object (an optimizer's step, a backward). */
int dpy_lazy_compute_all(void);
/* A deferred object's shape, dtype and device; false for any other. */
bool dpy_lazy_meta(PyObject *o, int *ndim, const int64_t **shape, dp_dtype *dtype,
                   dp_device_t **dev);
/* Drops o's recipe (o is dying). */
void dpy_lazy_release(dpy_tensor *o);

/* ---- autograd (autograd.c) ---------------------------------------------- */
extern bool dpy_grad_enabled;
/* The current tape, a borrowed reference (made on first use); NULL with
 * MemoryError. */
dpy_tape *dpy_current_tape(void);
/* Keeps the input objects of an op recorded on `tape` alive with it: 0, or
 * -1 with MemoryError. */
int dpy_tape_keep(dpy_tape *tape, PyObject *const *inputs, int n);
/* A tensor object died holding an output of `tape`. */
void dpy_tape_release_output(dpy_tape *tape);
uint64_t dpy_backward_count(void);
/* `from` (about to die) gave its tensor of `tape` to `to`: the tape's list
 * of its objects names `to` instead. */
void dpy_tape_replace_output(dpy_tape *tape, struct dpy_tensor *from, struct dpy_tensor *to);
PyObject *dpy_backward(dpy_tensor *loss);

/* ---- errors --------------------------------------------------------------- */
/* Raises the library's failure `rc` (< 0) as the matching Python exception
 * (ValueError for DP_EINVAL and DP_ESHAPE, MemoryError for DP_ENOMEM,
 * FileNotFoundError for DP_ENOENT, KeyboardInterrupt for DP_EINTR,
 * RuntimeError otherwise) with dp_last_error()'s line, or dp_strerror's
 * where nothing was logged; returns NULL. */
PyObject *dpy_raise(int rc);
/* The same for int-returning helpers: returns -1. */
int dpy_raise_int(int rc);

/* ---- devices (device.c) -------------------------------------------------- */
/* The device called `name` in the device convention (python-internals.md):
 * "cpu" is cpu:0; "cuda:i" is dptrain's device i (a GPU, else cpu:i);
 * opened on first use, cached for the process. NULL with ValueError. */
dp_device_t *dpy_device(const char *name);
/* The device of a Python argument: a str, or an object with a `.name`
 * attribute or whose str() is the name (dptrain.device); NULL: cpu:0. */
dp_device_t *dpy_device_arg(PyObject *o);
/* The devices opened so far, at most max, into devs; returns how many. */
int dpy_open_devices(dp_device_t **devs, int max);
/* The canonical name of a device: "cpu:0", "cuda:1". */
const char *dpy_device_name(dp_device_t *d);

/* ---- waits (wait.c) -------------------------------------------------------
 * Block with the GIL released, in 100 ms slices, checking for signals
 * between slices: 0, or -1 with an exception set (KeyboardInterrupt on
 * Ctrl-C; the commands enqueued keep running, the engine stays usable; the
 * error a command hit, as dpy_raise raises it). */
int dpy_wait_tensor(dp_tensor_t *t);
int dpy_wait_device(dp_device_t *d);
int dpy_wait_all(void);
/* dp_tensor_to_host after dpy_wait_tensor (GIL released while copying). */
int dpy_to_host(dp_tensor_t *t, void *dst, size_t bytes);

/* ---- dtypes and shapes (convert.c) --------------------------------------- */
/* "float32", "int32", "bfloat16" (also "float", "int", "bf16"). -1 with
 * TypeError naming the argument for anything else. */
int dpy_dtype_parse(PyObject *o, const char *func, const char *arg, dp_dtype *out);
const char *dpy_dtype_name(dp_dtype d);
/* A shape from an int or a sequence of ints (each >= 0, at most
 * DP_MAX_DIMS): its rank, or -1 with an exception naming the argument. */
int dpy_shape_parse(PyObject *o, const char *func, const char *arg, int64_t shape[DP_MAX_DIMS]);
/* A tuple of the tensor's sizes. */
PyObject *dpy_shape_tuple(const dp_tensor_t *t);
/* An int or a pair of ints into two ints (PyTorch's `kernel_size=2` or
 * `(2, 3)`); -1 with an exception naming the argument. */
int dpy_pair_parse(PyObject *o, const char *func, const char *arg, int out[2]);
/* Python numbers: -1 with TypeError naming the argument. */
int dpy_float_arg(PyObject *o, const char *func, const char *arg, double *out);
int dpy_int_arg(PyObject *o, const char *func, const char *arg, long long *out);
int dpy_bool_arg(PyObject *o, const char *func, const char *arg, bool *out);
/* t = value (enqueued; an int32 tensor is written from the host, a wait). */
int dpy_fill(dp_tensor_t *t, double value);
/* A tensor of one element holding `value` on `dev` in dtype, owned by the
 * caller (the reversed scalar forms: 2 - x). */
int dpy_scalar_tensor(dp_tensor_t **out, dp_device_t *dev, dp_dtype dtype, double value);

/* ---- the parts' hooks: each adds its functions and types to the module ---- */
void dpy_errors_init(void);        /* errors.c: the log callback */
int dpy_device_add(PyObject *m);   /* device.c: devices, waits, precision */
int dpy_autograd_add(PyObject *m); /* autograd.c: grad mode */
int dpy_tensor_add(PyObject *m);   /* tensor.c and its companions */
int dpy_creation_add(PyObject *m); /* creation.c: from_bytes, full */
int dpy_dlpack_add(PyObject *m);   /* dlpack.c: from_dlpack */
int dpy_ops_add(PyObject *m);      /* ops_nn.c, ops_tensor.c */
int dpy_optim_add(PyObject *m);    /* optim.c */
int dpy_io_add(PyObject *m);       /* io.c: safetensors */
int dpy_parallel_add(PyObject *m); /* parallel.c: scatter, gather, allreduce */
int dpy_data_add(PyObject *m);     /* data.c (datasets, loaders) */
int dpy_model_add(PyObject *m);    /* model.c (Python modules as dptrain models) */
int dpy_train_add(PyObject *m);    /* train.c (dp_train) */
int dpy_torch_rng_add(PyObject *m); /* torch_rng.c: PyTorch's CPU generator */
int dpy_lazy_add(PyObject *m);      /* lazy.c: deferred convolutions */
int dpy_kernels_add(PyObject *m);   /* kernels.c: the convolutions' kernel choice */

#define DPY_FASTCALL(f) (PyCFunction)(void (*)(void))(f), METH_FASTCALL

/* Adds a type made from spec to the module under its short name; the type
 * (a new reference) into *out when out is not NULL. */
int dpy_add_type(PyObject *m, PyType_Spec *spec, PyObject *base, PyTypeObject **out);

#endif
