/* module_model.h - a Python nn.Module as a dptrain model (model.c), for
 * dptrain.train (train.c). */
#ifndef DPY_MODULE_MODEL_H
#define DPY_MODULE_MODEL_H

#include "dpy.h"

/* While the library runs a Python module's forward on this thread, the
 * library's own tape (the trainer's, begun around the forward) records the
 * ops: the extension's ops must begin no tape of theirs, and wrap their
 * outputs DPY_OWN_OTHER with this keeper, since that tape releases them.
 * NULL otherwise. (dpy_op_begin and dpy_op_end read it.) */
extern PyObject *dpy_library_tape_keeper;

typedef struct dpy_module_model dpy_module_model;

/* A model definition over `module` (a dptrain.nn.Module): its float32
 * parameters (named_parameters(), state_dict order) are the model's
 * parameters, starting from their current values; its float32 buffers
 * (named_buffers()) the model's buffers; its forward is called with each
 * replica's parameters in place of its own. NULL with an exception. */
dpy_module_model *dpy_module_model_new(PyObject *module);
const dp_model_def *dpy_module_model_def(const dpy_module_model *mm);
/* For dp_train_options.on_epoch (GIL not held): keeps the trained values
 * of the replica the last forward ran on, for dpy_module_model_finish. */
bool dpy_module_model_on_epoch(const dp_epoch_stats *epoch, void *user);
/* After the run (GIL held): re-raises the exception the module's forward
 * raised, if any (-1), else writes the values kept after the last epoch
 * into the module's parameters and buffers (0, or -1 with an exception). */
int dpy_module_model_finish(dpy_module_model *mm, bool run_failed);
void dpy_module_model_free(dpy_module_model *mm);

#endif
