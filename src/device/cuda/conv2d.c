/* Convolution on a GPU through cuDNN, as src/device/cpu/conv2d.c.
 *
 * cuDNN runs every convolution in one consistent layout, NHWC activations
 * and NHWC (K, R, S, C) filters, the layout its tensor-core kernels (TF32)
 * take: activations arrive NHWC from the previous layer (the op layer makes
 * convolution outputs NHWC), a user's NCHW input with one channel is the
 * same bytes, and anything else is rearranged into scratch first. Weights
 * live in logical (K, C, R, S) in the parameter buffer; each call rearranges
 * them into scratch (and the weight gradient back), as the CPU device
 * reorders them for oneDNN. The bias, its gradient and the fused ReLU are
 * our kernels (eltwise.cu).
 *
 * Algorithms come from cuDNN's heuristics, once per shape, kept in a small
 * cache on the worker; a candidate that turns out not to run on this GPU
 * (any status of the CUDNN_STATUS_NOT_SUPPORTED category) is dropped for the
 * next one. The workspace is sized for the largest candidate, so that such
 * a fallback fits; where the GPU has no memory for that, for the first
 * candidate whose own workspace fits, down to the algorithms that need none
 * at the end of every list. TF32: cuDNN's default math allows it,
 * CUDNN_FMA_MATH forbids it (dp_set_tf32). */
#include "device/cuda/cuda.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

enum { CONV_FWD, CONV_BWD_DATA, CONV_BWD_WEIGHTS, CONV_KINDS };

/* Room for every algorithm cuDNN has of one kind (8 at most) plus the
 * fallbacks rank_algos appends. */
#define MAX_CANDIDATES 12

typedef struct conv_key {
    int kind, tf32;
    int64_t x[4], w[4];
    int stride_h, stride_w, pad_h, pad_w;
} conv_key;

struct dp__cuda_conv_algo {
    conv_key key;
    int algos[MAX_CANDIDATES]; /* cuDNN's algorithm numbers, best first; those
                                  found not to run here are removed */
    int count;
    /* The workspace that fitted after the largest one did not (SIZE_MAX
     * until then), so later calls do not free and fail again each time. */
    size_t ws_cap;
};

static const float one = 1.0f, zero = 0.0f;

/* cuDNN 9 reports "not supported" as one of several codes, 3000 and its
 * sub-codes 3001-3014 (..._SHAPE, ..._LAYOUT, ..._SHARED_MEMORY_INSUFFICIENT
 * ...). Comparing with CUDNN_STATUS_NOT_SUPPORTED alone would turn "this
 * algorithm does not run here, try the next" into a hard error; the
 * category macro (cuDNN 9) takes them all. */
static bool not_supported(cudnnStatus_t st)
{
#ifdef CUDNN_STATUS_CATEGORY
    return CUDNN_STATUS_CATEGORY(st) == CUDNN_STATUS_NOT_SUPPORTED;
#else
    return st == CUDNN_STATUS_NOT_SUPPORTED;
#endif
}

void dp__cuda_conv_cache_free(dp__cuda *cu)
{
    dp__free(cu->algos);
    cu->algos = NULL;
    cu->nalgos = cu->cap_algos = 0;
}

/* The descriptors of one call, all NHWC. */
typedef struct conv_descs {
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
} conv_descs;

static void descs_destroy(conv_descs *d)
{
    if (d->x)
        cudnnDestroyTensorDescriptor(d->x);
    if (d->y)
        cudnnDestroyTensorDescriptor(d->y);
    if (d->w)
        cudnnDestroyFilterDescriptor(d->w);
    if (d->conv)
        cudnnDestroyConvolutionDescriptor(d->conv);
}

static int64_t out_size(int64_t in, int pad, int64_t k, int stride)
{
    return (in + 2 * pad - k) / stride + 1;
}

static int descs_init(conv_descs *d, const conv_key *k)
{
    memset(d, 0, sizeof *d);
    int N = (int)k->x[0], C = (int)k->x[1], H = (int)k->x[2], W = (int)k->x[3];
    int K = (int)k->w[0], R = (int)k->w[2], S = (int)k->w[3];
    int P = (int)out_size(H, k->pad_h, R, k->stride_h);
    int Q = (int)out_size(W, k->pad_w, S, k->stride_w);
    DP_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d->x));
    DP_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d->y));
    DP_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d->w));
    DP_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d->conv));
    DP_CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, N, C, H, W));
    DP_CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(d->y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, N, K, P, Q));
    DP_CUDNN_CHECK(
        cudnnSetFilter4dDescriptor(d->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, K, C, R, S));
    DP_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(d->conv, k->pad_h, k->pad_w, k->stride_h,
                                                   k->stride_w, 1, 1, CUDNN_CROSS_CORRELATION,
                                                   CUDNN_DATA_FLOAT));
    DP_CUDNN_CHECK(
        cudnnSetConvolutionMathType(d->conv, k->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    return 0;
}

/* Appends `algo` unless it is a candidate already or the list is full. */
static void add_candidate(dp__cuda_conv_algo *e, int algo)
{
    for (int i = 0; i < e->count; i++)
        if (e->algos[i] == algo)
            return;
    if (e->count < MAX_CANDIDATES)
        e->algos[e->count++] = algo;
}

/* cuDNN's heuristic ranking for this convolution, those it says run, then
 * plain algorithms as the last resort: IMPLICIT_GEMM for the forward pass
 * and ALGO_0 for the two backward ones need no workspace at all, so one of
 * them fits whatever memory is left (ALGO_0 sums with atomics, hence the
 * deterministic ALGO_1 before it). A heuristic query that answers "not
 * supported" (any sub-code) leaves only the last resorts. */
static int rank_algos(dp__cuda *cu, const conv_descs *d, int kind, dp__cuda_conv_algo *e)
{
    int got = 0;
    cudnnStatus_t st;
    e->count = 0;
    if (kind == CONV_FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        st = cudnnGetConvolutionForwardAlgorithm_v7(cu->cudnn, d->x, d->w, d->conv, d->y,
                                                    CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf);
        for (int i = 0; st == CUDNN_STATUS_SUCCESS && i < got && e->count < MAX_CANDIDATES - 2; i++)
            if (perf[i].status == CUDNN_STATUS_SUCCESS)
                e->algos[e->count++] = (int)perf[i].algo;
        add_candidate(e, (int)CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM);
    } else if (kind == CONV_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        st = cudnnGetConvolutionBackwardDataAlgorithm_v7(cu->cudnn, d->w, d->y, d->conv, d->x,
                                                         CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                         &got, perf);
        for (int i = 0; st == CUDNN_STATUS_SUCCESS && i < got && e->count < MAX_CANDIDATES - 2; i++)
            if (perf[i].status == CUDNN_STATUS_SUCCESS)
                e->algos[e->count++] = (int)perf[i].algo;
        add_candidate(e, (int)CUDNN_CONVOLUTION_BWD_DATA_ALGO_1);
        add_candidate(e, (int)CUDNN_CONVOLUTION_BWD_DATA_ALGO_0);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        st = cudnnGetConvolutionBackwardFilterAlgorithm_v7(cu->cudnn, d->x, d->y, d->conv, d->w,
                                                           CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                                                           &got, perf);
        for (int i = 0; st == CUDNN_STATUS_SUCCESS && i < got && e->count < MAX_CANDIDATES - 2; i++)
            if (perf[i].status == CUDNN_STATUS_SUCCESS)
                e->algos[e->count++] = (int)perf[i].algo;
        add_candidate(e, (int)CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1);
        add_candidate(e, (int)CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0);
    }
    if (st != CUDNN_STATUS_SUCCESS && !not_supported(st)) {
        DP_ERROR("cuDNN: convolution heuristics (kind %d) failed: %s", kind,
                 cudnnGetErrorString(st));
        return DP_EDEVICE;
    }
    return 0;
}

static int lookup(dp__cuda *cu, const conv_key *k, const conv_descs *d, dp__cuda_conv_algo **out)
{
    for (size_t i = 0; i < cu->nalgos; i++) {
        if (memcmp(&cu->algos[i].key, k, sizeof *k) == 0) {
            *out = &cu->algos[i];
            return 0;
        }
    }
    if (cu->nalgos == cu->cap_algos) {
        size_t cap = cu->cap_algos ? 2 * cu->cap_algos : 32;
        dp__cuda_conv_algo *a = realloc(cu->algos, cap * sizeof *a);
        if (!a)
            return DP_ENOMEM;
        cu->algos = a;
        cu->cap_algos = cap;
    }
    dp__cuda_conv_algo *e = &cu->algos[cu->nalgos];
    memset(e, 0, sizeof *e);
    e->key = *k;
    e->ws_cap = SIZE_MAX;
    DP_TRY(rank_algos(cu, d, k->kind, e));
    cu->nalgos++;
    *out = e;
    return 0;
}

static size_t align_up(size_t b)
{
    return (b + 255) & ~(size_t)255;
}

/* A 4-D tensor as NHWC bytes: itself when it already is (or has one
 * channel), else `buf` (of the tensor's size). */
static bool is_nhwc(const dp__tdesc *t)
{
    return t->nhwc || t->shape[1] == 1;
}

static int relayout(dp__cuda *cu, const float *src, float *dst, const int64_t *shape, int src_nhwc)
{
    dp__relayout_args a = {.src = {.data = (void *)src, .ndim = 4, .nhwc = src_nhwc},
                           .dst = {.data = dst, .ndim = 4, .nhwc = !src_nhwc}};
    memcpy(a.src.shape, shape, sizeof a.src.shape);
    memcpy(a.dst.shape, shape, sizeof a.dst.shape);
    return dp__cuda_launched(dp__cuda_relayout_launch(&a, cu->stream), "conv2d relayout");
}

/* Everything one call needs: the descriptors, the algorithm entry, and the
 * NHWC buffers carved out of the worker's scratch. */
typedef struct conv_call {
    conv_key key;
    conv_descs d;
    dp__cuda_conv_algo *algo;
    float *w, *x, *y; /* NHWC views: filters (K, R, S, C), input, output */
    void *ws;
    size_t ws_bytes;
} conv_call;

/* The workspace candidate `algo` needs; a status of the not-supported
 * category (see not_supported) means the algorithm does not run for this
 * shape here, and the caller moves on rather than failing. */
static cudnnStatus_t workspace_size(dp__cuda *cu, const conv_call *c, int algo, size_t *bytes)
{
    const conv_descs *d = &c->d;
    *bytes = 0;
    if (c->key.kind == CONV_FWD)
        return cudnnGetConvolutionForwardWorkspaceSize(cu->cudnn, d->x, d->w, d->conv, d->y,
                                                       (cudnnConvolutionFwdAlgo_t)algo, bytes);
    if (c->key.kind == CONV_BWD_DATA)
        return cudnnGetConvolutionBackwardDataWorkspaceSize(
            cu->cudnn, d->w, d->y, d->conv, d->x, (cudnnConvolutionBwdDataAlgo_t)algo, bytes);
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(
        cu->cudnn, d->x, d->y, d->conv, d->w, (cudnnConvolutionBwdFilterAlgo_t)algo, bytes);
}

/* Runs candidate `algo`; its status is returned as is (not_supported()
 * tells the caller to try the next candidate). */
static cudnnStatus_t run_algo(dp__cuda *cu, const conv_call *c, int algo)
{
    const conv_descs *d = &c->d;
    if (c->key.kind == CONV_FWD)
        return cudnnConvolutionForward(cu->cudnn, &one, d->x, c->x, d->w, c->w, d->conv,
                                       (cudnnConvolutionFwdAlgo_t)algo, c->ws, c->ws_bytes, &zero,
                                       d->y, c->y);
    if (c->key.kind == CONV_BWD_DATA)
        return cudnnConvolutionBackwardData(cu->cudnn, &one, d->w, c->w, d->y, c->y, d->conv,
                                            (cudnnConvolutionBwdDataAlgo_t)algo, c->ws, c->ws_bytes,
                                            &zero, d->x, c->x);
    return cudnnConvolutionBackwardFilter(cu->cudnn, &one, d->x, c->x, d->y, c->y, d->conv,
                                          (cudnnConvolutionBwdFilterAlgo_t)algo, c->ws, c->ws_bytes,
                                          &zero, d->w, c->w);
}

/* Scratch for `buffers` bytes of NHWC copies and a workspace: that of the
 * largest candidate (so a candidate that fails at run time falls back
 * within the call), capped at what fitted before. Where cudaMalloc has no
 * memory for it, a failure here would end training although cheaper
 * algorithms exist: take instead the first candidate, in order of
 * preference, whose own workspace fits. Sets c->ws_bytes; execute skips
 * the candidates that need more. */
static int alloc_scratch(dp__cuda *cu, conv_call *c, size_t buffers, char **base)
{
    dp__cuda_conv_algo *e = c->algo;
    size_t ws_of[MAX_CANDIDATES], ws = 0;
    for (int i = 0; i < e->count; i++) {
        cudnnStatus_t st = workspace_size(cu, c, e->algos[i], &ws_of[i]);
        if (st != CUDNN_STATUS_SUCCESS && !not_supported(st)) {
            DP_ERROR("cuDNN: convolution workspace size (kind %d, algorithm %d) failed: %s",
                     c->key.kind, e->algos[i], cudnnGetErrorString(st));
            return DP_EDEVICE;
        }
        if (st != CUDNN_STATUS_SUCCESS) /* does not run here: execute drops it */
            ws_of[i] = SIZE_MAX;
        else if (ws_of[i] <= e->ws_cap && ws_of[i] > ws)
            ws = ws_of[i];
    }
    int rc = dp__cuda_scratch_try(cu, buffers + align_up(ws) + 256, (void **)base);
    size_t failed = ws;
    for (int i = 0; rc == DP_ENOMEM && i < e->count; i++) {
        if (ws_of[i] >= failed)
            continue;
        rc = dp__cuda_scratch_try(cu, buffers + align_up(ws_of[i]) + 256, (void **)base);
        if (rc == DP_ENOMEM) {
            failed = ws_of[i];
        } else if (rc == 0) {
            static atomic_int said;
            if (atomic_fetch_add(&said, 1) == 0)
                DP_WARN("cuda:%d: no GPU memory for a %zu-byte convolution workspace; using "
                        "cuDNN algorithm %d with %zu bytes instead",
                        cu->ordinal, ws, e->algos[i], ws_of[i]);
            ws = e->ws_cap = ws_of[i];
        }
    }
    if (rc == DP_ENOMEM)
        DP_ERROR("cuda:%d: out of GPU memory for a convolution (%zu bytes without workspace)",
                 cu->ordinal, buffers);
    if (rc < 0)
        return rc;
    c->ws_bytes = ws;
    return 0;
}

/* Sets up `c` for `a`: key, descriptors, algorithm, and scratch holding the
 * NHWC buffers that the tensors' own memory cannot serve. `xt`/`yt` are
 * the activation-side tensors of this kind (x or dx, y or dy) and `wt` the
 * weights or their gradient. */
static int prepare(dp__cuda *cu, conv_call *c, int kind, const dp__conv2d_args *a,
                   const dp__tdesc *xt, const dp__tdesc *yt, const dp__tdesc *wt)
{
    memset(&c->key, 0, sizeof c->key);
    c->key.kind = kind;
    c->key.tf32 = dp__cuda_tf32();
    memcpy(c->key.x, a->x.shape, sizeof c->key.x);
    memcpy(c->key.w, a->w.shape, sizeof c->key.w);
    c->key.stride_h = a->stride_h;
    c->key.stride_w = a->stride_w;
    c->key.pad_h = a->pad_h;
    c->key.pad_w = a->pad_w;
    DP_TRY(descs_init(&c->d, &c->key));
    DP_TRY(lookup(cu, &c->key, &c->d, &c->algo));
    size_t wb = align_up((size_t)dp__numel(4, wt->shape) * sizeof(float));
    size_t xb = is_nhwc(xt) ? 0 : align_up((size_t)dp__numel(4, xt->shape) * sizeof(float));
    size_t yb = is_nhwc(yt) ? 0 : align_up((size_t)dp__numel(4, yt->shape) * sizeof(float));
    bool w_direct = wt->shape[1] == 1; /* (K, 1, R, S) is (K, R, S, 1) */
    if (w_direct)
        wb = 0;
    char *base;
    DP_TRY(alloc_scratch(cu, c, wb + xb + yb, &base));
    c->w = w_direct ? wt->data : (float *)base;
    c->x = xb ? (float *)(base + wb) : xt->data;
    c->y = yb ? (float *)(base + wb + xb) : yt->data;
    c->ws = c->ws_bytes ? base + wb + xb + yb : NULL;
    return 0;
}

/* Runs the convolution with the first candidate that fits this call's
 * workspace, moving on where cuDNN says one does not run here (that one is
 * dropped for good; one that needs more workspace is only skipped, since
 * another call may have the memory for it). */
static int execute(dp__cuda *cu, conv_call *c)
{
    dp__cuda_conv_algo *e = c->algo;
    for (int i = 0; i < e->count;) {
        int algo = e->algos[i];
        size_t need = 0;
        cudnnStatus_t st = workspace_size(cu, c, algo, &need);
        if (st == CUDNN_STATUS_SUCCESS && need > c->ws_bytes) {
            i++;
            continue;
        }
        if (st == CUDNN_STATUS_SUCCESS)
            st = run_algo(cu, c, algo);
        if (st == CUDNN_STATUS_SUCCESS)
            return 0;
        /* Any sub-code of "not supported", not only 3000 itself. */
        if (!not_supported(st)) {
            DP_ERROR("cuDNN: convolution (kind %d, algorithm %d) failed: %s", c->key.kind, algo,
                     cudnnGetErrorString(st));
            return DP_EDEVICE;
        }
        memmove(&e->algos[i], &e->algos[i + 1], (size_t)(e->count - i - 1) * sizeof e->algos[0]);
        e->count--;
    }
    DP_ERROR("cuDNN: no convolution algorithm runs for this shape here (kind %d, %zu bytes of "
             "workspace)",
             c->key.kind, c->ws_bytes);
    return DP_EDEVICE;
}

static int run_forward(void *p, void *ctx)
{
    dp__conv2d_args *a = p;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    conv_call c;
    int rc = prepare(cu, &c, CONV_FWD, a, &a->x, &a->y, &a->w);
    if (rc == 0 && c.w != a->w.data)
        rc = relayout(cu, a->w.data, c.w, a->w.shape, 0);
    if (rc == 0 && c.x != a->x.data)
        rc = relayout(cu, a->x.data, c.x, a->x.shape, 0);
    if (rc == 0)
        rc = execute(cu, &c);
    int64_t rows = a->y.shape[0] * a->y.shape[2] * a->y.shape[3], K = a->y.shape[1];
    if (rc == 0 && a->b.data)
        rc = dp__cuda_launched(dp__cuda_bias_add_launch(c.y, a->b.data, rows, K, cu->stream),
                               "conv2d bias");
    if (rc == 0 && a->fuse_relu)
        rc = dp__cuda_launched(
            dp__cuda_eltwise_launch(
                &(dp__eltwise_args){.op = DP__ELT_RELU, .a = c.y, .out = c.y, .n = rows * K},
                cu->stream),
            "conv2d relu");
    if (rc == 0 && c.y != a->y.data)
        rc = relayout(cu, c.y, a->y.data, a->y.shape, 1);
    descs_destroy(&c.d);
    return rc;
}

static int run_backward_data(void *p, void *ctx)
{
    dp__conv2d_args *a = p;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    conv_call c;
    int rc = prepare(cu, &c, CONV_BWD_DATA, a, &a->dx, &a->dy, &a->w);
    if (rc == 0 && c.w != a->w.data)
        rc = relayout(cu, a->w.data, c.w, a->w.shape, 0);
    if (rc == 0 && c.y != a->dy.data)
        rc = relayout(cu, a->dy.data, c.y, a->dy.shape, 0);
    if (rc == 0)
        rc = execute(cu, &c);
    if (rc == 0 && c.x != a->dx.data)
        rc = relayout(cu, c.x, a->dx.data, a->dx.shape, 1);
    descs_destroy(&c.d);
    return rc;
}

static int run_backward_weights(void *p, void *ctx)
{
    dp__conv2d_args *a = p;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    conv_call c;
    int rc = prepare(cu, &c, CONV_BWD_WEIGHTS, a, &a->x, &a->dy, &a->dw);
    if (rc == 0 && c.x != a->x.data)
        rc = relayout(cu, a->x.data, c.x, a->x.shape, 0);
    if (rc == 0 && c.y != a->dy.data)
        rc = relayout(cu, a->dy.data, c.y, a->dy.shape, 0);
    if (rc == 0)
        rc = execute(cu, &c);
    if (rc == 0 && c.w != a->dw.data) /* (K, R, S, C) back to (K, C, R, S) */
        rc = relayout(cu, c.w, a->dw.data, a->dw.shape, 1);
    int64_t rows = a->dy.shape[0] * a->dy.shape[2] * a->dy.shape[3], K = a->dy.shape[1];
    if (rc == 0 && a->db.data)
        rc = dp__cuda_launched(dp__cuda_bias_grad_launch(c.y, a->db.data, rows, K, cu->stream),
                               "conv2d bias gradient");
    descs_destroy(&c.d);
    return rc;
}

/* An empty batch (cuDNN takes no zero sizes): nothing to compute, and the
 * weight gradients are zero. */
int dp__cuda_conv2d_forward(dp_device_t *dev, const dp__conv2d_args *a)
{
    if (a->x.shape[0] == 0)
        return 0;
    return dp__cuda_push(dev, run_forward, a, sizeof *a);
}

int dp__cuda_conv2d_backward_data(dp_device_t *dev, const dp__conv2d_args *a)
{
    if (a->x.shape[0] == 0)
        return 0;
    return dp__cuda_push(dev, run_backward_data, a, sizeof *a);
}

int dp__cuda_conv2d_backward_weights(dp_device_t *dev, const dp__conv2d_args *a)
{
    if (a->x.shape[0] == 0) {
        dp__fill_args zw = {a->dw.data, dp__numel(4, a->dw.shape), 0.0f, DP_F32};
        DP_TRY(dp__cuda_fill(dev, &zw));
        if (a->db.data) {
            dp__fill_args zb = {a->db.data, a->db.shape[0], 0.0f, DP_F32};
            DP_TRY(dp__cuda_fill(dev, &zb));
        }
        return 0;
    }
    return dp__cuda_push(dev, run_backward_weights, a, sizeof *a);
}
