/* module.c - the _dptrain module: its init calls each part's hook
 * (dpy.h) in order; a part adds its functions and types. */
#include "dpy.h"

int dpy_add_type(PyObject *m, PyType_Spec *spec, PyObject *base, PyTypeObject **out)
{
    PyObject *type = PyType_FromSpecWithBases(spec, base);
    if (!type)
        return -1;
    const char *dot = spec->name;
    for (const char *p = spec->name; *p; p++)
        if (*p == '.')
            dot = p + 1;
    Py_INCREF(type);
    if (PyModule_AddObject(m, dot, type) < 0) {
        Py_DECREF(type);
        Py_DECREF(type);
        return -1;
    }
    if (out)
        *out = (PyTypeObject *)type;
    else
        Py_DECREF(type);
    return 0;
}

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_dptrain",
    .m_doc = "dptrain's engine for Python: tensors, ops, autograd, devices, waits "
             "(docs/python-internals.md). Import dptrain, not this.",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__dptrain(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    dpy_errors_init();
    int (*parts[])(PyObject *) = {
        dpy_tensor_add,   dpy_creation_add, dpy_dlpack_add, dpy_autograd_add,
        dpy_device_add,   dpy_ops_add,      dpy_optim_add,  dpy_io_add,
        dpy_parallel_add, dpy_data_add,     dpy_model_add,  dpy_train_add,
        dpy_torch_rng_add, dpy_lazy_add,     dpy_kernels_add,
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (parts[i](m) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    if (PyModule_AddStringConstant(m, "__version__", DP_VERSION_STRING) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
