/* ops.c - the functional ops of nn.functional, positional (the package
 * gives them PyTorch's signatures and keywords): each checks its Python
 * arguments, names the one at fault, and runs the library's op under
 * autograd's rules (dpy_op_begin/end). The activations, losses and
 * elementwise ops are in ops_eltwise.c. */
#include "dpy.h"

#include <string.h>

/* The tensor args[i], or NULL (None) when optional. */
#define TENSOR_ARG(var, i, func, name)                                                             \
    dp_tensor_t *var = dpy_tensor_arg(args[i], func, name);                                        \
    if (!var)                                                                                      \
        return NULL;
#define OPTIONAL_TENSOR_ARG(var, i, func, name)                                                    \
    dp_tensor_t *var = NULL;                                                                       \
    if (args[i] != Py_None && !(var = dpy_tensor_arg(args[i], func, name)))                        \
        return NULL;

int dpy_nargs(const char *sig, Py_ssize_t nargs, Py_ssize_t want)
{
    if (nargs == want)
        return 0;
    PyErr_Format(PyExc_TypeError, "%s takes %zd arguments, %zd given", sig, want, nargs);
    return -1;
}

/* ndim of t must be `want` (or between lo and hi). */
int dpy_check_rank(const dp_tensor_t *t, const char *func, const char *arg, int lo, int hi)
{
    int nd = dp_tensor_ndim(t);
    if (nd >= lo && nd <= hi)
        return 0;
    char shape[64];
    if (lo == hi)
        PyErr_Format(PyExc_ValueError, "%s(): %s has %d dimensions %s, expected %d", func, arg, nd,
                     dp_tensor_shape_str(t, shape, sizeof shape), lo);
    else
        PyErr_Format(PyExc_ValueError, "%s(): %s has %d dimensions %s, expected %d to %d", func,
                     arg, nd, dp_tensor_shape_str(t, shape, sizeof shape), lo, hi);
    return -1;
}

static int check_float(const dp_tensor_t *t, const char *func, const char *arg)
{
    if (dp_tensor_dtype(t) != DP_I32)
        return 0;
    PyErr_Format(PyExc_TypeError, "%s(): %s is int32; it must be a float tensor", func, arg);
    return -1;
}

static int check_same_device(const dp_tensor_t *a, const dp_tensor_t *b, const char *func,
                             const char *arg)
{
    if (!b || dp_tensor_device(a) == dp_tensor_device(b))
        return 0;
    PyErr_Format(PyExc_ValueError, "%s(): %s is on %s, the input on %s", func, arg,
                 dp_device_name(dp_tensor_device(b)), dp_device_name(dp_tensor_device(a)));
    return -1;
}

/* conv2d(x, w, b, stride, padding, dilation, groups) */
static PyObject *py_conv2d(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    const char *f = "conv2d";
    if (dpy_nargs("conv2d(x, weight, bias, stride, padding, dilation, groups)", nargs, 7) < 0)
        return NULL;
    TENSOR_ARG(x, 0, f, "input");
    TENSOR_ARG(w, 1, f, "weight");
    OPTIONAL_TENSOR_ARG(b, 2, f, "bias");
    int stride[2], pad[2], dil[2];
    long long groups;
    if (dpy_check_rank(x, f, "input", 4, 4) < 0 || dpy_check_rank(w, f, "weight", 4, 4) < 0 ||
        (b && dpy_check_rank(b, f, "bias", 1, 1) < 0) || check_float(x, f, "input") < 0 ||
        check_float(w, f, "weight") < 0 || (b && check_float(b, f, "bias") < 0) ||
        check_same_device(x, w, f, "weight") < 0 || check_same_device(x, b, f, "bias") < 0 ||
        dpy_pair_parse(args[3], f, "stride", stride) < 0 ||
        dpy_pair_parse(args[4], f, "padding", pad) < 0 ||
        dpy_pair_parse(args[5], f, "dilation", dil) < 0 ||
        dpy_int_arg(args[6], f, "groups", &groups) < 0)
        return NULL;
    if (stride[0] < 1 || stride[1] < 1 || dil[0] < 1 || dil[1] < 1 || groups < 1 ||
        groups > (1 << 20))
        return PyErr_Format(PyExc_ValueError,
                            "conv2d(): stride, dilation and groups must be positive");
    if (dp_tensor_dim(x, 1) != dp_tensor_dim(w, 1) * groups)
        return PyErr_Format(PyExc_ValueError,
                            "conv2d(): input has %lld channels, weight expects %lld (groups %lld)",
                            (long long)dp_tensor_dim(x, 1),
                            (long long)(dp_tensor_dim(w, 1) * groups), groups);
    if (b && dp_tensor_dim(b, 0) != dp_tensor_dim(w, 0))
        return PyErr_Format(PyExc_ValueError, "conv2d(): bias has %lld elements, weight has %lld "
                                              "output channels",
                            (long long)dp_tensor_dim(b, 0), (long long)dp_tensor_dim(w, 0));
    dp_conv2d_params p = {.stride_h = stride[0],
                          .stride_w = stride[1],
                          .pad_h = pad[0],
                          .pad_w = pad[1],
                          .groups = (int)groups,
                          .dilation_h = dil[0],
                          .dilation_w = dil[1]};
    PyObject *deferred = dpy_lazy_conv2d(args[0], args[1], b ? args[2] : NULL, &p);
    if (deferred != Py_NotImplemented)
        return deferred;
    dp_tensor_t *y = NULL;
    dpy_op op;
    PyObject *in[3] = {args[0], args[1], b ? args[2] : NULL}; /* no bias: None is no input */
    dpy_op_begin(&op, in, 3);
    int rc = dp_conv2d(&y, x, w, b, &p);
    return dpy_op_end(&op, rc, y);
}

/* conv_transpose2d(x, w, b, stride, padding, output_padding, groups, dilation) */
static PyObject *py_conv_transpose2d(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    const char *f = "conv_transpose2d";
    if (dpy_nargs("conv_transpose2d(x, weight, bias, stride, padding, output_padding, groups, "
                  "dilation)",
                  nargs, 8) < 0)
        return NULL;
    TENSOR_ARG(x, 0, f, "input");
    TENSOR_ARG(w, 1, f, "weight");
    OPTIONAL_TENSOR_ARG(b, 2, f, "bias");
    int stride[2], pad[2], outpad[2], dil[2];
    long long groups;
    if (dpy_check_rank(x, f, "input", 4, 4) < 0 || dpy_check_rank(w, f, "weight", 4, 4) < 0 ||
        check_same_device(x, w, f, "weight") < 0 || check_same_device(x, b, f, "bias") < 0 ||
        dpy_pair_parse(args[3], f, "stride", stride) < 0 ||
        dpy_pair_parse(args[4], f, "padding", pad) < 0 ||
        dpy_pair_parse(args[5], f, "output_padding", outpad) < 0 ||
        dpy_int_arg(args[6], f, "groups", &groups) < 0 ||
        dpy_pair_parse(args[7], f, "dilation", dil) < 0)
        return NULL;
    if (groups < 1 || groups > (1 << 20))
        return PyErr_Format(PyExc_ValueError, "conv_transpose2d(): groups must be positive");
    dp_conv_transpose2d_params p = {.stride_h = stride[0],
                                    .stride_w = stride[1],
                                    .pad_h = pad[0],
                                    .pad_w = pad[1],
                                    .output_padding_h = outpad[0],
                                    .output_padding_w = outpad[1],
                                    .groups = (int)groups,
                                    .dilation_h = dil[0],
                                    .dilation_w = dil[1]};
    dp_tensor_t *y = NULL;
    dpy_op op;
    PyObject *in[3] = {args[0], args[1], b ? args[2] : NULL}; /* no bias: None is no input */
    dpy_op_begin(&op, in, 3);
    int rc = dp_conv_transpose2d(&y, x, w, b, &p);
    return dpy_op_end(&op, rc, y);
}

/* linear(x, w, b): y = x w^T + b (nn.Linear's layout). */
static PyObject *py_linear(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    const char *f = "linear";
    if (dpy_nargs("linear(x, weight, bias)", nargs, 3) < 0)
        return NULL;
    TENSOR_ARG(x, 0, f, "input");
    TENSOR_ARG(w, 1, f, "weight");
    OPTIONAL_TENSOR_ARG(b, 2, f, "bias");
    if (dpy_check_rank(x, f, "input", 2, 2) < 0 || dpy_check_rank(w, f, "weight", 2, 2) < 0 ||
        (b && dpy_check_rank(b, f, "bias", 1, 1) < 0) || check_float(x, f, "input") < 0 ||
        check_float(w, f, "weight") < 0 || (b && check_float(b, f, "bias") < 0) ||
        check_same_device(x, w, f, "weight") < 0 || check_same_device(x, b, f, "bias") < 0)
        return NULL;
    if (dp_tensor_dim(x, 1) != dp_tensor_dim(w, 1))
        return PyErr_Format(PyExc_ValueError,
                            "linear(): input has %lld features, a shape mismatch with weight (%lld, "
                            "%lld), which expects %lld",
                            (long long)dp_tensor_dim(x, 1), (long long)dp_tensor_dim(w, 0),
                            (long long)dp_tensor_dim(w, 1), (long long)dp_tensor_dim(w, 1));
    dp_tensor_t *y = NULL;
    dpy_op op;
    PyObject *in[3] = {args[0], args[1], b ? args[2] : NULL}; /* no bias: None is no input */
    dpy_op_begin(&op, in, 3);
    int rc = dp_linear(&y, x, w, b, DP_WEIGHT_OUT_IN);
    return dpy_op_end(&op, rc, y);
}

/* mm(a, b): a (N, K) times b (K, M). */
static PyObject *py_mm(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    const char *f = "mm";
    if (dpy_nargs("mm(input, mat2)", nargs, 2) < 0)
        return NULL;
    TENSOR_ARG(a, 0, f, "input");
    TENSOR_ARG(b, 1, f, "mat2");
    if (dpy_check_rank(a, f, "input", 2, 2) < 0 || dpy_check_rank(b, f, "mat2", 2, 2) < 0 ||
        check_float(a, f, "input") < 0 || check_float(b, f, "mat2") < 0 ||
        check_same_device(a, b, f, "mat2") < 0)
        return NULL;
    if (dp_tensor_dim(a, 1) != dp_tensor_dim(b, 0))
        return PyErr_Format(PyExc_ValueError,
                            "mm(): the shapes of input (%lld, %lld) and mat2 (%lld, %lld) do not match "
                            "for a product",
                            (long long)dp_tensor_dim(a, 0), (long long)dp_tensor_dim(a, 1),
                            (long long)dp_tensor_dim(b, 0), (long long)dp_tensor_dim(b, 1));
    dp_tensor_t *y = NULL;
    dpy_op op;
    dpy_op_begin(&op, args, 2);
    int rc = dp_matmul(&y, a, b);
    return dpy_op_end(&op, rc, y);
}

static int pool_params(PyObject *const *args, const char *f, dp_pool2d_params *p, bool with_dil)
{
    int k[2], s[2], pad[2], dil[2] = {1, 1};
    bool ceil_mode;
    if (dpy_pair_parse(args[1], f, "kernel_size", k) < 0 ||
        dpy_pair_parse(args[2], f, "stride", s) < 0 ||
        dpy_pair_parse(args[3], f, "padding", pad) < 0 ||
        (with_dil && dpy_pair_parse(args[4], f, "dilation", dil) < 0) ||
        dpy_bool_arg(args[with_dil ? 5 : 4], f, "ceil_mode", &ceil_mode) < 0)
        return -1;
    if (k[0] < 1 || k[1] < 1 || s[0] < 1 || s[1] < 1 || dil[0] < 1 || dil[1] < 1) {
        PyErr_Format(PyExc_ValueError, "%s(): kernel_size, stride and dilation must be positive",
                     f);
        return -1;
    }
    if (pad[0] > k[0] / 2 || pad[1] > k[1] / 2) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): pad should be at most half of effective kernel size, but got pad=%d, "
                     "kernel_size=%d",
                     f, pad[0] > k[0] / 2 ? pad[0] : pad[1], pad[0] > k[0] / 2 ? k[0] : k[1]);
        return -1;
    }
    *p = (dp_pool2d_params){.kernel_h = k[0],
                            .kernel_w = k[1],
                            .stride_h = s[0],
                            .stride_w = s[1],
                            .pad_h = pad[0],
                            .pad_w = pad[1],
                            .ceil_mode = ceil_mode,
                            .dilation_h = dil[0],
                            .dilation_w = dil[1]};
    return 0;
}

/* avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad) */
static PyObject *py_avg_pool2d(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    const char *f = "avg_pool2d";
    if (dpy_nargs("avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad)",
                  nargs, 6) < 0)
        return NULL;
    dp_pool2d_params p;
    bool include_pad;
    if (dpy_lazy_is_conv(args[0])) { /* the input is 4-D */
        if (pool_params(args, f, &p, false) < 0 ||
            dpy_bool_arg(args[5], f, "count_include_pad", &include_pad) < 0)
            return NULL;
        p.exclude_pad = !include_pad;
        return dpy_lazy_avg_pool2d(args[0], &p);
    }
    TENSOR_ARG(x, 0, f, "input");
    if (dpy_check_rank(x, f, "input", 4, 4) < 0 || pool_params(args, f, &p, false) < 0 ||
        dpy_bool_arg(args[5], f, "count_include_pad", &include_pad) < 0)
        return NULL;
    p.exclude_pad = !include_pad;
    dp_tensor_t *y = NULL;
    dpy_op op;
    dpy_op_begin(&op, args, 1);
    int rc = dp_avg_pool2d(&y, x, &p);
    return dpy_op_end(&op, rc, y);
}

/* max_pool2d(x, kernel, stride, padding, dilation, ceil_mode) */
static PyObject *py_max_pool2d(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    const char *f = "max_pool2d";
    if (dpy_nargs("max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode)", nargs, 6) <
        0)
        return NULL;
    TENSOR_ARG(x, 0, f, "input");
    dp_pool2d_params p;
    if (dpy_check_rank(x, f, "input", 4, 4) < 0 || pool_params(args, f, &p, true) < 0)
        return NULL;
    dp_tensor_t *y = NULL;
    dpy_op op;
    dpy_op_begin(&op, args, 1);
    int rc = dp_max_pool2d(&y, x, &p);
    return dpy_op_end(&op, rc, y);
}

/* adaptive_avg_pool2d(x, size) */
static PyObject *py_adaptive_avg_pool2d(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    const char *f = "adaptive_avg_pool2d";
    if (dpy_nargs("adaptive_avg_pool2d(x, output_size)", nargs, 2) < 0)
        return NULL;
    TENSOR_ARG(x, 0, f, "input");
    int size[2];
    if (dpy_check_rank(x, f, "input", 4, 4) < 0 ||
        dpy_pair_parse(args[1], f, "output_size", size) < 0)
        return NULL;
    if (size[0] < 1 || size[1] < 1)
        return PyErr_Format(PyExc_ValueError, "adaptive_avg_pool2d(): output_size must be "
                                              "positive");
    dp_tensor_t *y = NULL;
    dpy_op op;
    dpy_op_begin(&op, args, 1);
    int rc = dp_adaptive_avg_pool2d(&y, x, size[0], size[1]);
    return dpy_op_end(&op, rc, y);
}

/* global_max_pool2d(x): (N, C, H, W) -> (N, C, 1, 1), the max over (H, W);
 * the gradient goes to the first maximum (Tensor.max() reshapes into it). */
static PyObject *py_global_max_pool2d(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    const char *f = "global_max_pool2d";
    if (dpy_nargs("global_max_pool2d(x)", nargs, 1) < 0)
        return NULL;
    TENSOR_ARG(x, 0, f, "input");
    if (dpy_check_rank(x, f, "input", 4, 4) < 0 || check_float(x, f, "input") < 0)
        return NULL;
    dp_tensor_t *y = NULL;
    dpy_op op;
    dpy_op_begin(&op, args, 1);
    int rc = dp_global_max_pool2d(&y, x);
    return dpy_op_end(&op, rc, y);
}

/* flatten(x): (N, ...) into (N, rest). */
static PyObject *py_flatten(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    if (dpy_nargs("flatten(x)", nargs, 1) < 0)
        return NULL;
    TENSOR_ARG(x, 0, "flatten", "input");
    if (dpy_check_rank(x, "flatten", "input", 1, DP_MAX_DIMS) < 0)
        return NULL;
    dp_tensor_t *y = NULL;
    dpy_op op;
    dpy_op_begin(&op, args, 1);
    int rc = dp_flatten(&y, x);
    return dpy_op_end(&op, rc, y);
}

static PyMethodDef ops_functions[] = {
    {"conv2d", DPY_FASTCALL(py_conv2d),
     "conv2d(x, weight, bias, stride, padding, dilation, groups) (pairs for the geometry)"},
    {"conv_transpose2d", DPY_FASTCALL(py_conv_transpose2d),
     "conv_transpose2d(x, weight, bias, stride, padding, output_padding, groups, dilation)"},
    {"linear", DPY_FASTCALL(py_linear), "linear(x, weight, bias): x weight^T + bias"},
    {"mm", DPY_FASTCALL(py_mm), "mm(a, b): a (N, K) times b (K, M)"},
    {"avg_pool2d", DPY_FASTCALL(py_avg_pool2d),
     "avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad)"},
    {"max_pool2d", DPY_FASTCALL(py_max_pool2d),
     "max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode)"},
    {"adaptive_avg_pool2d", DPY_FASTCALL(py_adaptive_avg_pool2d),
     "adaptive_avg_pool2d(x, output_size)"},
    {"global_max_pool2d", DPY_FASTCALL(py_global_max_pool2d),
     "global_max_pool2d(x): (N, C, H, W) -> (N, C, 1, 1), the max over (H, W)"},
    {"flatten", DPY_FASTCALL(py_flatten), "flatten(x): (N, ...) -> (N, rest)"},
    {NULL, NULL, 0, NULL},
};

int dpy_ops_eltwise_add(PyObject *m);

int dpy_ops_add(PyObject *m)
{
    if (PyModule_AddFunctions(m, ops_functions) < 0)
        return -1;
    return dpy_ops_eltwise_add(m);
}
