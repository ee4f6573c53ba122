/* A forward of a model definition traced on the meta device: tensors with
 * shapes and no memory, kernels that run nothing, so that a model too large
 * for this machine (or an input of 4096x65536x65536) is traced all the
 * same, and every op the forward runs is on the tape with its inputs,
 * output and settings. dp_model_summary reads the tape as rows, the ONNX
 * exporter as nodes. */
#ifndef DP_NN_TRACE_H
#define DP_NN_TRACE_H

#include "dp/nn.h"

#include "autograd/tape.h"

typedef struct dp__trace {
    dp_device_t *dev;   /* the meta device */
    dp_model_t *model;  /* of the definition, weights not drawn (nothing reads them) */
    dp__tape *tape;     /* the ops of the forward, in order */
    dp_tensor_t *x, *y; /* the input (batch, C, H, W) and the forward's output */
} dp__trace;

/* Runs a forward of `def` on an input of `batch` samples of in_chw in
 * float32 whatever the thread's precision; `train` as dp_model_forward's.
 * A training forward records the ops whose inputs need a gradient (those
 * before the first parameter record none); input_grad makes the input need
 * one, so that every op is recorded. Close t with dp__trace_close, also
 * after a failure. */
int dp__trace_forward(dp__trace *t, const dp_model_def *def, const int64_t *in_chw, int64_t batch,
                      bool train, bool input_grad);
void dp__trace_close(dp__trace *t);

/* The outputs of every op of a training forward of one sample of in_chw
 * (summary.c): their elements summed, and the largest. A step keeps them
 * all until its backward pass, those of ops before the first parameter
 * too, which a summary does not list. */
int dp__trace_activations(const dp_model_def *def, const int64_t *in_chw, double *total,
                          double *largest);

#endif
