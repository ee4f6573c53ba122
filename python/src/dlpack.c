#include "dpy.h"

PyMethodDef dpy_tensor_dlpack_methods[] = {{NULL, NULL, 0, NULL}};
