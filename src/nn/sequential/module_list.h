/* The module list: every module an nn.Sequential file may hold, one line
 * each. It makes the layer kinds (DP__SEQ_<name>, sequential_layers.h) and
 * the table of modules that binds, checks and runs them
 * (sequential_modules.c), so that the two cannot disagree: a kind that the
 * code names and the list lacks does not compile, and neither does (with
 * warnings as errors) a module's function that no line uses.
 *
 * X(name, required, args, ...)
 *   name      the module as PyTorch's torch.nn names it (nn.Conv2d).
 *   required  how many of its first arguments must be given.
 *   args      PyTorch's constructor arguments, in order: DP__ARGS("p",
 *             "inplace"), DP__NO_ARGS, or an array of sequential_modules.c.
 *   ...       what it does, as fields of sequential_bind.h's
 *             dp__seq_module_info: .bind and .forward, functions of that file; or
 *             .op, the op that makes y from x (dp_relu); or
 *             DP__OP_NUMBER(op, default), an op that makes y from x and
 *             the module's argument 0, a number (`default` when not given).
 *             Without .bind, an "inplace" argument is read and changes
 *             nothing (a new output either way).
 *
 * Adding a module: docs/architecture.md, "How to add a module". */
#ifndef DP_NN_MODULE_LIST_H
#define DP_NN_MODULE_LIST_H

/* PyTorch's argument names of a module, as a static array ending in NULL. */
#define DP__ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define DP__NO_ARGS ((const char *const[]){NULL})
/* A module that runs op(y, x, number), its number argument 0 with PyTorch's
 * default `dflt`. */
#define DP__OP_NUMBER(op, dflt) .op_number = (op), .number = (dflt)

/* clang-format off */
#define DP__MODULE_LIST(X)                                                                         \
    X(Conv2d, 3, conv_args, .bind = bind_conv, .forward = forward_conv)                            \
    X(Linear, 2, DP__ARGS("in_features", "out_features", "bias"),                                  \
      .bind = bind_linear, .forward = forward_linear)                                              \
    X(ReLU, 0, DP__ARGS("inplace"), .op = dp_relu)                                                 \
    X(Sigmoid, 0, DP__NO_ARGS, .op = dp_sigmoid)                                                   \
    X(Tanh, 0, DP__NO_ARGS, .op = dp_tanh)                                                         \
    X(MaxPool2d, 1, max_pool_args, .bind = bind_pool, .forward = forward_pool)                     \
    X(AvgPool2d, 1, avg_pool_args, .bind = bind_pool, .forward = forward_pool)                     \
    X(AdaptiveAvgPool2d, 1, DP__ARGS("output_size"),                                               \
      .bind = bind_adaptive_pool, .forward = forward_adaptive_pool)                                \
    X(BatchNorm2d, 1, bn_args, .bind = bind_batch_norm, .forward = forward_batch_norm)             \
    X(BatchNorm1d, 1, bn_args, .bind = bind_batch_norm, .forward = forward_batch_norm)             \
    X(Flatten, 0, DP__ARGS("start_dim", "end_dim"), .bind = bind_flatten, .op = dp_flatten)        \
    X(Dropout, 0, DP__ARGS("p", "inplace"), .bind = bind_dropout, .forward = forward_dropout)      \
    X(LeakyReLU, 0, DP__ARGS("negative_slope", "inplace"), DP__OP_NUMBER(dp_leaky_relu, 0.01))    \
    X(ReLU6, 0, DP__ARGS("inplace"), .op = dp_relu6)                                               \
    X(Hardswish, 0, DP__ARGS("inplace"), .op = dp_hardswish)                                       \
    X(Hardsigmoid, 0, DP__ARGS("inplace"), .op = dp_hardsigmoid)                                   \
    X(ELU, 0, DP__ARGS("alpha", "inplace"), DP__OP_NUMBER(dp_elu, 1.0))                            \
    X(SELU, 0, DP__ARGS("inplace"), .op = dp_selu)                                                 \
    X(GELU, 0, DP__NO_ARGS, .op = dp_gelu)                                                         \
    X(SiLU, 0, DP__ARGS("inplace"), .op = dp_silu)                                                 \
    X(ConvTranspose2d, 3, conv_transpose_args,                                                     \
      .bind = bind_conv_transpose, .forward = forward_conv_transpose)                              \
    X(PReLU, 0, DP__ARGS("num_parameters", "init"), .bind = bind_prelu, .forward = forward_prelu) \
    X(Softmax, 0, DP__ARGS("dim"), .bind = bind_softmax, .op = dp_softmax)                        \
    X(LogSoftmax, 0, DP__ARGS("dim"), .bind = bind_softmax, .op = dp_log_softmax)                 \
    /* a new module: one line above this one */
/* clang-format on */

#endif
