/* The CUDA backend's host-side arithmetic and bookkeeping, with no CUDA
 * header in sight: cuDNN's int sizes and the split of a batch that exceeds
 * them, the order in which the bias gradient kernel sums, the TF32 setting
 * a convolution is queued with, and the current-device scope.
 * cmake/cuda.cmake
 * builds cuda_host.c in every configuration (as cuda_api.c), so that tests
 * check this logic on machines without a GPU. */
#ifndef DP_DEVICE_CUDA_HOST_H
#define DP_DEVICE_CUDA_HOST_H

#include "device/kernels.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" { /* eltwise.cu takes the bias gradient's block size from here */
#endif

/* ---- cuDNN's int sizes ------------------------------------------------------- */

/* cuDNN's tensor descriptors take int sizes and strides and refuse a tensor
 * of 2^31 elements or more. */
#define DP__CUDA_DESC_MAX_ELEMS INT32_MAX

/* Sizes and strides of a 4-D tensor for cudnnSetTensor4dDescriptorEx. */
typedef struct dp__cuda_dims {
    int n, c, h, w;
    int sn, sc, sh, sw;
} dp__cuda_dims;

/* The sizes and strides of a 4-D tensor of `shape` (N, C, H, W) in its
 * layout, computed in int64: DP_EINVAL, nothing logged, where a size is
 * negative or the tensor holds more than DP__CUDA_DESC_MAX_ELEMS elements
 * (then no stride fits an int either). */
int dp__cuda_dims_of(const int64_t shape[4], bool nhwc, dp__cuda_dims *out);

/* The most elements a slice of a batch may hold in any of its tensors:
 * DP__CUDA_DESC_MAX_ELEMS, lowered only by tests (test_cuda_ops), which
 * split small batches to compare the split with the whole. */
extern int64_t dp__cuda_slice_max_elems;

/* The most samples of a batch of `n` that one cuDNN call may take, where
 * per_sample[k] is the element count of one sample of tensor k: n when
 * whole tensors fit dp__cuda_slice_max_elems, fewer when the batch has to
 * be split along N, 0 when not even one sample fits. A count of 0 (an
 * empty tensor) sets no limit. */
int64_t dp__cuda_rows_per_slice(int64_t n, const int64_t *per_sample, int count);

/* Samples [n0, n0 + rows) of a 4-D tensor: N is outermost in both layouts,
 * so the slice is the tensor's bytes from sample n0 on, with N = rows. A
 * description without data stays without. */
dp__tdesc dp__cuda_tdesc_rows(const dp__tdesc *t, int64_t n0, int64_t rows);

/* ---- convolution commands ---------------------------------------------------- */

/* A convolution as queued on a GPU's worker. */
typedef struct dp__cuda_conv_cmd {
    dp__conv2d_args a;
    /* Whether TF32 was allowed (dp_set_tf32) when the convolution was
     * queued: the worker runs it later, and a dp_set_tf32 in between must
     * not change it (PyTorch reads allow_tf32 when it launches). */
    bool tf32;
    /* Backward weights of a slice after the first: add dw and db to what
     * the earlier slices left there instead of overwriting it. */
    bool accumulate;
} dp__cuda_conv_cmd;

/* Samples [n0, n0 + rows) of a convolution: its activations and their
 * gradients (x, y, dx, dy) sliced, its weights and bias as they are. */
dp__conv2d_args dp__cuda_conv_rows(const dp__conv2d_args *a, int64_t n0, int64_t rows);
/* The most samples of one cuDNN call of `a` (dp__cuda_rows_per_slice over
 * its activation tensors); 0 when one sample is too large. */
int64_t dp__cuda_conv_rows_per_slice(const dp__conv2d_args *a);
/* The command of `a`, made when the convolution is called: TF32 is read
 * here, on the caller's thread. */
dp__cuda_conv_cmd dp__cuda_conv_cmd_make(const dp__conv2d_args *a, bool accumulate);

/* Samples [n0, n0 + rows) of a pooling: x, y, dx, dy and the ReLU mask
 * (dx's shape) sliced. */
dp__pool2d_args dp__cuda_pool_rows(const dp__pool2d_args *a, int64_t n0, int64_t rows);
/* The most samples of one cuDNN call of `a`; 0 when one is too large. */
int64_t dp__cuda_pool_rows_per_slice(const dp__pool2d_args *a);

/* ---- the bias gradient's order ----------------------------------------------- */

/* The threads of one block of the bias gradient kernel (eltwise.cu), one
 * block per column; a power of two. */
#define DP__CUDA_BIAS_GRAD_THREADS 256

/* db (cols) = the sum over rows of dy (rows x cols), in the kernel's order:
 * thread t of a column's block sums rows t, t + T, t + 2T, ... (T =
 * DP__CUDA_BIAS_GRAD_THREADS) in that order, then the block adds its T
 * partial sums in a fixed tree, p[t] += p[t + s] for s = T/2, T/4, ..., 1.
 * Float additions in the same order give the same bits on the host as on
 * the GPU (nvcc --fmad=false), so this is the kernel's exact result. */
void dp__cuda_bias_grad_host(const float *dy, float *db, int64_t rows, int64_t cols);

/* ---- the current device ------------------------------------------------------ */

/* How the backend reads and sets the calling thread's current GPU:
 * cudaGetDevice and cudaSetDevice, each 0 on success. */
typedef struct dp__cuda_current_fns {
    int (*get)(int *ordinal);
    int (*set)(int ordinal);
} dp__cuda_current_fns;

/* Where set, the backend uses these instead of the CUDA runtime's: a test
 * that follows the current device through the backend's paths without a
 * GPU. Set only while no CUDA device is open. */
extern const dp__cuda_current_fns *dp__cuda_current_override;

/* A stretch of code that runs on one GPU and gives the caller back the
 * device it had (cudaSetDevice is per thread, and the front end's current
 * device is the caller's, not ours to change). */
typedef struct dp__cuda_scope {
    const dp__cuda_current_fns *fns;
    int prev;
    bool switched;
} dp__cuda_scope;

/* Makes `ordinal` current: 0, or nonzero when it could not be (nothing was
 * switched then). */
int dp__cuda_scope_enter(dp__cuda_scope *s, const dp__cuda_current_fns *fns, int ordinal);
/* Makes the device current before enter current again, if enter switched. */
void dp__cuda_scope_leave(const dp__cuda_scope *s);

#ifdef __cplusplus
}
#endif
#endif
