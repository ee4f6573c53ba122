/* The convolution algorithm choice of the CUDA backend (conv_algos.h):
 * cuDNN's heuristic ranking, once per shape, kept in a small cache on the
 * worker, with the zero-workspace algorithms as the last resort; the
 * descriptors of a call. conv2d.c runs the candidates. */
#include "device/cuda/conv_algos.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* cuDNN 9 reports "not supported" as one of several codes, 3000 and its
 * sub-codes 3001-3014 (..._SHAPE, ..._LAYOUT, ..._SHARED_MEMORY_INSUFFICIENT
 * ...). Comparing with CUDNN_STATUS_NOT_SUPPORTED alone would turn "this
 * algorithm does not run here, try the next" into a hard error; the
 * category macro (cuDNN 9) takes them all. */
bool dp__cuda_conv_not_supported(cudnnStatus_t st)
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

void dp__cuda_conv_descs_destroy(dp__cuda_conv_descs *d)
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

int dp__cuda_conv_descs_init(dp__cuda_conv_descs *d, const dp__cuda_conv_key *k)
{
    memset(d, 0, sizeof *d);
    /* The slices (conv2d.c's push_slices) fit cuDNN's int sizes; checked again here,
     * in int64, rather than cast blindly. */
    int64_t y[4] = {k->x[0], k->w[0],
                    dp__conv_out(k->x[2], k->pad_h, k->pad_h, k->w[2], k->dilation_h, k->stride_h),
                    dp__conv_out(k->x[3], k->pad_w, k->pad_w, k->w[3], k->dilation_w, k->stride_w)};
    dp__cuda_dims xd, yd, wd;
    if (dp__cuda_dims_of(k->x, true, &xd) < 0 || dp__cuda_dims_of(y, true, &yd) < 0 ||
        dp__cuda_dims_of(k->w, true, &wd) < 0) {
        DP_ERROR("conv2d: a tensor exceeds cuDNN's int sizes (%d elements at most)",
                 DP__CUDA_DESC_MAX_ELEMS);
        return DP_EINVAL;
    }
    int N = xd.n, C = xd.c, H = xd.h, W = xd.w;
    int K = wd.n, R = wd.h, S = wd.w;
    int P = yd.h, Q = yd.w;
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
    /* the filter descriptor is (K, C / groups, R, S): the weight's own */
    DP_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(d->conv, k->pad_h, k->pad_w, k->stride_h,
                                                   k->stride_w, k->dilation_h, k->dilation_w,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    if (k->groups > 1)
        DP_CUDNN_CHECK(cudnnSetConvolutionGroupCount(d->conv, k->groups));
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
    if (e->count < DP__CUDA_CONV_MAX_CANDIDATES)
        e->algos[e->count++] = algo;
}

/* The algorithms of perf[0..got) (cuDNN's ranking, best first, of any of
 * the three kinds' perf types) that cuDNN says run, in its order, leaving
 * room for the last resorts. */
#define TAKE_RANKED(e, perf, got)                                                                  \
    do {                                                                                           \
        for (int i_ = 0; i_ < (got) && (e)->count < DP__CUDA_CONV_MAX_CANDIDATES - 2; i_++)        \
            if ((perf)[i_].status == CUDNN_STATUS_SUCCESS)                                         \
                (e)->algos[(e)->count++] = (int)(perf)[i_].algo;                                   \
    } while (0)

/* Each kind's last resorts, in order (-1: none): IMPLICIT_GEMM for the
 * forward pass and ALGO_0 for the two backward ones need no workspace at
 * all, so one of them fits whatever memory is left (ALGO_0 sums with
 * atomics, hence the deterministic ALGO_1 before it). */
static const int last_resorts[DP__CUDA_CONV_KINDS][2] = {
    [DP__CUDA_CONV_FWD] = {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, -1},
    [DP__CUDA_CONV_BWD_DATA] = {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
                                CUDNN_CONVOLUTION_BWD_DATA_ALGO_0},
    [DP__CUDA_CONV_BWD_WEIGHTS] = {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
                                   CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0},
};

/* cuDNN's heuristic ranking for this convolution, those it says run, then
 * the kind's last resorts. A heuristic query that answers "not supported"
 * (any sub-code) leaves only the last resorts. */
static int rank_algos(dp__cuda *cu, const dp__cuda_conv_descs *d, int kind, dp__cuda_conv_algo *e)
{
    int got = 0;
    cudnnStatus_t st;
    e->count = 0;
    if (kind == DP__CUDA_CONV_FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        st = cudnnGetConvolutionForwardAlgorithm_v7(cu->cudnn, d->x, d->w, d->conv, d->y,
                                                    CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf);
        TAKE_RANKED(e, perf, st == CUDNN_STATUS_SUCCESS ? got : 0);
    } else if (kind == DP__CUDA_CONV_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        st = cudnnGetConvolutionBackwardDataAlgorithm_v7(cu->cudnn, d->w, d->y, d->conv, d->x,
                                                         CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                         &got, perf);
        TAKE_RANKED(e, perf, st == CUDNN_STATUS_SUCCESS ? got : 0);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        st = cudnnGetConvolutionBackwardFilterAlgorithm_v7(cu->cudnn, d->x, d->y, d->conv, d->w,
                                                           CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                                                           &got, perf);
        TAKE_RANKED(e, perf, st == CUDNN_STATUS_SUCCESS ? got : 0);
    }
    for (int i = 0; i < 2 && last_resorts[kind][i] >= 0; i++)
        add_candidate(e, last_resorts[kind][i]);
    if (st != CUDNN_STATUS_SUCCESS && !dp__cuda_conv_not_supported(st)) {
        DP_ERROR("cuDNN: convolution heuristics (kind %d) failed: %s", kind,
                 cudnnGetErrorString(st));
        return DP_EDEVICE;
    }
    return 0;
}

int dp__cuda_conv_lookup(dp__cuda *cu, const dp__cuda_conv_key *k, const dp__cuda_conv_descs *d,
                         dp__cuda_conv_algo **out)
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
