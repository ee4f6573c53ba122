/* train.c - dptrain.train: dp_train with the CLI's options (dp/train.h). */
#include "dpy.h"

int dpy_train_add(PyObject *m)
{
    (void)m;
    return 0;
}
