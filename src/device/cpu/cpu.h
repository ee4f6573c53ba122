/* The CPU device: a worker thread (the stream) whose kernels run on its own
 * OpenMP team of dev->threads threads. oneDNN (built on OpenMP in Debian)
 * runs convolution and pooling on that same team, and matrix products go
 * through oneDNN's sgemm, so one thread pool serves everything and no
 * second pool (OpenBLAS's) competes for the cores. */
#ifndef DP_DEVICE_CPU_H
#define DP_DEVICE_CPU_H

#include "core/internal.h"
#include "device/device.h"

#include <dnnl.h>

#define DP_DNNL_CHECK(call)                                                                        \
    do {                                                                                           \
        dnnl_status_t dp__st = (call);                                                             \
        if (dp__st != dnnl_success) {                                                              \
            DP_ERROR("oneDNN: %s failed: status %d", #call, (int)dp__st);                          \
            return DP_EDEVICE;                                                                     \
        }                                                                                          \
    } while (0)

/* Primitives are made once per shape and kept here. Only the worker thread
 * touches the cache. */
typedef struct dp__cpu_prim {
    unsigned char key[192]; /* a convolution's key is the largest */
    size_t key_size;
    void *value;
    void (*destroy)(void *value);
} dp__cpu_prim;

/* Scratch buffers of the worker's kernels (bf16 conversions, im2col):
 * each slot grows to the largest size asked for and is kept. Slots 0-2
 * hold f32 copies of bf16 activations (inputs, output), 3-5 the
 * convolutions' reordered weights and activations, 6 rounded weights of
 * the reference bf16 path. The communication path's worker shares the
 * device's dp__cpu and must not use them. */
#define DP__CPU_SCRATCH_SLOTS 7

typedef struct dp__cpu {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    dp__cpu_prim *prims;
    size_t nprims, cap_prims;
    int threads;
    struct {
        void *p;
        size_t bytes;
    } scratch[DP__CPU_SCRATCH_SLOTS];
} dp__cpu;

/* Scratch slot `slot` (0 .. DP__CPU_SCRATCH_SLOTS-1) of at least `bytes`,
 * 64-byte aligned, or NULL (logged) when memory runs out. Worker only; the
 * memory stays valid until the same slot is asked for more. */
void *dp__cpu_scratch(dp__cpu *cpu, int slot, size_t bytes);

/* The cached value for `key`, or NULL. */
void *dp__cpu_prim_find(dp__cpu *cpu, const void *key, size_t key_size);
/* Stores `value` under `key` (taking ownership). */
int dp__cpu_prim_put(dp__cpu *cpu, const void *key, size_t key_size, void *value,
                     void (*destroy)(void *value));
/* A destroy function for values the cache does not own (marks). */
void dp__cpu_destroy_nothing(void *value);

/* Enqueues `fn(args, dev)` on the device's worker, named for DP_PROFILE by
 * its file and function. */
#define dp__cpu_push(dev, fn, args, size)                                                          \
    (dp__stream_push_named((dev)->stream, fn, __FILE__ ":" #fn, args, size), 0)

/* A kernel entry of the op list (dp__cpu_<slot>): enqueues the command
 * `fn` with a copy of the argument struct. */
#define DP__CPU_ENTRY(slot, args_type, fn)                                                         \
    int dp__cpu_##slot(dp_device_t *dev, const args_type *a)                                       \
    {                                                                                              \
        return dp__cpu_push(dev, fn, a, sizeof *a);                                                \
    }

/* The forward and backward entries of an op (dp__cpu_<name>_forward and
 * _backward) whose passes are one function run(args, dev, backward): each
 * enqueues it, with backward 0 or 1. */
#define DP__CPU_PASSES(name, args_type, run)                                                       \
    static int run_forward(void *p, void *ctx)                                                     \
    {                                                                                              \
        return run(p, ctx, 0);                                                                     \
    }                                                                                              \
    static int run_backward(void *p, void *ctx)                                                    \
    {                                                                                              \
        return run(p, ctx, 1);                                                                     \
    }                                                                                              \
    DP__CPU_ENTRY(name##_forward, args_type, run_forward)                                          \
    DP__CPU_ENTRY(name##_backward, args_type, run_backward)

/* A oneDNN primitive of a kernel, as dp__cpu_primitive_get makes and caches
 * it: the primitive, memory objects for the descriptions its pd function
 * gave (mem[i]; each execution points them at the call's tensors with
 * dnnl_memory_set_data_handle), and its workspace, when it has one. */
#define DP__CPU_PRIM_MEMS 10
typedef struct dp__cpu_primitive {
    dnnl_primitive_t prim;
    dnnl_memory_t mem[DP__CPU_PRIM_MEMS];
    dnnl_memory_t ws; /* NULL: no workspace */
    size_t ws_bytes;
} dp__cpu_primitive;
/* Makes the primitive descriptor for a cache key (*pd), and the memory
 * descriptions mds[0..*n) of the memory objects the kernel executes it
 * with; DP_ENOTSUP when oneDNN has no kernel for the key's type here. */
typedef int (*dp__cpu_pd_fn)(dp__cpu *cpu, const void *key, dnnl_primitive_desc_t *pd,
                             dnnl_memory_desc_t *mds, int *n);
/* The cached primitive for `key` (zero it before filling it: its bytes are
 * compared), made through make_pd the first time: *out, or NULL (and 0)
 * when make_pd says DP_ENOTSUP, the caller then converting to f32. */
int dp__cpu_primitive_get(dp__cpu *cpu, const void *key, size_t key_size, dp__cpu_pd_fn make_pd,
                          dp__cpu_primitive **out);
/* The primitive descriptor of one pass: of fwd_desc (a oneDNN op
 * descriptor such as dnnl_pooling_v2_desc_t, with attr, which may be NULL),
 * or, when bwd_desc is given, of bwd_desc with that forward one as its
 * hint. A pass of a `type` other than f32 that oneDNN lacks here is
 * DP_ENOTSUP, not logged; other failures are logged, naming `what`. */
int dp__cpu_pass_pd(dp__cpu *cpu, const void *fwd_desc, const void *bwd_desc,
                    const_dnnl_primitive_attr_t attr, dnnl_data_type_t type, const char *what,
                    dnnl_primitive_desc_t *pd);

/* One argument of a primitive's execution: oneDNN's name for it
 * (DNNL_ARG_SRC, ...), the primitive's memory object that carries it
 * (mem[i], or DP__CPU_WORKSPACE for its workspace), and the data that
 * object points at this time. */
#define DP__CPU_WORKSPACE (-1)
typedef struct dp__cpu_arg {
    int name, mem;
    const void *data;
} dp__cpu_arg;
/* Executes c on cpu's stream with args[0..n), each memory object pointed
 * at its data first; a workspace argument is left out where c has none. */
int dp__cpu_primitive_run(dp__cpu *cpu, const dp__cpu_primitive *c, const dp__cpu_arg *args, int n);

/* The cache key of a kernel over channels (prelu, softmax): its pass and x
 * (N, C, HW) in its layout (dp__channel_view). No padding: keys are
 * compared byte for byte. */
typedef struct dp__cpu_channel_key {
    int backward, nhwc;
    int64_t N, C, HW;
} dp__cpu_channel_key;
/* *k for x and the pass. */
void dp__cpu_channel_key_init(dp__cpu_channel_key *k, const dp__tdesc *x, int backward);
/* x as such a kernel gives it to oneDNN: f32 (N, C, HW) with the strides
 * of its layout. */
int dp__cpu_channel_md(dnnl_memory_desc_t *md, const dp__cpu_channel_key *k);

/* A oneDNN memory descriptor of a tensor: 4-D as nchw or nhwc, else row-major. */
void dp__cpu_md(dnnl_memory_desc_t *md, const dp__tdesc *t);
/* oneDNN's data type for a dtype. */
dnnl_data_type_t dp__cpu_dnnl_type(dp_dtype dtype);

/* A matrix product C (m x n) = alpha A (m x k) B (k x n) [+ bias (1 x n),
 * f32] [+ beta C] [then ReLU], each matrix with its own strides (row, then
 * column: a transposed operand is a stride, not a copy) and type, on
 * oneDNN's matmul (matmul.c), its primitive cached per description. Zero
 * the description (memset) before filling it: it is the cache's key. */
typedef struct dp__cpu_matmul {
    int64_t m, n, k;
    int64_t a_strides[2], b_strides[2], c_strides[2];
    dnnl_data_type_t a_type, b_type, c_type;
    int bias, relu;
    float alpha, beta;
} dp__cpu_matmul;
int dp__cpu_matmul_run(dp__cpu *cpu, const dp__cpu_matmul *mm, const void *a, const void *b,
                       void *c, const float *bias);

/* Bulk conversions (convert.c), on the worker's team when large: bf16 from
 * f32 rounding to nearest even, f32 from bf16 (exact), and f32 rounded to
 * the nearest bf16 kept as f32 (the reference path's operands). */
void dp__cpu_bf16_from_f32(void *dst, const float *src, int64_t n);
void dp__cpu_f32_from_bf16(float *dst, const void *src, int64_t n);
void dp__cpu_round_bf16(float *dst, const float *src, int64_t n);
/* For a kernel that runs its f32 version on bf16 tensors: t[i] (i < n, at
 * most DP__CPU_SCRATCH_SLOTS) whose bit i is set in inputs or outputs gets
 * f32 scratch slot i in place of its memory, the inputs' values converted
 * into it (the caller converts the outputs back). */
int dp__cpu_descs_as_f32(dp__cpu *cpu, dp__tdesc *const *t, int n, unsigned inputs,
                         unsigned outputs);
/* A tensor's values as f32: its own memory when it is f32, else converted
 * into scratch `slot`; NULL when that memory cannot be had. */
const float *dp__cpu_as_f32(dp__cpu *cpu, int slot, const dp__tdesc *t);

/* Batch normalisation's training passes, summed in double
 * (batch_norm_train.c): the batch statistics into save_mean, save_var and
 * the running ones; dx, dgamma and dbeta (dx alone when a->totals gives the
 * group's sums); and the sums kernels' shard sums into a->sums (the
 * backward ones with dgamma and dbeta). */
int dp__cpu_bn_statistics(const dp__batch_norm_args *a);
int dp__cpu_bn_train_backward(const dp__batch_norm_args *a);
int dp__cpu_bn_sums(const dp__batch_norm_args *a, bool backward);

/* Kernel entries, one file per op family: dp__cpu_<slot> for the slots of
 * the op list (device/op_list.h), e.g.
 *   int dp__cpu_conv2d_forward(dp_device_t *dev, const dp__conv2d_args *a);
 * declared for every slot; those of the lines that give the CPU the op are
 * defined, and the table (cpu_device.c) takes them. */
/* clang-format off */
#define DP__CPU_KERNEL(slot, args, given) int dp__cpu_##slot(dp_device_t *dev, const args *a);
#define DP__CPU_LINE(name, args, kernels, backends, cost) \
    DP__OP_BACKEND_SLOTS(cpu, DP__CPU_KERNEL, name, args, kernels, backends)
DP__OP_LIST(DP__CPU_LINE)
#undef DP__CPU_LINE
#undef DP__CPU_KERNEL
/* clang-format on */

/* The CPU's key of a convolution kernel choice (choice_key.c). */
int dp__cpu_choice_key(char *buf, size_t size);

#endif
