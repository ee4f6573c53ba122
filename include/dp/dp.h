/* dp/dp.h - dptrain: data-parallel training of convolutional networks in C.
 *
 * The library is layered: a device owns a stream of commands that its worker
 * runs in order (dp/tensor.h); ops enqueue kernels and return at once
 * (dp/ops.h), recording on a tape for dp_backward (dp/autograd.h); models
 * keep parameters and gradients in one buffer each (dp/nn.h); SGD updates
 * that buffer (dp/optim.h); DataParallel and the pipeline spread a step
 * over devices behind one executor interface (dp/parallel.h,
 * dp/pipeline.h, dp/executor.h); data and the training loop sit on top
 * (dp/data.h, dp/train.h). Every fallible call returns 0 or a negative
 * DP_E* code, and the detail goes to the log callback (dp/core.h).
 *
 * One training step of the seed's LeNet, written out:
 *
 *   dp_device_t *dev;   dp_device_open(&dev, "cpu:0", 0);
 *   dp_model_t *net;    dp_model_init_builtin(&net, "lenet", dev, seed);
 *   dp_optimizer_t *sgd;      dp_optimizer_init(&sgd, dp_model_params(net),
 * &(dp_optimizer_options){.lr = 0.2f}); dp_tape_t *tape;    dp_tape_init(&tape, true);
 *
 *   dp_tape_begin(tape);
 *   dp_tensor_t *logits, *loss;
 *   dp_model_forward(net, X, true, &logits);               // X: (256, 1, 28, 28)
 *   dp_cross_entropy(&loss, logits, y, DP_REDUCE_SUM);      // y: int32 (256)
 *   dp_params_zero_grad(dp_model_params(net));
 *   dp_backward(loss);
 *   dp_optimizer_step(sgd, 1.0f / 256);                          // p -= lr * grad / batch_size
 *   dp_tape_end(tape);
 *   dp_tape_reset(tape);                                   // nothing has waited so far
 *   float l; dp_tensor_to_host(loss, &l, sizeof l);       // (before the reset) this waits
 */
#ifndef DP_DP_H
#define DP_DP_H

#define DP_VERSION_STRING "0.1.0"

#include "dp/autograd.h"
#include "dp/checkpoint.h"
#include "dp/conv_cache.h"
#include "dp/core.h"
#include "dp/data.h"
#include "dp/dist.h"
#include "dp/executor.h"
#include "dp/nn.h"
#include "dp/ops.h"
#include "dp/option.h"
#include "dp/optim.h"
#include "dp/parallel.h"
#include "dp/pipeline.h"
#include "dp/safetensors.h"
#include "dp/tensor.h"
#include "dp/train.h"
#include "dp/train_util.h"

#endif
