/* Forwards traced on the meta device (trace.h). */
#include "nn/trace.h"

#include "dp/autograd.h"

#include "core/internal.h"
#include "nn/model.h"

int dp__trace_forward(dp__trace *t, const dp_model_def *def, const int64_t *in_chw, int64_t batch,
                      bool train, bool input_grad)
{
    *t = (dp__trace){0};
    const int64_t xs[4] = {batch, in_chw[0], in_chw[1], in_chw[2]};
    int rc = dp__device_open_meta(&t->dev);
    if (rc == 0)
        rc = dp__model_init_uninit(&t->model, def, t->dev);
    if (rc == 0)
        rc = dp_tensor_new(&t->x, t->dev, DP_F32, 4, xs);
    if (rc == 0 && input_grad)
        rc = dp_tensor_set_requires_grad(t->x, NULL);
    if (rc == 0)
        rc = dp_tape_init(&t->tape, true);
    if (rc == 0) {
        /* Shapes do not depend on the thread's precision (a bf16 run asks
         * for its summary too); the meta device runs float32 only. */
        dp_precision precision = dp_set_precision(DP_PRECISION_FP32);
        dp_tape_begin(t->tape);
        rc = dp_model_forward(t->model, t->x, train, &t->y);
        dp_tape_end(t->tape);
        dp_set_precision(precision);
    }
    if (rc == 0)
        rc = dp_device_sync(t->dev);
    return rc;
}

void dp__trace_close(dp__trace *t)
{
    if (t->tape) {
        dp_tape_reset(t->tape);
        dp_tape_close(t->tape);
    }
    dp_tensor_free(t->x);
    dp_model_close(t->model);
    if (t->dev)
        dp_device_close(t->dev);
    *t = (dp__trace){0};
}
