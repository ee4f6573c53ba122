/* Copies for the CUDA device table: uploads through pinned staging blocks
 * (so the front end never waits for the GPU to take a batch), host <-> GPU
 * copies and GPU -> GPU copies, each enqueued on the device's stream. */
#include "device/cuda/cuda.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* A new pinned block of `size` bytes and its event, or false. Called
 * without pinned_mu: cudaHostAlloc takes milliseconds (it maps and locks
 * the pages) and the free mutex (device/device.h), and the worker's uploads and
 * pinned_give would wait behind it on pinned_mu meanwhile. */
static bool pinned_alloc(dp__cuda *cu, size_t size, void **p, cudaEvent_t *done)
{
    /* An event belongs to the device current when it is created, and
     * pinned_give records it on this device's stream: from the front end
     * (upload_fresh), whose current device is whichever GPU it touched
     * last, the event would belong to another GPU on a machine with
     * several and cudaEventRecord would fail. So this GPU is made current
     * here, and the caller's device given back after. */
    dp__cuda_scope scope;
    bool ok = false;
    *p = NULL;
    *done = NULL;
    if (dp__cuda_scope_enter(&scope, dp__cuda_current(), cu->ordinal) == 0) {
        ok = dp__cuda_host_alloc_locked(p, size, cudaHostAllocPortable) == cudaSuccess &&
             cudaEventCreateWithFlags(done, cudaEventDisableTiming) == cudaSuccess;
        dp__cuda_scope_leave(&scope);
    }
    if (!ok) {
        if (*p)
            dp__cuda_free_host_locked(*p);
        *p = NULL;
        *done = NULL;
        (void)cudaGetLastError(); /* out of pinned memory: pageable copies instead */
    }
    return ok;
}

/* A free pinned block of at least `bytes`, held for the caller, or NULL
 * (all held or busy, or out of pinned memory: the caller copies from
 * pageable memory instead). Never waits for the GPU. */
static dp__cuda_pinned *pinned_take(dp__cuda *cu, size_t bytes)
{
    dp__cuda_pinned *pick = NULL, *empty = NULL;
    pthread_mutex_lock(&cu->pinned_mu);
    for (int i = 0; i < DP__CUDA_PINNED_BLOCKS && !pick; i++) {
        dp__cuda_pinned *b = &cu->pinned[i];
        if (b->held)
            continue;
        if (!b->p) {
            if (!empty)
                empty = b;
            continue;
        }
        if (b->bytes >= bytes && cudaEventQuery(b->done) == cudaSuccess)
            pick = b;
    }
    (void)cudaGetLastError(); /* a busy event's cudaErrorNotReady */
    if (pick)
        pick->held = true;
    else if (empty)
        empty->held = true; /* reserved: no other thread fills this slot */
    pthread_mutex_unlock(&cu->pinned_mu);
    if (pick || !empty)
        return pick;
    size_t size = bytes < ((size_t)1 << 20) ? (size_t)1 << 20 : bytes;
    void *p;
    cudaEvent_t done;
    bool ok = pinned_alloc(cu, size, &p, &done);
    pthread_mutex_lock(&cu->pinned_mu);
    if (ok) {
        empty->p = p;
        empty->done = done;
        empty->bytes = size;
    } else {
        empty->held = false;
    }
    pthread_mutex_unlock(&cu->pinned_mu);
    return ok ? empty : NULL;
}

/* Worker: the block's copy has been issued; it is reusable once it ran. */
static int pinned_give(dp__cuda *cu, dp__cuda_pinned *b)
{
    cudaError_t e = cudaEventRecord(b->done, cu->stream);
    pthread_mutex_lock(&cu->pinned_mu);
    b->held = false;
    pthread_mutex_unlock(&cu->pinned_mu);
    DP_CUDA_CHECK(e);
    return 0;
}

/* Host -> device on the worker. From a pinned block the copy is
 * asynchronous: the worker goes on while the DMA runs behind the kernels
 * already queued, and `src` may be reused as soon as this returns. Pageable
 * memory (no pinned block free) is staged by the driver before
 * cudaMemcpyAsync returns, so the same holds. */
static int h2d(dp__cuda *cu, void *dst, const void *src, size_t bytes, dp__cuda_pinned *held)
{
    dp__cuda_pinned *b = held ? held : pinned_take(cu, bytes);
    if (!b) {
        DP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cu->stream));
        return 0;
    }
    if (!held)
        memcpy(b->p, src, bytes);
    cudaError_t e = cudaMemcpyAsync(dst, b->p, bytes, cudaMemcpyHostToDevice, cu->stream);
    int rc = pinned_give(cu, b);
    DP_CUDA_CHECK(e);
    return rc;
}

typedef struct copy_args {
    void *dst;
    const void *src;
    size_t bytes;
    dp__cuda_pinned *held; /* upload: the pinned block holding the data */
    void *owned;           /* upload without a pinned block: a heap copy to free */
} copy_args;

static int run_upload(void *p, void *ctx)
{
    copy_args *a = p;
    dp_device_t *dev = ctx;
    int rc = h2d(dev->impl, a->dst, a->owned ? a->owned : a->src, a->bytes, a->held);
    dp__free(a->owned);
    return rc;
}

/* The front end copies `src` at once (into a pinned block, or the heap),
 * so it may reuse it on return; the worker issues the DMA in stream order,
 * after every command that used the block before it came back to the
 * cache. */
int dp__cuda_upload_fresh(dp_device_t *dev, void *dst, const void *src, size_t bytes)
{
    dp__cuda *cu = dev->impl;
    copy_args a = {dst, NULL, bytes, NULL, NULL};
    if (bytes == 0)
        return 0;
    a.held = pinned_take(cu, bytes);
    if (a.held) {
        memcpy(a.held->p, src, bytes);
    } else {
        a.owned = dp__malloc(bytes);
        if (!a.owned)
            return DP_ENOMEM;
        memcpy(a.owned, src, bytes);
    }
    return dp__cuda_push(dev, run_upload, &a, sizeof a);
}

static int run_copy_from_host(void *p, void *ctx)
{
    copy_args *a = p;
    dp_device_t *dev = ctx;
    return h2d(dev->impl, a->dst, a->src, a->bytes, NULL);
}

int dp__cuda_copy_from_host(dp_device_t *dev, void *dst, const void *src, size_t bytes)
{
    copy_args a = {dst, src, bytes, NULL, NULL};
    if (bytes == 0)
        return 0;
    return dp__cuda_push(dev, run_copy_from_host, &a, sizeof a);
}

/* Device -> host, synchronous on the worker: the bytes are in `dst` when
 * the command has run. */
static int run_copy_to_host(void *p, void *ctx)
{
    copy_args *a = p;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    DP_CUDA_CHECK(cudaMemcpyAsync(a->dst, a->src, a->bytes, cudaMemcpyDeviceToHost, cu->stream));
    DP_CUDA_CHECK(cudaStreamSynchronize(cu->stream));
    return 0;
}

int dp__cuda_copy_to_host(dp_device_t *dev, void *dst, const void *src, size_t bytes)
{
    copy_args a = {dst, src, bytes, NULL, NULL};
    if (bytes == 0)
        return 0;
    return dp__cuda_push(dev, run_copy_to_host, &a, sizeof a);
}

static bool is_device_memory(const void *p)
{
    struct cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

/* Within a GPU, between GPUs (a peer copy), or with host memory on one side
 * (dp__copy_between routes a CPU device's buffers here): cudaMemcpyDefault
 * tells them apart by address. A copy touching host memory completes before
 * the command returns, since the CPU device that owns that memory goes on
 * after this command without asking the GPU. */
static int run_copy_device(void *p, void *ctx)
{
    copy_args *a = p;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    DP_CUDA_CHECK(cudaMemcpyAsync(a->dst, a->src, a->bytes, cudaMemcpyDefault, cu->stream));
    if (!is_device_memory(a->dst) || !is_device_memory(a->src))
        DP_CUDA_CHECK(cudaStreamSynchronize(cu->stream));
    return 0;
}

int dp__cuda_copy_device(dp_device_t *dev, void *dst, const void *src, size_t bytes)
{
    copy_args a = {dst, src, bytes, NULL, NULL};
    if (bytes == 0)
        return 0;
    return dp__cuda_push(dev, run_copy_device, &a, sizeof a);
}
