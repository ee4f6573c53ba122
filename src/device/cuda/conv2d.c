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
 * cache on the worker (conv_algos.c); a candidate that turns out not to run on this GPU
 * (any status of the CUDNN_STATUS_NOT_SUPPORTED category) is dropped for the
 * next one. The workspace is sized for the largest candidate, so that such
 * a fallback fits; where the GPU has no memory for that, for the first
 * candidate whose own workspace fits, down to the algorithms that need none
 * at the end of every list. TF32: cuDNN's default math allows it,
 * CUDNN_FMA_MATH forbids it; dp_set_tf32 decides, as it was when the
 * convolution was called (dp__cuda_conv_cmd), not when the worker runs it.
 *
 * cuDNN's descriptors take int sizes: a batch whose activations reach
 * 2^31 elements is split along N into slices that fit, one command each
 * (the weight and bias gradients of the slices after the first add to the
 * first's).
 *
 * Groups and dilation are the convolution descriptor's; padding that
 * differs between the sides, which it cannot hold, is added to a copy of
 * the input (conv_pad.cu). The transposed convolution (conv_transpose2d.c)
 * runs on these passes with the roles swapped: its forward is
 * cudnnConvolutionBackwardData. */
#include "device/cuda/conv_algos.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

static const float one = 1.0f, zero = 0.0f;

_Static_assert(sizeof(dp__cuda_conv_cmd) <= DP__CMD_ARGS_MAX - 16,
               "a convolution command travels inline (cuda_device.c's cuda_cmd)");

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
    dp__cuda_conv_key key;
    const float *beta; /* backward weights: 1 where a slice adds to dw */
    dp__cuda_conv_descs d;
    dp__cuda_conv_algo *algo;
    float *w, *x, *y; /* NHWC views: filters (K, R, S, C / groups), input, output */
    void *ws;
    size_t ws_bytes;
    /* Padding that differs between the sides: cuDNN pads both sides alike,
     * so x is a copy of the input moved down by top and right by left
     * within key.x's size, zeros around (conv_pad.cu). */
    bool padded;
    int top, left;
} conv_call;

/* Copies the input into c's padded copy (to_padded), or the padded
 * gradient's inside out to the tensor t. */
static int pad_copy(dp__cuda *cu, const conv_call *c, const dp__tdesc *t, int to_padded)
{
    dp__cuda_conv_pad_args p = {.t = *t,
                                .padded = c->x,
                                .h2 = c->key.x[2],
                                .w2 = c->key.x[3],
                                .top = c->top,
                                .left = c->left,
                                .to_padded = to_padded};
    p.t.nhwc = is_nhwc(t);
    return dp__cuda_launched(dp__cuda_conv_pad_launch(&p, cu->stream), "conv2d padding");
}

/* The input side's copy into cuDNN's buffer, if it has one: padded, or
 * rearranged into NHWC. */
static int input_in(dp__cuda *cu, const conv_call *c, const dp__tdesc *t)
{
    if (c->x == t->data)
        return 0;
    return c->padded ? pad_copy(cu, c, t, 1) : relayout(cu, t->data, c->x, t->shape, 0);
}

/* The workspace candidate `algo` needs; a status of the not-supported
 * category (see not_supported) means the algorithm does not run for this
 * shape here, and the caller moves on rather than failing. */
static cudnnStatus_t workspace_size(dp__cuda *cu, const conv_call *c, int algo, size_t *bytes)
{
    const dp__cuda_conv_descs *d = &c->d;
    *bytes = 0;
    if (c->key.kind == DP__CUDA_CONV_FWD)
        return cudnnGetConvolutionForwardWorkspaceSize(cu->cudnn, d->x, d->w, d->conv, d->y,
                                                       (cudnnConvolutionFwdAlgo_t)algo, bytes);
    if (c->key.kind == DP__CUDA_CONV_BWD_DATA)
        return cudnnGetConvolutionBackwardDataWorkspaceSize(
            cu->cudnn, d->w, d->y, d->conv, d->x, (cudnnConvolutionBwdDataAlgo_t)algo, bytes);
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(
        cu->cudnn, d->x, d->y, d->conv, d->w, (cudnnConvolutionBwdFilterAlgo_t)algo, bytes);
}

/* Runs candidate `algo`; its status is returned as is (dp__cuda_conv_not_supported()
 * tells the caller to try the next candidate). */
static cudnnStatus_t run_algo(dp__cuda *cu, const conv_call *c, int algo)
{
    const dp__cuda_conv_descs *d = &c->d;
    if (c->key.kind == DP__CUDA_CONV_FWD)
        return cudnnConvolutionForward(cu->cudnn, &one, d->x, c->x, d->w, c->w, d->conv,
                                       (cudnnConvolutionFwdAlgo_t)algo, c->ws, c->ws_bytes, &zero,
                                       d->y, c->y);
    if (c->key.kind == DP__CUDA_CONV_BWD_DATA)
        return cudnnConvolutionBackwardData(cu->cudnn, &one, d->w, c->w, d->y, c->y, d->conv,
                                            (cudnnConvolutionBwdDataAlgo_t)algo, c->ws, c->ws_bytes,
                                            &zero, d->x, c->x);
    return cudnnConvolutionBackwardFilter(cu->cudnn, &one, d->x, c->x, d->y, c->y, d->conv,
                                          (cudnnConvolutionBwdFilterAlgo_t)algo, c->ws, c->ws_bytes,
                                          c->beta, d->w, c->w);
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
    size_t ws_of[DP__CUDA_CONV_MAX_CANDIDATES], ws = 0;
    for (int i = 0; i < e->count; i++) {
        cudnnStatus_t st = workspace_size(cu, c, e->algos[i], &ws_of[i]);
        if (st != CUDNN_STATUS_SUCCESS && !dp__cuda_conv_not_supported(st)) {
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
static int prepare(dp__cuda *cu, conv_call *c, int kind, const dp__cuda_conv_cmd *cmd,
                   const dp__tdesc *xt, const dp__tdesc *yt, const dp__tdesc *wt)
{
    const dp__conv2d_args *a = &cmd->a;
    memset(&c->key, 0, sizeof c->key);
    c->key.kind = kind;
    c->key.tf32 = cmd->tf32;
    c->beta = cmd->accumulate ? &one : &zero;
    memcpy(c->key.x, a->x.shape, sizeof c->key.x);
    memcpy(c->key.w, a->w.shape, sizeof c->key.w);
    c->key.stride_h = a->stride_h;
    c->key.stride_w = a->stride_w;
    /* what both sides share stays cuDNN's padding; the rest is the copy's */
    c->key.pad_h = a->pad_h < a->pad_bottom ? a->pad_h : a->pad_bottom;
    c->key.pad_w = a->pad_w < a->pad_right ? a->pad_w : a->pad_right;
    c->top = a->pad_h - c->key.pad_h;
    c->left = a->pad_w - c->key.pad_w;
    c->key.x[2] += a->pad_h + a->pad_bottom - 2 * c->key.pad_h;
    c->key.x[3] += a->pad_w + a->pad_right - 2 * c->key.pad_w;
    c->padded = c->key.x[2] != a->x.shape[2] || c->key.x[3] != a->x.shape[3];
    c->key.dilation_h = a->dilation_h;
    c->key.dilation_w = a->dilation_w;
    c->key.groups = a->groups;
    DP_TRY(dp__cuda_conv_descs_init(&c->d, &c->key));
    DP_TRY(dp__cuda_conv_lookup(cu, &c->key, &c->d, &c->algo));
    size_t wb = align_up((size_t)dp__numel(4, wt->shape) * sizeof(float));
    size_t xb =
        is_nhwc(xt) && !c->padded ? 0 : align_up((size_t)dp__numel(4, c->key.x) * sizeof(float));
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
        if (!dp__cuda_conv_not_supported(st)) {
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
    const dp__cuda_conv_cmd *cmd = p;
    const dp__conv2d_args *a = &cmd->a;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    conv_call c;
    int rc = prepare(cu, &c, DP__CUDA_CONV_FWD, cmd, &a->x, &a->y, &a->w);
    if (rc == 0 && c.w != a->w.data)
        rc = relayout(cu, a->w.data, c.w, a->w.shape, 0);
    if (rc == 0)
        rc = input_in(cu, &c, &a->x);
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
    dp__cuda_conv_descs_destroy(&c.d);
    return rc;
}

static int run_backward_data(void *p, void *ctx)
{
    const dp__cuda_conv_cmd *cmd = p;
    const dp__conv2d_args *a = &cmd->a;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    conv_call c;
    int rc = prepare(cu, &c, DP__CUDA_CONV_BWD_DATA, cmd, &a->dx, &a->dy, &a->w);
    if (rc == 0 && c.w != a->w.data)
        rc = relayout(cu, a->w.data, c.w, a->w.shape, 0);
    if (rc == 0 && c.y != a->dy.data)
        rc = relayout(cu, a->dy.data, c.y, a->dy.shape, 0);
    if (rc == 0)
        rc = execute(cu, &c);
    if (rc == 0 && c.x != a->dx.data)
        rc = c.padded ? pad_copy(cu, &c, &a->dx, 0) : relayout(cu, c.x, a->dx.data, a->dx.shape, 1);
    dp__cuda_conv_descs_destroy(&c.d);
    return rc;
}

static int run_backward_weights(void *p, void *ctx)
{
    const dp__cuda_conv_cmd *cmd = p;
    const dp__conv2d_args *a = &cmd->a;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    conv_call c;
    int rc = prepare(cu, &c, DP__CUDA_CONV_BWD_WEIGHTS, cmd, &a->x, &a->dy, &a->dw);
    /* A later slice adds to dw (beta 1): cuDNN adds to the NHWC copy, so
     * that copy starts as the earlier slices' sum. */
    if (rc == 0 && cmd->accumulate && c.w != a->dw.data)
        rc = relayout(cu, a->dw.data, c.w, a->dw.shape, 0);
    if (rc == 0)
        rc = input_in(cu, &c, &a->x);
    if (rc == 0 && c.y != a->dy.data)
        rc = relayout(cu, a->dy.data, c.y, a->dy.shape, 0);
    if (rc == 0)
        rc = execute(cu, &c);
    if (rc == 0 && c.w != a->dw.data) /* (K, R, S, C) back to (K, C, R, S) */
        rc = relayout(cu, c.w, a->dw.data, a->dw.shape, 1);
    int64_t rows = a->dy.shape[0] * a->dy.shape[2] * a->dy.shape[3], K = a->dy.shape[1];
    if (rc == 0 && a->db.data)
        rc = dp__cuda_launched(
            dp__cuda_bias_grad_launch(c.y, a->db.data, rows, K, cmd->accumulate, cu->stream),
            "conv2d bias gradient");
    dp__cuda_conv_descs_destroy(&c.d);
    return rc;
}

/* Queues `run` on the batch in slices along N that cuDNN's int sizes take
 * (one slice, the whole batch, unless a tensor reaches 2^31 elements);
 * where `sums`, the slices after the first add their weight and bias
 * gradients to the first's. TF32 is read once, here. */
static int push_slices(dp_device_t *dev, dp__cmd_fn run, const char *name, const dp__conv2d_args *a,
                       bool sums)
{
    int64_t n = a->x.shape[0], rows = dp__cuda_conv_rows_per_slice(a);
    if (rows == 0) {
        DP_ERROR("%s: one sample of the convolution exceeds cuDNN's int sizes (%d elements a "
                 "tensor)",
                 dev->name, DP__CUDA_DESC_MAX_ELEMS);
        return DP_EINVAL;
    }
    dp__cuda_conv_cmd cmd = dp__cuda_conv_cmd_make(a, false);
    for (int64_t n0 = 0; n0 < n; n0 += rows) {
        cmd.a = dp__cuda_conv_rows(a, n0, n - n0 < rows ? n - n0 : rows);
        cmd.accumulate = sums && n0 > 0;
        DP_TRY(dp__cuda_push_named(dev, run, name, &cmd, sizeof cmd));
    }
    return 0;
}

#define PUSH_SLICES(dev, fn, a, sums) push_slices(dev, fn, __FILE__ ":" #fn, a, sums)

/* An empty batch (cuDNN takes no zero sizes): nothing to compute, and the
 * weight gradients are zero. */
int dp__cuda_conv2d_forward(dp_device_t *dev, const dp__conv2d_args *a)
{
    if (a->x.shape[0] == 0)
        return 0;
    return PUSH_SLICES(dev, run_forward, a, false);
}

int dp__cuda_conv2d_backward_data(dp_device_t *dev, const dp__conv2d_args *a)
{
    if (a->x.shape[0] == 0)
        return 0;
    return PUSH_SLICES(dev, run_backward_data, a, false);
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
    return PUSH_SLICES(dev, run_backward_weights, a, true);
}
