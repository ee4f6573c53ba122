/* The CUDA device: a worker thread (the engine's stream) that issues every
 * command onto one CUDA stream of its GPU. cuDNN does convolution, pooling
 * and batch normalisation, cuBLAS the matrix products, and our own kernels
 * (cuda_kernels.h) the rest.
 *
 * Threads: the cuBLAS and cuDNN handles, the convolution algorithm cache and
 * the scratch buffer belong to the worker alone. The pinned staging blocks
 * are shared by the front end (upload_fresh) and the worker, under
 * pinned_mu, a leaf lock.
 *
 * Completion: a command is "run" for the engine when its worker returns
 * (device/device.h), so every command synchronizes the CUDA stream before it
 * returns: a finished command is finished on the GPU too, and the engine's
 * events order the GPUs as they order the workers. Copies to the host are
 * synchronous as well: their bytes are in host memory when the command
 * returns, as a host command queued after them (src/comm/allreduce_mpi.c)
 * expects. The price is a launch gap between consecutive kernels, most
 * visible where kernels are short (bench/gpu/RESULTS.md). */
#ifndef DP_DEVICE_CUDA_H
#define DP_DEVICE_CUDA_H

#include "core/internal.h"
#include "device/cuda/cuda_host.h"
#include "device/cuda/cuda_kernels.h"
#include "device/device.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <stdbool.h>
#include <stdint.h>

#define DP_CUDA_CHECK(call)                                                                        \
    do {                                                                                           \
        cudaError_t dp__ce = (call);                                                               \
        if (dp__ce != cudaSuccess) {                                                               \
            DP_ERROR("CUDA: %s failed: %s", #call, cudaGetErrorString(dp__ce));                    \
            return DP_EDEVICE;                                                                     \
        }                                                                                          \
    } while (0)

#define DP_CUBLAS_CHECK(call)                                                                      \
    do {                                                                                           \
        cublasStatus_t dp__bs = (call);                                                            \
        if (dp__bs != CUBLAS_STATUS_SUCCESS) {                                                     \
            DP_ERROR("cuBLAS: %s failed: %s", #call, cublasGetStatusString(dp__bs));               \
            return DP_EDEVICE;                                                                     \
        }                                                                                          \
    } while (0)

#define DP_CUDNN_CHECK(call)                                                                       \
    do {                                                                                           \
        cudnnStatus_t dp__ds = (call);                                                             \
        if (dp__ds != CUDNN_STATUS_SUCCESS) {                                                      \
            DP_ERROR("cuDNN: %s failed: %s", #call, cudnnGetErrorString(dp__ds));                  \
            return DP_EDEVICE;                                                                     \
        }                                                                                          \
    } while (0)

/* A page-locked host block for copies to the GPU; reusable once `done` (an
 * event recorded after the copy that read it) has passed and no one holds
 * it. */
typedef struct dp__cuda_pinned {
    void *p;
    size_t bytes;
    cudaEvent_t done;
    bool held;
} dp__cuda_pinned;

#define DP__CUDA_PINNED_BLOCKS 16

/* One cached convolution algorithm choice (conv2d.c). */
typedef struct dp__cuda_conv_algo dp__cuda_conv_algo;

typedef struct dp__cuda {
    int ordinal; /* the CUDA device of this logical device */
    /* The worker could not make its GPU current (worker_init): every
     * command fails with this rather than run on another GPU. */
    cudaError_t worker_err;
    cudaStream_t stream;
    cublasHandle_t cublas;
    cudnnHandle_t cudnn;
    /* worker only */
    void *scratch;
    size_t scratch_bytes;
    dp__cuda_conv_algo *algos;
    size_t nalgos, cap_algos;
    /* front end and worker, under pinned_mu */
    pthread_mutex_t pinned_mu;
    dp__cuda_pinned pinned[DP__CUDA_PINNED_BLOCKS];
} dp__cuda;

/* Enqueues `fn(args, dev)` on the device's worker through a wrapper that
 * checks the launch status of the kernels it issued and waits for them. */
int dp__cuda_push_named(dp_device_t *dev, dp__cmd_fn fn, const char *name, const void *args,
                        size_t size);
#define dp__cuda_push(dev, fn, args, size)                                                         \
    dp__cuda_push_named(dev, fn, __FILE__ ":" #fn, args, size)

/* Worker only: a device buffer of at least `bytes` (256-byte aligned) that
 * stays valid until the next call; its earlier contents are lost. */
int dp__cuda_scratch(dp__cuda *cu, size_t bytes, void **out);
/* The same, but out of GPU memory is DP_ENOMEM with nothing logged, for a
 * caller that can do with less (conv2d.c's workspace). */
int dp__cuda_scratch_try(dp__cuda *cu, size_t bytes, void **out);
/* Checks a launcher's status: 0, or DP_EDEVICE with the message logged. */
int dp__cuda_launched(cudaError_t err, const char *what);
/* A cuDNN descriptor of a 4-D tensor in its layout (NCHW or NHWC strides). */
int dp__cuda_tensor_desc(cudnnTensorDescriptor_t d, const dp__tdesc *t);
/* Whether kernels on `reader`'s GPU may read `owner`'s memory (both CUDA
 * devices): the same GPU, or one with peer access enabled (peer access is
 * enabled between the GPUs this process has open, when the second of a
 * pair opens). */
bool dp__cuda_kernel_can_read(const dp_device_t *reader, const dp_device_t *owner);
/* The current-device functions in use: the CUDA runtime's, or a test's
 * (dp__cuda_current_override). */
const dp__cuda_current_fns *dp__cuda_current(void);

/* cudaFree, cudaHostAlloc and cudaFreeHost under the free mutex
 * (device.h: they must not run while an NCCL group launch is half done).
 * Every call of the backend goes through these. */
cudaError_t dp__cuda_free_locked(void *p);
cudaError_t dp__cuda_host_alloc_locked(void **p, size_t bytes, unsigned flags);
cudaError_t dp__cuda_free_host_locked(void *p);

/* copy.c: the table's copy entries (see device/device.h). */
int dp__cuda_upload_fresh(dp_device_t *dev, void *dst, const void *src, size_t bytes);
int dp__cuda_copy_from_host(dp_device_t *dev, void *dst, const void *src, size_t bytes);
int dp__cuda_copy_to_host(dp_device_t *dev, void *dst, const void *src, size_t bytes);
int dp__cuda_copy_device(dp_device_t *dev, void *dst, const void *src, size_t bytes);
/* Frees the convolution algorithm cache (conv2d.c), at close. */
void dp__cuda_conv_cache_free(dp__cuda *cu);

#endif
