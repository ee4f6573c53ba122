/* Elementwise kernels and layout copies on the CPU. The ops run as oneDNN
 * primitives (eltwise forward and backward, binary add) over the tensor
 * seen as a vector of n values, in f32 or bf16: oneDNN vectorises them for
 * the CPU it finds (AVX-512 and AVX512-BF16 conversions where there are),
 * which a portable build of our own loops cannot. Where oneDNN has no
 * kernel for the type (bf16 on a CPU without AVX-512), and on a device's
 * communication path (whose worker shares the device's primitive cache,
 * which only the device's own worker may touch), plain loops run them,
 * loading bf16 as f32 and rounding on the store; sigmoid and tanh there go
 * through the f32 primitive on converted copies. */
#include "core/bf16.h"
#include "device/cpu/cpu.h"

#include <string.h>

#define PAR_MIN 32768

typedef enum elt_kind { ELT_FORWARD, ELT_BACKWARD, ELT_BINARY_ADD, ELT_BINARY_ADD_RELU } elt_kind;

/* One primitive per (kind, function, length, type): the tensor seen as a
 * vector of n values (any shape and layout: the op is elementwise). */
typedef struct act_key {
    int kind;
    dnnl_alg_kind_t alg;
    int64_t n;
    dnnl_data_type_t type;
    float alpha;
} act_key;

/* The memory objects of an elementwise primitive. Forward: A = src, OUT =
 * dst. Backward (from dst, the saved output): A = diff_dst, B = dst, OUT =
 * diff_src. Add: A and B the sources. */
enum { MEM_A, MEM_B, MEM_OUT };

/* The primitive descriptor of k, or DP_ENOTSUP when oneDNN has none for
 * its type here. */
static int act_pd(dp__cpu *cpu, const void *key, dnnl_primitive_desc_t *pd, dnnl_memory_desc_t *mds,
                  int *n)
{
    const act_key *k = key;
    dnnl_memory_desc_t *md = &mds[MEM_A];
    dnnl_dims_t dims = {k->n};
    dnnl_memory_desc_init_by_tag(md, 1, dims, k->type, dnnl_a);
    mds[MEM_B] = mds[MEM_OUT] = *md;
    *n = 3;
    if (k->kind == ELT_BINARY_ADD || k->kind == ELT_BINARY_ADD_RELU) {
        /* the ReLU after the sum as the binary primitive's post-op */
        dnnl_binary_desc_t bdesc;
        dnnl_primitive_attr_t attr = NULL;
        dnnl_post_ops_t ops = NULL;
        dnnl_status_t st = dnnl_binary_desc_init(&bdesc, dnnl_binary_add, md, md, md);
        if (st == dnnl_success && k->kind == ELT_BINARY_ADD_RELU &&
            (st = dnnl_primitive_attr_create(&attr)) == dnnl_success &&
            (st = dnnl_post_ops_create(&ops)) == dnnl_success &&
            (st = dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_relu, 0, 0)) == dnnl_success)
            st = dnnl_primitive_attr_set_post_ops(attr, ops);
        int rc = st == dnnl_success
                     ? dp__cpu_pass_pd(cpu, &bdesc, NULL, attr, k->type, "binary", pd)
                     : DP_EDEVICE;
        if (ops)
            dnnl_post_ops_destroy(ops);
        if (attr)
            dnnl_primitive_attr_destroy(attr);
        if (st != dnnl_success)
            DP_ERROR("oneDNN: cannot describe a binary add: status %d", (int)st);
        return rc;
    }
    dnnl_eltwise_desc_t fdesc, bdesc;
    DP_DNNL_CHECK(
        dnnl_eltwise_forward_desc_init(&fdesc, dnnl_forward_training, k->alg, md, k->alpha, 0));
    if (k->kind == ELT_BACKWARD)
        DP_DNNL_CHECK(dnnl_eltwise_backward_desc_init(&bdesc, k->alg, md, md, k->alpha, 0));
    return dp__cpu_pass_pd(cpu, &fdesc, k->kind == ELT_BACKWARD ? &bdesc : NULL, NULL, k->type,
                           "elementwise", pd);
}

/* The primitive's key for op a; false for an op with none (copy). */
static bool key_of(const dp__eltwise_args *a, act_key *k)
{
    memset(k, 0, sizeof *k);
    k->n = a->n;
    k->type = dp__cpu_dnnl_type(a->dtype);
    switch (a->op) {
    case DP__ELT_RELU:
        k->kind = ELT_FORWARD, k->alg = dnnl_eltwise_relu;
        return true;
    case DP__ELT_RELU_BACKWARD:
        k->kind = ELT_BACKWARD, k->alg = dnnl_eltwise_relu_use_dst_for_bwd;
        return true;
    case DP__ELT_SIGMOID:
    case DP__ELT_SIGMOID_BACKWARD:
        k->kind = a->op == DP__ELT_SIGMOID ? ELT_FORWARD : ELT_BACKWARD;
        k->alg = dnnl_eltwise_logistic_use_dst_for_bwd;
        return true;
    case DP__ELT_TANH:
    case DP__ELT_TANH_BACKWARD:
        k->kind = a->op == DP__ELT_TANH ? ELT_FORWARD : ELT_BACKWARD;
        k->alg = dnnl_eltwise_tanh_use_dst_for_bwd;
        return true;
    case DP__ELT_SCALE:
        k->kind = ELT_FORWARD, k->alg = dnnl_eltwise_linear, k->alpha = a->alpha;
        return true;
    case DP__ELT_ADD:
    case DP__ELT_ACCUMULATE:
        k->kind = ELT_BINARY_ADD;
        return true;
    case DP__ELT_ADD_RELU:
        k->kind = ELT_BINARY_ADD_RELU;
        return true;
    default:
        return false;
    }
}

/* Runs a through its primitive; *done false when there is none here. */
static int run_primitive(const dp__eltwise_args *a, dp__cpu *cpu, bool *done)
{
    act_key k;
    dp__cpu_primitive *c = NULL;
    *done = false;
    if (!key_of(a, &k))
        return 0;
    DP_TRY(dp__cpu_primitive_get(cpu, &k, sizeof k, act_pd, &c));
    if (!c)
        return 0;
    *done = true;
    if (k.kind == ELT_BINARY_ADD || k.kind == ELT_BINARY_ADD_RELU) {
        /* accumulate: out = out + a, in place on the first source */
        bool acc = a->op == DP__ELT_ACCUMULATE;
        const dp__cpu_arg args[] = {{DNNL_ARG_SRC_0, MEM_A, acc ? a->out : a->a},
                                    {DNNL_ARG_SRC_1, MEM_B, acc ? a->a : a->b},
                                    {DNNL_ARG_DST, MEM_OUT, a->out}};
        return dp__cpu_primitive_run(cpu, c, args, 3);
    }
    if (k.kind == ELT_BACKWARD) {
        const dp__cpu_arg args[] = {{DNNL_ARG_DIFF_DST, MEM_A, a->a},
                                    {DNNL_ARG_DST, MEM_B, a->b},
                                    {DNNL_ARG_DIFF_SRC, MEM_OUT, a->out}};
        return dp__cpu_primitive_run(cpu, c, args, 3);
    }
    const dp__cpu_arg args[] = {{DNNL_ARG_SRC, MEM_A, a->a}, {DNNL_ARG_DST, MEM_OUT, a->out}};
    return dp__cpu_primitive_run(cpu, c, args, 2);
}

/* Sigmoid and tanh in bf16 where oneDNN has no bf16 eltwise: its f32
 * primitive on converted copies, a and b to f32, out back to bf16. */
static int run_activation_via_f32(const dp__eltwise_args *a, dp__cpu *cpu)
{
    bool backward = a->op == DP__ELT_SIGMOID_BACKWARD || a->op == DP__ELT_TANH_BACKWARD;
    float *fa = dp__cpu_scratch(cpu, 0, (size_t)a->n * sizeof(float));
    float *fb = backward ? dp__cpu_scratch(cpu, 1, (size_t)a->n * sizeof(float)) : NULL;
    if (!fa || (backward && !fb))
        return DP_ENOMEM;
    dp__cpu_f32_from_bf16(fa, a->a, a->n);
    if (fb)
        dp__cpu_f32_from_bf16(fb, a->b, a->n);
    dp__eltwise_args f = *a;
    f.a = fa;
    f.b = fb;
    f.out = fa; /* in place: oneDNN's eltwise allows it */
    f.dtype = DP_F32;
    bool done;
    DP_TRY(run_primitive(&f, cpu, &done));
    DP_ASSERT(done);
    dp__cpu_bf16_from_f32(a->out, fa, a->n);
    return 0;
}

/* The loops of the simple ops over elements of type T, read through LOAD
 * into float and written through STORE. */
#define ELTWISE_LOOPS(T, LOAD, STORE)                                                              \
    do {                                                                                           \
        const T *x = a->a, *y = a->b;                                                              \
        T *out = a->out;                                                                           \
        switch (a->op) {                                                                           \
        case DP__ELT_RELU:                                                                         \
            _Pragma("omp parallel for simd if (n > PAR_MIN)") for (int64_t i = 0; i < n; i++)      \
                out[i] = STORE(LOAD(x[i]) > 0.0f ? LOAD(x[i]) : 0.0f);                             \
            break;                                                                                 \
        case DP__ELT_RELU_BACKWARD:                                                                \
            _Pragma("omp parallel for simd if (n > PAR_MIN)") for (int64_t i = 0; i < n; i++)      \
                out[i] = STORE(LOAD(y[i]) > 0.0f ? LOAD(x[i]) : 0.0f);                             \
            break;                                                                                 \
        case DP__ELT_ADD:                                                                          \
            _Pragma("omp parallel for simd if (n > PAR_MIN)") for (int64_t i = 0; i < n; i++)      \
                out[i] = STORE(LOAD(x[i]) + LOAD(y[i]));                                           \
            break;                                                                                 \
        case DP__ELT_ACCUMULATE:                                                                   \
            _Pragma("omp parallel for simd if (n > PAR_MIN)") for (int64_t i = 0; i < n; i++)      \
                out[i] = STORE(LOAD(out[i]) + LOAD(x[i]));                                         \
            break;                                                                                 \
        case DP__ELT_ADD_RELU:                                                                     \
            _Pragma("omp parallel for simd if (n > PAR_MIN)") for (int64_t i = 0; i < n; i++)      \
                out[i] = STORE(LOAD(x[i]) + LOAD(y[i]) > 0.0f ? LOAD(x[i]) + LOAD(y[i]) : 0.0f);   \
            break;                                                                                 \
        case DP__ELT_SCALE:                                                                        \
            _Pragma("omp parallel for simd if (n > PAR_MIN)") for (int64_t i = 0; i < n; i++)      \
                out[i] = STORE(alpha * LOAD(x[i]));                                                \
            break;                                                                                 \
        case DP__ELT_COPY:                                                                         \
            if (out != x)                                                                          \
                memcpy(out, x, (size_t)n * sizeof(T));                                             \
            break;                                                                                 \
        default:                                                                                   \
            DP_ASSERT(0);                                                                          \
        }                                                                                          \
    } while (0)

#define F32_SAME(v) (v)

static int run_eltwise(void *p, void *ctx)
{
    dp__eltwise_args *a = p;
    dp_device_t *dev = ctx;
    float alpha = a->alpha;
    int64_t n = a->n;
    if (n == 0)
        return 0;
    bool activation = a->op >= DP__ELT_SIGMOID && a->op <= DP__ELT_TANH_BACKWARD;
    if (!dev->comm_of && a->op != DP__ELT_COPY) {
        bool done;
        DP_TRY(run_primitive(a, dev->impl, &done));
        if (done)
            return 0;
        if (activation)
            return run_activation_via_f32(a, dev->impl);
    }
    DP_ASSERT(!activation); /* never on a communication path */
    if (a->dtype == DP_BF16)
        ELTWISE_LOOPS(dp__bf16, dp__bf16_to_f32, dp__bf16_from_f32);
    else
        ELTWISE_LOOPS(float, F32_SAME, F32_SAME);
    return 0;
}

int dp__cpu_eltwise(dp_device_t *dev, const dp__eltwise_args *a)
{
    /* Named by op for DP_PROFILE: the elementwise sweeps are where a
     * network's time outside its kernels goes. */
    static const char *const names[] = {"eltwise.c:relu",    "eltwise.c:relu_backward",
                                        "eltwise.c:add",     "eltwise.c:accumulate",
                                        "eltwise.c:scale",   "eltwise.c:copy",
                                        "eltwise.c:sigmoid", "eltwise.c:sigmoid_backward",
                                        "eltwise.c:tanh",    "eltwise.c:tanh_backward",
                                        "eltwise.c:add_relu"};
    _Static_assert(DP_COUNTOF(names) == DP__ELT_ADD_RELU + 1, "a name for every op");
    dp__stream_push_named(dev->stream, run_eltwise, names[a->op], a, sizeof *a);
    return 0;
}

/* The NHWC <-> NCHW copy of src into dst, elements of type T. */
#define RELAYOUT(T)                                                                                \
    do {                                                                                           \
        const T *src = a->src.data;                                                                \
        T *dst = a->dst.data;                                                                      \
        if (a->src.nhwc) {                                                                         \
            _Pragma(                                                                               \
                "omp parallel for if (N * C * HW > PAR_MIN)") for (int64_t n = 0; n < N;           \
                                                                   n++) for (int64_t c = 0; c < C; \
                                                                             c++) for (int64_t i = \
                                                                                           0;      \
                                                                                       i < HW;     \
                                                                                       i++)        \
                dst[(n * C + c) * HW + i] = src[(n * HW + i) * C + c];                             \
        } else {                                                                                   \
            _Pragma(                                                                               \
                "omp parallel for if (N * C * HW > PAR_MIN)") for (int64_t n = 0; n < N;           \
                                                                   n++) for (int64_t i = 0;        \
                                                                             i < HW;               \
                                                                             i++) for (int64_t c = \
                                                                                           0;      \
                                                                                       c < C; c++) \
                dst[(n * HW + i) * C + c] = src[(n * C + c) * HW + i];                             \
        }                                                                                          \
    } while (0)

static int run_relayout(void *p, void *ctx)
{
    dp__relayout_args *a = p;
    (void)ctx;
    int64_t N = a->src.shape[0], C = a->src.shape[1], HW = a->src.shape[2] * a->src.shape[3];
    if (a->src.dtype == DP_BF16)
        RELAYOUT(dp__bf16);
    else
        RELAYOUT(float);
    return 0;
}

int dp__cpu_relayout(dp_device_t *dev, const dp__relayout_args *a)
{
    DP_ASSERT(a->src.ndim == 4 && a->src.nhwc != a->dst.nhwc && a->src.dtype == a->dst.dtype);
    return dp__cpu_push(dev, run_relayout, a, sizeof *a);
}
