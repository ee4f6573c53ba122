/* The convolution algorithm choice of the CUDA backend (conv_algos.c),
 * shared with conv2d.c, which runs the convolutions: the cache key of a
 * call, its cuDNN descriptors, and the ranked candidate algorithms. Worker
 * only (the cache is the device's, cuda.h). */
#ifndef DP_DEVICE_CUDA_CONV_ALGOS_H
#define DP_DEVICE_CUDA_CONV_ALGOS_H

#include "device/cuda/cuda.h"

enum { DP__CUDA_CONV_FWD, DP__CUDA_CONV_BWD_DATA, DP__CUDA_CONV_BWD_WEIGHTS, DP__CUDA_CONV_KINDS };

/* Room for every algorithm cuDNN has of one kind (8 at most) plus the
 * fallbacks rank_algos (conv_algos.c) appends. */
#define DP__CUDA_CONV_MAX_CANDIDATES 12

/* x is the input cuDNN sees: with padding that differs between the sides,
 * the input with the difference added as zeros (conv2d.c), and pad_h,
 * pad_w the padding left on both sides. */
typedef struct dp__cuda_conv_key {
    int kind, tf32;
    int64_t x[4], w[4];
    int stride_h, stride_w, pad_h, pad_w;
    int dilation_h, dilation_w, groups;
} dp__cuda_conv_key;

/* One cached choice (cuda.h names the type). */
struct dp__cuda_conv_algo {
    dp__cuda_conv_key key;
    /* cuDNN's algorithm numbers, best first; those found not to run here
     * are removed */
    int algos[DP__CUDA_CONV_MAX_CANDIDATES];
    int count;
    /* The workspace that fitted after the largest one did not (SIZE_MAX
     * until then), so later calls do not free and fail again each time. */
    size_t ws_cap;
};

/* The descriptors of one call, all NHWC. */
typedef struct dp__cuda_conv_descs {
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
} dp__cuda_conv_descs;

/* Whether a cuDNN status says "not supported here" (any sub-code): the
 * caller moves on to the next candidate. */
bool dp__cuda_conv_not_supported(cudnnStatus_t st);
/* The NHWC descriptors of a call of key `k`, in int sizes checked in
 * int64; destroy frees those made (also after a failed init). */
int dp__cuda_conv_descs_init(dp__cuda_conv_descs *d, const dp__cuda_conv_key *k);
void dp__cuda_conv_descs_destroy(dp__cuda_conv_descs *d);
/* The cached candidates for `k`, ranked on first use. */
int dp__cuda_conv_lookup(dp__cuda *cu, const dp__cuda_conv_key *k, const dp__cuda_conv_descs *d,
                         dp__cuda_conv_algo **out);

#endif
