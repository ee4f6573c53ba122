/* The CUDA device table: lifetime, memory, and the command wrapper every
 * kernel file pushes through (copies: copy.c). */
#include "device/cuda/cuda.h"

#include <stddef.h>
#include <string.h>

/* ---- commands ----------------------------------------------------------------- */

/* A command as pushed: the kernel file's function and its arguments. */
typedef struct cuda_cmd {
    dp__cmd_fn fn;
    _Alignas(16) unsigned char args[DP__CMD_ARGS_MAX - 16];
} cuda_cmd;

static int run_cmd(void *p, void *ctx)
{
    cuda_cmd *c = p;
    dp_device_t *dev = ctx;
    dp__cuda *cu = dev->impl;
    int rc = c->fn(c->args, ctx);
    /* A failed launch shows here at the latest; the sticky error of a
     * faulting kernel shows at the synchronization, which finishes the
     * command on the GPU before the engine counts it run (cuda.h). */
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(cu->stream);
    if (e != cudaSuccess) {
        DP_ERROR("%s: CUDA error after a command: %s", dev->name, cudaGetErrorString(e));
        if (rc == 0)
            rc = DP_EDEVICE;
    }
    return rc;
}

int dp__cuda_push_named(dp_device_t *dev, dp__cmd_fn fn, const char *name, const void *args,
                        size_t size)
{
    DP_ASSERT(size <= sizeof((cuda_cmd *)0)->args);
    cuda_cmd c;
    c.fn = fn;
    memcpy(c.args, args, size);
    dp__stream_push_named(dev->stream, run_cmd, name, &c, offsetof(cuda_cmd, args) + size);
    return 0;
}

/* A command of dp__cuda_push_launch: the launcher, then its arguments. */
typedef struct launch_cmd {
    dp__cuda_launcher launch;
    const char *name;
    _Alignas(16) unsigned char args[448];
} launch_cmd;

static int run_launch(void *p, void *ctx)
{
    launch_cmd *c = p;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    return dp__cuda_launched(c->launch(c->args, cu->stream), c->name);
}

int dp__cuda_push_launch(dp_device_t *dev, dp__cuda_launcher launch, const char *name,
                         const void *args, size_t size)
{
    launch_cmd c;
    DP_ASSERT(size <= sizeof c.args);
    c.launch = launch;
    c.name = name;
    memcpy(c.args, args, size);
    return dp__cuda_push_named(dev, run_launch, name, &c, offsetof(launch_cmd, args) + size);
}

int dp__cuda_launched(cudaError_t err, const char *what)
{
    if (err != cudaSuccess) {
        DP_ERROR("CUDA: launching %s failed: %s", what, cudaGetErrorString(err));
        return DP_EDEVICE;
    }
    return 0;
}

int dp__cuda_scratch_try(dp__cuda *cu, size_t bytes, void **out)
{
    if (bytes > cu->scratch_bytes) {
        /* Commands already issued may still use the old buffer. */
        if (cu->scratch) {
            DP_CUDA_CHECK(cudaStreamSynchronize(cu->stream));
            DP_CUDA_CHECK(cudaFree(cu->scratch));
            cu->scratch = NULL;
            cu->scratch_bytes = 0;
        }
        size_t size = (bytes + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
        cudaError_t e = cudaMalloc(&cu->scratch, size);
        if (e != cudaSuccess) {
            /* Not sticky: cleared here, or run_cmd would report it as the
             * command's error after a caller that recovered from it. */
            (void)cudaGetLastError();
            cu->scratch = NULL;
            if (e == cudaErrorMemoryAllocation)
                return DP_ENOMEM;
            DP_ERROR("CUDA: cudaMalloc(%zu) for scratch failed: %s", size, cudaGetErrorString(e));
            return DP_EDEVICE;
        }
        cu->scratch_bytes = size;
    }
    *out = cu->scratch;
    return 0;
}

int dp__cuda_scratch(dp__cuda *cu, size_t bytes, void **out)
{
    int rc = dp__cuda_scratch_try(cu, bytes, out);
    if (rc == DP_ENOMEM)
        DP_ERROR("CUDA: out of GPU memory for %zu bytes of scratch", bytes);
    return rc;
}

int dp__cuda_tensor_desc(cudnnTensorDescriptor_t d, const dp__tdesc *t)
{
    int n = (int)t->shape[0], c = (int)t->shape[1], h = (int)t->shape[2], w = (int)t->shape[3];
    if (t->nhwc)
        DP_CUDNN_CHECK(
            cudnnSetTensor4dDescriptorEx(d, CUDNN_DATA_FLOAT, n, c, h, w, h * w * c, 1, w * c, c));
    else
        DP_CUDNN_CHECK(
            cudnnSetTensor4dDescriptorEx(d, CUDNN_DATA_FLOAT, n, c, h, w, c * h * w, h * w, w, 1));
    return 0;
}

/* ---- lifetime ----------------------------------------------------------------- */

static void worker_init(void *ctx)
{
    dp_device_t *dev = ctx;
    /* Every CUDA call of the worker is for this device's GPU. */
    cudaSetDevice(dev->index);
}

/* Lets this GPU's kernels read and write every other GPU's memory (the
 * naive and ring allreduce add another device's buffer into their own) and
 * returns the peers for which that worked, bit p for cuda:p. A pair without
 * peer access is not fatal here: NCCL and copies do without it, and the
 * allreduce refuses to run kernels across it (dp__cuda_kernel_can_read). */
static uint64_t enable_peer_access(int ordinal)
{
    int count = 0;
    uint64_t peers = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess)
        return 0;
    for (int peer = 0; peer < count && peer < 64; peer++) {
        int can = 0;
        if (peer == ordinal || cudaDeviceCanAccessPeer(&can, ordinal, peer) != cudaSuccess || !can)
            continue;
        cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
        if (e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled)
            peers |= (uint64_t)1 << peer;
        else
            DP_WARN("cuda:%d: peer access to cuda:%d: %s", ordinal, peer, cudaGetErrorString(e));
    }
    (void)cudaGetLastError(); /* "already enabled" is not an error here */
    return peers;
}

bool dp__cuda_kernel_can_read(const dp_device_t *reader, const dp_device_t *owner)
{
    const dp__cuda *r = reader->impl, *o = owner->impl;
    if (r->ordinal == o->ordinal)
        return true;
    return o->ordinal < 64 && (r->peers >> o->ordinal & 1) != 0;
}

static void release_handles(dp__cuda *cu)
{
    for (int i = 0; i < DP__CUDA_PINNED_BLOCKS; i++) {
        if (cu->pinned[i].p)
            cudaFreeHost(cu->pinned[i].p);
        if (cu->pinned[i].done)
            cudaEventDestroy(cu->pinned[i].done);
    }
    if (cu->scratch)
        cudaFree(cu->scratch);
    if (cu->cudnn)
        cudnnDestroy(cu->cudnn);
    if (cu->cublas)
        cublasDestroy(cu->cublas);
    if (cu->stream)
        cudaStreamDestroy(cu->stream);
    pthread_mutex_destroy(&cu->pinned_mu);
    dp__free(cu);
}

static int cuda_open(dp_device_t *dev)
{
    int count = dp_cuda_device_count();
    if (dev->index >= count) {
        DP_ERROR("%s: no such GPU (%d here%s)", dev->name, count,
                 count == 0 ? ": no CUDA driver or no GPU" : "");
        return DP_EINVAL;
    }
    dp__cuda *cu = dp__calloc(1, sizeof *cu);
    if (!cu)
        return DP_ENOMEM;
    pthread_mutex_init(&cu->pinned_mu, NULL);
    cu->ordinal = dev->index;
    int rc = DP_EDEVICE;
    cudaError_t e = cudaSetDevice(cu->ordinal);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&cu->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        DP_ERROR("%s: cannot create a CUDA stream: %s", dev->name, cudaGetErrorString(e));
        goto fail;
    }
    cu->peers = enable_peer_access(cu->ordinal);
    if (cublasCreate(&cu->cublas) != CUBLAS_STATUS_SUCCESS ||
        cublasSetStream(cu->cublas, cu->stream) != CUBLAS_STATUS_SUCCESS ||
        /* Full float32 matrix products, as PyTorch by default. */
        cublasSetMathMode(cu->cublas, CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS) {
        DP_ERROR("%s: cannot create the cuBLAS handle", dev->name);
        goto fail;
    }
    if (cudnnCreate(&cu->cudnn) != CUDNN_STATUS_SUCCESS ||
        cudnnSetStream(cu->cudnn, cu->stream) != CUDNN_STATUS_SUCCESS) {
        DP_ERROR("%s: cannot create the cuDNN handle", dev->name);
        goto fail;
    }
    dev->impl = cu;
    rc = dp__stream_init(&dev->stream, dev->name, worker_init, dev);
    if (rc < 0) {
        dev->impl = NULL;
        goto fail;
    }
    return 0;
fail:
    release_handles(cu);
    return rc;
}

static void cuda_close(dp_device_t *dev)
{
    dp__cuda *cu = dev->impl;
    dp__stream_log_profile(dev->stream);
    dp__stream_close(dev->stream);
    cudaSetDevice(cu->ordinal);
    cudaStreamSynchronize(cu->stream);
    dp__cuda_conv_cache_free(cu);
    release_handles(cu);
    dev->impl = NULL;
}

/* ---- memory ------------------------------------------------------------------- */

/* Called from the front end (and from the block cache after close, so it
 * reads nothing of dev->impl). */
static void *cuda_alloc(dp_device_t *dev, size_t bytes)
{
    void *p = NULL;
    cudaSetDevice(dev->index);
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        DP_WARN("%s: cudaMalloc(%zu): %s", dev->name, bytes, cudaGetErrorString(e));
        return NULL;
    }
    return p;
}

static void cuda_free(dp_device_t *dev, void *p)
{
    cudaSetDevice(dev->index);
    cudaFree(p);
}

/* ---- fill --------------------------------------------------------------------- */

static int run_fill(void *p, void *ctx)
{
    dp__fill_args *a = p;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    return dp__cuda_launched(dp__cuda_fill_launch(a, cu->stream), "fill");
}

int dp__cuda_fill(dp_device_t *dev, const dp__fill_args *a)
{
    if (a->n == 0)
        return 0;
    return dp__cuda_push(dev, run_fill, a, sizeof *a);
}

/* For NCCL (src/comm/), which issues the GPUs' allreduce on their streams. */
static void *cuda_stream(const dp_device_t *dev)
{
    return ((const dp__cuda *)dev->impl)->stream;
}

const dp__device_ops dp__cuda_ops = {
    .kind = "cuda",
    .caps = 0, /* device memory; cuDNN may pick nondeterministic kernels */
    .open = cuda_open,
    .close = cuda_close,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload_fresh = dp__cuda_upload_fresh,
    .copy_from_host = dp__cuda_copy_from_host,
    .copy_to_host = dp__cuda_copy_to_host,
    .copy_device = dp__cuda_copy_device,
    .can_read = dp__cuda_kernel_can_read,
    .cuda_stream = cuda_stream,
/* Every slot of the op list that names CUDA: dp__cuda_<slot>. */
/* clang-format off */
#define KERNEL(slot, args) .slot = dp__cuda_##slot,
#define LINE(name, args, kernels, backends, cost) \
    DP__OP_BACKEND_SLOTS(cuda, KERNEL, name, args, kernels, backends)
    DP__OP_LIST(LINE)
#undef LINE
#undef KERNEL
    /* clang-format on */
};
