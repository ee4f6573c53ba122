/* The CUDA device table: lifetime, memory, and the command wrapper every
 * kernel file pushes through (copies: copy.c). */
#include "device/cuda/cuda.h"

#include "device/cuda/cuda_module.h"
#include "dp/dp.h"

#include <stdatomic.h>
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
    if (cu->worker_err != cudaSuccess) {
        DP_ERROR("%s: the worker cannot use its GPU: %s", dev->name,
                 cudaGetErrorString(cu->worker_err));
        return DP_EDEVICE;
    }
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
            DP_CUDA_CHECK(dp__cuda_free_locked(cu->scratch));
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
    /* In int64 with a check: c * h * w in int would wrap before cuDNN saw
     * it. The callers that can split a batch along N (conv2d.c, pool2d.c)
     * never get here with one this large. */
    dp__cuda_dims m;
    if (dp__cuda_dims_of(t->shape, t->nhwc, &m) < 0) {
        DP_ERROR("cuDNN: a tensor of %lld x %lld x %lld x %lld elements exceeds cuDNN's int sizes "
                 "(%d elements at most)",
                 (long long)t->shape[0], (long long)t->shape[1], (long long)t->shape[2],
                 (long long)t->shape[3], DP__CUDA_DESC_MAX_ELEMS);
        return DP_EINVAL;
    }
    DP_CUDNN_CHECK(cudnnSetTensor4dDescriptorEx(d, CUDNN_DATA_FLOAT, m.n, m.c, m.h, m.w, m.sn, m.sc,
                                                m.sh, m.sw));
    return 0;
}

/* ---- memory under the free mutex (device.h) ---------------------------------------------- */

cudaError_t dp__cuda_free_locked(void *p)
{
    dp__device_free_lock();
    cudaError_t e = cudaFree(p);
    dp__device_free_unlock();
    return e;
}

cudaError_t dp__cuda_host_alloc_locked(void **p, size_t bytes, unsigned flags)
{
    dp__device_free_lock();
    cudaError_t e = cudaHostAlloc(p, bytes, flags);
    dp__device_free_unlock();
    return e;
}

cudaError_t dp__cuda_free_host_locked(void *p)
{
    dp__device_free_lock();
    cudaError_t e = cudaFreeHost(p);
    dp__device_free_unlock();
    return e;
}

/* ---- the current device ------------------------------------------------------- */

static int runtime_get(int *ordinal)
{
    return cudaGetDevice(ordinal) != cudaSuccess;
}

static int runtime_set(int ordinal)
{
    return cudaSetDevice(ordinal) != cudaSuccess;
}

static const dp__cuda_current_fns runtime_current = {runtime_get, runtime_set};

const dp__cuda_current_fns *dp__cuda_current(void)
{
    return dp__cuda_current_override ? dp__cuda_current_override : &runtime_current;
}

/* ---- lifetime ----------------------------------------------------------------- */

static void worker_init(void *ctx)
{
    dp_device_t *dev = ctx;
    dp__cuda *cu = dev->impl;
    /* Every CUDA call of the worker is for this device's GPU; a worker that
     * cannot make it current would issue on another one, so its commands
     * fail instead (run_cmd). */
    cu->worker_err = cudaSetDevice(cu->ordinal);
    if (cu->worker_err != cudaSuccess) {
        (void)cudaGetLastError();
        DP_ERROR("%s: the worker cannot make its GPU current: %s", dev->name,
                 cudaGetErrorString(cu->worker_err));
    }
}

/* Peer access lets one GPU's kernels read and write another's memory (the
 * naive and ring allreduce add another device's buffer into their own).
 * It is enabled between the GPUs this process opens, and only those:
 * enabling it towards a GPU creates a context there (hundreds of MB), and
 * under MPI, one process per GPU, every rank would hold a context on every
 * GPU of the machine, which fails in exclusive-process mode. A pair is
 * enabled both ways when its second GPU opens, and stays enabled (as the
 * contexts stay) until the process ends. A pair without peer access is not
 * fatal: NCCL and copies do without it, and the allreduce refuses to run
 * kernels across it (dp__cuda_kernel_can_read). */
#define MAX_PEERS 64
static pthread_mutex_t peers_mu = PTHREAD_MUTEX_INITIALIZER;
static int peers_open[MAX_PEERS];                 /* logical devices open on cuda:p */
static _Atomic uint64_t peers_enabled[MAX_PEERS]; /* bit q of [p]: cuda:p may access cuda:q */

/* With `from` current: lets cuda:from access cuda:to where the hardware can. */
static void enable_peer(int from, int to)
{
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, from, to) != cudaSuccess || !can) {
        (void)cudaGetLastError();
        return;
    }
    cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
    if (e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled)
        atomic_fetch_or(&peers_enabled[from], (uint64_t)1 << to);
    else
        DP_WARN("cuda:%d: peer access to cuda:%d: %s", from, to, cudaGetErrorString(e));
    (void)cudaGetLastError(); /* "already enabled" is not an error here */
}

/* With cuda:ordinal current: counts it open, and the first time, enables
 * peer access between it and every other GPU open now. cuda:ordinal is
 * current again on return. */
static void peers_open_gpu(int ordinal)
{
    if (ordinal >= MAX_PEERS)
        return;
    pthread_mutex_lock(&peers_mu);
    if (peers_open[ordinal]++ == 0) {
        for (int p = 0; p < MAX_PEERS; p++) {
            if (p == ordinal || peers_open[p] == 0)
                continue;
            enable_peer(ordinal, p);
            if (cudaSetDevice(p) == cudaSuccess) {
                enable_peer(p, ordinal);
                cudaSetDevice(ordinal);
            }
        }
    }
    pthread_mutex_unlock(&peers_mu);
}

static void peers_close_gpu(int ordinal)
{
    if (ordinal >= MAX_PEERS)
        return;
    pthread_mutex_lock(&peers_mu);
    peers_open[ordinal]--;
    pthread_mutex_unlock(&peers_mu);
}

bool dp__cuda_kernel_can_read(const dp_device_t *reader, const dp_device_t *owner)
{
    const dp__cuda *r = reader->impl, *o = owner->impl;
    if (r->ordinal == o->ordinal)
        return true;
    return r->ordinal < MAX_PEERS && o->ordinal < MAX_PEERS &&
           (atomic_load(&peers_enabled[r->ordinal]) >> o->ordinal & 1) != 0;
}

static void release_handles(dp__cuda *cu)
{
    for (int i = 0; i < DP__CUDA_PINNED_BLOCKS; i++) {
        if (cu->pinned[i].p)
            dp__cuda_free_host_locked(cu->pinned[i].p);
        if (cu->pinned[i].done)
            cudaEventDestroy(cu->pinned[i].done);
    }
    if (cu->scratch)
        dp__cuda_free_locked(cu->scratch);
    if (cu->cudnn)
        cudnnDestroy(cu->cudnn);
    if (cu->cublas)
        cublasDestroy(cu->cublas);
    if (cu->stream)
        cudaStreamDestroy(cu->stream);
    pthread_mutex_destroy(&cu->pinned_mu);
    dp__free(cu);
}

/* Open, close, alloc and free run on the front end's thread, whose current
 * device is the caller's: each makes its GPU current for its own calls
 * (dp__cuda_scope) and gives the caller's back on every path. */
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
    dp__cuda_scope scope;
    if (dp__cuda_scope_enter(&scope, dp__cuda_current(), cu->ordinal) != 0) {
        (void)cudaGetLastError();
        DP_ERROR("%s: cannot make the GPU current", dev->name);
        release_handles(cu); /* nothing switched: nothing to give back */
        return DP_EDEVICE;
    }
    cudaError_t e = cudaStreamCreateWithFlags(&cu->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        DP_ERROR("%s: cannot create a CUDA stream: %s", dev->name, cudaGetErrorString(e));
        goto fail;
    }
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
    peers_open_gpu(cu->ordinal);
    dp__cuda_scope_leave(&scope);
    return 0;
fail:
    release_handles(cu);
    dp__cuda_scope_leave(&scope);
    return rc;
}

static void cuda_close(dp_device_t *dev)
{
    dp__cuda *cu = dev->impl;
    dp__stream_log_profile(dev->stream);
    dp__stream_close(dev->stream);
    dp__cuda_scope scope;
    if (dp__cuda_scope_enter(&scope, dp__cuda_current(), cu->ordinal) == 0)
        cudaStreamSynchronize(cu->stream);
    peers_close_gpu(cu->ordinal);
    dp__cuda_conv_cache_free(cu);
    release_handles(cu);
    dp__cuda_scope_leave(&scope);
    dev->impl = NULL;
}

/* ---- memory ------------------------------------------------------------------- */

/* Called from the front end (and from the block cache after close, so it
 * reads nothing of dev->impl). */
static void *cuda_alloc(dp_device_t *dev, size_t bytes)
{
    void *p = NULL;
    dp__cuda_scope scope;
    if (dp__cuda_scope_enter(&scope, dp__cuda_current(), dev->index) != 0) {
        (void)cudaGetLastError();
        DP_WARN("%s: cannot make the GPU current to allocate %zu bytes", dev->name, bytes);
        return NULL;
    }
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        DP_WARN("%s: cudaMalloc(%zu): %s", dev->name, bytes, cudaGetErrorString(e));
        p = NULL;
    }
    dp__cuda_scope_leave(&scope);
    return p;
}

static void cuda_free(dp_device_t *dev, void *p)
{
    dp__cuda_scope scope;
    if (dp__cuda_scope_enter(&scope, dp__cuda_current(), dev->index) != 0) {
        (void)cudaGetLastError();
        DP_WARN("%s: cannot make the GPU current to free a block", dev->name);
        return;
    }
    dp__cuda_free_locked(p);
    dp__cuda_scope_leave(&scope);
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
/* Every slot of the op list that a line gives CUDA: dp__cuda_<slot>. */
/* clang-format off */
#define KERNEL(slot, args, given) .slot = DP__OP_ENTRY(given, dp__cuda_##slot),
#define LINE(name, args, kernels, backends, cost) \
    DP__OP_BACKEND_SLOTS(cuda, KERNEL, name, args, kernels, backends)
    DP__OP_LIST(LINE)
#undef LINE
#undef KERNEL
    /* clang-format on */
};

/* GPU `ordinal`'s name and memory, as the runtime sees them. */
static int runtime_info(int ordinal, char *name, size_t size, size_t *total_bytes)
{
    struct cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, ordinal);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        DP_ERROR("CUDA: cudaGetDeviceProperties(%d) failed: %s", ordinal, cudaGetErrorString(e));
        return DP_EDEVICE;
    }
    if (name && size)
        snprintf(name, size, "%s", prop.name);
    if (total_bytes)
        *total_bytes = prop.totalGlobalMem;
    return 0;
}

/* What cuda_api.c, the library's stub, looks up in this module. */
const dp__cuda_module dp__cuda_module_entry = {
    .version = DP_VERSION_STRING,
    .table_size = sizeof(dp__device_ops),
    .ops = &dp__cuda_ops,
    .info = runtime_info,
};
