/* The op list: every op of the library and every kernel of the device
 * table, one line each. Everything that has to agree with it is made from
 * it:
 *   - the kernel slots of the device table (device/device.h);
 *   - each backend's prototypes and table, from its functions
 *     dp__<backend>_<slot> (DP__OP_BACKEND_SLOTS: cpu/cpu.h and
 *     cpu/cpu_device.c, cuda/cuda_kernels.h and cuda/cuda_device.c), so
 *     that a backend the line gives the op and that lacks one of the op's
 *     functions does not link; the meta device's kernels that run nothing
 *     (meta_device.c);
 *   - the ids the tape records (DP__OP_<name>), their names (dp__op_name)
 *     and what dp_model_summary counts for each (dp__op_cost_rule).
 * It lives here, below src/ops/, because the device table is made from it
 * and src/device/ may not depend on src/ops/. Valid C and C++: the CUDA
 * files include it too.
 *
 * X(name, args, kernels, backends, cost)
 *   name      the op as the tape and dp_model_summary name it, and the stem
 *             of its slots.
 *   args      the argument struct of its kernels (device/kernels.h), or of
 *             the kernels of other lines that it runs on.
 *   kernels   its slots in the device table:
 *               NONE  none of its own: it runs on other lines' kernels
 *                     (relu on eltwise, linear on gemm and bias_add);
 *               ONE   <name>;
 *               FB    <name>_forward and <name>_backward;
 *               FDW   <name>_forward, <name>_backward_data and
 *                     <name>_backward_weights.
 *   backends  the backends that implement its slots (device/backend_list.h):
 *               ALL        every backend of the list;
 *               ONLY(...)  those named, e.g. ONLY(cpu) or ONLY(cpu, cuda)
 *                          (up to four names);
 *               NONE       none: with kernels NONE.
 *             A slot some backend is not given is NULL there, and the op
 *             returns DP_ENOTSUP on it.
 *   cost      what dp_model_summary counts for one recorded row:
 *               ELEMENTS  one FLOP per output element;
 *               CONV      two per multiply-add of a convolution: the
 *                         output's elements times C R S of the weight
 *                         (inputs[1]);
 *               CONV_TRANSPOSE  two per multiply-add of a transposed
 *                         convolution: the input's elements (inputs[0])
 *                         times K R S / groups of the weight (inputs[1]);
 *               MATMUL    two per multiply-add of a matrix product: the
 *                         output's elements times the last dimension of
 *                         the input (inputs[0]);
 *               NONE      never recorded: a kernel that ops run on.
 *
 * Adding an op: docs/architecture.md, "How to add an op". */
#ifndef DP_DEVICE_OP_LIST_H
#define DP_DEVICE_OP_LIST_H

#include "device/backend_list.h"

/* clang-format off */
#define DP__OP_LIST(X)                                                                            \
    /* name                  args                     kernels backends cost */                    \
    X(fill,                  dp__fill_args,           ONE,    ALL,     NONE)                      \
    X(cast,                  dp__cast_args,           ONE,    ONLY(cpu), ELEMENTS)                \
    X(cast_int32,            dp__cast_args,           ONE,    ALL,     NONE)                      \
    X(relayout,              dp__relayout_args,       ONE,    ALL,     NONE)                      \
    X(eltwise,               dp__eltwise_args,        ONE,    ALL,     NONE)                      \
    X(conv2d,                dp__conv2d_args,         FDW,    ALL,     CONV)                      \
    X(pool2d,                dp__pool2d_args,         FB,     ALL,     NONE)                      \
    X(conv2d_pool,           dp__conv2d_pool_args,    FB,     ONLY(cpu), NONE)                    \
    X(max_pool2d,            dp__pool2d_args,         NONE,   NONE,    ELEMENTS)                  \
    X(avg_pool2d,            dp__pool2d_args,         NONE,   NONE,    ELEMENTS)                  \
    X(adaptive_avg_pool,     dp__adaptive_pool_args,  FB,     ALL,     NONE)                      \
    X(adaptive_avg_pool2d,   dp__adaptive_pool_args,  NONE,   NONE,    ELEMENTS)                  \
    X(relu,                  dp__eltwise_args,        NONE,   NONE,    ELEMENTS)                  \
    X(sigmoid,               dp__eltwise_args,        NONE,   NONE,    ELEMENTS)                  \
    X(tanh,                  dp__eltwise_args,        NONE,   NONE,    ELEMENTS)                  \
    X(add,                   dp__eltwise_args,        NONE,   NONE,    ELEMENTS)                  \
    X(dropout,               dp__dropout_args,        ONE,    ALL,     ELEMENTS)                  \
    X(gemm,                  dp__gemm_args,           ONE,    ALL,     NONE)                      \
    X(bias_add,              dp__bias_args,           ONE,    ALL,     NONE)                      \
    X(bias_grad,             dp__bias_args,           ONE,    ALL,     NONE)                      \
    X(linear,                dp__gemm_args,           NONE,   NONE,    MATMUL)                    \
    X(reshape,               dp__eltwise_args,        NONE,   NONE,    ELEMENTS)                  \
    X(batch_norm,            dp__batch_norm_args,     FB,     ALL,     NONE)                      \
    X(batch_norm_sums,       dp__batch_norm_args,     FB,     ONLY(cpu), NONE)                    \
    X(batch_norm_add,        dp__batch_norm_args,     ONE,    ONLY(cpu), NONE)                    \
    X(batch_norm2d,          dp__batch_norm_args,     NONE,   NONE,    ELEMENTS)                  \
    X(batch_norm1d,          dp__batch_norm_args,     NONE,   NONE,    ELEMENTS)                  \
    X(cross_entropy,         dp__xent_args,           FB,     ALL,     ELEMENTS)                  \
    X(accuracy,              dp__accuracy_args,       ONE,    ALL,     NONE)                      \
    X(optimizer_step,        dp__optimizer_args,      ONE,    ALL,     NONE)                      \
    X(grad_clip,             dp__grad_clip_args,      ONE,    ALL,     NONE)                      \
    X(check_finite,          dp__check_finite_args,   ONE,    ALL,     NONE)                      \
    X(scatter,               dp__eltwise_args,        NONE,   NONE,    ELEMENTS)                  \
    X(gather,                dp__eltwise_args,        NONE,   NONE,    ELEMENTS)                  \
    X(leaky_relu,            dp__eltwise_args,        FB,     ALL,     ELEMENTS)                  \
    X(activation,            dp__activation_args,     FB,     ALL,     ELEMENTS)                  \
    X(conv_transpose2d,      dp__conv2d_args,         FDW,    ALL,     CONV_TRANSPOSE)            \
    X(prelu,                 dp__prelu_args,          FB,     ALL,     ELEMENTS)                  \
    X(softmax,               dp__softmax_args,        FB,     ALL,     ELEMENTS)                  \
    X(log_softmax,           dp__softmax_args,        NONE,   NONE,    ELEMENTS)                  \
    X(binary,                dp__binary_args,         FB,     ALL,     ELEMENTS)                  \
    X(channel_copy,          dp__channel_copy_args,   ONE,    ALL,     NONE)                      \
    X(concat,                dp__channel_copy_args,   NONE,   NONE,    ELEMENTS)                  \
    X(split,                 dp__channel_copy_args,   NONE,   NONE,    ELEMENTS)                  \
    X(transpose,             dp__transpose_args,      ONE,    ALL,     ELEMENTS)                  \
    X(reduce,                dp__reduce_args,         FB,     ALL,     NONE)                      \
    X(sum,                   dp__reduce_args,         NONE,   NONE,    ELEMENTS)                  \
    X(mean,                  dp__reduce_args,         NONE,   NONE,    ELEMENTS)                  \
    X(argmax,                dp__reduce_args,         ONE,    ALL,     NONE)                      \
    X(eq,                    dp__eq_args,             ONE,    ALL,     NONE)                      \
    X(narrow,                dp__eltwise_args,        NONE,   NONE,    ELEMENTS)                  \
    X(to_device,             dp__eltwise_args,        NONE,   NONE,    ELEMENTS)                  \
    /* a new op: one line above this one */
/* clang-format on */

/* The slots of a line: S(slot, args, x) for each, x passed through. */
#define DP__OP_SLOTS_NONE(S, name, args, x)
#define DP__OP_SLOTS_ONE(S, name, args, x) S(name, args, x)
#define DP__OP_SLOTS_FB(S, name, args, x) S(name##_forward, args, x) S(name##_backward, args, x)
#define DP__OP_SLOTS_FDW(S, name, args, x)                                                         \
    S(name##_forward, args, x) S(name##_backward_data, args, x) S(name##_backward_weights, args, x)

/* The backends column as a mask of backend ids (1u << DP__BACKEND_<name>):
 * DP__OP_BACKENDS_<column>. A name that is no backend's does not compile. */
#define DP__OP_BACKENDS_ALL ((1u << DP__BACKEND_COUNT) - 1u)
#define DP__OP_BACKENDS_NONE 0u
#define DP__OP_BACKENDS_ONLY(...) (0u DP__OP_BITS_(__VA_ARGS__, 4, 3, 2, 1, 0)(__VA_ARGS__))
#define DP__OP_BITS_(a, b, c, d, n, ...) DP__OP_BITS_##n
#define DP__OP_BIT(b) | (1u << DP__BACKEND_##b)
#define DP__OP_BITS_1(a) DP__OP_BIT(a)
#define DP__OP_BITS_2(a, b) DP__OP_BIT(a) DP__OP_BIT(b)
#define DP__OP_BITS_3(a, b, c) DP__OP_BIT(a) DP__OP_BIT(b) DP__OP_BIT(c)
#define DP__OP_BITS_4(a, b, c, d) DP__OP_BIT(a) DP__OP_BIT(b) DP__OP_BIT(c) DP__OP_BIT(d)

/* For backend b's prototypes and table: S(slot, args, given) for each slot
 * of the line, `given` an integer constant expression, nonzero where the
 * line's backends include b. */
#define DP__OP_BACKEND_SLOTS(b, S, name, args, kernels, backends)                                  \
    DP__OP_SLOTS_##kernels(S, name, args, ((DP__OP_BACKENDS_##backends >> DP__BACKEND_##b) & 1u))

/* A table's entry: f where `given`, else NULL. The choice is made by the
 * compiler, so a function not given is never referenced, and one given
 * must exist or the library does not link. */
#define DP__OP_ENTRY(given, f) ((given) ? (f) : NULL)

#ifdef __cplusplus
extern "C" {
#endif

/* The ops, in the list's order: what the tape records. */
/* clang-format off */
typedef enum dp__op {
#define DP__OP_ENUM(name, args, kernels, backends, cost) DP__OP_##name,
    DP__OP_LIST(DP__OP_ENUM)
#undef DP__OP_ENUM
    DP__OP_COUNT
} dp__op;
/* clang-format on */

typedef enum dp__op_cost {
    DP__COST_NONE,
    DP__COST_ELEMENTS,
    DP__COST_CONV,
    DP__COST_CONV_TRANSPOSE,
    DP__COST_MATMUL,
} dp__op_cost;

/* "conv2d": the op's name in the list. */
const char *dp__op_name(dp__op op);
/* How dp_model_summary counts the op's FLOPs. */
dp__op_cost dp__op_cost_rule(dp__op op);

#ifdef __cplusplus
}
#endif

#endif
